#include "topologies/collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>
#include <vector>

#include "core/check.h"

namespace servesim::topologies {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// factor / bandwidth, with nothing to send costing nothing and no bandwidth costing forever.
double per_byte(double factor, double bytes_per_s) {
  if (!(factor > 0)) return 0.0;
  return bytes_per_s > 0 ? factor / bytes_per_s : kInf;
}

double min_positive(double a, double b) {
  if (!(a > 0)) return b;
  if (!(b > 0)) return a;
  return std::min(a, b);
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

PhaseTerms phase(Plane tier, CollectiveKind fit, double steps, Duration hop, double spb) {
  PhaseTerms p;
  p.tier = tier;
  p.fit = fit;
  p.steps = steps;
  p.latency_s = steps * hop.to_seconds();
  p.seconds_per_byte = spb;
  return p;
}

AlgorithmTerms algorithm(std::string_view name, std::initializer_list<PhaseTerms> phases) {
  AlgorithmTerms a;
  a.name = name;
  for (const auto& p : phases) a.phases[static_cast<std::size_t>(a.count++)] = p;
  return a;
}

const ProtocolFit& protocol(const CommCalibration& c, Plane tier, CollectiveKind kind, int which) {
  const CollectiveFit& f = c.tier(tier)[kind];
  return which == 0 ? f.latency_bound : f.bandwidth_bound;
}

// The line of one phase under one protocol.
CostLine phase_line(const PhaseTerms& p, const CommCalibration& c, int which) {
  const ProtocolFit& fit = protocol(c, p.tier, p.fit, which);
  CostLine l;
  l.alpha_s = fit.base.to_seconds() + p.steps * fit.per_step.to_seconds() + p.latency_s;
  if (p.concurrent_tiers) {
    const double eu = protocol(c, Plane::kScaleUp, p.fit, which).efficiency;
    const double eo = protocol(c, Plane::kScaleOut, p.fit, which).efficiency;
    SERVESIM_CHECK(eu > 0 && eo > 0);
    l.seconds_per_byte = std::max(p.up_seconds_per_byte / eu, p.out_seconds_per_byte / eo);
  } else {
    SERVESIM_CHECK(fit.efficiency > 0);
    l.seconds_per_byte = p.seconds_per_byte / fit.efficiency;
  }
  return l;
}

}  // namespace

double ring_all_reduce_seconds(double bytes, int ranks, const LinkTier& tier) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  const double n = ranks;
  return tier.latency.to_seconds() + 2.0 * (n - 1.0) / n * bytes / (tier.bandwidth.bytes_per_s * tier.efficiency);
}

double p2p_seconds(double bytes, const LinkTier& tier) {
  if (bytes <= 0) return 0.0;
  return tier.latency.to_seconds() + bytes / (tier.bandwidth.bytes_per_s * tier.efficiency);
}

std::string_view collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kP2p: return "p2p";
    case CollectiveKind::kDispatch: return "dispatch";
    case CollectiveKind::kCombine: return "combine";
    case CollectiveKind::kDispatchLowLatency: return "dispatch_low_latency";
    case CollectiveKind::kCombineLowLatency: return "combine_low_latency";
    case CollectiveKind::kCount: break;
  }
  return "?";
}

CostCurve CostCurve::envelope(std::span<const CostLine> lines) {
  CostCurve out;
  if (lines.empty()) return out;
  // Walk the envelope from bytes = 0 rightwards: start with the cheapest line at 0 (the flattest
  // on a tie), then repeatedly move to the flatter line that undercuts the current one first.
  std::size_t cur = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const CostLine& a = lines[i];
    const CostLine& b = lines[cur];
    if (a.alpha_s < b.alpha_s || (a.alpha_s == b.alpha_s && a.seconds_per_byte < b.seconds_per_byte)) cur = i;
  }
  double x = 0;
  while (true) {
    SERVESIM_CHECK(out.count_ < kMaxLines);
    out.lines_[static_cast<std::size_t>(out.count_++)] = lines[cur];
    std::size_t next = cur;
    double next_x = kInf;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const CostLine& a = lines[i];
      const CostLine& b = lines[cur];
      if (!(a.seconds_per_byte < b.seconds_per_byte)) continue;
      // Where a undercuts b: a.alpha + a.s x = b.alpha + b.s x.
      const double cross = (a.alpha_s - b.alpha_s) / (b.seconds_per_byte - a.seconds_per_byte);
      const double at = std::max(cross, x);
      if (at < next_x || (at == next_x && a.seconds_per_byte < lines[next].seconds_per_byte)) {
        next_x = at;
        next = i;
      }
    }
    if (next == cur || !std::isfinite(next_x)) break;
    cur = next;
    x = next_x;
  }
  return out;
}

