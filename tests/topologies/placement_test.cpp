#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/topologies/test_fabrics.h"
#include "topologies/cluster.h"
#include "topologies/faults.h"
#include "topologies/placement.h"

using namespace servesim;
using namespace servesim::topologies;
using servesim::topologies::testing::dgx_like;

namespace {

PoolPlacementSpec pool(InstanceShape shape, int instances, PlacementPolicy policy = PlacementPolicy::kPack) {
  PoolPlacementSpec p;
  p.name = "p";
  p.shape = shape;
  p.instances = instances;
  p.policy = policy;
  return p;
}

std::vector<std::uint32_t> ids(std::span<const ChipId> chips) {
  std::vector<std::uint32_t> out;
  for (ChipId c : chips) out.push_back(c.value);
  return out;
}

std::vector<std::uint32_t> range(std::uint32_t first, std::uint32_t count) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t c = first; c < first + count; ++c) out.push_back(c);
  return out;
}

std::string messages(const ClusterPlacement& p) {
  std::string out;
  for (const auto& i : p.issues()) out += (i.error ? "error: " : "warning: ") + i.message + "\n";
  return out;
}

}  // namespace

TEST_CASE("group_ranks: tp fastest, then dp, cp, pp; EP groups moe_tp apart in a MoE group") {
  // tp 2, dp 2, cp 2, pp 2, ep 2 x moe_tp 2: 16 ranks, 8 per stage, MoE groups of 4.
  InstanceShape s;
  s.tp = 2;
  s.dp = 2;
  s.cp = 2;
  s.pp = 2;
  s.ep = 2;
  s.moe_tp = 2;
  REQUIRE(s.valid());
  // rank = ((stage x 2 + c) x 2 + d) x 2 + t.
  CHECK(group_ranks(s, GroupKind::kTp, 0) == std::vector<int>{0, 1});
  CHECK(group_ranks(s, GroupKind::kDp, 0) == std::vector<int>{0, 2});
  CHECK(group_ranks(s, GroupKind::kCp, 0) == std::vector<int>{0, 4});
  CHECK(group_ranks(s, GroupKind::kPp, 0) == std::vector<int>{0, 8});
  CHECK(group_ranks(s, GroupKind::kMoe, 1) == std::vector<int>{4, 5, 6, 7});
  // MoE group 1 (ranks 4-7), expert-TP rank 1: ranks 5 and 7.
  CHECK(group_ranks(s, GroupKind::kEp, 3) == std::vector<int>{5, 7});
  CHECK(group_ranks(s, GroupKind::kTp, 7) == std::vector<int>{14, 15});
  // Every kind partitions the ranks: each rank in exactly one group.
  for (GroupKind k :
       {GroupKind::kTp, GroupKind::kDp, GroupKind::kEp, GroupKind::kMoe, GroupKind::kCp, GroupKind::kPp}) {
    std::multiset<int> seen;
    for (int i = 0; i < group_count(s, k); ++i) {
      for (int r : group_ranks(s, k, i)) seen.insert(r);
    }
    INFO(group_name(k));
    CHECK(seen.size() == 16);
    for (int r = 0; r < 16; ++r) CHECK(seen.count(r) == 1);
  }
  // The same strides as models::ParallelPlan::group: dp stride tp, cp stride tp x dp, pp stride
  // tp x dp x cp, ep stride moe_tp.
  CHECK(group_ranks(s, GroupKind::kDp, 0)[1] - group_ranks(s, GroupKind::kDp, 0)[0] == s.tp);
  CHECK(group_ranks(s, GroupKind::kCp, 0)[1] - group_ranks(s, GroupKind::kCp, 0)[0] == s.tp * s.dp);
  CHECK(group_ranks(s, GroupKind::kEp, 0)[1] - group_ranks(s, GroupKind::kEp, 0)[0] == s.moe_tp);
}

TEST_CASE("place_pools: pack fills nodes in order, an instance of at most a node inside one") {
  const Fabric f = build_fabric(dgx_like(2));
  const std::vector<PoolPlacementSpec> pools = {pool({4, 1, 1, 1, 1, 4}, 3), pool({2, 1, 1, 1, 1, 2}, 2)};
  const ClusterPlacement p = place_pools(f, pools);
  CHECK(messages(p) == "");
  CHECK(ids(p.chips(0, 0)) == range(0, 4));
  CHECK(ids(p.chips(0, 1)) == range(4, 4));
  CHECK(ids(p.chips(0, 2)) == range(8, 4));
  CHECK(ids(p.chips(1, 0)) == range(12, 2));
  CHECK(ids(p.chips(1, 1)) == range(14, 2));
  CHECK(p.owner(ChipId(13)).pool == 1);
  CHECK(p.owner(ChipId(13)).instance == 0);
  CHECK(p.rank_of(ChipId(13)) == 1);
}

