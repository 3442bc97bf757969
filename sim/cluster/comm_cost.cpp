#include "sim/cluster/comm_cost.h"

#include <algorithm>

namespace servesim::cluster {

CommCost::CommCost(const models::ChipSpec& chip)
    : up_{chip.scale_up_bandwidth, chip.efficiency.collective_latency,
          chip.efficiency.collective_bandwidth},
      out_{chip.scale_out_bandwidth, chip.scale_out_latency, chip.efficiency.collective_bandwidth} {}

double CommCost::seconds(models::Collective c, const GroupSpan& g, double bytes, double nic_share) const {
  if (g.ranks <= 1 || bytes <= 0) return 0.0;
  const topologies::LinkTier& tier = g.leaves_domain ? out_ : up_;
  const double n = g.ranks;
  switch (c) {
    case models::Collective::kAllReduce:
      return topologies::ring_all_reduce_seconds(bytes, g.ranks, tier);
    case models::Collective::kAllGather:
    case models::Collective::kReduceScatter:
      return tier.latency.to_seconds() +
             (n - 1.0) / n * bytes / (tier.bandwidth.bytes_per_s * tier.efficiency);
    case models::Collective::kAllToAll: {
      const double out_bytes = bytes * g.outside_fraction, in_bytes = bytes - out_bytes;
      const double t = std::max(in_bytes / (up_.bandwidth.bytes_per_s * up_.efficiency),
                                out_bytes / (out_.bandwidth.bytes_per_s * out_.efficiency * nic_share));
      return tier.latency.to_seconds() + t;
    }
    case models::Collective::kP2p:
      return topologies::p2p_seconds(bytes, tier);
  }
  return 0.0;
}

double CommCost::nic_seconds(models::Collective c, const GroupSpan& g, double bytes) const {
  if (c != models::Collective::kAllToAll || g.ranks <= 1 || bytes <= 0 || !g.leaves_domain) return 0.0;
  return bytes * g.outside_fraction / (out_.bandwidth.bytes_per_s * out_.efficiency);
}

GroupSpan group_span(const models::ParallelPlan& p, models::Group g, int domain) {
  const models::GroupShape s = p.group(g);
  GroupSpan span;
  span.ranks = s.ranks;
  if (s.ranks <= 1 || domain <= 0) return span;
  // Groups of this kind: every chip c of one stage block belongs to the group whose members are
  // c + i stride; check each group's first and last member (contiguous from a domain boundary).
  const int block = p.stage_chips() * p.pp;
  double outside = 0;
  int groups = 0;
  for (int c = 0; c < block; ++c) {
    // c is a group's first member when no member lies before it at distance stride.
    const int within = (c / s.stride) % s.ranks;
    if (within != 0) continue;
    const int last = c + (s.ranks - 1) * s.stride;
    if (c / domain != last / domain) span.leaves_domain = true;
    int same = 0;
    for (int i = 0; i < s.ranks; ++i) same += (c + i * s.stride) / domain == c / domain ? 1 : 0;
    outside += static_cast<double>(s.ranks - same) / (s.ranks - 1);
    ++groups;
  }
  span.outside_fraction = groups > 0 ? outside / groups : 0.0;
  return span;
}

bool pp_hop_leaves_domain(const models::ParallelPlan& p, int stage, int domain) {
  const int s = p.stage_chips();
  for (int r = 0; r < s; ++r) {
    if ((stage * s + r) / domain != ((stage + 1) * s + r) / domain) return true;
  }
  return false;
}

}  // namespace servesim::cluster
