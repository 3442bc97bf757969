// The cluster graph, flattened for the simulation: chips, switches and directed links in arrays
// indexed by ids, with deterministic up/down routing.
//
// Models: chips (accelerators), switches (NVSwitch, UB L1/L2, NIC, leaf, spine, core) and links
// with a bandwidth per direction (each direction is its own link), a latency per traversal and
// the plane it belongs to. Up to two planes: plane 0 is the scale-up fabric (NVLink, HCCS, UB),
// plane 1 the scale-out network (InfiniBand / RoCE RDMA). Each chip belongs to one node (server
// or tray), rack, scale-up domain and failure domain, and sits on one rail (its NIC's index in
// its node).
//
// Routing. Within a plane the switches form levels (1 = the switches chips attach to, 2, 3, ...;
// computed by a breadth-first search from the chips when the fabric is built). Every switch of
// level >= 2 covers a contiguous range of level-1 switches (those below it). A route goes up from
// the source's level-1 switch until a switch covers the destination's, then down: the classic
// up/down route of a fat tree, O(path length), no graph search. Equal-cost choices (which spine,
// which core) are made by a hash of (source, destination, flow label): ECMP. Chips of one full
// mesh (HCCS) talk over their direct link. Chips of one scale-up domain use plane 0, others
// plane 1. Routes avoid failed links (set_link_up); when every equal-cost choice is down the next
// one that still reaches the destination is taken, and a pair with no surviving route gets none.
//
// Flows (flow_route) follow the fabric's routing mode. ECMP: a flow pins one of the equal-cost
// paths, so flows that hash onto the same core link share it. Adaptive (adaptive routing or
// packet spraying, as InfiniBand AR and Spectrum-X do): a flow spreads evenly over all equal-cost
// paths, which the model represents by bundles: all up links of a tier group (a leaf, the spines
// of a pod) form one resource with their summed bandwidth, and so do all links down into a group.
// A flow's resources are then its NIC links and the bundles of the tiers it crosses; a
// non-blocking core never binds. Resources are numbered links first, then two bundles per group
// (up, down).
//
// Deliberately ignored: packets, queues, congestion control, imperfect spraying, lateral links
// between switches.
//
// Invariants (checked when built): links join a chip or switch to one of the next level, or two
// chips of one scale-up domain (a mesh); covers are contiguous and a switch's children's covers
// are equal or disjoint; every chip attaches to at most one level-1 switch per plane, both ways.
// Adaptive routing needs every tier group's members to share one parent group (true of every
// builder here; otherwise flows fall back to ECMP).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/time.h"
#include "core/units.h"

namespace servesim::topologies {

using ChipId = Id<struct ChipTag>;
using VertexId = Id<struct VertexTag>;  // chips are vertices [0, chips), switches follow
using LinkId = Id<struct LinkTag>;

inline constexpr int kPlanes = 2;
enum class Plane : std::uint8_t { kScaleUp = 0, kScaleOut = 1 };
std::string_view plane_name(Plane p);

enum class SwitchRole : std::uint8_t {
  kChip,     // not a switch
  kScaleUp,  // NVSwitch (one logical switch per domain), UB L1 / L2
  kNic,      // a NIC shared by several chips (PCIe below, network above)
  kLeaf,
  kSpine,
  kCore,
};
std::string_view role_name(SwitchRole r);

// Which tier of the fabric a link belongs to, for utilization reports and collective costs.
enum class LinkClass : std::uint8_t {
  kScaleUp,  // chip <-> scale-up switch, chip <-> chip (mesh), UB L1 <-> L2
  kNic,      // chip <-> NIC, chip/NIC <-> leaf
  kLeafSpine,
  kSpineCore,
  kCount,
};
std::string_view link_class_name(LinkClass c);

struct Link {
  VertexId from;
  VertexId to;
  double bandwidth_bytes_per_s = 0;
  Duration latency;
  Plane plane = Plane::kScaleUp;
  LinkClass link_class = LinkClass::kScaleUp;
};

// Where a chip sits. Every index counts from 0 over the whole cluster.
struct ChipPlace {
  std::uint32_t node = 0;
  std::uint32_t rack = 0;
  std::uint32_t domain = 0;  // scale-up domain (NVSwitch node, NVL72 rack, UB supernode)
  std::uint32_t failure_domain = 0;
  std::uint32_t rail = 0;  // NIC index within the node
};

// At most 8 links: chip -> leaf -> spine -> core -> spine -> leaf -> chip is 6, plus a NIC
// level on each side.
inline constexpr int kMaxHops = 8;

struct Route {
  std::array<LinkId, kMaxHops> links{};
  std::uint8_t hops = 0;
  Plane plane = Plane::kScaleUp;

