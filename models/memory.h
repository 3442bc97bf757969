// What one chip of an instance must hold, and the KV-cache capacity that leaves.
//
// Per chip of pipeline stage s (the model of vLLM's memory profiling):
//   usable      = memory x memory_utilization            (vLLM gpu_memory_utilization)
//   weights     = its share of the layers, split over tp; the vocabulary-parallel embedding on the
//                 first stage and the LM head on the last (one matrix when tied, on both ends)
//   activations = peak intermediate tensors of one forward pass at the batch token budget, plus
//                 fp32 logits for the sequences that sample (last stage)
//   reserved    = framework reserve (CUDA context, NCCL buffers, graphs)
//   kv          = usable - weights - activations - reserved
// The instance's KV capacity in tokens is the smallest over its stages of kv / (KV bytes per token
// on that stage's chips). Formulas in models/README.md.
#pragma once

#include <cstdint>
#include <string>

#include "models/chip_spec.h"
#include "models/model_spec.h"
#include "models/parallel_plan.h"
#include "sim/core/units.h"

namespace servesim::models {

struct MemoryConfig {
  double memory_utilization = 0.9;
  Bytes reserved;
  std::int64_t max_batched_tokens = 0;  // the scheduler's token budget per iteration
  std::int64_t max_sequences = 0;       // the scheduler's batch-size cap
};

struct MemoryPlan {
  Bytes capacity;     // per chip
  Bytes usable;
  // The binding stage (smallest KV capacity) and its consumers, per chip.
  int stage = 0;
  Bytes weights;
  Bytes activations;
  Bytes reserved;
  Bytes kv;           // left for the KV cache; negative when the plan does not fit
  double kv_bytes_per_token = 0;  // on one chip of the binding stage
  std::int64_t kv_tokens = 0;     // instance-wide capacity; 0 when it does not fit

  bool fits() const { return kv_tokens > 0; }
  // "weights" / "activations" / "reserved": the largest consumer on the binding stage.
  std::string biggest_consumer() const;
};

Bytes stage_weight_bytes(const ModelSpec& m, const ParallelPlan& p, int stage);
Bytes stage_activation_bytes(const ModelSpec& m, const ParallelPlan& p, int stage,
                             const MemoryConfig& c);
MemoryPlan plan_memory(const ModelSpec& m, const ChipSpec& chip, const ParallelPlan& p,
                       const MemoryConfig& c);

}  // namespace servesim::models
