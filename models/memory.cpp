#include "models/memory.h"

#include <cmath>
#include <limits>

#include "models/operators.h"

namespace servesim::models {

std::string MemoryPlan::biggest_consumer() const {
  if (weights >= activations && weights >= reserved) return "weights";
  return activations >= reserved ? "activations" : "reserved";
}

Bytes stage_weight_bytes(const ModelSpec& m, const ParallelPlan& p, int stage) {
  const double per_layer = static_cast<double>(m.layer_params()) / p.tp;
  double params = per_layer * p.stage_layers(m, stage);
  const double embedding = static_cast<double>(m.embedding_params()) / p.tp;
  const bool first = stage == 0, last = stage == p.pp - 1;
  if (first) params += embedding;
  if (last) params += m.hidden;  // final norm
  // The LM head lives on the last stage; with tied embeddings it is the same matrix as the
  // embedding, which a single-stage instance holds once and a multi-stage one holds on both ends.
  if (last && (!m.tied_embeddings || !first)) params += embedding;
  return Bytes{params * m.weight_bytes};
}

Bytes stage_activation_bytes(const ModelSpec& m, const ParallelPlan& p, int stage,
                             const MemoryConfig& c) {
  // Largest set of live tensors in one layer at the token budget B (elements per token):
  // residual + normed input + attention output + MLP output (4 h), the QKV projection
  // (hq + 2 hkv) hd, and the MLP intermediates: gate|up (2 ffn) and the activated product (ffn).
  const double b = static_cast<double>(c.max_batched_tokens);
  const double ffn = static_cast<double>(m.intermediate) / p.tp;
  const double qkv = (p.heads_per_chip(m) + 2.0 * p.kv_heads_per_chip(m)) * m.head_dim;
  double bytes = m.activation_bytes * b * (4.0 * m.hidden + qkv + 3.0 * ffn);
  if (stage == p.pp - 1) {
    // fp32 logits over this chip's vocabulary shard for every sequence that samples.
    const double seqs = static_cast<double>(std::min(c.max_sequences, c.max_batched_tokens));
    bytes += 4.0 * seqs * static_cast<double>(m.vocab) / p.tp;
  }
  return Bytes{bytes};
}

MemoryPlan plan_memory(const ModelSpec& m, const ChipSpec& chip, const ParallelPlan& p,
                       const MemoryConfig& c) {
  MemoryPlan best;
  bool have = false;
  double best_tokens = 0;
  for (int s = 0; s < p.pp; ++s) {
    MemoryPlan plan;
    plan.capacity = chip.memory;
    plan.usable = Bytes{chip.memory.value * c.memory_utilization};
    plan.stage = s;
    plan.weights = stage_weight_bytes(m, p, s);
    plan.activations = stage_activation_bytes(m, p, s, c);
    plan.reserved = c.reserved;
    plan.kv = Bytes{plan.usable.value - plan.weights.value - plan.activations.value -
                    plan.reserved.value};
    plan.kv_bytes_per_token = kv_bytes_per_token_per_chip(m, p, s);
    const double tokens = plan.kv.value > 0 ? std::floor(plan.kv.value / plan.kv_bytes_per_token)
                                            : -1.0;
    if (!have || tokens < best_tokens) {
      best = plan;
      best_tokens = tokens;
      have = true;
    }
  }
  best.kv_tokens = best_tokens > 0 ? static_cast<std::int64_t>(best_tokens) : 0;
  return best;
}

}  // namespace servesim::models
