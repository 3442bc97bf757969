#include "models/parallel_plan.h"

namespace servesim::models {
namespace {

std::string divisors_of(int n, int limit) {
  std::string out;
  for (int d = 1; d <= n && d <= limit; ++d) {
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  }
  return out;
}

std::string str(int v) { return std::to_string(v); }

}  // namespace

GroupShape ParallelPlan::group(Group g) const {
  switch (g) {
    case Group::kTp: return {tp, 1};
    case Group::kDp: return {dp, tp};
    case Group::kMoe: return {tp * dp, 1};
    case Group::kEp: return {ep, moe_tp};
    case Group::kCp: return {cp, tp * dp};
    case Group::kPp: return {pp, tp * dp * cp};
  }
  return {};
}

int default_moe_tp(int tp, int dp, int ep) {
  const int chips = tp * dp;
  return ep >= 1 && chips % ep == 0 ? chips / ep : 1;
}

std::vector<std::string> validate_plan(const ModelSpec& m, const ParallelPlan& p, int max_tp) {
  std::vector<std::string> out;
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.ep < 1 || p.moe_tp < 1 || p.cp < 1) {
    return out;  // range errors are reported by the loader
  }
  const std::string tp = "tensor parallelism " + str(p.tp);
  if (m.heads > 0 && m.heads % p.tp != 0) {
    out.push_back(tp + " does not divide the " + str(m.heads) + " attention heads of " + m.name + " (choose one of " +
                  divisors_of(m.heads, max_tp) + ")");
  } else if (m.attention == AttentionKind::kGqa && m.kv_heads > 0 && m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0) {
    out.push_back(tp + " neither divides nor is a multiple of the " + str(m.kv_heads) + " KV heads of " + m.name);
  }
  if (m.linear.enabled() && m.linear.value_heads % p.tp != 0) {
    out.push_back(tp + " does not divide the " + str(m.linear.value_heads) + " linear-attention value heads of " +
                  m.name + " (choose one of " + divisors_of(m.linear.value_heads, max_tp) + ")");
  }
  bool has_dense_mlp = false;
  for (int l = 0; l < m.layers && !has_dense_mlp; ++l) has_dense_mlp = m.has_ffn(l) && !m.is_moe_layer(l);
  if (has_dense_mlp && m.intermediate > 0 && m.intermediate % p.tp != 0) {
    out.push_back(tp + " does not divide the MLP width " + str(m.intermediate) + " of " + m.name);
  }
  if (m.layers > 0 && p.pp > m.layers) {
    out.push_back("pipeline parallelism " + str(p.pp) + " exceeds the " + str(m.layers) + " layers of " + m.name);
  }
  if (!m.moe.enabled()) {
    if (p.ep > 1 || p.moe_tp > 1) {
      // moe_tp defaults to tp x dp, which a dense model ignores; only an explicit split is wrong.
      if (p.ep > 1) {
        out.push_back("expert parallelism ep " + str(p.ep) + " needs a MoE model; " + m.name +
                      " has no experts (remove ep)");
      }
    }
    return out;
  }
  const int moe_chips = p.tp * p.dp;
  if (p.ep * p.moe_tp != moe_chips) {
    out.push_back("the MoE layers are split moe_tp x ep over the tp x dp = " + str(moe_chips) +
                  " chips of a stage, but moe_tp " + str(p.moe_tp) + " x ep " + str(p.ep) + " = " +
                  str(p.ep * p.moe_tp) +
                  (moe_chips % p.ep == 0 ? "; set moe_tp to " + str(moe_chips / p.ep)
                                         : "; choose ep among " + divisors_of(moe_chips, moe_chips)));
  }
  if (p.redundant_experts > 0 && (m.moe.experts + p.redundant_experts) % p.ep != 0) {
    out.push_back("expert parallelism ep " + str(p.ep) + " does not divide the " + str(m.moe.experts) + " experts of " +
                  m.name + " plus " + str(p.redundant_experts) + " redundant ones (" +
                  str(m.moe.experts + p.redundant_experts) + " slots)");
  } else if (p.redundant_experts == 0 && m.moe.experts % p.ep != 0) {
    out.push_back("expert parallelism ep " + str(p.ep) + " does not divide the " + str(m.moe.experts) + " experts of " +
                  m.name + " (choose one of " + divisors_of(m.moe.experts, moe_chips) + ")");
  }
  if (m.moe.expert_intermediate % p.moe_tp != 0) {
    out.push_back("expert tensor parallelism moe_tp " + str(p.moe_tp) + " does not divide the expert width " +
                  str(m.moe.expert_intermediate) + " of " + m.name + " (choose one of " +
                  divisors_of(m.moe.expert_intermediate, moe_chips) + ")");
  }
  if (m.moe.shared_intermediate % p.tp != 0) {
    out.push_back(tp + " does not divide the shared-expert width " + str(m.moe.shared_intermediate) + " of " + m.name);
  }
  return out;
}

}  // namespace servesim::models
