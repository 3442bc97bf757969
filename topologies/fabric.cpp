#include "topologies/fabric.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/visitors.hpp>

#include "core/rng.h"

namespace servesim::topologies {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint8_t kUnreached = std::numeric_limits<std::uint8_t>::max();

// Boost.Graph view of the links: one CSR graph whose edge property is the link index, filtered
// by plane (and by link state when routing around failures).
struct EdgeIndex {
  std::uint32_t link = 0;
};
using CsrGraph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, EdgeIndex>;

CsrGraph make_csr(const std::vector<Link>& links, std::size_t vertices) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ends;
  std::vector<EdgeIndex> props;
  ends.reserve(links.size());
  props.reserve(links.size());
  for (std::size_t i = 0; i < links.size(); ++i) {
    ends.emplace_back(links[i].from.value, links[i].to.value);
    props.push_back(EdgeIndex{static_cast<std::uint32_t>(i)});
  }
  return CsrGraph(boost::edges_are_unsorted_multi_pass, ends.begin(), ends.end(), props.begin(), vertices);
}

struct PlaneFilter {
  const CsrGraph* g = nullptr;
  const std::vector<Link>* links = nullptr;
  const std::vector<std::uint8_t>* up = nullptr;  // null: every link counts
  Plane plane = Plane::kScaleUp;
  bool operator()(const boost::graph_traits<CsrGraph>::edge_descriptor& e) const {
    const std::uint32_t i = (*g)[e].link;
    return (*links)[i].plane == plane && (up == nullptr || (*up)[i] != 0);
  }
};

// Breadth-first distances (in links) from `sources` inside one plane.
std::vector<std::uint32_t> plane_distances(const CsrGraph& g, const std::vector<Link>& links,
                                           const std::vector<std::uint8_t>* up, Plane plane,
                                           const std::vector<std::uint32_t>& sources, std::size_t vertices) {
  const PlaneFilter filter{&g, &links, up, plane};
  boost::filtered_graph<CsrGraph, PlaneFilter> view(g, filter);
  std::vector<std::uint32_t> dist(vertices, kNone);
  for (auto s : sources) dist[s] = 0;
  std::vector<boost::default_color_type> color(vertices, boost::white_color);
  boost::queue<std::uint32_t> queue;
  auto recorder = boost::record_distances(
      boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, g)), boost::on_tree_edge());
  boost::breadth_first_visit(view, sources.begin(), sources.end(), queue, boost::make_bfs_visitor(recorder),
                             boost::make_iterator_property_map(color.begin(), boost::get(boost::vertex_index, g)));
  return dist;
}

std::uint64_t mix(std::uint64_t h, std::uint64_t salt) {
  std::uint64_t s = h ^ (salt * 0x9e3779b97f4a7c15ULL);
  return splitmix64(s);
}

}  // namespace

std::string_view plane_name(Plane p) { return p == Plane::kScaleUp ? "scale-up" : "scale-out"; }

std::string_view role_name(SwitchRole r) {
  switch (r) {
    case SwitchRole::kChip: return "chip";
    case SwitchRole::kScaleUp: return "scale-up switch";
    case SwitchRole::kNic: return "NIC";
    case SwitchRole::kLeaf: return "leaf";
    case SwitchRole::kSpine: return "spine";
    case SwitchRole::kCore: return "core";
  }
  return "?";
}

std::string_view link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::kScaleUp: return "scale_up";
    case LinkClass::kNic: return "nic";
    case LinkClass::kLeafSpine: return "leaf_spine";
    case LinkClass::kSpineCore: return "spine_core";
    case LinkClass::kCount: break;
  }
  return "?";
}

// --- queries ---

FabricCounts Fabric::counts() const {
  FabricCounts c;
  c.chips = chips();
  c.links = links_.size();
  for (const auto& p : places_) {
    c.nodes = std::max<std::size_t>(c.nodes, p.node + 1);
    c.domains = std::max<std::size_t>(c.domains, p.domain + 1);
  }
  for (std::size_t v = chips(); v < vertices(); ++v) {
    ++c.switches;
    ++c.switches_by_role[static_cast<std::size_t>(role_[v])];
  }
  return c;
}