  const LinkId* begin() const { return links.data(); }
  const LinkId* end() const { return links.data() + hops; }
};

enum class Routing : std::uint8_t { kEcmp, kAdaptive };

struct FabricCounts {
  std::size_t chips = 0;
  std::size_t nodes = 0;
  std::size_t domains = 0;
  std::size_t switches = 0;
  std::size_t links = 0;
  std::array<std::size_t, 6> switches_by_role{};  // indexed by SwitchRole
};

class FabricBuilder;

class Fabric {
 public:
  std::size_t chips() const { return places_.size(); }
  std::size_t vertices() const { return level_.size(); }
  std::size_t link_count() const { return links_.size(); }
  const Link& link(LinkId l) const { return links_[l.index()]; }
  const ChipPlace& place(ChipId c) const { return places_[c.index()]; }
  SwitchRole role(VertexId v) const { return role_[v.index()]; }
  int level(VertexId v) const { return level_[v.index()]; }
  FabricCounts counts() const;
  // The links of a chip's attachment in a plane (invalid ids when it has none).
  LinkId attachment_up(ChipId c, Plane p) const { return attach_up_[idx(p)][c.index()]; }
  LinkId attachment_down(ChipId c, Plane p) const { return attach_down_[idx(p)][c.index()]; }
  // The level-1 switch ordinal a chip attaches to in a plane (kInvalid when none).
  std::uint32_t leaf_of(ChipId c, Plane p) const { return leaf_of_[idx(p)][c.index()]; }
  // The direct (mesh) links leaving a chip.
  const LinkId* mesh_begin(ChipId c) const { return mesh_links_.data() + mesh_begin_[c.index()]; }
  const LinkId* mesh_end(ChipId c) const { return mesh_links_.data() + mesh_begin_[c.index() + 1]; }
  // Up and down links of a vertex within its plane (a chip's are its attachments' planes' own).
  const LinkId* up_begin(VertexId v) const { return up_links_.data() + up_begin_[v.index()]; }
  const LinkId* up_end(VertexId v) const { return up_links_.data() + up_begin_[v.index() + 1]; }
  const LinkId* down_begin(VertexId v) const { return down_links_.data() + down_begin_[v.index()]; }
  const LinkId* down_end(VertexId v) const { return down_links_.data() + down_begin_[v.index() + 1]; }
  // The level-1 ordinals [lo, hi) below a switch.
  std::uint32_t cover_lo(VertexId v) const { return cover_lo_[v.index()]; }
  std::uint32_t cover_hi(VertexId v) const { return cover_hi_[v.index()]; }

  bool same_domain(ChipId a, ChipId b) const { return place(a).domain == place(b).domain; }
  // The plane a route between two chips uses: scale-up inside a domain (when the plane joins
  // them), scale-out otherwise.
  Plane plane_between(ChipId src, ChipId dst) const;

  // Routes src -> dst on the plane that joins them; false when no route survives (or src == dst,
  // which needs no links: the route is then empty and the function returns true).
  bool route(ChipId src, ChipId dst, std::uint64_t flow_label, Route& out) const;
  bool route_on(ChipId src, ChipId dst, Plane plane, std::uint64_t flow_label, Route& out) const;
  // Sum of link latencies along a route.
  Duration latency(const Route& r) const;
  // The smallest bandwidth along a route (bytes/s); +inf for an empty route.
  double bottleneck(const Route& r) const;

  // Link state (faults). Failed links carry nothing and routes avoid them.
  bool link_up(LinkId l) const { return link_up_[l.index()] != 0; }
  void set_link_up(LinkId l, bool up);
  std::size_t failed_links() const;
  // Every link that touches a vertex (both directions).
  std::vector<LinkId> links_of(VertexId v) const;

  // Reference for tests: fewest links from src to dst inside one plane by breadth-first search
  // over surviving links (Boost.Graph); -1 when unreachable.
  int search_hops(ChipId src, ChipId dst, Plane plane) const;

