#include <doctest/doctest.h>

#include <map>
#include <string>

#include "tests/topologies/test_fabrics.h"
#include "topologies/faults.h"

using namespace servesim;
using namespace servesim::topologies;
using servesim::topologies::testing::dgx_like;

namespace {

SimTime hours(double h) { return SimTime::zero() + Duration::seconds(h * 3600); }

}  // namespace

TEST_CASE("fault_timeline: scheduled faults in time order, recoveries first at equal times") {
  const Fabric f = build_fabric(dgx_like(2));
  FaultSpec spec;
  spec.scheduled.push_back({FaultTarget{FaultKind::kNode, 1}, hours(2), hours(3)});
  spec.scheduled.push_back({FaultTarget{FaultKind::kChip, 3}, hours(1), hours(2)});
  spec.scheduled.push_back({FaultTarget{FaultKind::kLink, 0}, hours(5), std::nullopt});
  CHECK(validate_faults(f, spec).empty());
  const auto t = fault_timeline(f, spec, hours(4), 1);
  REQUIRE(t.size() == 4);  // the link fails after the horizon
  CHECK((t[0].at == hours(1) && t[0].target.kind == FaultKind::kChip && !t[0].up));
  CHECK((t[1].at == hours(2) && t[1].target.kind == FaultKind::kChip && t[1].up));
  CHECK((t[2].at == hours(2) && t[2].target.kind == FaultKind::kNode && !t[2].up));
  CHECK((t[3].at == hours(3) && t[3].up));
}

TEST_CASE("validate_faults: targets that do not exist and backward recoveries") {
  const Fabric f = build_fabric(dgx_like(2));
  FaultSpec spec;
  spec.scheduled.push_back({FaultTarget{FaultKind::kNode, 2}, hours(1), std::nullopt});
  spec.scheduled.push_back({FaultTarget{FaultKind::kChip, 0}, hours(2), hours(1)});
  const auto p = validate_faults(f, spec);
  REQUIRE(p.size() == 2);
  CHECK(p[0].message == "node 2 does not exist: the cluster has 2 nodes, numbered from 0");
  CHECK(p[1].scheduled == 1);
  CHECK(p[1].message == "recovers before (or when) it fails");
}

TEST_CASE("fault_timeline: random faults follow the MTBF, deterministically per seed") {
  const Fabric f = build_fabric(dgx_like(125));  // 1,000 chips
  FaultSpec spec;
  spec.random.push_back({FaultKind::kChip, 1000.0 * 3600, 3600.0});
  // 1,000 chips at an MTBF of 1,000 h: one failure per hour across the fleet, 100 expected in
  // 100 h (Poisson, standard deviation 10).
  const auto a = fault_timeline(f, spec, hours(100), 42);
  const auto b = fault_timeline(f, spec, hours(100), 42);
  const auto c = fault_timeline(f, spec, hours(100), 43);
  int failures = 0;
  std::map<std::uint32_t, bool> down;
  for (const auto& e : a) {
    if (!e.up) {
      ++failures;
      CHECK_FALSE(down[e.target.index]);  // never failed twice without recovering
    }
    down[e.target.index] = !e.up;
  }
  CHECK(failures >= 60);
  CHECK(failures <= 140);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK((a[i].at == b[i].at && a[i].target == b[i].target));
  CHECK(a.size() != c.size());
}

TEST_CASE("fault_effect: a node takes its chips and their links; a switch its links") {
  const Fabric f = build_fabric(dgx_like(2));
  const FaultEffect node = fault_effect(f, FaultTarget{FaultKind::kNode, 1});
  REQUIRE(node.dead_chips.size() == 8);
  CHECK(node.dead_chips.front() == ChipId(8));
  // Each chip: NVLink up and down, NIC up and down.
  CHECK(node.links.size() == 8 * 4);
  // Switch 0 is node 0's NVSwitch: its 16 links touch chips 0-7, which survive.
  const FaultEffect nvswitch = fault_effect(f, FaultTarget{FaultKind::kSwitch, 0});
  CHECK(nvswitch.dead_chips.empty());
  CHECK(nvswitch.links.size() == 16);
  CHECK(nvswitch.touched_chips.size() == 8);
  const FaultEffect link = fault_effect(f, FaultTarget{FaultKind::kLink, 0});
  CHECK(link.links.size() == 2);  // both directions of the cable
  CHECK(describe(f, FaultTarget{FaultKind::kSwitch, 0}) == "scale-up switch switch 0");
}
