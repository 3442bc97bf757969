// What one batch iteration of an instance costs, per pipeline stage and per component.
//
// Stage k of an instance with L_k layers takes
//   L_k x (QKV + O + MLP GEMMs + elementwise + attention + 2 TP all-reduces)
//   + on the first stage: host time (per iteration + per sequence) and the embedding all-reduce
//   + on the last stage: the LM head; on the others: the send of activations to the next stage.
// Operators are costed by the roofline model (models/roofline.h), collectives on the instance's
// placement (topologies/collectives.h). Everything that depends only on the token count (GEMMs,
// elementwise, all-reduces) is memoised per token count in a table shared by all instances of the
// pool, filled on first use. Attention, the LM head and pipeline sends are affine in the batch's
// sums (operators.h), so their FLOPs and bytes are kept as coefficients, read off the operator
// definitions once at construction. Costing an iteration is O(pipeline stages), whatever the
// batch size, and a few dozen arithmetic operations.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "models/chip_spec.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/parallel_plan.h"
#include "models/roofline.h"
#include "topologies/placement.h"

namespace servesim::cluster {

using ComponentTimes = std::array<std::int64_t, models::kOpKinds>;  // picoseconds

class IterationCostModel {
 public:
  IterationCostModel(const models::ModelSpec& model, const models::ChipSpec& chip,
                     const models::ParallelPlan& plan, const topologies::InstancePlacement& placement,
                     std::int64_t max_tokens);

  // Writes the time of each stage to stage_ps[0 .. pp) and the time per component, summed over
  // stages, to components. `sequences` counts the batch's sequences (for host overhead).
  void cost(const models::BatchShape& batch, std::int64_t sequences, std::int64_t* stage_ps,
            ComponentTimes& components);

  int stages() const { return plan_.pp; }

 private:
  struct TokenLinear {  // per layer unless noted, picoseconds
    std::int64_t qkv = -1, out = 0, mlp = 0, elementwise = 0, all_reduce = 0;
  };
  const TokenLinear& linear(std::int64_t tokens);

  // An operator whose FLOPs and bytes are affine in up to three batch sums x:
  // flops = f[0] + f[1] x1 + f[2] x2 + f[3] x3, bytes likewise.
  struct AffineOp {
    models::OpKind kind = models::OpKind::kGemmQkv;
    double f[4] = {0, 0, 0, 0};
    double b[4] = {0, 0, 0, 0};
  };
  template <class MakeOp>
  static AffineOp affine(MakeOp make_op);
  double seconds(const AffineOp& op, double x1, double x2 = 0, double x3 = 0) const;

  models::ModelSpec model_;
  models::ChipSpec chip_;
  models::ParallelPlan plan_;
  topologies::InstancePlacement placement_;
  models::Roofline roofline_;
  std::vector<int> stage_layers_;
  std::vector<TokenLinear> linear_;  // by token count; qkv < 0 marks "not computed yet"
  AffineOp prefill_attention_;  // x = (prefill pairs, prefill tokens, prefill KV tokens)
  AffineOp decode_attention_;   // x = (decode KV tokens, decode sequences)
  AffineOp lm_head_;            // x = (sampled sequences)
  std::vector<double> send_alpha_s_, send_s_per_token_;  // per pipeline hop
};

}  // namespace servesim::cluster