GroupLayout describe_group(const Fabric& fabric, std::span<const ChipId> ranks) {
  GroupLayout g;
  g.ranks = static_cast<int>(ranks.size());
  if (ranks.size() <= 1) return g;
  // Domains in order of first appearance, and each rank's position within its domain.
  std::vector<std::uint32_t> domain_order;
  std::vector<std::vector<std::size_t>> members;
  std::vector<std::size_t> domain_of(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::uint32_t d = fabric.place(ranks[i]).domain;
    auto it = std::find(domain_order.begin(), domain_order.end(), d);
    std::size_t k = static_cast<std::size_t>(it - domain_order.begin());
    if (it == domain_order.end()) {
      domain_order.push_back(d);
      members.emplace_back();
    }
    members[k].push_back(i);
    domain_of[i] = k;
  }
  g.domains = static_cast<int>(domain_order.size());
  for (const auto& m : members) g.ranks_per_domain = std::max(g.ranks_per_domain, static_cast<int>(m.size()));

  // Inside domains: each rank's scale-up link, or its direct links to the group's peers.
  std::unordered_set<std::uint32_t> in_group;
  for (ChipId c : ranks) in_group.insert(c.value);
  double up = kInf;
  for (const auto& m : members) {
    if (m.size() < 2) continue;
    for (std::size_t i : m) {
      const ChipId c = ranks[i];
      double bw = 0;
      if (fabric.mesh_begin(c) != fabric.mesh_end(c)) {
        for (const LinkId* l = fabric.mesh_begin(c); l != fabric.mesh_end(c); ++l) {
          if (fabric.link_up(*l) && in_group.count(fabric.link(*l).to.value)) {
            bw += fabric.link(*l).bandwidth_bytes_per_s;
          }
        }
      } else if (const LinkId l = fabric.attachment_up(c, Plane::kScaleUp); l.valid() && fabric.link_up(l)) {
        bw = fabric.link(l).bandwidth_bytes_per_s;
      }
      up = std::min(up, bw);
    }
    if (g.up_hop == Duration::zero()) {
      Route r;
      if (fabric.route_on(ranks[m[0]], ranks[m[1]], Plane::kScaleUp, 0, r)) g.up_hop = fabric.latency(r);
    }
  }
  g.up_bytes_per_s = std::isfinite(up) ? up : 0.0;

  // Across domains: the route of each rank to its peer in the next domain, links shared among
  // the ranks whose routes use them.
  if (g.domains > 1) {
    std::vector<Route> routes(ranks.size());
    std::vector<bool> routed(ranks.size(), false);
    std::unordered_map<std::uint32_t, int> users;
    std::vector<std::size_t> position(ranks.size());
    for (const auto& m : members) {
      for (std::size_t q = 0; q < m.size(); ++q) position[m[q]] = q;
    }
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const auto& next = members[(domain_of[i] + 1) % members.size()];
      const ChipId peer = ranks[next[std::min(position[i], next.size() - 1)]];
      if (fabric.route_on(ranks[i], peer, Plane::kScaleOut, 0, routes[i])) {
        routed[i] = true;
        for (LinkId l : routes[i]) ++users[l.value];
        g.out_hop = std::max(g.out_hop, fabric.latency(routes[i]));
      }
    }
    double out = kInf;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (!routed[i]) {
        out = 0;
        continue;
      }
      for (LinkId l : routes[i]) {
        out = std::min(out, fabric.link(l).bandwidth_bytes_per_s / users[l.value]);
      }
    }
    g.out_bytes_per_s = std::isfinite(out) ? out : 0.0;
  }
  return g;
}

