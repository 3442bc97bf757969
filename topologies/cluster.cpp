#include "topologies/cluster.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace servesim::topologies {
namespace {

int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

int uplinks(int down, double oversubscription) {
  return std::max(1, static_cast<int>(std::ceil(down / oversubscription - 1e-9)));
}

std::string num(long long v) { return format_count(static_cast<std::int64_t>(v)); }

}  // namespace

std::string_view scale_up_kind_name(ScaleUpKind k) {
  switch (k) {
    case ScaleUpKind::kNone: return "none";
    case ScaleUpKind::kSwitch: return "switch";
    case ScaleUpKind::kFullMesh: return "full_mesh";
    case ScaleUpKind::kTwoLevelSwitch: return "two_level_switch";
  }
  return "?";
}

std::string_view failure_domain_name(FailureDomainLevel l) {
  switch (l) {
    case FailureDomainLevel::kNode: return "node";
    case FailureDomainLevel::kRack: return "rack";
    case FailureDomainLevel::kDomain: return "scale_up_domain";
  }
  return "?";
}

int round_up_chips(const ClusterSpec& spec, int chips) {
  const long long unit = std::lcm(static_cast<long long>(std::max(1, spec.node_chips)),
                                  static_cast<long long>(std::max(1, spec.scale_up.domain_chips)));
  const long long c = std::max(1, chips);
  return static_cast<int>((c + unit - 1) / unit * unit);
}

FatTreeShape fat_tree_shape(const ClusterSpec& spec) {
  FatTreeShape s;
  const ScaleOutSpec& o = spec.scale_out;
  if (!o.present || spec.chips <= 0 || o.chips_per_nic <= 0 || spec.node_chips <= 0) return s;
  s.nics = spec.chips / o.chips_per_nic;
  if (o.tiers == 1) {
    s.leaves = 1;
    return s;
  }
  const int rails = spec.node_chips / o.chips_per_nic;
  const int nodes = spec.chips / spec.node_chips;
  s.leaves = o.rail_optimized ? ceil_div(nodes, o.hosts_per_leaf) * rails : ceil_div(s.nics, o.hosts_per_leaf);
  s.leaf_uplinks = uplinks(o.hosts_per_leaf, o.leaf_oversubscription);
  if (o.tiers == 2) {
    s.spines = s.leaf_uplinks;
    s.pods = 1;
    return s;
  }
  s.pods = ceil_div(s.leaves, o.leaves_per_pod);
  s.spines = s.pods * s.leaf_uplinks;
  s.spine_uplinks = uplinks(o.leaves_per_pod, o.spine_oversubscription);
  s.cores = s.leaf_uplinks * s.spine_uplinks;
  return s;
}