TEST_CASE("place_pools: an instance of two nodes takes whole nodes inside one scale-up domain") {
  // 16-GPU domains of two 8-GPU nodes: a tp 8 x pp 2 instance must not straddle two domains.
  ClusterSpec s = dgx_like(4);
  s.scale_up.domain_chips = 16;
  const Fabric f = build_fabric(s);
  const std::vector<PoolPlacementSpec> pools = {pool({4, 1, 1, 1, 1, 4}, 1), pool({8, 1, 1, 2, 1, 8}, 1)};
  const ClusterPlacement p = place_pools(f, pools);
  CHECK(messages(p) == "");
  // Chips 0-3 are taken; nodes 0-1 are domain 0, so the 16 chips go to domain 1 (16-31).
  CHECK(ids(p.chips(1, 0)) == range(16, 16));
}

TEST_CASE("place_pools: rail_aligned keeps pipeline hops on one rail; pack does not") {
  // tp 4 x pp 4 on 8-GPU rail-optimised nodes. Pack: stages 0-1 on node 0 (chips 0-7), 2-3 on
  // node 1; the hop from stage 1 (chips 4-7, rails 4-7) to stage 2 (chips 8-11, rails 0-3)
  // changes rail: leaf, spine, leaf (4 links). Rail-aligned: stage k on node k at offset 0, so
  // every hop is rail r to rail r on one leaf (2 links).
  const Fabric f = build_fabric(dgx_like(4, 2, true, 4));
  const InstanceShape shape{4, 1, 1, 4, 1, 4};
  const std::vector<PoolPlacementSpec> packed = {pool(shape, 2)};
  const std::vector<PoolPlacementSpec> aligned = {pool(shape, 2, PlacementPolicy::kRailAligned)};
  const ClusterPlacement a = place_pools(f, packed);
  const ClusterPlacement b = place_pools(f, aligned);
  CHECK(messages(a) == "");
  CHECK(messages(b) == "");
  CHECK(ids(b.chips(0, 0)) == std::vector<std::uint32_t>{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27});
  CHECK(ids(b.chips(0, 1)) == std::vector<std::uint32_t>{4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31});
  auto hop_links = [&](const ClusterPlacement& p, int stage) {
    const auto all = p.chips(0, 0);
    Route r;
    REQUIRE(f.route(all[static_cast<std::size_t>(stage * 4)], all[static_cast<std::size_t>((stage + 1) * 4)], 0, r));
    return static_cast<int>(r.hops);
  };
  CHECK(hop_links(a, 1) == 4);
  for (int k = 0; k < 3; ++k) CHECK(hop_links(b, k) == 2);
}

TEST_CASE("place_pools: spread puts consecutive instances in different failure domains") {
  const Fabric f = build_fabric(dgx_like(4));  // failure domain = node
  const std::vector<PoolPlacementSpec> pools = {pool({2, 1, 1, 1, 1, 2}, 6, PlacementPolicy::kSpread)};
  const ClusterPlacement p = place_pools(f, pools);
  CHECK(messages(p) == "");
  CHECK(ids(p.chips(0, 0)) == range(0, 2));
  CHECK(ids(p.chips(0, 1)) == range(8, 2));
  CHECK(ids(p.chips(0, 2)) == range(16, 2));
  CHECK(ids(p.chips(0, 3)) == range(24, 2));
  CHECK(ids(p.chips(0, 4)) == range(2, 2));  // round two
  CHECK(ids(p.chips(0, 5)) == range(10, 2));
  // One node fails: only the instances on it are hit (6 instances on 4 nodes: 1 and 5).
  const FaultEffect e = fault_effect(f, FaultTarget{FaultKind::kNode, 1});
  const auto hit = p.instances_on(e.touched_chips);
  REQUIRE(hit.size() == 2);
  CHECK(hit[0].instance == 1);
  CHECK(hit[1].instance == 5);
}

TEST_CASE("place_pools: explicit lists are taken as given, in rank order") {
  const Fabric f = build_fabric(dgx_like(2));
  PoolPlacementSpec e = pool({2, 1, 1, 1, 1, 2}, 2, PlacementPolicy::kExplicit);
  e.chips = {{9, 8}, {3, 4}};
  const std::vector<PoolPlacementSpec> pools = {pool({4, 1, 1, 1, 1, 4}, 1), e};
  const ClusterPlacement p = place_pools(f, pools);
  CHECK(messages(p) == "");
  CHECK(ids(p.chips(1, 0)) == std::vector<std::uint32_t>{9, 8});
  // Explicit pools are placed first, so the packed pool avoids chips 3 and 4: chips 0-3 are not
  // all free, the next aligned block is 8-11? No: 8 and 9 are taken too; 12-15 is free.
  CHECK(ids(p.chips(0, 0)) == range(12, 4));
}

