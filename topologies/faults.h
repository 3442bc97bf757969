// Faults of chips, nodes, links and switches, as a timeline of events the serving model consumes.
//
// A fault takes a component down at a time and (optionally) brings it back later. Components:
// a chip, a node (all its chips), a link (a cable: both directions), a switch (every link that
// touches it). Faults are scheduled at given times, or drawn at random per component kind from a
// mean time between failures (MTBF, per component) and a mean time to repair (exponential), from
// the project RNG (stream "faults/<kind>"), so the same seed gives the same timeline.
// fault_effect says which links go down and which chips are lost (dead chips, and chips whose own
// links fail); FlowNetwork::fail / recover reroute and abort flows; ClusterPlacement::instances_on
// names the instances hit. What happens to their requests is the serving model's decision.
// Deliberately ignored: correlated failures beyond node = all its chips, partial (degraded) links.
// Invariants: events come sorted by (time, recoveries first, kind, index); a component is never
// failed twice without recovering in between.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "topologies/fabric.h"

namespace servesim::topologies {

enum class FaultKind : std::uint8_t { kChip, kNode, kLink, kSwitch };
std::string_view fault_kind_name(FaultKind k);

struct FaultTarget {
  FaultKind kind = FaultKind::kChip;
  std::uint32_t index = 0;  // chip, node, link (either direction of the cable) or switch ordinal
  auto operator<=>(const FaultTarget&) const = default;  // NOLINT(modernize-use-nullptr)
};

struct FaultEvent {
  SimTime at;
  FaultTarget target;
  bool up = false;  // false: fails; true: recovers
};

struct ScheduledFault {
  FaultTarget target;
  SimTime at;
  std::optional<SimTime> recover_at;
};

struct RandomFaults {
  FaultKind kind = FaultKind::kChip;
  double mtbf_s = 0;             // per component, seconds (years are common: not a Duration)
  std::optional<double> mttr_s;  // mean repair time (exponential); none: never repaired
};

struct FaultSpec {
  std::vector<ScheduledFault> scheduled;
  std::vector<RandomFaults> random;
  bool empty() const { return scheduled.empty() && random.empty(); }
};

// How many components of a kind the fabric has (links count cables).
std::size_t component_count(const Fabric& f, FaultKind k);
// Problems with a spec (a target that does not exist, a recovery before its failure), as
// sentences with the scheduled fault's position.
struct FaultProblem {
  int scheduled = -1;  // index into spec.scheduled, or -1
  int random = -1;     // index into spec.random, or -1
  std::string message;
};
std::vector<FaultProblem> validate_faults(const Fabric& f, const FaultSpec& spec);

// Every fault event up to `horizon`.
std::vector<FaultEvent> fault_timeline(const Fabric& f, const FaultSpec& spec, SimTime horizon, std::uint64_t seed);

struct FaultEffect {
  std::vector<LinkId> links;          // go down (or come back)
  std::vector<ChipId> dead_chips;     // lost with their state (chip and node faults)
  std::vector<ChipId> touched_chips;  // dead chips and chips whose own links fail, sorted
};
FaultEffect fault_effect(const Fabric& f, const FaultTarget& t);

std::string describe(const Fabric& f, const FaultTarget& t);

}  // namespace servesim::topologies
