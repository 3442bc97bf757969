#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/approx.h"
#include "topologies/collectives.h"
#include "topologies/placement.h"

using namespace servesim;
using namespace servesim::topologies;

namespace {

// An NVLink-like tier: 300 GB/s per direction, 60% achieved, 45 us per call.
LinkTier nvlink_like() { return LinkTier{Bandwidth{300e9}, Duration::microseconds(45), 0.6}; }

// Reference: run the ring all-reduce step by step (Thakur, Rabenseifner & Gropp 2005) on real
// numbers and time it. S bytes are cut into n chunks; in each of the n - 1 reduce-scatter steps
// and the n - 1 all-gather steps every rank sends one chunk (S / n bytes) to its right neighbour
// on its own link, all at once, so a step takes (S / n) / (B x eff); the call pays alpha once.
// The data check makes sure the steps counted really are an all-reduce.
struct RingRun {
  double seconds = 0;
  bool every_rank_has_the_sum = false;
};

RingRun simulate_ring_all_reduce(double bytes, int n, const LinkTier& tier) {
  // data[r][c]: rank r's copy of chunk c; rank r contributes (r + 1) x (c + 1), so the reduced
  // chunk c is (c + 1) x n (n + 1) / 2.
  std::vector<std::vector<double>> data(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(n)));
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      data[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] = (r + 1.0) * (c + 1.0);
    }
  }
  auto at = [&](int r, int c) -> double& {
    const auto wrap = [n](int i) { return static_cast<std::size_t>((i % n + n) % n); };
    return data[wrap(r)][wrap(c)];
  };
  const double step_s = (bytes / n) / (tier.bandwidth.bytes_per_s * tier.efficiency);
  RingRun run;
  run.seconds = tier.latency.to_seconds();
  // Reduce-scatter: in step s rank r sends chunk r - s to rank r + 1, which adds it.
  for (int s = 0; s < n - 1; ++s) {
    std::vector<double> sent(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) sent[static_cast<std::size_t>(r)] = at(r, r - s);
    for (int r = 0; r < n; ++r) at(r + 1, r - s) += sent[static_cast<std::size_t>(r)];
    run.seconds += step_s;
  }
  // Now rank r holds the full sum of chunk r + 1. All-gather: in step s rank r forwards chunk
  // r + 1 - s to rank r + 1, which overwrites its copy.
  for (int s = 0; s < n - 1; ++s) {
    std::vector<double> sent(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) sent[static_cast<std::size_t>(r)] = at(r, r + 1 - s);
    for (int r = 0; r < n; ++r) at(r + 1, r + 1 - s) = sent[static_cast<std::size_t>(r)];
    run.seconds += step_s;
  }
  run.every_rank_has_the_sum = true;
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      const double want = (c + 1.0) * n * (n + 1.0) / 2.0;
      run.every_rank_has_the_sum = run.every_rank_has_the_sum && at(r, c) == want;
    }
  }
  return run;
}

// Which domain each chip of an instance is in, chip by chip: stage k holds chips
// [k tp, (k + 1) tp) counted from the instance's first chip, which sits on a domain boundary.
std::vector<bool> brute_force_crossings(int domain, int tp, int pp) {
  std::vector<bool> crosses;
  for (int k = 0; k + 1 < pp; ++k) {
    const int from_domain = (k * tp) / domain;
    const int to_domain = ((k + 1) * tp) / domain;
    // A valid TP group never straddles domains: check it on every chip of both stages.
    for (int c = 0; c < tp; ++c) {
      REQUIRE((k * tp + c) / domain == from_domain);
      REQUIRE(((k + 1) * tp + c) / domain == to_domain);
    }
    crosses.push_back(from_domain != to_domain);
  }
  return crosses;
}

FabricSpec two_tier_fabric(int domain) {
  FabricSpec f;
  f.scale_up_domain = domain;
  f.scale_up = LinkTier{Bandwidth{450e9}, Duration::microseconds(10), 0.7};
  f.scale_out = LinkTier{Bandwidth{50e9}, Duration::microseconds(20), 0.8};
  return f;
}