std::vector<SpecProblem> validate_cluster(const ClusterSpec& spec) {
  std::vector<SpecProblem> out;
  auto bad = [&](std::string key, std::string message) { out.push_back({std::move(key), std::move(message)}); };
  const ScaleUpSpec& u = spec.scale_up;
  const ScaleOutSpec& o = spec.scale_out;
  if (spec.chips < 1 || spec.chips > 10'000'000) bad("chips", "must be between 1 and 10,000,000");
  if (spec.node_chips < 1 || spec.node_chips > 1024) bad("node_chips", "must be between 1 and 1,024");
  if (spec.nodes_per_rack < 1) bad("nodes_per_rack", "must be at least 1");
  if (!out.empty()) return out;

  if (u.kind == ScaleUpKind::kNone) {
    if (u.domain_chips != 1) bad("scale_up.domain_chips", "must be 1 without a scale-up fabric (kind: none)");
  } else {
    if (u.domain_chips < 2 || u.domain_chips > 100'000) {
      bad("scale_up.domain_chips", "must be between 2 and 100,000 chips");
    } else if (u.domain_chips % spec.node_chips != 0 && spec.node_chips % u.domain_chips != 0) {
      bad("scale_up.domain_chips", "a scale-up domain of " + num(u.domain_chips) +
                                       " chips neither holds whole nodes of " + num(spec.node_chips) +
                                       " nor divides one");
    }
    if (u.kind == ScaleUpKind::kFullMesh && u.domain_chips > 64) {
      bad("scale_up.domain_chips",
          "a full mesh joins every pair directly; more than 64 chips would "
          "need " +
              num(64LL * 63) + "+ links per domain: use kind: switch");
    }
    if (u.kind == ScaleUpKind::kTwoLevelSwitch && u.domain_chips % spec.node_chips != 0) {
      bad("scale_up.domain_chips",
          "two switch levels need whole nodes per domain (" + num(spec.node_chips) + " chips per node)");
    }
    if (!(u.chip_bandwidth.bytes_per_s > 0)) bad("scale_up.bandwidth", "must be greater than 0 B/s");
  }
  if (spec.chips % spec.node_chips != 0 || spec.chips % std::max(1, u.domain_chips) != 0) {
    bad("chips", num(spec.chips) + " chips is not a whole number of nodes (" + num(spec.node_chips) +
                     ") and scale-up domains (" + num(u.domain_chips) + ")");
  }
  if (!o.present) return out;

  if (o.tiers < 1 || o.tiers > 3) bad("scale_out.tiers", "must be 1, 2 or 3");
  if (o.chips_per_nic < 1 || spec.node_chips % o.chips_per_nic != 0) {
    bad("scale_out.chips_per_nic", "must divide the " + num(spec.node_chips) + " chips of a node");
  }
  if (o.hosts_per_leaf < 1) bad("scale_out.hosts_per_leaf", "must be at least 1");
  if (o.leaves_per_pod < 1) bad("scale_out.leaves_per_pod", "must be at least 1");
  if (!(o.leaf_oversubscription >= 1)) bad("scale_out.oversubscription", "must be at least 1 (down : up)");
  if (!(o.spine_oversubscription >= 1)) bad("scale_out.spine_oversubscription", "must be at least 1 (down : up)");
  if (!(o.nic_bandwidth.bytes_per_s > 0)) bad("scale_out.nic_bandwidth", "must be greater than 0 B/s");
  if (!(o.link_bandwidth.bytes_per_s > 0)) bad("scale_out.link_bandwidth", "must be greater than 0 B/s");
  if (!out.empty()) return out;

  const int rails = spec.node_chips / o.chips_per_nic;
  if (o.tiers == 3 && o.rail_optimized && o.leaves_per_pod % rails != 0) {
    bad("scale_out.leaves_per_pod", "a rail-optimised pod holds whole groups of " + num(rails) + " rail leaves; " +
                                        num(o.leaves_per_pod) + " is not a multiple of " + num(rails));
  }
  const FatTreeShape s = fat_tree_shape(spec);
  if (o.radix > 0) {
    if (o.tiers == 1 && s.nics > o.radix) {
      bad("scale_out.tiers",
          "one switch of radix " + num(o.radix) + " cannot take " + num(s.nics) + " NICs: use tiers: 2 or 3");
    }
    if (o.tiers >= 2 && o.hosts_per_leaf + s.leaf_uplinks > o.radix) {
      bad("scale_out.hosts_per_leaf", "a leaf needs " + num(o.hosts_per_leaf) + " down + " + num(s.leaf_uplinks) +
                                          " up ports, more than the radix " + num(o.radix));
    }
    if (o.tiers == 2 && s.leaves > o.radix) {
      bad("scale_out.tiers", "a two-tier fat tree of radix " + num(o.radix) + " joins at most " + num(o.radix) +
                                 " leaves (" + num(static_cast<long long>(o.radix) * o.hosts_per_leaf) + " NICs); " +
                                 num(s.nics) + " NICs need " + num(s.leaves) + " leaves: use tiers: 3");
    }
    if (o.tiers == 3 && o.leaves_per_pod + s.spine_uplinks > o.radix) {
      bad("scale_out.leaves_per_pod", "a spine needs " + num(o.leaves_per_pod) + " down + " + num(s.spine_uplinks) +
                                          " up ports, more than the radix " + num(o.radix));
    }
    if (o.tiers == 3 && s.pods > o.radix) {
      bad("scale_out.radix", "a core switch needs one port per pod: " + num(s.pods) + " pods of " +
                                 num(o.leaves_per_pod) + " leaves exceed the radix " + num(o.radix) +
                                 " (that fabric holds at most " +
                                 num(static_cast<long long>(o.radix) * o.leaves_per_pod * o.hosts_per_leaf) +
                                 " NICs): use a bigger radix or more hosts per leaf");
    }
  }
  return out;
}