std::vector<AlgorithmTerms> collective_algorithms(const GroupLayout& g, CollectiveKind kind) {
  std::vector<AlgorithmTerms> out;
  const int n = g.ranks;
  if (n <= 1) return out;
  const int m = g.domains;
  const int p = g.ranks_per_domain;
  const double nd = n, md = m, pd = p;
  const Plane up = Plane::kScaleUp, so = Plane::kScaleOut;
  // The bandwidth a flat ring gets: the slowest tier it crosses.
  const double ring_bw =
      m > 1 ? (p > 1 ? min_positive(g.up_bytes_per_s, g.out_bytes_per_s) : g.out_bytes_per_s) : g.up_bytes_per_s;
  const Plane ring_tier = m > 1 ? so : up;
  const Duration ring_hop = m > 1 ? g.out_hop : g.up_hop;
  switch (kind) {
    case CollectiveKind::kAllReduce: {
      out.push_back(
          algorithm("ring", {phase(ring_tier, kind, 2 * (nd - 1), ring_hop, per_byte(2 * (nd - 1) / nd, ring_bw))}));
      if (m > 1) {
        // Double binary tree across domains, a chain inside each (NCCL's tree): every rank
        // sends and receives the vector twice.
        PhaseTerms t = phase(so, kind, 2.0 * ceil_log2(m) + 2 * (pd - 1), Duration::zero(), per_byte(2.0, ring_bw));
        t.latency_s = 2.0 * ceil_log2(m) * g.out_hop.to_seconds() + 2 * (pd - 1) * g.up_hop.to_seconds();
        out.push_back(algorithm("tree", {t}));
        if (p > 1) {
          out.push_back(algorithm(
              "hierarchical",
              {phase(up, CollectiveKind::kReduceScatter, pd - 1, g.up_hop, per_byte((pd - 1) / pd, g.up_bytes_per_s)),
               phase(so, CollectiveKind::kAllReduce, 2 * (md - 1), g.out_hop,
                     per_byte(2 * (md - 1) / md / pd, g.out_bytes_per_s)),
               phase(up, CollectiveKind::kAllGather, pd - 1, g.up_hop, per_byte((pd - 1) / pd, g.up_bytes_per_s))}));
        }
      }
      break;
    }
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter: {
      out.push_back(algorithm("ring", {phase(ring_tier, kind, nd - 1, ring_hop, per_byte((nd - 1) / nd, ring_bw))}));
      if (m > 1 && p > 1) {
        out.push_back(algorithm("hierarchical",
                                {phase(so, kind, md - 1, g.out_hop, per_byte((md - 1) / md / pd, g.out_bytes_per_s)),
                                 phase(up, kind, pd - 1, g.up_hop, per_byte((pd - 1) / pd, g.up_bytes_per_s))}));
      }
      break;
    }
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kDispatch:
    case CollectiveKind::kCombine:
    case CollectiveKind::kDispatchLowLatency:
    case CollectiveKind::kCombineLowLatency: {
      PhaseTerms t = phase(ring_tier, kind, nd - 1, Duration::zero(), 0);
      t.latency_s = ring_hop.to_seconds();
      t.concurrent_tiers = true;
      t.up_seconds_per_byte = per_byte((pd - 1) / nd, g.up_bytes_per_s);
      t.out_seconds_per_byte = m > 1 ? per_byte((nd - pd) / nd, g.out_bytes_per_s) : 0.0;
      out.push_back(algorithm("direct", {t}));
      break;
    }
    case CollectiveKind::kP2p: {
      out.push_back(algorithm("send", {phase(ring_tier, kind, 1, ring_hop, per_byte(1.0, ring_bw))}));
      break;
    }
    case CollectiveKind::kCount: break;
  }
  return out;
}