TEST_CASE("place_pools: impossible placements are errors that say why") {
  const Fabric f = build_fabric(dgx_like(2));
  {
    const std::vector<PoolPlacementSpec> pools = {pool({8, 1, 1, 1, 1, 8}, 2), pool({4, 1, 1, 1, 1, 4}, 1)};
    CHECK(messages(place_pools(f, pools)) ==
          "error: the pools need 20 chips (2 x 8 + 1 x 4) but the cluster has 16 chips\n");
  }
  {
    PoolPlacementSpec e = pool({2, 1, 1, 1, 1, 2}, 3, PlacementPolicy::kExplicit);
    e.chips = {{0, 1}, {1, 2}, {16, 3, 3}};
    const std::vector<PoolPlacementSpec> pools = {e};
    CHECK(messages(place_pools(f, pools)) ==
          "error: chip 1 is already given to instance 0 of this pool\n"
          "error: lists 3 chips but an instance has 2 chips (tp x cp x dp x pp)\n");
  }
  {
    PoolPlacementSpec e = pool({2, 1, 1, 1, 1, 2}, 1, PlacementPolicy::kExplicit);
    e.chips = {{16, 3}};
    const std::vector<PoolPlacementSpec> pools = {e};
    CHECK(messages(place_pools(f, pools)) == "error: chip 16 does not exist: the cluster has chips 0-15\n");
  }
  {
    PoolPlacementSpec e = pool({2, 1, 1, 1, 1, 2}, 2, PlacementPolicy::kExplicit);
    e.chips = {{0, 1}};
    const std::vector<PoolPlacementSpec> pools = {e};
    CHECK(messages(place_pools(f, pools)) ==
          "error: the explicit placement gives 1 chip list for 2 instances; give one list per instance\n");
  }
}

TEST_CASE("place_pools: a TP group across nodes is an error, or a warning when accepted") {
  const Fabric f = build_fabric(dgx_like(2));
  PoolPlacementSpec e = pool({4, 1, 1, 1, 1, 4}, 2, PlacementPolicy::kExplicit);
  e.chips = {{0, 1, 2, 3}, {6, 7, 8, 9}};
  std::vector<PoolPlacementSpec> pools = {e};
  CHECK(messages(place_pools(f, pools)) ==
        "error: 1 instance of 2 has a tensor-parallel group that spans scale-up domains, so its all-reduces "
        "cross the scale-out network (first: instance 1, tensor-parallel group 0 on chips 6-9 spans 2 "
        "scale-up domains); choose another placement or set on_violation: warn to accept it\n");
  pools[0].on_violation = ViolationAction::kWarn;
  const ClusterPlacement p = place_pools(f, pools);
  CHECK_FALSE(p.has_errors());
  REQUIRE(p.issues().size() == 1);
  CHECK_FALSE(p.issues()[0].error);
  CHECK(ids(p.chips(0, 1)) == std::vector<std::uint32_t>{6, 7, 8, 9});
}

TEST_CASE("place_pools: an EP group that could fit its supernode but leaves it is flagged") {
  ClusterSpec s = *cluster_preset("cloudmatrix384", 768);  // two 384-NPU supernodes
  const Fabric f = build_fabric(s);
  // dp 16 x ep 16 on chips 376-391: crosses from supernode 0 into 1.
  PoolPlacementSpec e = pool({1, 16, 1, 1, 16, 1}, 1, PlacementPolicy::kExplicit);
  e.chips = {range(376, 16)};
  std::vector<PoolPlacementSpec> pools = {e};
  const std::string m = messages(place_pools(f, pools));
  CHECK(m.find("expert-parallel group of 16 that leaves its scale-up domain of 384 chips") != std::string::npos);
  // An EP group bigger than a supernode leaves it by design: no issue.
  pools[0].shape = InstanceShape{1, 512, 1, 1, 512, 1};
  pools[0].chips = {range(0, 512)};
  CHECK(messages(place_pools(f, pools)) == "");
}

TEST_CASE("format_chips: runs become ranges") {
  const std::vector<ChipId> c = {ChipId(0), ChipId(1), ChipId(2), ChipId(3), ChipId(8), ChipId(10), ChipId(11)};
  CHECK(format_chips(c) == "0-3, 8, 10-11");
}