// Tiers have no equality; the fabric above gives them distinct bandwidths.
bool is_scale_out(const LinkTier& t) { return t.bandwidth.bytes_per_s == 50e9; }

}  // namespace

TEST_CASE("ring_all_reduce_seconds: the alpha-beta closed form, by hand") {
  // 1 GiB over 8 ranks at 300 GB/s x 0.6 with 45 us per call:
  //   45e-6 + 2 x 7 / 8 x 1,073,741,824 B / 1.8e11 B/s
  // = 45e-6 + 1,879,048,192 / 1.8e11 = 45e-6 + 0.0104391566 = 0.0104841566 s (10.48 ms).
  const double expected = 45e-6 + 1.75 * kGiB / 1.8e11;
  CHECK(ring_all_reduce_seconds(kGiB, 8, nvlink_like()) == approx(expected).epsilon(1e-12));
  CHECK(ring_all_reduce_seconds(kGiB, 8, nvlink_like()) == approx(0.0104841566).epsilon(1e-8));
}

TEST_CASE("ring_all_reduce_seconds: one rank or zero bytes cost nothing") {
  CHECK(ring_all_reduce_seconds(kGiB, 1, nvlink_like()) == 0.0);
  CHECK(ring_all_reduce_seconds(0.0, 8, nvlink_like()) == 0.0);
  CHECK(ring_all_reduce_seconds(-1.0, 8, nvlink_like()) == 0.0);
}

TEST_CASE("ring_all_reduce_seconds: equals a step-by-step ring all-reduce over 2 to 16 ranks") {
  for (int n = 2; n <= 16; ++n) {
    for (double bytes : {1.0, 4096.0, 1e6, 3.0 * kGiB}) {
      const RingRun run = simulate_ring_all_reduce(bytes, n, nvlink_like());
      INFO("ranks ", n, ", bytes ", bytes);
      CHECK(run.every_rank_has_the_sum);
      CHECK(ring_all_reduce_seconds(bytes, n, nvlink_like()) == approx(run.seconds).epsilon(1e-12));
    }
  }
}

TEST_CASE("p2p_seconds: latency plus bytes over achieved bandwidth") {
  // 1 GiB at 50 GB/s x 0.8 with 20 us: 20e-6 + 1,073,741,824 / 4e10 = 20e-6 + 0.0268435456
  // = 0.0268635456 s.
  const LinkTier out = two_tier_fabric(8).scale_out;
  CHECK(p2p_seconds(kGiB, out) == approx(20e-6 + kGiB / 4e10).epsilon(1e-12));
  CHECK(p2p_seconds(kGiB, out) == approx(0.0268635456).epsilon(1e-8));
  CHECK(p2p_seconds(0.0, out) == 0.0);
}

TEST_CASE("validate_placement: a TP group fits in a scale-up domain or fills whole domains") {
  const FabricSpec f = two_tier_fabric(8);
  // Inside one domain, dividing it or not (an instance starts at a domain boundary; pipeline
  // stages may span domains).
  for (int tp : {1, 2, 3, 4, 5, 6, 7, 8}) {
    INFO("tp = ", tp);
    CHECK(validate_placement(f, tp, 1).empty());
    CHECK(validate_placement(f, tp, 4).empty());
  }
  // Over several whole domains (tensor parallelism across nodes, its all-reduce over the NICs).
  CHECK(validate_placement(f, 16, 1).empty());
  CHECK(validate_placement(f, 64, 1).empty());
  for (int tp : {12, 20}) {
    INFO("tp = ", tp);
    const auto partial = validate_placement(f, tp, 1);
    REQUIRE(partial.size() == 1);
    CHECK(partial[0].find("wider than the scale-up domain of 8 chips and must fill whole domains") !=
          std::string::npos);
  }
  // NVL72: TP 16, 32, 64 stay inside the domain.
  for (int tp : {16, 32, 64}) CHECK(validate_placement(two_tier_fabric(72), tp, 1).empty());
}

