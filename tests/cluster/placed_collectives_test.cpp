// Collectives costed on the placed groups (comm_cost.h, PlacedGroup; sim/cluster/README.md,
// "Collectives on the placed groups"). A scenario with `cluster:` costs each pool's TP, MoE, CP
// and pipeline groups on the chips its placement gives them, with topologies/collectives.h's
// algorithms and the cluster's calibration.
//
// The cluster: two DGX-like nodes (tests/topologies/test_fabrics.h): 8 chips per NVSwitch node,
// 450 GB/s per chip and 0.2 us per link inside (chip -> switch -> chip: 0.4 us), one 50 GB/s NIC
// per chip on a rail-optimised leaf (chips 0 and 8 share rail 0's leaf: NIC up, NIC down, 0.5 us
// each: 1 us). The calibration: every protocol of every tier with no base, no per-step cost and
// efficiency 1, so each collective is its algorithm's alpha-beta on the links.

#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "sim/cluster/comm_cost.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"
#include "tests/topologies/test_fabrics.h"
#include "topologies/collectives.h"
#include "topologies/placement.h"

using namespace servesim;

namespace {

topologies::ClusterSpec two_nodes() {
  topologies::ClusterSpec s = topologies::testing::dgx_like(2);
  for (auto& tier : s.comm.tiers) {
    for (auto& k : tier.kinds) {
      k.latency_bound = k.bandwidth_bound = topologies::ProtocolFit{Duration::zero(), Duration::zero(), 1.0};
    }
  }
  return s;
}

std::vector<topologies::ChipId> ids(std::initializer_list<std::uint32_t> c) {
  std::vector<topologies::ChipId> out;
  for (const std::uint32_t x : c) out.push_back(topologies::ChipId(x));
  return out;
}

cluster::PlacedGroup placed(const topologies::Fabric& f, const topologies::ClusterSpec& s,
                            std::initializer_list<std::uint32_t> chips) {
  topologies::CollectiveCostCache cache(s.comm);
  const topologies::GroupLayout g = topologies::describe_group(f, ids(chips));
  return cluster::place_group(std::span(&g, 1), cache, s.comm, 0.5);
}

// A combined pool of the tiny model at tp 2 on the ideal chip, its one instance on `chips`.
cluster::SimulationConfig tp2_on(std::vector<std::uint32_t> chips) {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].plan.tp = 2;
  config.workload = test::fixed_closed_loop(1, 1, 100, 1);
  cluster::ClusterConfig cc;
  cc.spec = two_nodes();
  cc.fabric = std::make_shared<const topologies::Fabric>(topologies::build_fabric(cc.spec));
  topologies::PoolPlacementSpec p;
  p.name = "pool";
  p.shape = cluster::instance_shape(config.pools[0].plan);
  p.instances = 1;
  p.policy = topologies::PlacementPolicy::kExplicit;
  p.chips = {chips};
  p.on_violation = topologies::ViolationAction::kWarn;
  config.pools[0].placement = p;
  const std::vector<topologies::PoolPlacementSpec> specs = {p};
  cc.placement = topologies::place_pools(*cc.fabric, specs);
  REQUIRE(!cc.placement.has_errors());
  config.cluster = cc;
  return config;
}

}  // namespace

TEST_CASE("Placed collectives: a TP2 all-reduce inside a node and split over two nodes, by hand") {
  const topologies::ClusterSpec s = two_nodes();
  const topologies::Fabric f = topologies::build_fabric(s);
  const cluster::CommCost comm(test::ideal_chip());
  const cluster::PlacedGroup inside = placed(f, s, {0, 1}), across = placed(f, s, {0, 8});
  const cluster::GroupSpan in_span = cluster::placed_span(inside), out_span = cluster::placed_span(across);
  CHECK(!in_span.leaves_domain);
  CHECK(out_span.leaves_domain);
  // Ring all-reduce of S = 1 MB over n = 2: 2 (n - 1) = 2 steps of the hop, 2 (n - 1) / n = 1 x S
  // over the tier. Inside: 2 x 0.4 us + 1e6 / 450e9 s = 0.8 + 2.2222 us = 3.0222 us.
  CHECK(comm.seconds(models::Collective::kAllReduce, in_span, 1e6) == approx(0.8e-6 + 1e6 / 450e9));
  // Across (m = 2 domains, p = 1): the ring crosses the NICs, 2 x 1 us + 1e6 / 50e9 = 22 us; the
  // tree (2 steps, 2 x S over the NICs: 42 us) loses, and no hierarchical one with p = 1.
  CHECK(comm.seconds(models::Collective::kAllReduce, out_span, 1e6) == approx(2e-6 + 1e6 / 50e9));
  // The contiguous model (ideal chip: no latency, 1e30 B/s) costs neither.
  CHECK(comm.seconds(models::Collective::kAllReduce, cluster::GroupSpan{2, false, 0}, 1e6) < 1e-15);
}

