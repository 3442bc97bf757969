// Cluster descriptions and the builders that turn them into a Fabric.
//
// A cluster is `chips` accelerators in nodes (servers or trays) of `node_chips`, racks of
// `nodes_per_rack` nodes, and scale-up domains of `scale_up.domain_chips` chips, joined by:
//  - a scale-up fabric per domain: one logical switch (an 8-GPU NVSwitch node, a 72-GPU NVL72
//    rack), a full mesh of direct links (8 Ascend 910B on HCCS: 7 links per NPU), or two switch
//    levels (CloudMatrix384's UB plane: an L1 per node, an L2 per supernode, non-blocking);
//  - a scale-out network: a fat tree of 1, 2 (leaf-spine) or 3 (leaf-spine-core) tiers,
//    rail-optimised (leaf r of a group of nodes takes NIC r of each) or not, with an
//    oversubscription per tier (down ports : up ports), one NIC per chip or one shared by several
//    chips over PCIe.
// Presets (cluster_preset) give each figure with its source; the user may override any of them.
//
// Deliberately ignored: the physical NVSwitch chips (one logical non-blocking switch per domain),
// the UB L2 sub-planes (one logical L2), the frontend (storage / VPC) network, cable lengths.
// Invariant: a spec that validate_cluster accepts builds (build_fabric does not fail).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/recent_cache.h"
#include "core/time.h"
#include "core/units.h"
#include "topologies/collectives.h"
#include "topologies/fabric.h"

namespace servesim::topologies {

enum class ScaleUpKind : std::uint8_t { kNone, kSwitch, kFullMesh, kTwoLevelSwitch };
enum class FailureDomainLevel : std::uint8_t { kNode, kRack, kDomain };

struct ScaleUpSpec {
  ScaleUpKind kind = ScaleUpKind::kSwitch;
  int domain_chips = 8;
  Bandwidth chip_bandwidth{450e9};  // per chip per direction, all its scale-up links together
  Duration hop_latency = Duration::nanoseconds(200);
  bool operator==(const ScaleUpSpec&) const = default;
};

struct ScaleOutSpec {
  bool present = true;
  int tiers = 3;  // 1, 2 or 3 switch tiers
  bool rail_optimized = true;
  int chips_per_nic = 1;
  Bandwidth nic_bandwidth{50e9};        // per NIC per direction
  Bandwidth pcie_bandwidth{64e9};       // chip <-> shared NIC (chips_per_nic > 1)
  int hosts_per_leaf = 64;              // NIC ports down per leaf
  double leaf_oversubscription = 1.0;   // leaf down ports : up ports
  int leaves_per_pod = 64;              // tier 3: leaves that share a set of spines
  double spine_oversubscription = 1.0;  // tier 3: spine down ports : up ports
  Bandwidth link_bandwidth{50e9};       // switch-to-switch links
  Duration hop_latency = Duration::nanoseconds(500);
  int radix = 0;                         // ports per switch; 0 = not checked
  Routing routing = Routing::kAdaptive;  // how flows use equal-cost paths (fabric.h)
  bool operator==(const ScaleOutSpec&) const = default;
};

struct ClusterSpec {
  std::string name;  // preset name or "custom"
  std::string chip;  // the chip preset the cluster is built of (informational)
  int chips = 0;
  int node_chips = 8;
  int nodes_per_rack = 4;
  FailureDomainLevel failure_domain = FailureDomainLevel::kNode;
  ScaleUpSpec scale_up;
  ScaleOutSpec scale_out;
  CommCalibration comm;
  std::string source;  // where the figures come from, and which are assumptions
  bool operator==(const ClusterSpec&) const = default;
};

// A problem with a spec: the key it is about (relative to the cluster section, e.g.
// "scale_out.hosts_per_leaf") and a sentence.
struct SpecProblem {
  std::string key;
  std::string message;
};
std::vector<SpecProblem> validate_cluster(const ClusterSpec& spec);

// The smallest chip count >= `chips` made of whole nodes and scale-up domains.
int round_up_chips(const ClusterSpec& spec, int chips);

// Builds the graph. Precondition: validate_cluster(spec) is empty.
Fabric build_fabric(const ClusterSpec& spec);
// The fabrics of the last few cluster specs built (a serve session, a sweep or a plan builds a
// scenario per hypothesis, mostly on the same cluster). Owned by the session. Thread-safe.
class FabricCache {
 public:
  // build_fabric(spec), or the fabric an equal spec built before.
  std::shared_ptr<const Fabric> get(const ClusterSpec& spec);

 private:
  RecentCache<ClusterSpec, std::shared_ptr<const Fabric>> kept_{4};
};

// build_fabric(spec), shared: from `cache` when given, else built for the caller alone.
std::shared_ptr<const Fabric> shared_fabric(const ClusterSpec& spec, FabricCache* cache);

// Switch and link counts the spec would build, without building it.
struct FatTreeShape {
  int nics = 0, leaves = 0, spines = 0, cores = 0, pods = 0;
  int leaf_uplinks = 0, spine_uplinks = 0;
};
FatTreeShape fat_tree_shape(const ClusterSpec& spec);

// Presets: "h100-superpod", "h800-superpod", "atlas-800t-a2", "cloudmatrix384", "gb200-nvl72".
// `chips` is rounded up to whole nodes and domains.
std::optional<ClusterSpec> cluster_preset(std::string_view name, int chips);
std::vector<std::string_view> cluster_preset_names();

std::string_view scale_up_kind_name(ScaleUpKind k);
std::string_view failure_domain_name(FailureDomainLevel l);

}  // namespace servesim::topologies
