#include "topologies/collectives.h"

namespace servesim::topologies {

double ring_all_reduce_seconds(double bytes, int ranks, const LinkTier& tier) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  const double n = ranks;
  return tier.latency.to_seconds() +
         2.0 * (n - 1.0) / n * bytes / (tier.bandwidth.bytes_per_s * tier.efficiency);
}

double p2p_seconds(double bytes, const LinkTier& tier) {
  if (bytes <= 0) return 0.0;
  return tier.latency.to_seconds() + bytes / (tier.bandwidth.bytes_per_s * tier.efficiency);
}

}  // namespace servesim::topologies
