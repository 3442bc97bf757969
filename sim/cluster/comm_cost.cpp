#include "sim/cluster/comm_cost.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::cluster {

CommCost::CommCost(const models::ChipSpec& chip)
    : up_{chip.scale_up_bandwidth, chip.efficiency.collective_latency, chip.efficiency.collective_bandwidth},
      out_{chip.scale_out_bandwidth, chip.scale_out_latency, chip.efficiency.collective_bandwidth},
      all_reduce_lines_(chip.efficiency.all_reduce_lines) {}

namespace {

topologies::CollectiveKind topology_kind(models::Collective c) {
  switch (c) {
    case models::Collective::kAllReduce: return topologies::CollectiveKind::kAllReduce;
    case models::Collective::kAllGather: return topologies::CollectiveKind::kAllGather;
    case models::Collective::kReduceScatter: return topologies::CollectiveKind::kReduceScatter;
    case models::Collective::kAllToAll: return topologies::CollectiveKind::kAllToAll;
    case models::Collective::kP2p: return topologies::CollectiveKind::kP2p;
  }
  return topologies::CollectiveKind::kP2p;
}

// The models' all-to-all bytes are what a rank sends to its peers; topologies' are NCCL-tests'
// size, the rank's own share included: n / (n - 1) times as many.
double topology_bytes(models::Collective c, int ranks, double bytes) {
  return c == models::Collective::kAllToAll && ranks > 1 ? bytes * ranks / (ranks - 1.0) : bytes;
}

// The kernel kinds of PlacedGroup::Layout::ep, in order.
constexpr std::array<topologies::CollectiveKind, 4> kEpKinds = {
    topologies::CollectiveKind::kDispatch, topologies::CollectiveKind::kCombine,
    topologies::CollectiveKind::kDispatchLowLatency, topologies::CollectiveKind::kCombineLowLatency};

std::size_t ep_index(const models::CommOp& op) {
  return (op.kind == models::OpKind::kEpCombine ? 1u : 0u) + (op.low_latency ? 2u : 0u);
}

bool split_op(const models::CommOp& op) {
  return op.collective == models::Collective::kAllToAll && op.nic_bytes >= 0 &&
         (op.kind == models::OpKind::kEpDispatch || op.kind == models::OpKind::kEpCombine);
}

}  // namespace

bool PlacedGroup::leaves_domain() const {
  for (const Layout& l : layouts) {
    if (l.layout.domains > 1) return true;
  }
  return false;
}

PlacedGroup place_group(std::span<const topologies::GroupLayout> layouts, topologies::CollectiveCostCache& cache,
                        const topologies::CommCalibration& calibration, double nic_share) {
  PlacedGroup g;
  g.nic_share = nic_share;
  for (const topologies::GroupLayout& layout : layouts) {
    PlacedGroup::Layout l;
    l.layout = layout;
    for (std::size_t k = 0; k < PlacedGroup::kKinds; ++k) {
      l.curves[k] = cache.curve(layout, topology_kind(static_cast<models::Collective>(k)));
    }
    topologies::GroupLayout shared = layout;
    shared.out_bytes_per_s *= nic_share;
    l.a2a_shared = cache.curve(shared, topologies::CollectiveKind::kAllToAll);
    // The direct algorithm's scale-out part: (n - p) / n of the bytes over the NIC share, at the
    // bandwidth-oriented protocol's scale-out efficiency (collectives.h).
    for (const topologies::AlgorithmTerms& a :
         topologies::collective_algorithms(layout, topologies::CollectiveKind::kAllToAll)) {
      const double eff = calibration.tier(topologies::Plane::kScaleOut)[topologies::CollectiveKind::kAllToAll]
                             .bandwidth_bound.efficiency;
      if (a.count > 0 && eff > 0) l.nic_s_per_byte = a.phases[0].out_seconds_per_byte / eff;
    }
    for (std::size_t k = 0; k < kEpKinds.size(); ++k) {
      l.ep[k] = topologies::split_all_to_all(layout, kEpKinds[k], calibration);
      const double eff = calibration.tier(topologies::Plane::kScaleOut)[kEpKinds[k]].bandwidth_bound.efficiency;
      if (layout.domains > 1 && layout.out_bytes_per_s > 0 && eff > 0) {
        l.ep_nic_s_per_byte[k] = 1.0 / (layout.out_bytes_per_s * eff);
      }
    }
    g.layouts.push_back(l);
  }
  return g;
}

GroupSpan placed_span(const PlacedGroup& g) {
  GroupSpan s;
  s.placed = &g;
  for (const PlacedGroup::Layout& l : g.layouts) {
    const topologies::GroupLayout& x = l.layout;
    s.ranks = std::max(s.ranks, x.ranks);
    if (x.domains > 1) s.leaves_domain = true;
    if (x.ranks > 1) {
      s.outside_fraction =
          std::max(s.outside_fraction, static_cast<double>(x.ranks - x.ranks_per_domain) / (x.ranks - 1));
    }
  }
  return s;
}

double CommCost::placed_seconds(models::Collective c, const GroupSpan& g, double bytes, double nic_share) const {
  const PlacedGroup& p = *g.placed;
  const bool shared = c == models::Collective::kAllToAll && nic_share != 1.0;
  SERVESIM_CHECK_MSG(!shared || nic_share == p.nic_share, "a placed all-to-all is costed at its NIC share");
  double worst = 0;
  for (const PlacedGroup::Layout& l : p.layouts) {
    const topologies::CostCurve& curve = shared ? l.a2a_shared : l.curves[static_cast<std::size_t>(c)];
    worst = std::max(worst, curve.seconds(topology_bytes(c, l.layout.ranks, bytes)));
  }
  return worst;
}

