// Placement of instances onto chips.
//
// First version (used by the running simulation until the serving issue wires the cluster graph
// in): chips come in scale-up domains (an 8-GPU NVSwitch node) joined by a scale-out network (one
// NIC per chip). Each instance starts at a domain boundary and its stages take consecutive groups
// of tp chips; a TP group stays inside one domain or fills whole domains (tensor parallelism over
// several nodes, whose all-reduces then cross the scale-out network), and pipeline stages that do
// not fit in the instance's domain talk over the scale-out network. (FabricSpec,
// validate_placement, place_instance.)
//
// On a Fabric (place_pools): every instance of every pool gets chips by its pool's policy:
//  - pack: consecutive free chips, an instance of at most a node inside one node (aligned to its
//    size when that divides the node), bigger ones on whole nodes inside one scale-up domain
//    when they fit in one;
//  - rail_aligned: pipeline stages smaller than a node go to pp different nodes at the same
//    offset, so that stage-to-stage traffic stays on one rail (one leaf of a rail-optimised
//    fabric); otherwise as pack;
//  - spread: instance i goes to failure domain (i mod domains), packed inside it, so that one
//    failure takes out as few instances as possible;
//  - explicit: the chip lists the scenario gives, one per instance, in rank order.
// Explicit pools are placed first, then the others in pool order. Ranks within an instance follow
// models/parallel_plan.h (tp fastest, then dp, cp, pp):
//   rank = ((stage x cp + c) x dp + d) x tp + t;
// the MoE group of a stage is its tp x dp consecutive ranks for one c, split moe_tp x ep with
// expert-TP fastest: an EP group is ep ranks of one MoE group, moe_tp apart.
// Checks: more chips than exist, chips out of range or given twice (always errors); a TP group
// that spans scale-up domains, an EP group that leaves its scale-up domain though it would fit in
// one (errors or warnings, as the pool's on_violation says). Problems are summarised per pool:
// how many instances, and the first one with its chips.
// Deliberately ignored: heterogeneous chips within a cluster, placement that changes during a run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "topologies/collectives.h"
#include "topologies/fabric.h"

namespace servesim::topologies {

struct FabricSpec {
  int scale_up_domain = 8;  // chips per domain
  LinkTier scale_up;        // per chip, inside a domain
  LinkTier scale_out;       // per chip, between domains
};

struct InstancePlacement {
  LinkTier tp;                    // the tier the TP all-reduce runs on
  std::vector<LinkTier> pp_hops;  // hop k carries activations from stage k to stage k + 1
};

// Problems (sentences) of placing an instance of tp x pp chips on this fabric.
std::vector<std::string> validate_placement(const FabricSpec& f, int tp, int pp);
InstancePlacement place_instance(const FabricSpec& f, int tp, int pp);

// --- placement on a cluster graph ---

struct InstanceShape {
  int tp = 1;
  int dp = 1;
  int cp = 1;
  int pp = 1;
  int ep = 1;  // moe_tp x ep = tp x dp
  int moe_tp = 1;
  int stage_chips() const { return tp * dp * cp; }
  int chips() const { return stage_chips() * pp; }
  bool valid() const {
    return tp >= 1 && dp >= 1 && cp >= 1 && pp >= 1 && ep >= 1 && moe_tp >= 1 && moe_tp * ep == tp * dp;
  }
};

// kMoe: a stage's whole MoE group (tp x dp ranks); kEp: its expert-parallel groups.
enum class GroupKind : std::uint8_t { kTp, kDp, kEp, kMoe, kCp, kPp };
std::string_view group_name(GroupKind k);
int group_size(const InstanceShape& s, GroupKind k);
int group_count(const InstanceShape& s, GroupKind k);
// Instance-local ranks of group `index` of kind `k`, in rank order.
std::vector<int> group_ranks(const InstanceShape& s, GroupKind k, int index);

enum class PlacementPolicy : std::uint8_t { kPack, kRailAligned, kSpread, kExplicit };
enum class ViolationAction : std::uint8_t { kError, kWarn };
std::string_view policy_name(PlacementPolicy p);

struct PoolPlacementSpec {
  std::string name;
  InstanceShape shape;
  int instances = 1;
  PlacementPolicy policy = PlacementPolicy::kPack;
  std::vector<std::vector<std::uint32_t>> chips;  // kExplicit: one list per instance, rank order
  ViolationAction on_violation = ViolationAction::kError;
};

struct PlacementIssue {
  int pool = -1;
  int instance = -1;  // the first instance concerned; -1 for the pool as a whole
  int list = -1;      // kExplicit: the chip list concerned
  bool error = true;  // false: a warning (on_violation: warn)
  std::string message;
};

struct InstanceRef {
  int pool = -1;
  int instance = -1;
  auto operator<=>(const InstanceRef&) const = default;  // NOLINT(modernize-use-nullptr)
};

class ClusterPlacement {
 public:
  int pools() const { return static_cast<int>(shapes_.size()); }
  int instances(int pool) const { return counts_[static_cast<std::size_t>(pool)]; }
  const InstanceShape& shape(int pool) const { return shapes_[static_cast<std::size_t>(pool)]; }
  // The instance's chips in rank order (empty when it could not be placed).
  std::span<const ChipId> chips(int pool, int instance) const;
  // The chips of one of the instance's groups, in rank order.
  std::vector<ChipId> group(int pool, int instance, GroupKind kind, int index) const;
  // Who holds a chip (pool -1 when nobody).
  InstanceRef owner(ChipId c) const;
  int rank_of(ChipId c) const;
  // Instances holding any of `chips`, sorted, each once.
  std::vector<InstanceRef> instances_on(std::span<const ChipId> chips) const;

  const std::vector<PlacementIssue>& issues() const { return issues_; }
  bool has_errors() const;

 private:
  friend ClusterPlacement place_pools(const Fabric&, std::span<const PoolPlacementSpec>);
  std::vector<InstanceShape> shapes_;
  std::vector<int> counts_;
  std::vector<std::size_t> first_;    // per pool, offset of instance 0 in chips_
  std::vector<ChipId> chips_;         // every pool's instances, chips in rank order
  std::vector<std::uint8_t> placed_;  // per (pool, instance), flattened like first_
  std::vector<std::size_t> placed_first_;
  std::vector<InstanceRef> owner_;  // per chip
  std::vector<int> rank_;           // per chip
  std::vector<PlacementIssue> issues_;
};

ClusterPlacement place_pools(const Fabric& fabric, std::span<const PoolPlacementSpec> pools);

// "0-3, 8, 10-11": a chip list in compact form for messages.
std::string format_chips(std::span<const ChipId> chips);

}  // namespace servesim::topologies
