#include "models/memory.h"

#include <algorithm>
#include <cmath>

namespace servesim::models {
namespace {

// Elements of one layer's attention block on one chip.
double attention_chip_elements(const ModelSpec& m, const ParallelPlan& p) {
  const double tp = p.tp;
  if (m.attention == AttentionKind::kMla) {
    const MlaSpec& a = m.mla;
    const double h = m.hidden, nh = m.heads, ql = a.q_lora_rank, kl = a.kv_lora_rank;
    const double qk = a.qk_nope_dim + a.qk_rope_dim;
    // Replicated on every TP rank: the down-projections (vLLM's fused_qkv_a_proj is a
    // ReplicatedLinear), their norms, the layer norms and the DSA indexer.
    double replicated = h * (kl + a.qk_rope_dim) + kl + 2 * h;
    double split = kl * nh * (a.qk_nope_dim + a.v_dim) + nh * a.v_dim * h;
    if (m.attention_output_gate) split += h * nh * a.v_dim;  // the output gate's projection
    if (ql > 0) {
      replicated += h * ql + ql;
      split += ql * nh * qk;
    } else {
      split += h * nh * qk;
    }
    replicated += static_cast<double>(m.indexer_params());
    return replicated + split / tp;
  }
  if (m.compress.enabled()) {
    // DeepSeek-V4: split, wq_b, wo_a, wo_b and the sinks (operators.cpp, layer_token_ops);
    // replicated, the rest of ModelSpec::attention_params (what runs from h before the heads split:
    // wq_a, wkv, the compressor, their norms; the indexer; the layer norms) and mHC's mixing.
    const CompressSpec& c = m.compress;
    const double h = m.hidden, nh = m.heads, hd = m.head_dim, ql = c.q_lora_rank, ol = c.o_lora_rank;
    const double split = ql * nh * hd + nh * hd * ol + c.o_groups * ol * h + (m.attention_sinks ? nh : 0.0);
    return static_cast<double>(m.attention_params() + m.mhc_params()) - split + split / tp;
  }
  // A block sparse attention's index projections are replicated, like DSA's (0 without).
  const double indexer = static_cast<double>(m.indexer_params());
  const double split = static_cast<double>(m.attention_params()) - indexer;
  if (m.kv_heads >= p.tp) return split / tp + indexer;
  // More TP ranks than KV heads: each chip holds one whole KV head (vLLM replicates them).
  // K and V (K only where V is K's projection, k_eq_v) of one KV head, with their biases.
  const double kv_dims = m.head_dim + (m.k_eq_v ? 0 : m.value_dim());
  const double h = m.hidden;
  const double kv_total = h * m.kv_heads * kv_dims + (m.qkv_bias ? m.kv_heads * kv_dims : 0.0);
  const double kv_chip = h * kv_dims + (m.qkv_bias ? kv_dims : 0.0);
  return (split - kv_total) / tp + kv_chip + indexer;
}

// Elements of one MoE block (routed experts, shared experts, router) on one chip, by format.
struct MoeChip {
  double experts = 0;  // in the expert format
  double shared = 0;   // in the dense weight format
  double router = 0;   // bf16
};
MoeChip moe_chip_elements(const ModelSpec& m, const ParallelPlan& p) {
  MoeChip c;
  c.experts = static_cast<double>(m.moe.experts + p.redundant_experts) / p.ep *
              (static_cast<double>(m.expert_params()) / p.moe_tp);
  c.shared = static_cast<double>(m.shared_expert_params() + m.latent_projection_params()) / p.tp;
  c.router = static_cast<double>(m.router_params());
  return c;
}

double moe_layer_bytes(const ModelSpec& m, const ParallelPlan& p) {
  const MoeChip c = moe_chip_elements(m, p);
  return c.experts * m.expert_bytes_per_element() + c.shared * m.weight_bytes_per_element() + c.router * 2.0;
}

// Elements of one linear-attention layer's mixer on one chip (ModelSpec::linear_attention_params
// split by heads; key heads replicated when tp exceeds them).
double linear_chip_elements(const ModelSpec& m, const ParallelPlan& p) {
  const LinearAttentionSpec& l = m.linear;
  const double hk = std::max(1.0, static_cast<double>(l.key_heads) / p.tp);
  return m.linear_mixer_elements(hk, static_cast<double>(l.value_heads) / p.tp);
}

}  // namespace

double linear_state_bytes_per_layer_chip(const ModelSpec& m, const ParallelPlan& p) {
  if (!m.linear.enabled()) return 0;
  const LinearAttentionSpec& l = m.linear;
  const double hk = std::max(1.0, static_cast<double>(l.key_heads) / p.tp);
  const double hv = static_cast<double>(l.value_heads) / p.tp;
  return hv * l.key_dim * l.value_dim * l.state_bytes +
         (l.conv_kernel - 1.0) * (2 * hk * l.key_dim + hv * l.value_dim) * m.activation_bytes;
}

std::string MemoryPlan::biggest_consumer() const {
  const double w = weights.value, a = activations.value, k = window_kv.value, r = reserved.value;
  const double s = linear_state.value;
  if (w >= a && w >= k && w >= r && w >= s) return "weights";
  if (a >= k && a >= r && a >= s) return "activations";
  if (s >= k && s >= r) return "linear state";
  return k >= r ? "window KV" : "reserved";
}

StageWeights stage_weights(const ModelSpec& m, const ParallelPlan& p, int stage, const MemoryConfig& c) {
  StageWeights w;
  const LayerCounts n = m.count_layers(p.stage_first_layer(m, stage), p.stage_layers(m, stage));
  const double wb = m.weight_bytes_per_element();
  // Dense layers: attention + MLP split over tp (replicated parts as attention_chip_elements).
  const double dense_mlp = static_cast<double>(m.dense_mlp_params()) / p.tp;
  double dense_layer = 0;
  if (m.attention == AttentionKind::kGqa && m.kv_heads >= p.tp && !m.dsa.enabled()) {
    dense_layer = static_cast<double>(m.attention_params() + m.dense_mlp_params()) / p.tp;
  } else {
    dense_layer = attention_chip_elements(m, p) + dense_mlp;
  }
  // DeepSeek-V4's wo_a is held in bf16 whatever the weights' format (operators.cpp): its bytes beyond wb.
  const double attention_extra =
      m.compress.enabled() ? (2.0 - wb) * p.heads_per_chip(m) * m.head_dim * m.compress.o_lora_rank : 0.0;
  const double moe_layer = attention_chip_elements(m, p) * wb + attention_extra + moe_layer_bytes(m, p);
  // Dense MLPs in a format of their own (ModelFormats::mlp) hold that many bytes less or more.
  const double mlp_delta = m.formats.mlp ? dense_mlp * (bytes_per_element(*m.formats.mlp) - wb) : 0.0;
  // Linear-attention layers hold their mixer instead of the attention block.
  const double linear_delta = m.linear.enabled() ? linear_chip_elements(m, p) - attention_chip_elements(m, p) : 0.0;
  // Sliding-window layers of their own attention shape hold that attention block instead.
  const double window_delta = m.window_shape_differs()
                                  ? attention_chip_elements(m.window_layer_spec(), p) - attention_chip_elements(m, p)
                                  : 0.0;
  // DSA layers that reuse another layer's top-k hold no indexer.
  const double no_indexer = m.dsa.enabled() ? static_cast<double>(m.indexer_params()) * (n.layers - n.indexer) : 0.0;
  // Layers without a feed-forward block hold their mixer alone.
  w.layers = Bytes{dense_layer * n.dense() * wb + moe_layer * n.moe + linear_delta * n.linear * wb +
                   attention_chip_elements(m, p) * n.no_ffn * wb - no_indexer * wb + window_delta * n.window * wb +
                   mlp_delta * n.dense() + attention_extra * (n.dense() + n.no_ffn)};

  const double embedding = static_cast<double>(m.embedding_params()) / p.tp;
  const bool first = stage == 0, last = stage == p.pp - 1;
  double emb = 0;
  if (first) emb += embedding;
  if (last) emb += m.hidden;  // final norm
  // The LM head lives on the last stage; with tied embeddings it is the same matrix as the
  // embedding, which a single-stage instance holds once and a multi-stage one holds on both ends.
  if (last && (!m.tied_embeddings || !first)) emb += embedding;
  w.embedding = Bytes{emb * 2.0};  // bf16 in every checkpoint format the presets use

  if (last && c.load_mtp && m.mtp_layers > 0) {
    // An MTP layer is split like the last decoder layer; eh_proj and its norms are replicated.
    const double layer = m.is_moe_layer(m.layers - 1) ? moe_layer : dense_layer * wb + mlp_delta;
    const double extra = (2.0 * m.hidden * m.hidden + 3.0 * m.hidden) * wb;
    w.mtp = Bytes{m.mtp_layers * (layer + extra)};
  }
  if (first && m.vision) {
    w.vision = Bytes{static_cast<double>(m.vision->params()) / p.tp * 2.0};
  }
  return w;
}

Bytes stage_weight_bytes(const ModelSpec& m, const ParallelPlan& p, int stage) {
  return stage_weights(m, p, stage, MemoryConfig{}).total();
}

Bytes stage_activation_bytes(const ModelSpec& m, const ParallelPlan& p, int stage, const MemoryConfig& c) {
  // Largest set of live tensors in one layer at the token budget B, per chip (elements per
  // token): residual + normed input + attention output + MLP output (4 h), the attention
  // projections' outputs, and the MLP intermediates: gate|up (2 ffn) and the activated product
  // (ffn).
  const LayerCounts n = m.count_layers(p.stage_first_layer(m, stage), p.stage_layers(m, stage));
  const double b = tokens_per_chip(p, static_cast<double>(c.max_batched_tokens));
  double attn = 0;
  if (m.attention == AttentionKind::kMla) {
    const MlaSpec& a = m.mla;
    attn = a.q_lora_rank + a.kv_lora_rank + a.qk_rope_dim + p.heads_per_chip(m) * (a.qk_nope_dim + a.qk_rope_dim);
    if (m.attention_output_gate) attn += p.heads_per_chip(m) * a.v_dim;
  } else {
    attn = (p.heads_per_chip(m) * (m.attention_output_gate ? 2.0 : 1.0) + p.kv_heads_per_chip(m)) * m.head_dim +
           p.kv_heads_per_chip(m) * m.value_dim();
  }
  if (n.linear > 0) {
    // Gated DeltaNet: q, k, v, z and beta / decay per token (the in-projections' outputs).
    const LinearAttentionSpec& l = m.linear;
    const double hk = std::max(1.0, static_cast<double>(l.key_heads) / p.tp);
    const double hv = static_cast<double>(l.value_heads) / p.tp;
    attn = std::max(attn, 2 * hk * l.key_dim + 2 * hv * l.value_dim + 2 * hv);
  }
  const double ffn = static_cast<double>(m.intermediate) / p.tp;
  double bytes = 0;
  if (n.dense() > 0 || n.no_ffn > 0) bytes = m.activation_bytes * b * (4.0 * m.hidden + attn + 3.0 * ffn);
  if (n.moe > 0) {
    // The busiest EP rank's token copies (in and out of both expert GEMMs, the gate|up output) on
    // top of the shared experts' intermediates.
    const MoeLoad load(m, p, c.routing);
    const double pairs = load.busiest_pairs(static_cast<double>(c.max_batched_tokens) / p.cp);
    const double fe = static_cast<double>(m.moe.expert_intermediate) / p.moe_tp;
    const double shared = static_cast<double>(m.moe.shared_intermediate) / p.tp;
    const double moe =
        m.activation_bytes * (b * (4.0 * m.hidden + attn + 3.0 * shared) + pairs * (2.0 * m.hidden + 3.0 * fe));
    bytes = std::max(bytes, moe);
  }
  if (stage == p.pp - 1) {
    // fp32 logits over this chip's vocabulary shard for every sequence that samples.
    const double seqs = tokens_per_chip(p, static_cast<double>(std::min(c.max_sequences, c.max_batched_tokens)));
    bytes += 4.0 * seqs * static_cast<double>(m.vocab) / p.tp;
  }
  return Bytes{bytes};
}

double kv_bytes_per_token_per_chip(const ModelSpec& m, const ParallelPlan& p, int stage) {
  const LayerCounts n = m.count_layers(p.stage_first_layer(m, stage), p.stage_layers(m, stage));
  // Index keys only on the layers that run the indexer (all of a DSA model's layers are full), whole
  // on every chip; 0 without one.
  // Compressed attention's HCA layers (the dense-attention ones) cache an entry per dense_ratio tokens.
  return (kv_bytes_per_token_layer_chip(m, p) * m.full_kv_layers(n) + m.index_bytes_per_token_layer() * n.indexer) /
         p.cp;
}

MemoryPlan plan_memory(const ModelSpec& m, const ChipSpec& chip, const ParallelPlan& p, const MemoryConfig& c) {
  MemoryPlan best;
  bool have = false;
  double best_tokens = 0;
  for (int s = 0; s < p.pp; ++s) {
    MemoryPlan plan;
    plan.capacity = chip.memory;
    plan.usable = Bytes{chip.memory.value * c.memory_utilization};
    plan.stage = s;
    plan.weight_parts = stage_weights(m, p, s, c);
    plan.weights = plan.weight_parts.total();
    plan.activations = stage_activation_bytes(m, p, s, c);
    plan.reserved = c.reserved;
    const LayerCounts n = m.count_layers(p.stage_first_layer(m, s), p.stage_layers(m, s));
    if (n.window > 0) {
      // The window layers' own shape where it differs (ModelSpec::window_layer_spec).
      const double per_layer = kv_bytes_per_token_layer_chip(m.window_shape_differs() ? m.window_layer_spec() : m, p);
      const double seqs = static_cast<double>(c.max_sequences) / p.dp;
      const double tokens = static_cast<double>(m.window.window + c.block_tokens);
      plan.window_kv = Bytes{seqs * tokens * per_layer * n.window / p.cp};
    }
    if (m.compress.enabled()) {
      // Compressed attention: every layer's window and compressors' state, whole on each chip.
      const double seqs = static_cast<double>(c.max_sequences) / p.dp;
      plan.window_kv = Bytes{seqs * m.compressed_state_bytes(n) / p.cp};
    }
    if (n.linear > 0) {
      const double seqs = static_cast<double>(c.max_sequences) / p.dp;
      plan.linear_state = Bytes{seqs * n.linear * linear_state_bytes_per_layer_chip(m, p)};
    }
    plan.kv = Bytes{plan.usable.value - plan.weights.value - plan.activations.value - plan.window_kv.value -
                    plan.linear_state.value - plan.reserved.value};
    plan.kv_bytes_per_token = kv_bytes_per_token_per_chip(m, p, s);
    double tokens = -1.0;
    if (plan.kv.value > 0) {
      // A stage without full-attention layers caches nothing per token beyond its windows.
      tokens = plan.kv_bytes_per_token > 0 ? std::floor(plan.kv.value / plan.kv_bytes_per_token) : 1e15;
    }
    if (!have || tokens < best_tokens) {
      best = plan;
      best_tokens = tokens;
      have = true;
    }
  }
  if (best_tokens > 0) {
    best.kv_tokens_per_group = static_cast<std::int64_t>(std::min(best_tokens, 1e15));
    best.kv_tokens = best.kv_tokens_per_group * p.dp;
  }
  return best;
}

}  // namespace servesim::models
