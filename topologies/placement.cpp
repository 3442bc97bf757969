#include "topologies/placement.h"

namespace servesim::topologies {

std::vector<std::string> validate_placement(const FabricSpec& f, int tp, int pp) {
  std::vector<std::string> out;
  (void)pp;
  if (tp > f.scale_up_domain) {
    out.push_back("a tensor-parallel group of " + std::to_string(tp) +
                  " chips does not fit in one scale-up domain of " +
                  std::to_string(f.scale_up_domain) +
                  " chips; use tp <= " + std::to_string(f.scale_up_domain) +
                  " and pipeline parallelism across domains");
  } else if (f.scale_up_domain % tp != 0) {
    out.push_back("tensor parallelism " + std::to_string(tp) + " does not divide the scale-up " +
                  "domain of " + std::to_string(f.scale_up_domain) +
                  " chips, so some TP groups would straddle two domains");
  }
  return out;
}

InstancePlacement place_instance(const FabricSpec& f, int tp, int pp) {
  InstancePlacement p;
  p.tp = f.scale_up;
  // Stage k occupies chips [k tp, (k + 1) tp) from the instance's first chip; a hop crosses the
  // scale-out network when its two stages sit in different domains.
  for (int k = 0; k + 1 < pp; ++k) {
    const bool crosses = (k * tp) / f.scale_up_domain != ((k + 1) * tp) / f.scale_up_domain;
    p.pp_hops.push_back(crosses ? f.scale_out : f.scale_up);
  }
  return p;
}

}  // namespace servesim::topologies
