// How one model replica (an instance) is split over chips.
//
// tp: tensor parallelism (Megatron-style: attention heads and MLP columns split over tp chips,
// two all-reduces per layer). pp: pipeline parallelism (layers split into pp stages of
// consecutive layers; earlier stages take the remainder when pp does not divide the layer count).
// An instance has tp x pp chips. Expert, attention-data and context parallelism come with the
// models issue.
#pragma once

#include <string>
#include <vector>

#include "models/model_spec.h"

namespace servesim::models {

struct ParallelPlan {
  int tp = 1;
  int pp = 1;

  int chips() const { return tp * pp; }
  // Layers held by pipeline stage `stage` (0-based).
  int stage_layers(const ModelSpec& m, int stage) const {
    const int base = m.layers / pp;
    return base + (stage < m.layers % pp ? 1 : 0);
  }
  // Query and KV heads on each chip. KV heads are replicated when tp exceeds them (each chip then
  // holds one KV head), as vLLM does.
  int heads_per_chip(const ModelSpec& m) const { return m.heads / tp; }
  int kv_heads_per_chip(const ModelSpec& m) const { return m.kv_heads >= tp ? m.kv_heads / tp : 1; }
};

// Problems of a plan for a model, as sentences with the fix (empty when valid). Suggested TP
// degrees go up to `max_tp` (the chips that share a scale-up domain).
std::vector<std::string> validate_plan(const ModelSpec& m, const ParallelPlan& p, int max_tp = 64);

}  // namespace servesim::models