CostCurve collective_curve(const GroupLayout& g, CollectiveKind kind, const CommCalibration& c) {
  std::vector<CostLine> lines;
  for (const AlgorithmTerms& a : collective_algorithms(g, kind)) {
    // Every combination of protocols over the phases (each phase is its own library call).
    for (int mask = 0; mask < (1 << a.count); ++mask) {
      CostLine sum;
      for (int i = 0; i < a.count; ++i) {
        const CostLine l = phase_line(a.phases[static_cast<std::size_t>(i)], c, (mask >> i) & 1);
        sum.alpha_s += l.alpha_s;
        sum.seconds_per_byte += l.seconds_per_byte;
      }
      lines.push_back(sum);
    }
  }
  return CostCurve::envelope(lines);
}

std::size_t CollectiveCostCache::KeyHash::operator()(const Key& k) const {
  std::size_t h = static_cast<std::size_t>(k.kind);
  auto mixin = [&](std::uint64_t v) { h ^= static_cast<std::size_t>(v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); };
  mixin(static_cast<std::uint64_t>(k.layout.ranks));
  mixin(static_cast<std::uint64_t>(k.layout.domains));
  mixin(static_cast<std::uint64_t>(k.layout.ranks_per_domain));
  mixin(static_cast<std::uint64_t>(std::llround(k.layout.up_bytes_per_s)));
  mixin(static_cast<std::uint64_t>(std::llround(k.layout.out_bytes_per_s)));
  mixin(static_cast<std::uint64_t>(k.layout.up_hop.ps()));
  mixin(static_cast<std::uint64_t>(k.layout.out_hop.ps()));
  return h;
}

const CostCurve& CollectiveCostCache::curve(const GroupLayout& g, CollectiveKind kind) {
  const Key key{g, kind};
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, collective_curve(g, kind, calibration_)).first;
  return it->second;
}

double SplitAllToAll::seconds(double up_bytes, double out_bytes, double share) const {
  if (!(up_bytes > 0) && !(out_bytes > 0)) return 0.0;
  double best = kInf;
  for (int i = 0; i < count; ++i) {
    const Protocol& p = protocols[static_cast<std::size_t>(i)];
    const double up = up_bytes > 0 ? up_bytes * p.up_s_per_byte : 0.0;
    const double out = out_bytes > 0 ? out_bytes * p.out_s_per_byte / share : 0.0;
    best = std::min(best, p.alpha_s + std::max(up, out));
  }
  return count > 0 ? best : 0.0;
}

SplitAllToAll split_all_to_all(const GroupLayout& g, CollectiveKind kind, const CommCalibration& c) {
  SplitAllToAll s;
  if (g.ranks <= 1) return s;
  const bool across = g.domains > 1;
  const Plane tier = across ? Plane::kScaleOut : Plane::kScaleUp;
  const Duration hop = across ? g.out_hop : g.up_hop;
  for (int which = 0; which < 2; ++which) {
    // The direct algorithm's phase (collective_algorithms), its transfer per byte of each tier.
    const ProtocolFit& fit = protocol(c, tier, kind, which);
    SplitAllToAll::Protocol& p = s.protocols[static_cast<std::size_t>(s.count++)];
    p.alpha_s = fit.base.to_seconds() + (g.ranks - 1.0) * fit.per_step.to_seconds() + hop.to_seconds();
    const double eu = protocol(c, Plane::kScaleUp, kind, which).efficiency;
    const double eo = protocol(c, Plane::kScaleOut, kind, which).efficiency;
    SERVESIM_CHECK(eu > 0 && eo > 0);
    p.up_s_per_byte = g.ranks_per_domain > 1 ? per_byte(1.0, g.up_bytes_per_s) / eu : 0.0;
    p.out_s_per_byte = across ? per_byte(1.0, g.out_bytes_per_s) / eo : 0.0;
  }
  return s;
}

double expected_destination_ranks(int experts, int topk, int ranks) {
  if (ranks <= 0 || experts <= 0 || topk <= 0) return 0.0;
  const double e = experts;
  const double per_rank = e / ranks;
  // P(no expert of a given rank among the k picks) = C(E - E/r, k) / C(E, k).
  double miss = 1.0;
  for (int i = 0; i < topk; ++i) miss *= std::max(0.0, (e - per_rank - i) / (e - i));
  return ranks * (1.0 - miss);
}

}  // namespace servesim::topologies