Fabric build_fabric(const ClusterSpec& spec) {
  SERVESIM_CHECK_MSG(validate_cluster(spec).empty(), "build_fabric needs a valid spec");
  const ScaleUpSpec& u = spec.scale_up;
  const ScaleOutSpec& o = spec.scale_out;
  const int chips = spec.chips;
  const int rails = o.present ? spec.node_chips / o.chips_per_nic : 1;

  std::vector<ChipPlace> places(static_cast<std::size_t>(chips));
  for (int c = 0; c < chips; ++c) {
    ChipPlace& p = places[static_cast<std::size_t>(c)];
    p.node = static_cast<std::uint32_t>(c / spec.node_chips);
    p.rack = p.node / static_cast<std::uint32_t>(spec.nodes_per_rack);
    p.domain = static_cast<std::uint32_t>(c / u.domain_chips);
    p.rail = static_cast<std::uint32_t>((c % spec.node_chips) / (o.present ? o.chips_per_nic : spec.node_chips));
    switch (spec.failure_domain) {
      case FailureDomainLevel::kNode: p.failure_domain = p.node; break;
      case FailureDomainLevel::kRack: p.failure_domain = p.rack; break;
      case FailureDomainLevel::kDomain: p.failure_domain = p.domain; break;
    }
  }
  FabricBuilder b(std::move(places));
  auto chip = [&](int c) { return b.chip_vertex(ChipId(static_cast<std::uint32_t>(c))); };

  // Scale-up plane.
  const double ub = u.chip_bandwidth.bytes_per_s;
  const int domains = chips / u.domain_chips;
  for (int d = 0; d < domains && u.kind != ScaleUpKind::kNone; ++d) {
    const int first = d * u.domain_chips;
    switch (u.kind) {
      case ScaleUpKind::kSwitch: {
        const VertexId s = b.add_switch(SwitchRole::kScaleUp);
        for (int c = first; c < first + u.domain_chips; ++c) {
          b.add_cable(chip(c), s, ub, u.hop_latency, Plane::kScaleUp, LinkClass::kScaleUp);
        }
        break;
      }
      case ScaleUpKind::kFullMesh: {
        const double per_link = ub / (u.domain_chips - 1);
        for (int a = first; a < first + u.domain_chips; ++a) {
          for (int c = a + 1; c < first + u.domain_chips; ++c) {
            b.add_cable(chip(a), chip(c), per_link, u.hop_latency, Plane::kScaleUp, LinkClass::kScaleUp);
          }
        }
        break;
      }
      case ScaleUpKind::kTwoLevelSwitch: {
        std::vector<VertexId> l1;
        for (int c = first; c < first + u.domain_chips; c += spec.node_chips) {
          const VertexId s = b.add_switch(SwitchRole::kScaleUp);
          l1.push_back(s);
          for (int k = c; k < c + spec.node_chips; ++k) {
            b.add_cable(chip(k), s, ub, u.hop_latency, Plane::kScaleUp, LinkClass::kScaleUp);
          }
        }
        const VertexId l2 = b.add_switch(SwitchRole::kScaleUp);
        for (VertexId s : l1) {
          b.add_cable(s, l2, ub * spec.node_chips, u.hop_latency, Plane::kScaleUp, LinkClass::kScaleUp);
        }
        break;
      }
      case ScaleUpKind::kNone: break;
    }
  }

  // Scale-out plane: NICs (when shared), leaves, spines, cores.
  if (o.present) {
    const FatTreeShape s = fat_tree_shape(spec);
    const double nic = o.nic_bandwidth.bytes_per_s;
    const double link = o.link_bandwidth.bytes_per_s;
    const Duration lat = o.hop_latency;
    // The leaf each NIC hangs from.
    std::vector<int> leaf_of_nic(static_cast<std::size_t>(s.nics), 0);
    for (int n = 0; n < s.nics && o.tiers > 1; ++n) {
      leaf_of_nic[static_cast<std::size_t>(n)] =
          o.rail_optimized ? ((n / rails) / o.hosts_per_leaf) * rails + n % rails : n / o.hosts_per_leaf;
    }
    // The vertex each NIC port hangs from: the chip itself, or a shared NIC. Shared NICs are
    // created leaf by leaf so that every leaf covers a contiguous range of them.
    std::vector<VertexId> nic_vertex(static_cast<std::size_t>(s.nics));
    std::vector<int> by_leaf(static_cast<std::size_t>(s.nics));
    std::iota(by_leaf.begin(), by_leaf.end(), 0);
    std::stable_sort(by_leaf.begin(), by_leaf.end(), [&](int x, int y) {
      return leaf_of_nic[static_cast<std::size_t>(x)] < leaf_of_nic[static_cast<std::size_t>(y)];
    });
    for (int n : by_leaf) {
      if (o.chips_per_nic == 1) {
        nic_vertex[static_cast<std::size_t>(n)] = chip(n);
        continue;
      }
      const VertexId v = b.add_switch(SwitchRole::kNic);
      nic_vertex[static_cast<std::size_t>(n)] = v;
      for (int c = n * o.chips_per_nic; c < (n + 1) * o.chips_per_nic; ++c) {
        b.add_cable(chip(c), v, o.pcie_bandwidth.bytes_per_s, lat, Plane::kScaleOut, LinkClass::kNic);
      }
    }
    std::vector<VertexId> leaves(static_cast<std::size_t>(s.leaves));
    for (auto& l : leaves) l = b.add_switch(SwitchRole::kLeaf);
    for (int n = 0; n < s.nics; ++n) {
      b.add_cable(nic_vertex[static_cast<std::size_t>(n)],
                  leaves[static_cast<std::size_t>(leaf_of_nic[static_cast<std::size_t>(n)])], nic, lat,
                  Plane::kScaleOut, LinkClass::kNic);
    }
    if (o.tiers == 2) {
      std::vector<VertexId> spines(static_cast<std::size_t>(s.spines));
      for (auto& v : spines) v = b.add_switch(SwitchRole::kSpine);
      for (VertexId l : leaves) {
        for (VertexId v : spines) b.add_cable(l, v, link, lat, Plane::kScaleOut, LinkClass::kLeafSpine);
      }
    } else if (o.tiers == 3) {
      std::vector<VertexId> spines(static_cast<std::size_t>(s.spines));
      for (auto& v : spines) v = b.add_switch(SwitchRole::kSpine);
      // Pod p's spine j is spines[p x leaf_uplinks + j], in size_t: p < pods, j < leaf_uplinks, so
      // the index is below spines = pods x leaf_uplinks (an int), the same value as in int.
      const auto per_pod = static_cast<std::size_t>(s.leaf_uplinks);
      for (int l = 0; l < s.leaves; ++l) {
        const int pod = l / o.leaves_per_pod;
        for (int j = 0; j < s.leaf_uplinks; ++j) {
          b.add_cable(leaves[static_cast<std::size_t>(l)],
                      spines[static_cast<std::size_t>(pod) * per_pod + static_cast<std::size_t>(j)], link, lat,
                      Plane::kScaleOut, LinkClass::kLeafSpine);
        }
      }
      // Core (j, k) joins spine j of every pod.
      for (int j = 0; j < s.leaf_uplinks; ++j) {
        for (int k = 0; k < s.spine_uplinks; ++k) {
          const VertexId core = b.add_switch(SwitchRole::kCore);
          for (int pod = 0; pod < s.pods; ++pod) {
            b.add_cable(spines[static_cast<std::size_t>(pod) * per_pod + static_cast<std::size_t>(j)], core, link, lat,
                        Plane::kScaleOut, LinkClass::kSpineCore);
          }
        }
      }
    }
  }
  Fabric f = std::move(b).build();
  f.set_routing(o.present ? o.routing : Routing::kEcmp);
  return f;
}

std::shared_ptr<const Fabric> FabricCache::get(const ClusterSpec& spec) {
  if (auto fabric = kept_.find(spec)) return *fabric;
  auto fabric = std::make_shared<const Fabric>(build_fabric(spec));
  kept_.keep(spec, fabric);
  return fabric;
}

std::shared_ptr<const Fabric> shared_fabric(const ClusterSpec& spec, FabricCache* cache) {
  return cache != nullptr ? cache->get(spec) : std::make_shared<const Fabric>(build_fabric(spec));
}

}  // namespace servesim::topologies
