#include <doctest/doctest.h>

#include <set>
#include <string>

#include "core/rng.h"
#include "tests/approx.h"
#include "tests/topologies/test_fabrics.h"
#include "topologies/cluster.h"
#include "topologies/fabric.h"

using namespace servesim;
using namespace servesim::topologies;
using servesim::topologies::testing::dgx_like;

namespace {

ChipId chip(std::uint32_t c) { return ChipId(c); }

// A route must be a walk: it starts at src, each link starts where the previous ended, it ends at
// dst, it stays on one plane and uses only surviving links.
bool is_walk(const Fabric& f, const Route& r, ChipId src, ChipId dst) {
  if (r.hops == 0) return src == dst;
  VertexId at(src.value);
  for (LinkId l : r) {
    if (f.link(l).from != at || f.link(l).plane != r.plane || !f.link_up(l)) return false;
    at = f.link(l).to;
  }
  return at.value == dst.value;
}

std::string first_problem(const ClusterSpec& s) {
  const auto p = validate_cluster(s);
  return p.empty() ? "" : p.front().key + ": " + p.front().message;
}

}  // namespace

TEST_CASE("Fabric: an 8-GPU NVSwitch node routes chip to chip through its switch") {
  ClusterSpec s = dgx_like(1);
  s.scale_out.present = false;
  const Fabric f = build_fabric(s);
  const FabricCounts c = f.counts();
  CHECK(c.chips == 8);
  CHECK(c.switches == 1);
  CHECK(c.links == 16);  // 8 cables, both directions
  Route r;
  REQUIRE(f.route(chip(0), chip(5), 0, r));
  CHECK(r.hops == 2);
  CHECK(r.plane == Plane::kScaleUp);
  CHECK(is_walk(f, r, chip(0), chip(5)));
  // Two links of 0.2 us: 0.4 us; the bottleneck is the 450 GB/s chip link.
  CHECK(f.latency(r) == Duration::nanoseconds(400));
  CHECK(f.bottleneck(r) == 450e9);
}

TEST_CASE("Fabric: an HCCS full mesh has 7 direct links per NPU of 392/7 GB/s each") {
  ClusterSpec s = *cluster_preset("atlas-800t-a2", 8);
  s.scale_out.present = false;
  const Fabric f = build_fabric(s);
  CHECK(f.counts().switches == 0);
  CHECK(f.link_count() == 56);  // 8 x 7 directed links
  for (std::uint32_t a = 0; a < 8; ++a) {
    CHECK(f.mesh_end(chip(a)) - f.mesh_begin(chip(a)) == 7);
  }
  Route r;
  REQUIRE(f.route(chip(2), chip(6), 0, r));
  CHECK(r.hops == 1);
  CHECK(is_walk(f, r, chip(2), chip(6)));
  CHECK(f.bottleneck(r) == approx(392e9 / 7));  // 56 GB/s
}

TEST_CASE("Fabric: a UB supernode goes chip - L1 - chip inside a node and chip - L1 - L2 - L1 - chip across") {
  ClusterSpec s = *cluster_preset("cloudmatrix384", 384);
  s.scale_out.present = false;
  const Fabric f = build_fabric(s);
  // 48 nodes of 8 NPUs: 48 L1 switches and one L2.
  CHECK(f.counts().switches == 49);
  Route r;
  REQUIRE(f.route(chip(0), chip(7), 0, r));
  CHECK(r.hops == 2);
  REQUIRE(f.route(chip(0), chip(383), 0, r));
  CHECK(r.hops == 4);
  CHECK(is_walk(f, r, chip(0), chip(383)));
  // The L1-L2 links carry a node's 8 x 392 GB/s: the chip links stay the bottleneck.
  CHECK(f.bottleneck(r) == 392e9);
  CHECK(f.place(chip(383)).domain == 0);
  CHECK(f.place(chip(383)).node == 47);
}

TEST_CASE("Fabric: a GB200 NVL72 rack is one 72-GPU domain of 18 four-GPU trays") {
  const Fabric f = build_fabric(*cluster_preset("gb200-nvl72", 144));
  CHECK(f.chips() == 144);
  CHECK(f.place(chip(71)).domain == 0);
  CHECK(f.place(chip(72)).domain == 1);
  CHECK(f.place(chip(71)).node == 17);
  CHECK(f.place(chip(71)).rack == 0);
  CHECK(f.place(chip(5)).rail == 1);  // second GPU of tray 1
  Route r;
  REQUIRE(f.route(chip(0), chip(71), 0, r));
  CHECK(r.plane == Plane::kScaleUp);
  CHECK(r.hops == 2);
  REQUIRE(f.route(chip(0), chip(72), 0, r));
  CHECK(r.plane == Plane::kScaleOut);
}