TEST_CASE("place_instance: tp=4 pp=4 in an 8-chip domain crosses domains on the middle hop only") {
  // Stages on chips 0-3, 4-7 | 8-11, 12-15: domains 0, 0, 1, 1. Hop 0->1 stays in domain 0,
  // hop 1->2 goes from domain 0 to 1 (scale-out), hop 2->3 stays in domain 1.
  const InstancePlacement p = place_instance(two_tier_fabric(8), 4, 4);
  REQUIRE(p.pp_hops.size() == 3);
  CHECK_FALSE(is_scale_out(p.pp_hops[0]));
  CHECK(is_scale_out(p.pp_hops[1]));
  CHECK_FALSE(is_scale_out(p.pp_hops[2]));
  CHECK_FALSE(is_scale_out(p.tp));  // the TP all-reduce stays on the scale-up links
}

TEST_CASE("place_instance: tp=2 pp=2 stays inside one domain") {
  // Chips 0-1 and 2-3: both in domain 0.
  const InstancePlacement p = place_instance(two_tier_fabric(8), 2, 2);
  REQUIRE(p.pp_hops.size() == 1);
  CHECK_FALSE(is_scale_out(p.pp_hops[0]));
  CHECK(place_instance(two_tier_fabric(8), 8, 1).pp_hops.empty());  // one stage: no hops
}

TEST_CASE("place_instance: hop tiers agree with a chip-by-chip domain walk") {
  for (int domain : {4, 8, 16}) {
    for (int tp = 1; tp <= domain; ++tp) {
      if (domain % tp != 0) continue;  // only valid placements
      for (int pp = 1; pp <= 9; ++pp) {
        INFO("domain ", domain, ", tp ", tp, ", pp ", pp);
        const InstancePlacement p = place_instance(two_tier_fabric(domain), tp, pp);
        const std::vector<bool> want = brute_force_crossings(domain, tp, pp);
        REQUIRE(p.pp_hops.size() == want.size());
        for (std::size_t k = 0; k < want.size(); ++k) CHECK(is_scale_out(p.pp_hops[k]) == want[k]);
      }
    }
  }
}

// --- collectives on a cluster graph ---

#include "core/rng.h"
#include "tests/topologies/test_fabrics.h"
#include "topologies/cluster.h"

using servesim::topologies::testing::dgx_like;

namespace {

// Round figures so that every expected value below can be derived by hand. Latency protocol:
// 5 us base, 1 us per step, 25% of the link; bandwidth protocol: 20 us, 0.5 us, 80%. Scale-out:
// 10 us, 2 us, 20% and 30 us, 1 us, 70%.
CommCalibration round_calibration() {
  CommCalibration c;
  for (auto& k : c.tier(Plane::kScaleUp).kinds) {
    k.latency_bound = ProtocolFit{Duration::microseconds(5), Duration::microseconds(1), 0.25};
    k.bandwidth_bound = ProtocolFit{Duration::microseconds(20), Duration::nanoseconds(500), 0.8};
  }
  for (auto& k : c.tier(Plane::kScaleOut).kinds) {
    k.latency_bound = ProtocolFit{Duration::microseconds(10), Duration::microseconds(2), 0.2};
    k.bandwidth_bound = ProtocolFit{Duration::microseconds(30), Duration::microseconds(1), 0.7};
  }
  return c;
}

std::vector<ChipId> chips(std::uint32_t first, std::uint32_t count) {
  std::vector<ChipId> out;
  for (std::uint32_t c = first; c < first + count; ++c) out.push_back(ChipId(c));
  return out;
}

}  // namespace

TEST_CASE("describe_group: a TP8 group in one NVSwitch node") {
  const Fabric f = build_fabric(dgx_like(1));
  const GroupLayout g = describe_group(f, chips(0, 8));
  CHECK(g.ranks == 8);
  CHECK(g.domains == 1);
  CHECK(g.ranks_per_domain == 8);
  CHECK(g.up_bytes_per_s == 450e9);
  CHECK(g.out_bytes_per_s == 0);
  CHECK(g.up_hop == Duration::nanoseconds(400));  // chip -> NVSwitch -> chip, 0.2 us each
}

