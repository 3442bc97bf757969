// How one model replica (an instance) is split over chips.
//
// Convention (AIConfigurator's, and the measured serving benchmarks'): an instance has
// tp x pp x dp x cp chips.
//   tp      tensor parallelism: attention heads, MLP columns and the vocabulary split over tp chips
//           (Megatron-style; an all-reduce after attention and after each MLP).
//   pp      pipeline parallelism: consecutive layers in pp stages (earlier stages take the
//           remainder when pp does not divide the layer count).
//   dp      attention data parallelism (DeepSeek-style): dp groups of tp chips each hold the
//           attention (and dense MLP) weights and serve their own share of the batch; in this
//           version the instance's batch splits evenly over the dp groups (per-rank batches and
//           their imbalance come with the EPD issue).
//   ep, moe_tp  the MoE layers are split moe_tp x ep over the same tp x dp chips of a stage
//           (moe_tp x ep = tp x dp): each expert lives on one of ep ranks, its columns split over
//           moe_tp of them.
//   cp      context parallelism: each request's tokens and KV cache are split over cp ranks
//           (ring attention for prefill, a partial-attention exchange for decode), so a context
//           longer than one chip's memory becomes representable.
// Rank layout, fastest first: tp, dp, cp, pp (a TP group is tp consecutive chips, the MoE group
// of a stage the tp x dp consecutive chips, expert-TP fastest inside it).
// Invariant (validate_plan): every degree >= 1 and divides what it splits.
#pragma once

#include <string>
#include <vector>

#include "models/model_spec.h"

namespace servesim::models {

// Communication groups of an instance.
enum class Group : std::uint8_t { kTp, kDp, kEp, kMoe, kCp, kPp };

struct GroupShape {
  int ranks = 1;   // members
  int stride = 1;  // chips between consecutive members
  int span() const { return (ranks - 1) * stride + 1; }
};

struct ParallelPlan {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int ep = 1;
  int moe_tp = 1;
  int cp = 1;
  // Extra expert replicas spread over the EP ranks (DeepSeek's EPLB: 32 redundant experts make
  // 256 + 32 = 288 slots for EP144): (experts + redundant_experts) must divide by ep, each rank
  // holds that many / ep experts' weights. Token routing still sees the logical experts dealt
  // round-robin over the ranks (MoeLoad): the replicas' load balancing is not modelled.
  int redundant_experts = 0;

  int chips() const { return tp * pp * dp * cp; }
  int stage_chips() const { return tp * dp * cp; }
  // Layers held by pipeline stage `stage` (0-based), and the first of them.
  int stage_layers(const ModelSpec& m, int stage) const {
    const int base = m.layers / pp;
    return base + (stage < m.layers % pp ? 1 : 0);
  }
  int stage_first_layer(const ModelSpec& m, int stage) const {
    int first = 0;
    for (int s = 0; s < stage; ++s) first += stage_layers(m, s);
    return first;
  }
  // Query and KV heads on each chip. KV heads are replicated when tp exceeds them (each chip then
  // holds one KV head), as vLLM does; MLA's latent is replicated on every TP rank.
  int heads_per_chip(const ModelSpec& m) const { return m.heads / tp; }
  int kv_heads_per_chip(const ModelSpec& m) const { return m.kv_heads >= tp ? m.kv_heads / tp : 1; }
  GroupShape group(Group g) const;
};

// The MoE defaults for a plan that gives neither: experts tensor-parallel over all tp x dp chips
// (moe_tp = tp x dp, ep = 1), or moe_tp = tp x dp / ep when only ep is given.
int default_moe_tp(int tp, int dp, int ep);

// Problems of a plan for a model, as sentences with the fix (empty when valid). Suggested TP
// degrees go up to `max_tp` (the chips that share a scale-up domain).
std::vector<std::string> validate_plan(const ModelSpec& m, const ParallelPlan& p, int max_tp = 64);

}  // namespace servesim::models