  // --- flows: resources (links and bundles) ---
  Routing routing() const { return routing_; }
  void set_routing(Routing r);
  // Fabrics with equal ids are equal (links, chips' places, roles, link states, bundles,
  // routing): build() gives each fabric a fresh id, so does each change of state (set_link_up,
  // set_routing), and a copy keeps its original's. What a check that reads the whole fabric can
  // key a cache on (rank_flows_symmetric, rank_flow_symmetry.h).
  std::uint64_t content_id() const { return content_id_; }
  std::size_t resource_count() const { return links_.size() + 2 * group_plane_.size(); }
  bool is_bundle(std::uint32_t resource) const { return resource >= links_.size(); }
  // Bandwidth (bytes/s) of a resource: a surviving link's, or the surviving members' sum.
  double resource_capacity(std::uint32_t resource) const;
  LinkClass resource_class(std::uint32_t resource) const;
  Duration resource_latency(std::uint32_t resource) const;
  // The real links a resource stands for (one for a link, the members for a bundle).
  std::vector<LinkId> resource_links(std::uint32_t resource) const;
  // The bundle a link belongs to (kNone for chip and NIC links, which are their own resource).
  std::uint32_t bundle_of(LinkId l) const { return bundle_of_[l.index()]; }
  // The resources a flow from src to dst occupies under the fabric's routing: links (ECMP), or
  // NIC links and bundles (adaptive; falls back to ECMP where the scale-up plane joins the chips
  // directly). False when no route survives.
  bool flow_route(ChipId src, ChipId dst, std::uint64_t flow_label, Route& out) const;
  Duration resource_latency(const Route& r) const;
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

 private:
  friend class FabricBuilder;
  static std::size_t idx(Plane p) { return static_cast<std::size_t>(p); }
  bool climb(VertexId v, std::uint32_t target, std::uint64_t hash, int depth, Route& out) const;
  bool descend(VertexId v, std::uint32_t target, std::uint64_t hash, int depth, Route& out) const;
  bool reaches_down(VertexId v, std::uint32_t target) const;

  std::vector<Link> links_;
  std::vector<std::uint8_t> link_up_;
  std::vector<std::uint8_t> level_;
  std::vector<SwitchRole> role_;
  std::vector<ChipPlace> places_;
  std::array<std::vector<LinkId>, kPlanes> attach_up_, attach_down_;
  std::array<std::vector<std::uint32_t>, kPlanes> leaf_of_;
  std::array<std::vector<VertexId>, kPlanes> level1_;
  std::vector<std::uint32_t> mesh_begin_;
  std::vector<LinkId> mesh_links_;
  std::vector<std::uint32_t> up_begin_, down_begin_;
  std::vector<LinkId> up_links_, down_links_;  // down links sorted by the child's cover
  std::vector<std::uint32_t> cover_lo_, cover_hi_;

  // Tier groups: switches of one plane and level with the same cover. Bundles: up (2g) and
  // down (2g + 1) after the links.
  bool adaptive_route(ChipId src, ChipId dst, Plane plane, Route& out) const;
  // What flow_route reads per chip, in one place: the chip's domain, its attachments, whether
  // they survive, and the group of the switch it attaches to, per plane.
  struct ChipRouting {
    std::uint32_t domain = 0;
    std::array<std::uint32_t, kPlanes> up{}, down{}, group{};
    std::array<std::uint8_t, kPlanes> up_alive{}, down_alive{};
    std::uint8_t mesh = 0;
  };
  std::vector<ChipRouting> chip_routing_;
  void set_bundle_capacity(LinkId l, bool up);
  Routing routing_ = Routing::kEcmp;
  std::vector<std::uint32_t> group_of_;  // per vertex
  std::vector<std::uint8_t> group_plane_, group_level_;
  std::vector<std::uint32_t> group_parent_;         // kNone at the top
  std::vector<std::uint32_t> group_lo_, group_hi_;  // the cover
  std::vector<std::uint32_t> child_begin_;          // CSR: child groups sorted by cover
  std::vector<std::uint32_t> children_;
  std::vector<double> bundle_capacity_;  // per bundle, surviving members
  std::vector<LinkClass> bundle_class_;
  std::vector<Duration> bundle_latency_;
  std::vector<std::uint32_t> bundle_of_;  // per link
  bool bundles_ok_ = false;               // every group's members share one parent group
  std::uint64_t content_id_ = 0;          // see content_id()
  static std::uint64_t fresh_content_id();
};

// Collects vertices and links, then checks and flattens them (Boost.Graph inside).
class FabricBuilder {
 public:
  explicit FabricBuilder(std::vector<ChipPlace> chips);
  VertexId add_switch(SwitchRole role);
  // One direction; add_cable adds both.
  LinkId add_link(VertexId from, VertexId to, double bytes_per_s, Duration latency, Plane plane, LinkClass cls);
  void add_cable(VertexId a, VertexId b, double bytes_per_s, Duration latency, Plane plane, LinkClass cls);
  VertexId chip_vertex(ChipId c) const { return VertexId(c.value); }
  std::size_t link_count() const { return links_.size(); }
  // Throws std::logic_error naming the broken invariant (a builder bug, not user input).
  Fabric build() &&;

 private:
  std::vector<ChipPlace> chips_;
  std::vector<SwitchRole> roles_;
  std::vector<Link> links_;
};

}  // namespace servesim::topologies
