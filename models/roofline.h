// The roofline cost model with per-operator-kind efficiencies.
//
// time(op) = kernels x overhead + max( flops / (peak FLOP/s x compute efficiency),
//                                      bytes / (HBM bandwidth x memory efficiency) )
// Williams, Waterman & Patterson, "Roofline", CACM 2009; the efficiencies and overheads are the
// chip's (models/chip_spec.cpp), fitted to measurements where the project has them. Which
// efficiency applies to which kind is decided in one switch in roofline.cpp.
// Ignored: size-dependent efficiency (tile quantisation, wave effects), which the models issue adds.
#pragma once

#include "models/chip_spec.h"
#include "models/operators.h"
#include "sim/core/time.h"

namespace servesim::models {

class Roofline {
 public:
  explicit Roofline(const ChipSpec& chip);
  // Seconds, as a double: callers sum many operators and round once.
  double seconds(const Operator& op) const { return seconds(op.kind, op.flops, op.bytes, op.kernels); }
  double seconds(OpKind kind, double flops, double bytes, int kernels) const;

 private:
  // Per operator kind: seconds per FLOP and per byte at the achieved rates, and the fixed cost
  // per kernel (precomputed: the simulator costs an attention operator every iteration).
  struct Rates {
    double s_per_flop = 0, s_per_byte = 0, overhead_s = 0;
    bool chip_operator = false;
  };
  Rates rates_[kOpKinds];
};

}  // namespace servesim::models