TEST_CASE("Fabric: a rail-optimised two-tier fat tree keeps same-rail traffic on one leaf") {
  // 4 nodes x 8 rails, 2 nodes per leaf group: leaf (group, rail) = group x 8 + rail, 16 leaves,
  // 2 uplinks each (1:1), so 2 spines.
  const Fabric f = build_fabric(dgx_like(4));
  CHECK(f.counts().switches_by_role[static_cast<int>(SwitchRole::kLeaf)] == 16);
  CHECK(f.counts().switches_by_role[static_cast<int>(SwitchRole::kSpine)] == 2);
  CHECK(f.leaf_of(chip(0), Plane::kScaleOut) == 0);
  CHECK(f.leaf_of(chip(9), Plane::kScaleOut) == 1);   // node 1, rail 1
  CHECK(f.leaf_of(chip(16), Plane::kScaleOut) == 8);  // node 2 is in group 1
  Route r;
  REQUIRE(f.route(chip(0), chip(8), 0, r));  // node 0 -> node 1, both rail 0: one leaf
  CHECK(r.plane == Plane::kScaleOut);
  CHECK(r.hops == 2);
  REQUIRE(f.route(chip(0), chip(9), 0, r));  // rail 0 -> rail 1: up to a spine
  CHECK(r.hops == 4);
  REQUIRE(f.route(chip(0), chip(16), 0, r));  // another group
  CHECK(r.hops == 4);
  CHECK(is_walk(f, r, chip(0), chip(16)));
  // Four 0.5 us links.
  CHECK(f.latency(r) == Duration::microseconds(2));
}

TEST_CASE("Fabric: a three-tier fat tree crosses pods through a core in six links") {
  // 8 nodes, 2 per leaf group: 4 groups x 8 rails = 32 leaves; 16 leaves per pod: 2 pods;
  // 2 spines per pod, 16 uplinks per spine, 2 x 16 = 32 cores of one link per pod.
  const Fabric f = build_fabric(dgx_like(8, 3));
  const auto c = f.counts();
  CHECK(c.switches_by_role[static_cast<int>(SwitchRole::kLeaf)] == 32);
  CHECK(c.switches_by_role[static_cast<int>(SwitchRole::kSpine)] == 4);
  CHECK(c.switches_by_role[static_cast<int>(SwitchRole::kCore)] == 32);
  Route r;
  REQUIRE(f.route(chip(0), chip(32), 3, r));  // node 4 is in pod 1
  CHECK(r.hops == 6);
  CHECK(is_walk(f, r, chip(0), chip(32)));
  CHECK(f.link(r.links[2]).link_class == LinkClass::kSpineCore);
  REQUIRE(f.route(chip(0), chip(17), 3, r));  // same pod, other rail
  CHECK(r.hops == 4);
}

TEST_CASE("Fabric: oversubscription 2:1 halves a leaf's uplinks") {
  ClusterSpec s = dgx_like(8, 2, false, 8);
  s.scale_out.leaf_oversubscription = 2.0;
  const FatTreeShape shape = fat_tree_shape(s);
  // 64 NICs, 8 per leaf: 8 leaves with 8 / 2 = 4 uplinks each, so 4 spines.
  CHECK(shape.leaves == 8);
  CHECK(shape.leaf_uplinks == 4);
  CHECK(shape.spines == 4);
  const Fabric f = build_fabric(s);
  const VertexId leaf0(static_cast<std::uint32_t>(64 + 8));  // 64 chips, 8 NVSwitches, then leaves
  CHECK(f.role(leaf0) == SwitchRole::kLeaf);
  CHECK(f.up_end(leaf0) - f.up_begin(leaf0) == 4);
}

TEST_CASE("Fabric: chips sharing one NIC go through it over PCIe") {
  ClusterSpec s = dgx_like(2, 2, false, 2);
  s.scale_out.chips_per_nic = 8;
  s.scale_out.pcie_bandwidth = Bandwidth{32e9};
  const Fabric f = build_fabric(s);
  CHECK(f.counts().switches_by_role[static_cast<int>(SwitchRole::kNic)] == 2);
  Route r;
  REQUIRE(f.route_on(chip(0), chip(8), Plane::kScaleOut, 0, r));
  // chip -> NIC -> leaf -> NIC -> chip; the 32 GB/s PCIe links are the bottleneck.
  CHECK(r.hops == 4);
  CHECK(f.bottleneck(r) == 32e9);
}

