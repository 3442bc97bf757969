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
  using models::BatchShape;
  prefill_attention_ = affine([&](double pairs, double tokens, double kv) {
    BatchShape b;
    b.prefill_pairs = pairs;
    b.prefill_tokens = static_cast<std::int64_t>(tokens);
    b.prefill_kv_tokens = static_cast<std::int64_t>(kv);
    return models::attention_prefill_op(model, plan, b);
  });
  decode_attention_ = affine([&](double kv, double seqs, double) {
    BatchShape b;
    b.decode_kv_tokens = static_cast<std::int64_t>(kv);
    b.decode_seqs = static_cast<std::int64_t>(seqs);
    return models::attention_decode_op(model, plan, b);
  });
  lm_head_ = affine([&](double logits, double, double) {
    return models::lm_head_op(model, plan, static_cast<std::int64_t>(logits));
  });
  for (const topologies::LinkTier& hop : placement.pp_hops) {
    // p2p time = alpha + bytes / (bandwidth x efficiency), bytes linear in the token count: the
    // times of one and two tokens give both terms.
    const double one = topologies::p2p_seconds(models::hidden_state_bytes(model, 1), hop);
    const double two = topologies::p2p_seconds(models::hidden_state_bytes(model, 2), hop);
    send_s_per_token_.push_back(two - one);
    send_alpha_s_.push_back(one - (two - one));
  }
}

template <class MakeOp>
IterationCostModel::AffineOp IterationCostModel::affine(MakeOp make_op) {
  // The operators are affine in the batch sums, so evaluating them at the origin and at each unit
  // vector gives the coefficients exactly.
  const models::Operator o = make_op(0.0, 0.0, 0.0);
  const models::Operator e[3] = {make_op(1.0, 0.0, 0.0), make_op(0.0, 1.0, 0.0), make_op(0.0, 0.0, 1.0)};
  AffineOp a;
  a.kind = o.kind;
  a.f[0] = o.flops;
  a.b[0] = o.bytes;
  for (int i = 0; i < 3; ++i) {
    a.f[i + 1] = e[i].flops - o.flops;
    a.b[i + 1] = e[i].bytes - o.bytes;
  }
  return a;
}

double IterationCostModel::seconds(const AffineOp& op, double x1, double x2, double x3) const {
  return roofline_.seconds(op.kind, op.f[0] + op.f[1] * x1 + op.f[2] * x2 + op.f[3] * x3,
                           op.b[0] + op.b[1] * x1 + op.b[2] * x2 + op.b[3] * x3, 1);
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
  // An operator with nothing to do launches no kernel.
  const std::int64_t attn_prefill =
      b.prefill_tokens > 0 ? to_ps(seconds(prefill_attention_, b.prefill_pairs,
                                           static_cast<double>(b.prefill_tokens),
                                           static_cast<double>(b.prefill_kv_tokens)))
                           : 0;
  const std::int64_t attn_decode =
      b.decode_seqs > 0 ? to_ps(seconds(decode_attention_, static_cast<double>(b.decode_kv_tokens),
                                        static_cast<double>(b.decode_seqs)))
                        : 0;
  const std::int64_t per_layer = lin.qkv + lin.out + lin.mlp + lin.elementwise +
                                 2 * lin.all_reduce + attn_prefill + attn_decode;
  const Duration host = chip_.efficiency.iteration_overhead +
                        chip_.efficiency.sequence_overhead * sequences;
  const std::int64_t lm_head =
      b.logits > 0 ? to_ps(seconds(lm_head_, static_cast<double>(b.logits))) : 0;

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
      const auto hop = static_cast<std::size_t>(s);
      const std::int64_t send = b.tokens > 0 ? to_ps(send_alpha_s_[hop] + send_s_per_token_[hop] *
                                                                           static_cast<double>(b.tokens))
                                             : 0;
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