std::size_t Fabric::failed_links() const {
  return static_cast<std::size_t>(std::count(link_up_.begin(), link_up_.end(), std::uint8_t{0}));
}

std::vector<LinkId> Fabric::links_of(VertexId v) const {
  std::vector<LinkId> out;
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (links_[i].from == v || links_[i].to == v) out.emplace_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

Plane Fabric::plane_between(ChipId src, ChipId dst) const {
  if (same_domain(src, dst)) {
    if (mesh_begin(src) != mesh_end(src) || attach_up_[0][src.index()].valid()) return Plane::kScaleUp;
  }
  return Plane::kScaleOut;
}

Duration Fabric::latency(const Route& r) const {
  Duration d = Duration::zero();
  for (LinkId l : r) d += links_[l.index()].latency;
  return d;
}

double Fabric::bottleneck(const Route& r) const {
  double b = std::numeric_limits<double>::infinity();
  for (LinkId l : r) b = std::min(b, links_[l.index()].bandwidth_bytes_per_s);
  return b;
}

// --- routing ---

bool Fabric::reaches_down(VertexId v, std::uint32_t target) const {
  if (level_[v.index()] == 1) return cover_lo_[v.index()] == target;
  const LinkId* b = down_begin(v);
  const LinkId* e = down_end(v);
  for (const LinkId* it = b; it != e; ++it) {
    const VertexId child = links_[it->index()].to;
    if (cover_lo_[child.index()] <= target && target < cover_hi_[child.index()] && link_up_[it->index()] != 0 &&
        reaches_down(child, target)) {
      return true;
    }
  }
  return false;
}

bool Fabric::descend(VertexId v, std::uint32_t target, std::uint64_t hash, int depth, Route& out) const {
  if (level_[v.index()] == 1) return cover_lo_[v.index()] == target;
  if (out.hops >= kMaxHops - 1) return false;
  // Children are sorted by their cover's start and are identical or disjoint: the candidates are
  // the run of children whose cover starts at the last start <= target.
  const LinkId* b = down_begin(v);
  const LinkId* e = down_end(v);
  const LinkId* hi = std::upper_bound(
      b, e, target, [&](std::uint32_t t, LinkId l) { return t < cover_lo_[links_[l.index()].to.index()]; });
  if (hi == b) return false;
  const std::uint32_t lo_start = cover_lo_[links_[(hi - 1)->index()].to.index()];
  const LinkId* lo = hi - 1;
  while (lo > b && cover_lo_[links_[(lo - 1)->index()].to.index()] == lo_start) --lo;
  if (cover_hi_[links_[lo->index()].to.index()] <= target) return false;
  const std::size_t n = static_cast<std::size_t>(hi - lo);
  const std::size_t first = static_cast<std::size_t>(mix(hash, static_cast<std::uint64_t>(depth)) % n);
  for (std::size_t k = 0; k < n; ++k) {
    const LinkId l = lo[(first + k) % n];
    if (link_up_[l.index()] == 0) continue;
    const VertexId child = links_[l.index()].to;
    if (n > 1 && !reaches_down(child, target)) continue;
    out.links[out.hops++] = l;
    if (descend(child, target, hash, depth + 1, out)) return true;
    --out.hops;
  }
  return false;
}

bool Fabric::climb(VertexId v, std::uint32_t target, std::uint64_t hash, int depth, Route& out) const {
  if (cover_lo_[v.index()] <= target && target < cover_hi_[v.index()]) {
    return descend(v, target, hash, depth, out);
  }
  if (out.hops >= kMaxHops - 2) return false;
  const LinkId* b = up_begin(v);
  const std::size_t n = static_cast<std::size_t>(up_end(v) - b);
  if (n == 0) return false;
  const std::size_t first = static_cast<std::size_t>(mix(hash, static_cast<std::uint64_t>(depth)) % n);
  for (std::size_t k = 0; k < n; ++k) {
    const LinkId l = b[(first + k) % n];
    if (link_up_[l.index()] == 0) continue;
    out.links[out.hops++] = l;
    if (climb(links_[l.index()].to, target, hash, depth + 1, out)) return true;
    --out.hops;
  }
  return false;
}

bool Fabric::route_on(ChipId src, ChipId dst, Plane plane, std::uint64_t flow_label, Route& out) const {
  out.hops = 0;
  out.plane = plane;
  if (src == dst) return true;
  const std::size_t p = idx(plane);
  if (plane == Plane::kScaleUp) {
    for (const LinkId* it = mesh_begin(src); it != mesh_end(src); ++it) {
      if (links_[it->index()].to.value == dst.value) {
        if (link_up_[it->index()] == 0) break;
        out.links[0] = *it;
        out.hops = 1;
        return true;
      }
    }
  }
  const LinkId up = attach_up_[p][src.index()];
  const LinkId down = attach_down_[p][dst.index()];
  if (!up.valid() || !down.valid() || link_up_[up.index()] == 0 || link_up_[down.index()] == 0) {
    return false;
  }
  const std::uint32_t target = leaf_of_[p][dst.index()];
  std::uint64_t h = (static_cast<std::uint64_t>(src.value) << 32) ^ dst.value;
  h = mix(h, flow_label + 1);
  out.links[out.hops++] = up;
  if (!climb(links_[up.index()].to, target, h, 0, out)) {
    out.hops = 0;
    return false;
  }
  out.links[out.hops++] = down;
  return true;
}

bool Fabric::route(ChipId src, ChipId dst, std::uint64_t flow_label, Route& out) const {
  const Plane first = plane_between(src, dst);
  if (route_on(src, dst, first, flow_label, out)) return true;
  const Plane other = first == Plane::kScaleUp ? Plane::kScaleOut : Plane::kScaleUp;
  return route_on(src, dst, other, flow_label, out);
}

int Fabric::search_hops(ChipId src, ChipId dst, Plane plane) const {
  const CsrGraph g = make_csr(links_, vertices());
  const auto dist = plane_distances(g, links_, &link_up_, plane, {src.value}, vertices());
  return dist[dst.index()] == kNone ? -1 : static_cast<int>(dist[dst.index()]);
}

// --- resources for flows ---

std::uint64_t Fabric::fresh_content_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void Fabric::set_routing(Routing r) {
  if (routing_ == r) return;
  routing_ = r;
  content_id_ = fresh_content_id();
}

void Fabric::set_link_up(LinkId l, bool up) {
  const std::uint8_t v = up ? 1 : 0;
  if (link_up_[l.index()] == v) return;
  link_up_[l.index()] = v;
  content_id_ = fresh_content_id();
  const Link& k = links_[l.index()];
  const std::size_t p = idx(k.plane);
  if (k.from.index() < chips() && attach_up_[p][k.from.index()] == l) chip_routing_[k.from.index()].up_alive[p] = v;
  if (k.to.index() < chips() && attach_down_[p][k.to.index()] == l) chip_routing_[k.to.index()].down_alive[p] = v;
  const std::uint32_t b = bundle_of_[l.index()];
  if (b != kNone) {
    double& cap = bundle_capacity_[b - links_.size()];
    cap += up ? links_[l.index()].bandwidth_bytes_per_s : -links_[l.index()].bandwidth_bytes_per_s;
    if (cap < 1e-6) cap = 0;
  }
}

double Fabric::resource_capacity(std::uint32_t r) const {
  if (r < links_.size()) return link_up_[r] ? links_[r].bandwidth_bytes_per_s : 0.0;
  return bundle_capacity_[r - links_.size()];
}

LinkClass Fabric::resource_class(std::uint32_t r) const {
  return r < links_.size() ? links_[r].link_class : bundle_class_[r - links_.size()];
}

Duration Fabric::resource_latency(std::uint32_t r) const {
  return r < links_.size() ? links_[r].latency : bundle_latency_[r - links_.size()];
}

Duration Fabric::resource_latency(const Route& r) const {
  Duration d = Duration::zero();
  for (LinkId l : r) d += resource_latency(l.value);
  return d;
}

std::vector<LinkId> Fabric::resource_links(std::uint32_t r) const {
  if (r < links_.size()) return {LinkId(r)};
  std::vector<LinkId> out;
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (bundle_of_[i] == r) out.emplace_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

bool Fabric::adaptive_route(ChipId src, ChipId dst, Plane plane, Route& out) const {
  out.hops = 0;
  out.plane = plane;
  const std::size_t p = idx(plane);
  const ChipRouting& s_route = chip_routing_[src.index()];
  const ChipRouting& d_route = chip_routing_[dst.index()];
  if (s_route.up[p] == kNone || d_route.down[p] == kNone || !s_route.up_alive[p] || !d_route.down_alive[p]) {
    return false;
  }
  const LinkId up(s_route.up[p]);
  const LinkId down(d_route.down[p]);
  // Climb both ends' group chains to their lowest common group: up bundles on the way up from
  // the source, down bundles (in reverse) on the way down to the destination.
  const auto L = static_cast<std::uint32_t>(links_.size());
  std::uint32_t a = s_route.group[p];
  std::uint32_t b = d_route.group[p];
  std::array<std::uint32_t, kMaxHops> downs{};
  int n_down = 0;
  out.links[out.hops++] = up;
  while (a != b) {
    const bool climb_a = group_level_[a] <= group_level_[b];
    const bool climb_b = group_level_[b] <= group_level_[a];
    if (climb_a) {
      if (group_parent_[a] == kNone || bundle_capacity_[2 * std::size_t{a}] <= 0 || out.hops >= kMaxHops - 2)
        return false;
      out.links[out.hops++] = LinkId(L + 2 * a);
      a = group_parent_[a];
    }
    if (climb_b) {
      if (group_parent_[b] == kNone || bundle_capacity_[2 * b + 1] <= 0 || n_down >= kMaxHops - 2) return false;
      downs[static_cast<std::size_t>(n_down++)] = L + 2 * b + 1;
      b = group_parent_[b];
    }
  }
  if (out.hops + n_down + 1 > kMaxHops) return false;
  for (int k = n_down - 1; k >= 0; --k) out.links[out.hops++] = LinkId(downs[static_cast<std::size_t>(k)]);
  out.links[out.hops++] = down;
  return true;
}

bool Fabric::flow_route(ChipId src, ChipId dst, std::uint64_t flow_label, Route& out) const {
  if (routing_ == Routing::kEcmp || !bundles_ok_ || src == dst) return route(src, dst, flow_label, out);
  const ChipRouting& a = chip_routing_[src.index()];
  const bool up_plane = a.domain == chip_routing_[dst.index()].domain && (a.mesh || a.up[0] != kNone);
  const Plane first = up_plane ? Plane::kScaleUp : Plane::kScaleOut;
  for (Plane plane : {first, first == Plane::kScaleUp ? Plane::kScaleOut : Plane::kScaleUp}) {
    if (plane == Plane::kScaleUp && a.mesh) {
      if (route_on(src, dst, plane, flow_label, out)) return true;
      continue;
    }
    if (adaptive_route(src, dst, plane, out)) return true;
  }
  return false;
}

// --- building ---

FabricBuilder::FabricBuilder(std::vector<ChipPlace> chips)
    : chips_(std::move(chips)), roles_(chips_.size(), SwitchRole::kChip) {}

VertexId FabricBuilder::add_switch(SwitchRole role) {
  roles_.push_back(role);
  return VertexId(static_cast<std::uint32_t>(roles_.size() - 1));
}

LinkId FabricBuilder::add_link(VertexId from, VertexId to, double bytes_per_s, Duration latency, Plane plane,
                               LinkClass cls) {
  links_.push_back(Link{from, to, bytes_per_s, latency, plane, cls});
  return LinkId(static_cast<std::uint32_t>(links_.size() - 1));
}

void FabricBuilder::add_cable(VertexId a, VertexId b, double bytes_per_s, Duration latency, Plane plane,
                              LinkClass cls) {
  add_link(a, b, bytes_per_s, latency, plane, cls);
  add_link(b, a, bytes_per_s, latency, plane, cls);
}

Fabric FabricBuilder::build() && {
  Fabric f;
  const std::size_t n_chips = chips_.size();
  const std::size_t n = roles_.size();
  auto fail = [](const std::string& what) { throw std::logic_error("fabric: " + what); };

  // Levels per plane by a multi-source breadth-first search from the chips (Boost.Graph).
  const CsrGraph csr = make_csr(links_, n);
  std::vector<std::uint32_t> sources(n_chips);
  for (std::size_t c = 0; c < n_chips; ++c) sources[c] = static_cast<std::uint32_t>(c);
  std::vector<std::uint8_t> level(n, kUnreached);
  std::vector<std::uint8_t> plane_of(n, kUnreached);
  for (int p = 0; p < kPlanes; ++p) {
    const auto dist = plane_distances(csr, links_, nullptr, static_cast<Plane>(p), sources, n);
    for (std::size_t v = n_chips; v < n; ++v) {
      if (dist[v] == kNone) continue;
      if (plane_of[v] != kUnreached) fail("a switch is reachable in both planes");
      if (dist[v] >= kUnreached) fail("too many levels");
      plane_of[v] = static_cast<std::uint8_t>(p);
      level[v] = static_cast<std::uint8_t>(dist[v]);
    }
  }
  for (std::size_t c = 0; c < n_chips; ++c) level[c] = 0;
  for (std::size_t v = n_chips; v < n; ++v) {
    if (level[v] == kUnreached) fail("a switch reaches no chip");
  }

  // Classify links; attachments and mesh links per chip.
  for (auto& a : f.attach_up_) a.assign(n_chips, LinkId());
  for (auto& a : f.attach_down_) a.assign(n_chips, LinkId());
  std::vector<std::uint32_t> up_count(n + 1, 0), down_count(n + 1, 0), mesh_count(n_chips + 1, 0);
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    const std::size_t a = l.from.index(), b = l.to.index();
    if (a >= n || b >= n || a == b) fail("a link with a bad end");
    const bool a_chip = a < n_chips, b_chip = b < n_chips;
    const LinkId id(static_cast<std::uint32_t>(i));
    const std::size_t p = static_cast<std::size_t>(l.plane);
    if (a_chip && b_chip) {
      if (l.plane != Plane::kScaleUp) fail("a chip-to-chip link outside the scale-up plane");
      if (chips_[a].domain != chips_[b].domain) fail("a mesh link between scale-up domains");
      ++mesh_count[a];
      continue;
    }
    if ((!a_chip && plane_of[a] != p) || (!b_chip && plane_of[b] != p)) fail("a link leaves its plane");
    if (level[b] == level[a] + 1) {
      ++up_count[a];
      if (a_chip) {
        if (f.attach_up_[p][a].valid()) fail("a chip attaches twice in one plane");
        f.attach_up_[p][a] = id;
      }
    } else if (level[a] == level[b] + 1) {
      ++down_count[a];
      if (b_chip) {
        if (f.attach_down_[p][b].valid()) fail("a chip is reached twice in one plane");
        f.attach_down_[p][b] = id;
      }
    } else {
      fail("a link between switches of the same level");
    }
  }
  for (int p = 0; p < kPlanes; ++p) {
    for (std::size_t c = 0; c < n_chips; ++c) {
      if (f.attach_up_[p][c].valid() != f.attach_down_[p][c].valid()) fail("a one-way attachment");
      if (f.attach_up_[p][c].valid() &&
          links_[f.attach_up_[p][c].index()].to != links_[f.attach_down_[p][c].index()].from) {
        fail("a chip's up and down attachments reach different switches");
      }
    }
  }

  // CSR of up, down and mesh links.
  auto prefix = [](std::vector<std::uint32_t>& counts) {
    std::uint32_t sum = 0;
    for (auto& c : counts) {
      const std::uint32_t v = c;
      c = sum;
      sum += v;
    }
  };
  prefix(up_count);
  prefix(down_count);
  prefix(mesh_count);
  f.up_begin_ = up_count;
  f.down_begin_ = down_count;
  f.mesh_begin_ = mesh_count;
  f.up_links_.resize(up_count.back());
  f.down_links_.resize(down_count.back());
  f.mesh_links_.resize(mesh_count.back());
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    const std::size_t a = l.from.index(), b = l.to.index();
    const LinkId id(static_cast<std::uint32_t>(i));
    if (a < n_chips && b < n_chips) {
      f.mesh_links_[mesh_count[a]++] = id;
    } else if (level[b] == level[a] + 1) {
      f.up_links_[up_count[a]++] = id;
    } else {
      f.down_links_[down_count[a]++] = id;
    }
  }

  // Level-1 ordinals and covers, level by level upwards.
  f.cover_lo_.assign(n, kNone);
  f.cover_hi_.assign(n, kNone);
  std::uint8_t top = 0;
  for (std::size_t v = n_chips; v < n; ++v) top = std::max(top, level[v]);
  for (int p = 0; p < kPlanes; ++p) {
    f.leaf_of_[p].assign(n_chips, kNone);
    for (std::size_t v = n_chips; v < n; ++v) {
      if (plane_of[v] == p && level[v] == 1) {
        const auto ord = static_cast<std::uint32_t>(f.level1_[p].size());
        f.cover_lo_[v] = ord;
        f.cover_hi_[v] = ord + 1;
        f.level1_[p].push_back(VertexId(static_cast<std::uint32_t>(v)));
      }
    }
    for (std::size_t c = 0; c < n_chips; ++c) {
      if (f.attach_up_[p][c].valid()) {
        f.leaf_of_[p][c] = f.cover_lo_[links_[f.attach_up_[p][c].index()].to.index()];
      }
    }
  }
  for (std::uint8_t lv = 2; lv <= top; ++lv) {
    for (std::size_t v = n_chips; v < n; ++v) {
      if (level[v] != lv) continue;
      auto* b = f.down_links_.data() + f.down_begin_[v];
      auto* e = f.down_links_.data() + f.down_begin_[v + 1];
      if (b == e) fail("a switch above level 1 without children");
      std::sort(b, e, [&](LinkId x, LinkId y) {
        const auto cx = links_[x.index()].to.index(), cy = links_[y.index()].to.index();
        return std::pair(f.cover_lo_[cx], x.value) < std::pair(f.cover_lo_[cy], y.value);
      });
      std::uint32_t lo = f.cover_lo_[links_[b->index()].to.index()];
      std::uint32_t hi = f.cover_hi_[links_[b->index()].to.index()];
      const std::uint32_t first_lo = lo;
      for (auto* it = b + 1; it != e; ++it) {
        const auto c = links_[it->index()].to.index();
        if (f.cover_lo_[c] == lo) {
          if (f.cover_hi_[c] != hi) fail("children covers overlap without being equal");
          continue;
        }
        if (f.cover_lo_[c] != hi) fail("a switch covers a non-contiguous set of level-1 switches");
        lo = f.cover_lo_[c];
        hi = f.cover_hi_[c];
      }
      f.cover_lo_[v] = first_lo;
      f.cover_hi_[v] = hi;
    }
  }

  // Tier groups (switches of one plane and level with one cover) and their bundles.
  {
    std::map<std::tuple<std::uint8_t, std::uint8_t, std::uint32_t, std::uint32_t>, std::uint32_t> ids;
    f.group_of_.assign(n, kNone);
    for (std::size_t v = n_chips; v < n; ++v) {
      const auto key = std::make_tuple(plane_of[v], level[v], f.cover_lo_[v], f.cover_hi_[v]);
      auto [it, fresh] = ids.emplace(key, static_cast<std::uint32_t>(f.group_plane_.size()));
      if (fresh) {
        f.group_plane_.push_back(plane_of[v]);
        f.group_level_.push_back(level[v]);
        f.group_lo_.push_back(f.cover_lo_[v]);
        f.group_hi_.push_back(f.cover_hi_[v]);
      }
      f.group_of_[v] = it->second;
    }
    const std::size_t G = f.group_plane_.size();
    f.group_parent_.assign(G, kNone);
    f.bundles_ok_ = true;
    f.bundle_of_.assign(links_.size(), kNone);
    f.bundle_capacity_.assign(2 * G, 0.0);
    f.bundle_class_.assign(2 * G, LinkClass::kScaleUp);
    f.bundle_latency_.assign(2 * G, Duration::zero());
    const auto L = static_cast<std::uint32_t>(links_.size());
    for (std::size_t i = 0; i < links_.size(); ++i) {
      const std::size_t a = links_[i].from.index(), b = links_[i].to.index();
      if (a < n_chips || b < n_chips) continue;  // chip links are their own resources
      // An up link belongs to its lower end's up bundle, a down link to its lower end's down one.
      const bool up = level[b] == level[a] + 1;
      const std::size_t lower = up ? a : b, upper = up ? b : a;
      const std::uint32_t g = f.group_of_[lower];
      const std::uint32_t pg = f.group_of_[upper];
      if (f.group_parent_[g] == kNone) f.group_parent_[g] = pg;
      if (f.group_parent_[g] != pg) f.bundles_ok_ = false;
      const std::uint32_t bundle = 2 * g + (up ? 0u : 1u);
      f.bundle_of_[i] = L + bundle;
      f.bundle_capacity_[bundle] += links_[i].bandwidth_bytes_per_s;
      f.bundle_class_[bundle] = links_[i].link_class;
      f.bundle_latency_[bundle] = links_[i].latency;
    }
    std::vector<std::uint32_t> counts(G + 1, 0);
    for (std::size_t g = 0; g < G; ++g) {
      if (f.group_parent_[g] != kNone) ++counts[f.group_parent_[g]];
    }
    f.child_begin_.assign(G + 1, 0);
    for (std::size_t g = 0; g < G; ++g) f.child_begin_[g + 1] = f.child_begin_[g] + counts[g];
    f.children_.resize(f.child_begin_[G]);
    std::vector<std::uint32_t> fill(f.child_begin_.begin(), f.child_begin_.end() - 1);
    for (std::size_t g = 0; g < G; ++g) {
      if (f.group_parent_[g] != kNone) f.children_[fill[f.group_parent_[g]]++] = static_cast<std::uint32_t>(g);
    }
    for (std::size_t g = 0; g < G; ++g) {
      auto* b = f.children_.data() + f.child_begin_[g];
      auto* e = f.children_.data() + f.child_begin_[g + 1];
      std::sort(b, e, [&](std::uint32_t x, std::uint32_t y) { return f.group_lo_[x] < f.group_lo_[y]; });
      for (auto* it = b; it + 1 < e; ++it) {
        if (f.group_hi_[*it] > f.group_lo_[*(it + 1)]) f.bundles_ok_ = false;  // overlapping children
      }
    }
  }

  f.chip_routing_.resize(n_chips);
  for (std::size_t c = 0; c < n_chips; ++c) {
    Fabric::ChipRouting& r = f.chip_routing_[c];
    r.domain = chips_[c].domain;
    r.mesh = f.mesh_begin_[c] != f.mesh_begin_[c + 1];
    for (int p = 0; p < kPlanes; ++p) {
      const LinkId up = f.attach_up_[p][c], down = f.attach_down_[p][c];
      r.up[p] = up.valid() ? up.value : kNone;
      r.down[p] = down.valid() ? down.value : kNone;
      r.up_alive[p] = r.down_alive[p] = 1;
      r.group[p] = up.valid() ? f.group_of_[links_[up.index()].to.index()] : kNone;
    }
  }

  f.links_ = std::move(links_);
  f.link_up_.assign(f.links_.size(), 1);
  f.level_ = std::move(level);
  f.role_ = std::move(roles_);
  f.places_ = std::move(chips_);
  f.content_id_ = Fabric::fresh_content_id();
  return f;
}

}  // namespace servesim::topologies