TEST_CASE("Fabric: up/down routes are as short as a breadth-first search finds, on random pairs") {
  Rng rng(7, "fabric-test");
  for (const ClusterSpec& s : {dgx_like(8, 3), dgx_like(6, 2, false, 3), *cluster_preset("gb200-nvl72", 288),
                               *cluster_preset("cloudmatrix384", 768), *cluster_preset("atlas-800t-a2", 64)}) {
    ClusterSpec spec = s;
    if (spec.scale_out.radix > 0) {
      spec.scale_out.hosts_per_leaf = 4;
      spec.scale_out.leaves_per_pod =
          spec.scale_out.rail_optimized ? 2 * (spec.node_chips / spec.scale_out.chips_per_nic) : 4;
    }
    INFO(spec.name);
    REQUIRE(first_problem(spec) == "");
    const Fabric f = build_fabric(spec);
    for (int i = 0; i < 200; ++i) {
      const ChipId a(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
      const ChipId b(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
      Route r;
      REQUIRE(f.route(a, b, rng.next_u64(), r));
      INFO("chips ", a.value, " -> ", b.value);
      CHECK(is_walk(f, r, a, b));
      if (a != b) CHECK(r.hops == f.search_hops(a, b, r.plane));
    }
  }
}

TEST_CASE("Fabric: ECMP spreads flow labels over the spines, the same label always on one route") {
  const Fabric f = build_fabric(dgx_like(8, 2, false, 8));  // 8 leaves x 8 spines
  std::set<std::uint32_t> spines;
  for (std::uint64_t label = 0; label < 64; ++label) {
    Route r, again;
    REQUIRE(f.route(chip(0), chip(63), label, r));
    REQUIRE(f.route(chip(0), chip(63), label, again));
    CHECK(std::equal(r.begin(), r.end(), again.begin(), again.end()));
    spines.insert(f.link(r.links[1]).to.value);
  }
  CHECK(spines.size() >= 6);  // 64 labels over 8 spines
}

TEST_CASE("Fabric: routes avoid failed links and fail when no path survives") {
  Fabric f = build_fabric(dgx_like(8, 2, false, 8));
  Route r;
  REQUIRE(f.route(chip(0), chip(63), 5, r));
  const LinkId up = r.links[1];  // leaf -> spine
  f.set_link_up(up, false);
  Route detour;
  REQUIRE(f.route(chip(0), chip(63), 5, detour));
  CHECK(is_walk(f, detour, chip(0), chip(63)));
  CHECK(std::find(detour.begin(), detour.end(), up) == detour.end());
  CHECK(f.failed_links() == 1);
  // Every uplink of chip 0's leaf down: the other leaves are out of reach, its own leaf is not.
  const VertexId leaf = f.link(r.links[0]).to;
  for (const LinkId* l = f.up_begin(leaf); l != f.up_end(leaf); ++l) f.set_link_up(*l, false);
  CHECK_FALSE(f.route_on(chip(0), chip(63), Plane::kScaleOut, 5, r));
  CHECK(f.search_hops(chip(0), chip(63), Plane::kScaleOut) == -1);
  REQUIRE(f.route_on(chip(0), chip(3), Plane::kScaleOut, 5, r));  // same leaf (chips 0-7)
  CHECK(r.hops == 2);
  // Inside the node NVLink still works.
  REQUIRE(f.route(chip(0), chip(1), 5, r));
  CHECK(r.plane == Plane::kScaleUp);
}

TEST_CASE("Fabric: a chip whose NVLink failed reaches its node-mates over the scale-out network") {
  Fabric f = build_fabric(dgx_like(2));
  f.set_link_up(f.attachment_up(chip(0), Plane::kScaleUp), false);
  Route r;
  REQUIRE(f.route(chip(0), chip(1), 0, r));
  CHECK(r.plane == Plane::kScaleOut);
  CHECK(is_walk(f, r, chip(0), chip(1)));
}

TEST_CASE("validate_cluster: impossible fabrics are explained") {
  ClusterSpec s = dgx_like(64, 2, true, 32);
  s.scale_out.radix = 64;
  // 64 nodes x 8 rails with 32 hosts per leaf: 16 leaves with 32 + 32 ports: fine.
  CHECK(first_problem(s) == "");
  s.chips = 8 * 1024;  // 1,024 nodes: 256 leaves, more than a radix-64 spine can join
  CHECK(first_problem(s) ==
        "scale_out.tiers: a two-tier fat tree of radix 64 joins at most 64 leaves (2,048 NICs); "
        "8,192 NICs need 256 leaves: use tiers: 3");
  s.scale_out.tiers = 3;
  s.scale_out.leaves_per_pod = 32;
  CHECK(first_problem(s) == "");  // 256 leaves in 8 pods
  s.scale_out.leaves_per_pod = 12;
  CHECK(first_problem(s) ==
        "scale_out.leaves_per_pod: a rail-optimised pod holds whole groups of 8 rail leaves; 12 is "
        "not a multiple of 8");
  ClusterSpec m = *cluster_preset("atlas-800t-a2", 8);
  m.scale_up.domain_chips = 12;
  CHECK(first_problem(m) ==
        "scale_up.domain_chips: a scale-up domain of 12 chips neither holds whole nodes of 8 nor divides one");
  ClusterSpec big = *cluster_preset("h100-superpod", 100'000);
  big.scale_out.radix = 64;
  big.scale_out.hosts_per_leaf = 32;
  big.scale_out.leaves_per_pod = 32;
  // 12,500 nodes / 32 = 391 groups x 8 rails = 3,128 leaves in 98 pods: more than 64 core ports.
  CHECK(first_problem(big) ==
        "scale_out.radix: a core switch needs one port per pod: 98 pods of 32 leaves exceed the radix "
        "64 (that fabric holds at most 65,536 NICs): use a bigger radix or more hosts per leaf");
}

TEST_CASE("cluster_preset: every preset scales to 100,000 chips and rounds up to whole domains") {
  for (auto name : cluster_preset_names()) {
    INFO(name);
    const auto s = cluster_preset(name, 100'000);
    REQUIRE(s.has_value());
    CHECK(s->chips >= 100'000);
    CHECK(s->chips % s->scale_up.domain_chips == 0);
    CHECK(s->chips - 100'000 < s->scale_up.domain_chips);
    CHECK(first_problem(*s) == "");
    CHECK_FALSE(s->source.empty());
  }
  CHECK(cluster_preset("cloudmatrix384", 100'000)->chips == 100'224);  // 261 supernodes
  CHECK(cluster_preset("gb200-nvl72", 1)->chips == 72);
  CHECK_FALSE(cluster_preset("dgx-a100", 8).has_value());
}

TEST_CASE("Fabric content ids: a copy keeps its original's, a change of state gets a fresh one") {
  const ClusterSpec spec = *cluster_preset("h100-superpod", 64);
  const Fabric a = build_fabric(spec);
  const Fabric b = build_fabric(spec);
  CHECK(a.content_id() != 0);
  CHECK(a.content_id() != b.content_id());  // two builds: equal, but nothing proves it cheaply
  Fabric c = a;
  CHECK(c.content_id() == a.content_id());
  c.set_routing(c.routing());  // no change
  CHECK(c.content_id() == a.content_id());
  c.set_link_up(LinkId(0), true);  // already up
  CHECK(c.content_id() == a.content_id());
  c.set_link_up(LinkId(0), false);
  const std::uint64_t down = c.content_id();
  CHECK(down != a.content_id());
  c.set_link_up(LinkId(0), true);  // the same links as a again, but a fresh id: ids only say "equal"
  CHECK(c.content_id() != down);
  CHECK(c.content_id() != a.content_id());
  c.set_routing(c.routing() == Routing::kEcmp ? Routing::kAdaptive : Routing::kEcmp);
  CHECK(c.content_id() != a.content_id());
}

TEST_CASE("FabricCache: one fabric per spec, shared; a different spec gets its own") {
  ClusterSpec spec = *cluster_preset("h100-superpod", 64);
  FabricCache cache;
  const auto first = shared_fabric(spec, &cache);
  const auto again = shared_fabric(spec, &cache);
  CHECK(first.get() == again.get());
  CHECK(first->chips() == build_fabric(spec).chips());
  ClusterSpec other = spec;
  other.scale_out.leaf_oversubscription = 2.0;
  const auto changed = shared_fabric(other, &cache);
  CHECK(changed.get() != first.get());
  CHECK(changed->content_id() != first->content_id());
  // The bandwidth the change moved: a leaf's uplinks halve, so the fabrics' links differ.
  double first_total = 0, changed_total = 0;
  for (std::uint32_t l = 0; l < first->link_count(); ++l) first_total += first->link(LinkId(l)).bandwidth_bytes_per_s;
  for (std::uint32_t l = 0; l < changed->link_count(); ++l)
    changed_total += changed->link(LinkId(l)).bandwidth_bytes_per_s;
  CHECK(changed_total != first_total);
  CHECK(shared_fabric(spec, &cache).get() == first.get());  // still kept
  // Without a cache each caller builds its own, equal in content.
  const auto alone = shared_fabric(spec, nullptr);
  CHECK(alone.get() != first.get());
  CHECK(alone->link_count() == first->link_count());
  // Another cache (another session) keeps its own.
  FabricCache other_session;
  CHECK(shared_fabric(spec, &other_session).get() != first.get());
}
