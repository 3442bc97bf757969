#include "sim/cluster/iteration_cost.h"

#include <cmath>

#include "sim/core/check.h"
#include "topologies/collectives.h"

namespace servesim::cluster {
namespace {
// Costs are non-negative: round half up without the libm call (this runs every iteration).
std::int64_t to_ps(double seconds) { return static_cast<std::int64_t>(seconds * 1e12 + 0.5); }
constexpr std::size_t idx(models::OpKind k) { return static_cast<std::size_t>(k); }
}  // namespace

IterationCostModel::IterationCostModel(const models::ModelSpec& model, const models::ChipSpec& chip,
                                       const models::ParallelPlan& plan,
                                       const topologies::InstancePlacement& placement,
                                       std::int64_t max_tokens)
    : model_(model), chip_(chip), plan_(plan), placement_(placement), roofline_(chip),
      linear_(static_cast<std::size_t>(max_tokens) + 1) {
  for (int s = 0; s < plan.pp; ++s) stage_layers_.push_back(plan.stage_layers(model, s));
}

const IterationCostModel::TokenLinear& IterationCostModel::linear(std::int64_t tokens) {
  SERVESIM_CHECK_MSG(tokens >= 0 && static_cast<std::size_t>(tokens) < linear_.size(),
                     "batch of " + std::to_string(tokens) + " tokens exceeds the token budget");
  TokenLinear& e = linear_[static_cast<std::size_t>(tokens)];
  if (e.qkv >= 0) return e;
  const auto ops = models::linear_layer_ops(model_, plan_, tokens);
  e.qkv = to_ps(roofline_.seconds(ops[0]));
  e.out = to_ps(roofline_.seconds(ops[1]));
  e.mlp = to_ps(roofline_.seconds(ops[2]));
  e.elementwise = to_ps(roofline_.seconds(ops[3]));
  e.all_reduce = to_ps(topologies::ring_all_reduce_seconds(
      models::hidden_state_bytes(model_, tokens), plan_.tp, placement_.tp));
  return e;
}

void IterationCostModel::cost(const models::BatchShape& b, std::int64_t sequences,
                              std::int64_t* stage_ps, ComponentTimes& c) {
  using models::OpKind;
  const TokenLinear& lin = linear(b.tokens);
  const std::int64_t attn_prefill =
      to_ps(roofline_.seconds(models::attention_prefill_op(model_, plan_, b)));
  const std::int64_t attn_decode =
      to_ps(roofline_.seconds(models::attention_decode_op(model_, plan_, b)));
  const std::int64_t per_layer = lin.qkv + lin.out + lin.mlp + lin.elementwise +
                                 2 * lin.all_reduce + attn_prefill + attn_decode;
  const Duration host = chip_.efficiency.iteration_overhead +
                        chip_.efficiency.sequence_overhead * sequences;
  const std::int64_t lm_head = to_ps(roofline_.seconds(models::lm_head_op(model_, plan_, b.logits)));
  const double hidden_bytes = models::hidden_state_bytes(model_, b.tokens);

  c.fill(0);
  std::int64_t layers = 0;
  for (int s = 0; s < plan_.pp; ++s) {
    const std::int64_t l = stage_layers_[static_cast<std::size_t>(s)];
    layers += l;
    std::int64_t t = l * per_layer;
    if (s == 0) {
      // Host work precedes the first stage; the vocabulary-parallel embedding ends in one more
      // all-reduce.
      t += host.ps() + lin.all_reduce;
      c[idx(OpKind::kScheduling)] += host.ps();
      c[idx(OpKind::kTpAllReduce)] += lin.all_reduce;
    }
    if (s == plan_.pp - 1) {
      t += lm_head;
      c[idx(OpKind::kLmHead)] += lm_head;
    } else {
      const std::int64_t send = to_ps(topologies::p2p_seconds(
          hidden_bytes, placement_.pp_hops[static_cast<std::size_t>(s)]));
      t += send;
      c[idx(OpKind::kPpSend)] += send;
    }
    stage_ps[s] = t;
  }
  c[idx(OpKind::kGemmQkv)] += layers * lin.qkv;
  c[idx(OpKind::kGemmOut)] += layers * lin.out;
  c[idx(OpKind::kGemmMlp)] += layers * lin.mlp;
  c[idx(OpKind::kElementwise)] += layers * lin.elementwise;
  c[idx(OpKind::kTpAllReduce)] += layers * 2 * lin.all_reduce;
  c[idx(OpKind::kAttentionPrefill)] += layers * attn_prefill;
  c[idx(OpKind::kAttentionDecode)] += layers * attn_decode;
}

}  // namespace servesim::cluster