TEST_CASE("collective_curve: ring all-reduce in one node, two protocol lines, by hand") {
  const Fabric f = build_fabric(dgx_like(1));
  const CostCurve c = collective_curve(describe_group(f, chips(0, 8)), CollectiveKind::kAllReduce, round_calibration());
  // 2 (n - 1) = 14 steps, each also crossing the 0.4 us route: 5.6 us.
  // Latency protocol: 5 + 14 x 1 + 5.6 = 24.6 us, then 2 x 7 / 8 / (450 GB/s x 0.25) per byte
  //   = 1.75 / 112.5e9 = 1.5556e-11 s/B.
  // Bandwidth protocol: 20 + 14 x 0.5 + 5.6 = 32.6 us, 1.75 / (450e9 x 0.8) = 4.8611e-12 s/B.
  // They cross at (32.6 - 24.6) us / (1.5556e-11 - 4.8611e-12) = 748,052 bytes.
  REQUIRE(c.size() == 2);
  CHECK(c.seconds(1024) == approx(24.6e-6 + 1024 * 1.75 / 112.5e9));
  CHECK(c.seconds(kGiB) == approx(32.6e-6 + kGiB * 1.75 / 360e9));
  const double cross = 8e-6 / (1.75 / 112.5e9 - 1.75 / 360e9);
  CHECK(cross == approx(748'052).epsilon(1e-5));
  CHECK(c.seconds(cross * 0.99) == approx(24.6e-6 + cross * 0.99 * 1.75 / 112.5e9));
  CHECK(c.seconds(cross * 1.01) == approx(32.6e-6 + cross * 1.01 * 1.75 / 360e9));
  CHECK(c.seconds(0) == 0.0);
  // One rank: nothing to do.
  CHECK(collective_curve(describe_group(f, chips(0, 1)), CollectiveKind::kAllReduce, round_calibration()).empty());
}

TEST_CASE("collective_curve: a flat ring equals a step-by-step ring with per-step latency") {
  // With base 0, per-step 0 and efficiency 1, the curve is the ring run step by step: 2 (n - 1)
  // steps, each paying the route latency and moving S / n over the 450 GB/s chip link.
  CommCalibration ideal;
  for (auto& t : ideal.tiers) {
    for (auto& k : t.kinds) k.latency_bound = k.bandwidth_bound = ProtocolFit{Duration::zero(), Duration::zero(), 1.0};
  }
  const Fabric f = build_fabric(dgx_like(1));
  const LinkTier tier{Bandwidth{450e9}, Duration::zero(), 1.0};
  for (int n = 2; n <= 8; ++n) {
    const GroupLayout g = describe_group(f, chips(0, static_cast<std::uint32_t>(n)));
    for (double bytes : {64.0, 1e6, 3.0 * kGiB}) {
      RingRun run = simulate_ring_all_reduce(bytes, n, tier);
      REQUIRE(run.every_rank_has_the_sum);
      run.seconds += 2 * (n - 1) * g.up_hop.to_seconds();
      INFO("ranks ", n, ", bytes ", bytes);
      CHECK(collective_curve(g, CollectiveKind::kAllReduce, ideal).seconds(bytes) ==
            approx(run.seconds).epsilon(1e-12));
    }
  }
}

TEST_CASE("collective_curve: across two nodes the hierarchical all-reduce wins for big messages") {
  // 16 ranks = 2 rail-optimised DGX nodes: every rank's peer is the same GPU of the other node,
  // on its own rail leaf (one user per link): 50 GB/s each, 1 us (two 0.5 us links) per hop.
  const Fabric f = build_fabric(dgx_like(2));
  const GroupLayout g = describe_group(f, chips(0, 16));
  CHECK(g.domains == 2);
  CHECK(g.ranks_per_domain == 8);
  CHECK(g.out_bytes_per_s == 50e9);
  CHECK(g.out_hop == Duration::microseconds(1));
  const CommCalibration cal = round_calibration();
  const CostCurve c = collective_curve(g, CollectiveKind::kAllReduce, cal);
  // Hierarchical, bandwidth protocol in every phase:
  //  reduce-scatter in the node: 20 + 7 x 0.5 + 7 x 0.4 = 26.3 us, (7/8) / (450e9 x 0.8) s/B;
  //  all-reduce of S/8 across 2 nodes: 30 + 2 x 1 + 2 x 1 = 34 us, (2 x 1/2 / 8) / (50e9 x 0.7);
  //  all-gather in the node: as the reduce-scatter.
  const double alpha = 26.3e-6 + 34e-6 + 26.3e-6;
  const double slope = 2 * 0.875 / 360e9 + 0.125 / 35e9;
  CHECK(c.seconds(kGiB) == approx(alpha + kGiB * slope));
  // The flat ring is bound by the 50 GB/s tier: 1.875 / (50e9 x 0.7) s/B, six times steeper.
  const double ring = 30e-6 + 30 * 1e-6 + 30 * 1e-6 + kGiB * 1.875 / 35e9;
  CHECK(c.seconds(kGiB) < ring / 5);
  // Tiny messages: the hierarchical all-reduce with the latency protocol in every phase. In the
  // node 5 + 7 x 1 + 7 x 0.4 = 14.8 us and 8 B x 7/8 / (450 GB/s x 0.25) for each of the
  // reduce-scatter and the all-gather; across the nodes 10 + 2 x 2 + 2 x 1 = 16 us and
  // 1 B / (50 GB/s x 0.2): 45.6 us in all. The double binary tree takes 2 x 1 + 2 x 7 = 16 steps
  // of 2 us, hops 2 x 1 + 14 x 0.4 = 7.6 us and base 10 us: 49.6 us, more.
  CHECK(c.seconds(8) == approx(45.6e-6 + 2 * 7 / 112.5e9 + 1 / 10e9));
}

TEST_CASE("collective_curve: all-to-all splits into the NVLink share and the NIC share") {
  const Fabric f = build_fabric(dgx_like(2));
  const GroupLayout g = describe_group(f, chips(0, 16));
  const CostCurve c = collective_curve(g, CollectiveKind::kAllToAll, round_calibration());
  // Each rank sends S/16 to each rank: 7/16 of S over NVLink (at 450 GB/s x 0.8) and 8/16 over
  // its NIC (50 GB/s x 0.7) at once: the NIC share binds, 0.5 / 35e9 s/B. Base 30 us + 15 steps
  // x 1 us + one 1 us hop = 46 us.
  CHECK(c.seconds(kGiB) == approx(46e-6 + kGiB * 0.5 / 35e9));
  // Dispatch and combine are costed alike, from their own fits.
  CHECK(collective_curve(g, CollectiveKind::kDispatch, round_calibration()).seconds(kGiB) == approx(c.seconds(kGiB)));
}

TEST_CASE("split_all_to_all: the even split is the all-to-all curve; other splits cost each tier's bytes") {
  const Fabric f = build_fabric(dgx_like(2));
  const GroupLayout g = describe_group(f, chips(0, 16));
  const CommCalibration cal = round_calibration();
  const SplitAllToAll split = split_all_to_all(g, CollectiveKind::kDispatch, cal);
  const CostCurve c = collective_curve(g, CollectiveKind::kDispatch, cal);
  // S split as the curve splits it: 7/16 over NVLink, 8/16 over the NIC.
  for (const double bytes : {1e3, 1e6, 1e9}) {
    CHECK(split.seconds(bytes * 7 / 16, bytes * 8 / 16) == approx(c.seconds(bytes)));
  }
  // A dispatch that sends 1 GB inside the node and 0.2 GB across: the bandwidth protocol,
  // 30 us + 15 x 1 us + 1 us hop = 46 us, + max(1e9 / (450e9 x 0.8), 0.2e9 / (50e9 x 0.7)) =
  // max(2.778 ms, 5.714 ms); at half the NIC 11.429 ms.
  CHECK(split.seconds(1e9, 0.2e9) == approx(46e-6 + 0.2e9 / 35e9));
  CHECK(split.seconds(1e9, 0.2e9, 0.5) == approx(46e-6 + 0.4e9 / 35e9));
  // All of it inside the node: the NVLink part binds, 1e9 / 360e9.
  CHECK(split.seconds(1e9, 0) == approx(46e-6 + 1e9 / 360e9));
  CHECK(split.seconds(0, 0) == 0.0);
}

TEST_CASE("describe_group: ranks sharing a NIC share its bandwidth; a full mesh sums the peer links") {
  ClusterSpec s = dgx_like(2, 2, false, 2);
  s.scale_out.chips_per_nic = 8;
  const Fabric shared = build_fabric(s);
  // 8 ranks per node behind one 50 GB/s NIC: 6.25 GB/s each across nodes.
  CHECK(describe_group(shared, chips(0, 16)).out_bytes_per_s == approx(50e9 / 8));
  ClusterSpec a = *cluster_preset("atlas-800t-a2", 8);
  a.scale_out.present = false;
  const Fabric mesh = build_fabric(a);
  // HCCS: 56 GB/s per link; TP4 uses its 3 links to the group, TP8 all 7.
  CHECK(describe_group(mesh, chips(0, 4)).up_bytes_per_s == approx(3 * 56e9));
  CHECK(describe_group(mesh, chips(0, 8)).up_bytes_per_s == approx(392e9));
}

TEST_CASE("describe_group: a p2p pair across nodes costs its route") {
  const Fabric f = build_fabric(dgx_like(4));
  const std::vector<ChipId> pair = {ChipId(0), ChipId(17)};  // node 2, other rail: via a spine
  const GroupLayout g = describe_group(f, pair);
  CHECK(g.domains == 2);
  CHECK(g.out_hop == Duration::microseconds(2));  // four 0.5 us links
  const CostCurve c = collective_curve(g, CollectiveKind::kP2p, round_calibration());
  // Bandwidth protocol: 30 + 1 x 1 + 2 = 33 us, 1 / (50e9 x 0.7) s/B.
  CHECK(c.seconds(kGiB) == approx(33e-6 + kGiB / 35e9));
}

TEST_CASE("CostCurve::envelope: equals the minimum over all lines everywhere") {
  Rng rng(11, "envelope");
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<CostLine> lines(static_cast<std::size_t>(rng.uniform_int(1, 6)));
    for (auto& l : lines) {
      l.alpha_s = rng.uniform01() * 1e-4;
      l.seconds_per_byte = rng.uniform01() * 1e-10;
    }
    const CostCurve c = CostCurve::envelope(lines);
    for (double x : {1.0, 1e3, 1e5, 1e6, 1e7, 1e9, 1e11}) {
      double want = lines[0].at(x);
      for (const auto& l : lines) want = std::min(want, l.at(x));
      CHECK(c.seconds(x) == approx(want).epsilon(1e-12));
    }
  }
}

TEST_CASE("CollectiveCostCache: identical groups share one curve") {
  const Fabric f = build_fabric(dgx_like(2));
  CollectiveCostCache cache(round_calibration());
  const CostCurve& a = cache.curve(describe_group(f, chips(0, 8)), CollectiveKind::kAllReduce);
  const CostCurve& b = cache.curve(describe_group(f, chips(8, 8)), CollectiveKind::kAllReduce);
  CHECK(&a == &b);
  CHECK(cache.size() == 1);
  cache.curve(describe_group(f, chips(0, 4)), CollectiveKind::kAllReduce);
  CHECK(cache.size() == 2);
}

TEST_CASE("expected_destination_ranks: matches counting every top-k choice") {
  // Brute force: every set of k distinct experts out of E, experts e on rank e / (E / ranks).
  for (auto [experts, topk, ranks] : {std::tuple{8, 2, 4}, std::tuple{16, 3, 8}, std::tuple{12, 4, 3}}) {
    double total = 0, sets = 0;
    const int E = experts;
    for (int mask = 0; mask < (1 << E); ++mask) {
      if (__builtin_popcount(static_cast<unsigned>(mask)) != topk) continue;
      std::set<int> hit;
      for (int e = 0; e < E; ++e) {
        if (mask >> e & 1) hit.insert(e / (E / ranks));
      }
      total += static_cast<double>(hit.size());
      sets += 1;
    }
    INFO(experts, " experts, top-", topk, ", ", ranks, " ranks");
    CHECK(expected_destination_ranks(experts, topk, ranks) == approx(total / sets));
  }
  CHECK(expected_destination_ranks(256, 1, 8) == approx(1.0));
}