TEST_CASE("Placed collectives: an EP2 all-to-all across nodes, at the whole NIC and at half of it") {
  const topologies::ClusterSpec s = two_nodes();
  const topologies::Fabric f = topologies::build_fabric(s);
  const cluster::CommCost comm(test::ideal_chip());
  const cluster::PlacedGroup across = placed(f, s, {0, 8});
  const cluster::GroupSpan span = cluster::placed_span(across);
  CHECK(span.outside_fraction == 1.0);  // the one peer is in the other node
  // A rank sends B = 1 MB to its peer: NCCL size 2B, of which (n - p) / n = 1/2 leaves over the
  // NIC. Direct algorithm: 1 hop of 1 us + B / 50e9 = 21 us; at half the NIC 1 + 40 = 41 us.
  CHECK(comm.seconds(models::Collective::kAllToAll, span, 1e6) == approx(1e-6 + 1e6 / 50e9));
  CHECK(comm.seconds(models::Collective::kAllToAll, span, 1e6, 0.5) == approx(1e-6 + 2e6 / 50e9));
  // Its NIC time at the whole NIC: B / 50e9 = 20 us, no latency.
  CHECK(comm.nic_seconds(models::Collective::kAllToAll, span, 1e6) == approx(1e6 / 50e9));
}

TEST_CASE("Placed collectives: one request's TTFT grows by five all-reduces when placement splits TP2") {
  // One prompt of 100 tokens, one output token: TTFT is one prefill iteration. At tp 2 it has
  // 2 all-reduces per layer (after attention, after the MLP) x 2 layers + the embedding's = 5,
  // each of the hidden states: S = 100 x 64 x 2 B = 12,800 B.
  //   inside node 0: 0.8 us + 12,800 / 450e9 s = 828,444 ps (rounded);
  //   chips 0 and 8: 2 us + 12,800 / 50e9 s = 2,256,000 ps.
  // TTFT delta = 5 x (2,256,000 - 828,444) = 7,137,780 ps.
  metrics::RunMetrics compact_m, split_m;
  {
    cluster::Simulation sim(tp2_on({0, 1}), compact_m);
    sim.set_paranoid(true);
    sim.run();
  }
  {
    cluster::Simulation sim(tp2_on({0, 8}), split_m);
    sim.set_paranoid(true);
    sim.run();
  }
  const auto& a = compact_m.requests().at(0);
  const auto& b = split_m.requests().at(0);
  CHECK((b.first_token - b.arrival).ps() - (a.first_token - a.arrival).ps() == 7'137'780);
  // The report's groups come from the same layouts.
  const auto& ga = compact_m.pools().at(0).info.groups;
  const auto& gb = split_m.pools().at(0).info.groups;
  REQUIRE(ga.size() == 5);
  CHECK(ga[0].group == "tp");
  CHECK(ga[0].tier == "scale_up");
  CHECK(!ga[0].leaves_domain);
  CHECK(gb[0].tier == "scale_out");
  CHECK(gb[0].leaves_domain);
}

TEST_CASE("Placed collectives: a pool costs the slowest of its instances' layouts") {
  const topologies::ClusterSpec s = two_nodes();
  const topologies::Fabric f = topologies::build_fabric(s);
  topologies::CollectiveCostCache cache(s.comm);
  const std::vector<topologies::GroupLayout> both = {describe_group(f, ids({0, 1})), describe_group(f, ids({2, 10}))};
  const cluster::PlacedGroup g = cluster::place_group(both, cache, s.comm, 0.5);
  const cluster::CommCost comm(test::ideal_chip());
  // Chips 2 and 10 share rail 2's leaf (1 us): the split one binds, 2 us + 1e6 / 50e9 = 22 us.
  CHECK(comm.seconds(models::Collective::kAllReduce, cluster::placed_span(g), 1e6) == approx(2e-6 + 1e6 / 50e9));
}