double CommCost::seconds(models::Collective c, const GroupSpan& g, double bytes, double nic_share) const {
  if (g.ranks <= 1 || bytes <= 0) return 0.0;
  if (g.placed != nullptr) return placed_seconds(c, g, bytes, nic_share);
  const topologies::LinkTier& tier = g.leaves_domain ? out_ : up_;
  const double n = g.ranks;
  switch (c) {
    case models::Collective::kAllReduce:
      if (!g.leaves_domain && !all_reduce_lines_.empty()) {
        return models::all_reduce_line_seconds(all_reduce_lines_, bytes, g.ranks, up_.bandwidth);
      }
      if (g.leaves_domain && g.domain_ranks > 1 && g.ranks % g.domain_ranks == 0) {
        // Hierarchical (header): reduce-scatter and all-gather in the domain, the shards across.
        const double d = g.domain_ranks;
        const double in_domain =
            2.0 * (up_.latency.to_seconds() + (d - 1.0) / d * bytes / (up_.bandwidth.bytes_per_s * up_.efficiency));
        return in_domain + topologies::ring_all_reduce_seconds(bytes / d, g.ranks / g.domain_ranks, out_);
      }
      return topologies::ring_all_reduce_seconds(bytes, g.ranks, tier);
    case models::Collective::kAllGather:
    case models::Collective::kReduceScatter:
      return tier.latency.to_seconds() + (n - 1.0) / n * bytes / (tier.bandwidth.bytes_per_s * tier.efficiency);
    case models::Collective::kAllToAll: {
      const double out_bytes = bytes * g.outside_fraction, in_bytes = bytes - out_bytes;
      const double t = std::max(in_bytes / (up_.bandwidth.bytes_per_s * up_.efficiency),
                                out_bytes / (out_.bandwidth.bytes_per_s * out_.efficiency * nic_share));
      return tier.latency.to_seconds() + t;
    }
    case models::Collective::kP2p: return topologies::p2p_seconds(bytes, tier);
  }
  return 0.0;
}

double CommCost::seconds(const models::CommOp& op, const GroupSpan& g, double nic_share) const {
  if (!split_op(op)) return seconds(op.collective, g, op.bytes, nic_share);
  if (g.ranks <= 1 || op.bytes <= 0) return 0.0;
  const double out = g.leaves_domain ? op.nic_bytes : 0.0, in = std::max(0.0, op.bytes - out);
  if (g.placed != nullptr) {
    // The slowest layout binds; a layout inside one domain sends everything over its scale-up.
    double worst = 0;
    for (const PlacedGroup::Layout& l : g.placed->layouts) {
      const bool across = l.layout.domains > 1;
      worst = std::max(worst, l.ep[ep_index(op)].seconds(across ? in : op.bytes, across ? out : 0.0, nic_share));
    }
    return worst;
  }
  const topologies::LinkTier& tier = g.leaves_domain ? out_ : up_;
  return tier.latency.to_seconds() + std::max(in / (up_.bandwidth.bytes_per_s * up_.efficiency),
                                              out / (out_.bandwidth.bytes_per_s * out_.efficiency * nic_share));
}

double CommCost::nic_seconds(const models::CommOp& op, const GroupSpan& g) const {
  if (!split_op(op)) return nic_seconds(op.collective, g, op.bytes);
  if (g.ranks <= 1 || op.nic_bytes <= 0 || !g.leaves_domain) return 0.0;
  if (g.placed != nullptr) {
    double worst = 0;
    for (const PlacedGroup::Layout& l : g.placed->layouts) {
      worst = std::max(worst, op.nic_bytes * l.ep_nic_s_per_byte[ep_index(op)]);
    }
    return worst;
  }
  return op.nic_bytes / (out_.bandwidth.bytes_per_s * out_.efficiency);
}

double CommCost::nic_seconds(models::Collective c, const GroupSpan& g, double bytes) const {
  if (c != models::Collective::kAllToAll || g.ranks <= 1 || bytes <= 0 || !g.leaves_domain) return 0.0;
  if (g.placed != nullptr) {
    double worst = 0;
    for (const PlacedGroup::Layout& l : g.placed->layouts) {
      worst = std::max(worst, topology_bytes(c, l.layout.ranks, bytes) * l.nic_s_per_byte);
    }
    return worst;
  }
  return bytes * g.outside_fraction / (out_.bandwidth.bytes_per_s * out_.efficiency);
}

double a2a_nic_share(const topologies::FlowNetwork::ResourceTraffic& t, double iteration_s) {
  if (!(t.rate > 0) || !(t.capacity > 0) || !(iteration_s > 0)) return 1.0;
  const double half = 0.5 * t.capacity;
  const double q = t.saturated ? half : std::min(t.rate, half);
  // Their pace without the all-to-all: the whole NIC when it binds them (the rate seen now may be
  // what an earlier duty cycle left them), their own rate otherwise.
  const double pace = t.saturated ? t.capacity : t.rate;
  const double f = std::min(1.0, t.remaining / pace / iteration_s);
  return 1.0 / (1.0 + f * q / (t.capacity - q));
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
  if (s.stride == 1 && s.ranks > domain && s.ranks % domain == 0) span.domain_ranks = domain;
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
