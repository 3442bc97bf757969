// What one chip of an instance must hold, and the KV-cache capacity that leaves.
//
// Per chip of pipeline stage s (the model of vLLM's memory profiling):
//   usable      = memory x memory_utilization            (vLLM gpu_memory_utilization)
//   weights     = the stage's layers, each part split the way it is computed: attention and dense
//                 MLPs over tp (replicated over dp and cp; MLA's down-projections and the DSA
//                 indexer replicated over tp too), routed experts over ep x moe_tp, shared experts
//                 over tp, the router replicated; the vocabulary-parallel embedding on the first
//                 stage and the LM head on the last (one matrix when tied, on both ends when pp > 1),
//                 in bf16; MTP layers on the last stage when loaded; the vision encoder on the first
//   activations = peak intermediate tensors of one forward pass at the batch token budget (split
//                 over dp x cp), the busiest EP rank's permuted token copies, fp32 logits for the
//                 sequences that sample (last stage)
//   window KV   = sliding-window layers keep at most window + one block of tokens per running
//                 sequence (vLLM's hybrid allocator frees the blocks that leave the window):
//                 reserved up front for max_sequences
//   linear state = linear-attention layers keep a fixed recurrent state per running sequence
//                 (SGLang's mamba pool and vLLM's hybrid allocator hold one per request): reserved
//                 up front for max_sequences
//   reserved    = framework reserve (CUDA context, NCCL buffers, graphs)
//   kv          = usable - weights - activations - window KV - linear state - reserved
// KV bytes per token per chip: full-attention layers of the stage x (K and V of this chip's KV
// heads, or MLA's replicated latent + rotary key, + DSA index keys), divided by cp. The instance's
// capacity in tokens is the smallest over its stages of kv / that, times dp (each dp group caches
// its own requests); one request can use at most one dp group's share. Formulas in
// models/README.md.
#pragma once

#include <cstdint>
#include <string>

#include "core/units.h"
#include "models/chip_spec.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/parallel_plan.h"

namespace servesim::models {

struct MemoryConfig {
  double memory_utilization = 0.9;
  Bytes reserved;
  std::int64_t max_batched_tokens = 0;  // the scheduler's token budget per iteration (instance)
  std::int64_t max_sequences = 0;       // the scheduler's batch-size cap (instance)
  std::int64_t block_tokens = 16;       // KV block size (window layers keep one extra block)
  bool load_mtp = false;                // MTP layers loaded (speculative decoding with them)
  MoeRouting routing;                   // for the busiest EP rank's activations
};

struct StageWeights {
  Bytes layers;     // attention, MLPs, experts of the stage's layers
  Bytes embedding;  // embedding, LM head and final norm held by the stage
  Bytes mtp;
  Bytes vision;
  Bytes total() const { return Bytes{layers.value + embedding.value + mtp.value + vision.value}; }
};

struct MemoryPlan {
  Bytes capacity;  // per chip
  Bytes usable;
  // The binding stage (smallest KV capacity) and its consumers, per chip.
  int stage = 0;
  Bytes weights;
  StageWeights weight_parts;
  Bytes activations;
  Bytes window_kv;
  Bytes linear_state;
  Bytes reserved;
  Bytes kv;                              // left for the KV cache; negative when the plan does not fit
  double kv_bytes_per_token = 0;         // on one chip of the binding stage
  std::int64_t kv_tokens = 0;            // instance-wide capacity; 0 when it does not fit
  std::int64_t kv_tokens_per_group = 0;  // one dp group's: the longest context a request can hold

  bool fits() const { return kv_tokens > 0; }
  // "weights" / "activations" / "window KV" / "linear state" / "reserved": the largest consumer on
  // the binding stage.
  std::string biggest_consumer() const;
};

StageWeights stage_weights(const ModelSpec& m, const ParallelPlan& p, int stage, const MemoryConfig& c);
Bytes stage_weight_bytes(const ModelSpec& m, const ParallelPlan& p, int stage);
Bytes stage_activation_bytes(const ModelSpec& m, const ParallelPlan& p, int stage, const MemoryConfig& c);
// Recurrent state one sequence holds on one chip in each linear-attention layer (value heads split
// over tp: state and convolution channels).
double linear_state_bytes_per_layer_chip(const ModelSpec& m, const ParallelPlan& p);
// KV-cache bytes one token occupies on one chip of pipeline stage `stage` (full-attention layers).
double kv_bytes_per_token_per_chip(const ModelSpec& m, const ParallelPlan& p, int stage);
MemoryPlan plan_memory(const ModelSpec& m, const ChipSpec& chip, const ParallelPlan& p, const MemoryConfig& c);

}  // namespace servesim::models
