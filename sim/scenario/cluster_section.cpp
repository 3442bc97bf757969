#include <algorithm>
#include <set>

#include "sim/scenario/sections.h"

namespace servesim::scenario {
namespace {

using topologies::ClusterSpec;
using topologies::FaultKind;

// Remembers where each key of the section was given (for problems found after reading).
void remember(ClusterMarks& marks, MapReader& m, const std::string& prefix, std::string_view key) {
  if (auto f = m.find(key)) marks.keys.emplace_back(prefix + std::string(key), *f);
}

Field where(const ClusterMarks& marks, const std::string& key) {
  for (const auto& [k, f] : marks.keys) {
    if (k == key) return f;
  }
  return Field{YAML::Node(), marks.section.mark, marks.section.path + (key.empty() ? "" : "." + key)};
}

// `mapping_key: {...}` below `m`, read by `body`; an absent key reads as an empty mapping.
template <class Body>
bool sub_map(MapReader& m, std::string_view key, Body body) {
  auto f = m.find(key);
  MapReader s(m.doc(), f ? f->node : YAML::Node(), f ? f->mark : m.mark(), child_path(m.path(), key),
              m.echo()[std::string(key)]);
  const bool ok = body(s);
  s.finish();
  return ok && s.valid();
}

bool read_scale_up(MapReader& u, ClusterSpec& spec, ClusterMarks& marks) {
  bool ok = true;
  auto& s = spec.scale_up;
  static const std::vector<std::string_view> kinds = {"none", "switch", "full_mesh", "two_level_switch"};
  if (auto r = u.choice("kind", kinds, std::string(topologies::scale_up_kind_name(s.kind)))) {
    s.kind = static_cast<topologies::ScaleUpKind>(std::find(kinds.begin(), kinds.end(), *r) - kinds.begin());
  } else {
    ok = false;
  }
  remember(marks, u, "scale_up.", "domain_chips");
  if (auto r = u.integer("domain_chips", 1, 100'000, s.domain_chips))
    s.domain_chips = static_cast<int>(*r);
  else
    ok = false;
  remember(marks, u, "scale_up.", "bandwidth");
  if (auto r = u.quantity("bandwidth", Dimension::kBandwidth, 0, kInf, false, s.chip_bandwidth.bytes_per_s)) {
    s.chip_bandwidth = Bandwidth{*r};
  } else {
    ok = false;
  }
  if (auto r = u.duration("hop_latency", Duration::zero(), Duration::seconds(1), s.hop_latency))
    s.hop_latency = *r;
  else
    ok = false;
  return ok;
}

bool read_scale_out(MapReader& o, ClusterSpec& spec, ClusterMarks& marks) {
  bool ok = true;
  auto& s = spec.scale_out;
  if (auto r = o.choice("kind", {"fat_tree", "none"}, s.present ? "fat_tree" : "none"))
    s.present = *r == "fat_tree";
  else
    ok = false;
  auto integer = [&](std::string_view key, std::int64_t lo, std::int64_t hi, int& out) {
    remember(marks, o, "scale_out.", key);
    if (auto r = o.integer(key, lo, hi, out))
      out = static_cast<int>(*r);
    else
      ok = false;
  };
  auto bandwidth = [&](std::string_view key, Bandwidth& out) {
    remember(marks, o, "scale_out.", key);
    if (auto r = o.quantity(key, Dimension::kBandwidth, 0, kInf, false, out.bytes_per_s))
      out = Bandwidth{*r};
    else
      ok = false;
  };
  auto ratio = [&](std::string_view key, double& out) {
    remember(marks, o, "scale_out.", key);
    if (auto r = o.number(key, 1, 1024, false, out))
      out = *r;
    else
      ok = false;
  };
  integer("tiers", 1, 3, s.tiers);
  if (auto r = o.boolean("rail_optimized", s.rail_optimized))
    s.rail_optimized = *r;
  else
    ok = false;
  integer("chips_per_nic", 1, 1024, s.chips_per_nic);
  bandwidth("nic_bandwidth", s.nic_bandwidth);
  bandwidth("pcie_bandwidth", s.pcie_bandwidth);
  integer("hosts_per_leaf", 1, 100'000, s.hosts_per_leaf);
  ratio("oversubscription", s.leaf_oversubscription);
  integer("leaves_per_pod", 1, 100'000, s.leaves_per_pod);
  ratio("spine_oversubscription", s.spine_oversubscription);
  bandwidth("link_bandwidth", s.link_bandwidth);
  if (auto r = o.duration("hop_latency", Duration::zero(), Duration::seconds(1), s.hop_latency))
    s.hop_latency = *r;
  else
    ok = false;
  integer("radix", 0, 100'000, s.radix);
  if (auto r = o.choice("routing", {"adaptive", "ecmp"},
                        s.routing == topologies::Routing::kAdaptive ? "adaptive" : "ecmp")) {
    s.routing = *r == "adaptive" ? topologies::Routing::kAdaptive : topologies::Routing::kEcmp;
  } else {
    ok = false;
  }
  return ok;
}

std::optional<FaultKind> fault_kind(std::string_view name) {
  for (FaultKind k : {FaultKind::kChip, FaultKind::kNode, FaultKind::kLink, FaultKind::kSwitch}) {
    if (topologies::fault_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

bool read_faults(MapReader& faults, topologies::FaultSpec& out, ClusterMarks& marks) {
  bool ok = true;
  const std::vector<std::string_view> kinds = {"chip", "node", "link", "switch"};
  auto list = [&](std::string_view key) -> std::optional<Field> {
    auto f = faults.find(key);
    if (!f || f->node.IsNull()) {
      faults.echo()[std::string(key)] = Json::array();
      return std::nullopt;
    }
    if (!f->node.IsSequence()) {
      faults.doc().error(f->mark, f->path, "expected a list, got " + describe(f->node));
      ok = false;
      return std::nullopt;
    }
    faults.echo()[std::string(key)] = Json::array();
    return f;
  };
  if (auto events = list("events")) {
    for (std::size_t i = 0; i < events->node.size(); ++i) {
      const YAML::Node item = events->node[i];
      Json& echo = faults.echo()["events"].emplace_back(Json::object());
      MapReader e(faults.doc(), item, item.Mark(), index_path(events->path, i), echo);
      marks.events.push_back(Field{item, item.Mark(), e.path()});
      topologies::ScheduledFault s;
      bool good = e.valid();
      if (auto r = e.duration("at", Duration::zero(), kMaxDuration, std::nullopt))
        s.at = SimTime::zero() + *r;
      else
        good = false;
      // fail: {chip | node | link | switch: INDEX}, exactly one.
      if (auto ff = e.find("fail")) {
        MapReader t(faults.doc(), ff->node, ff->mark, ff->path, echo["fail"]);
        int given = 0;
        for (auto k : kinds) given += t.has(k) ? 1 : 0;
        if (t.valid() && given != 1) {
          faults.doc().error(t.mark(), t.path(),
                             "name exactly one component: {chip: N}, {node: N}, {link: N} or {switch: N}");
          good = false;
          t.ignore_unknown_keys();
        }
        for (auto k : kinds) {
          if (!t.has(k)) {
            t.find(k);
            continue;
          }
          if (auto r = t.integer(k, 0, 100'000'000, std::nullopt)) {
            s.target = topologies::FaultTarget{*fault_kind(k), static_cast<std::uint32_t>(*r)};
          } else {
            good = false;
          }
        }
        t.finish();
        good = good && t.valid();
      } else {
        e.missing("fail", "the component that fails, like {node: 3}");
        good = false;
      }
      const auto rf = e.find("recover");
      if (rf && !rf->node.IsNull()) {
        if (auto r = e.duration("recover", Duration::zero(), kMaxDuration, std::nullopt))
          s.recover_at = SimTime::zero() + *r;
        else
          good = false;
      } else {
        echo["recover"] = nullptr;
      }
      e.finish();
      if (good)
        out.scheduled.push_back(s);
      else
        ok = false;
    }
  }
  if (auto random = list("random")) {
    for (std::size_t i = 0; i < random->node.size(); ++i) {
      const YAML::Node item = random->node[i];
      Json& echo = faults.echo()["random"].emplace_back(Json::object());
      MapReader r(faults.doc(), item, item.Mark(), index_path(random->path, i), echo);
      marks.random.push_back(Field{item, item.Mark(), r.path()});
      topologies::RandomFaults rf;
      bool good = r.valid();
      if (auto k = r.choice("kind", kinds, std::nullopt))
        rf.kind = *fault_kind(*k);
      else
        good = false;
      // A mean time between failures per component: hours to years, so a quantity, not a Duration.
      if (auto v = r.quantity("mtbf", Dimension::kDuration, 0, kInf, false, std::nullopt))
        rf.mtbf_s = *v;
      else
        good = false;
      const auto mf = r.find("mttr");
      if (mf && !mf->node.IsNull()) {
        if (auto v = r.quantity("mttr", Dimension::kDuration, 0, kInf, false, std::nullopt))
          rf.mttr_s = *v;
        else
          good = false;
      } else {
        echo["mttr"] = nullptr;
      }
      r.finish();
      if (good)
        out.random.push_back(rf);
      else
        ok = false;
    }
  }
  return ok;
}

// Nodes a pool needs under its policy (placement.h): whole nodes per instance, or instances per
// node; instances of several nodes that fit a scale-up domain stay inside one.
long long nodes_needed(const ClusterSpec& spec, const cluster::PoolConfig& pool) {
  const topologies::InstanceShape shape = cluster::instance_shape(pool.plan);
  const long long node = spec.node_chips, domain = std::max(spec.scale_up.domain_chips, spec.node_chips);
  const long long c = shape.chips(), n = pool.instances;
  const long long S = shape.stage_chips();
  if (pool.placement.policy == topologies::PlacementPolicy::kRailAligned && shape.pp > 1 && S < node) {
    return shape.pp * ((n + node / S - 1) / (node / S));
  }
  if (c <= node) return (n + node / c - 1) / (node / c);
  const long long per = (c + node - 1) / node;
  if (c <= domain) {
    const long long per_domain = domain / (per * node);
    return (n + per_domain - 1) / per_domain * (domain / node);
  }
  return n * per;
}

}  // namespace

std::optional<ClusterRead> read_cluster(MapReader& top, ClusterMarks& marks) {
  auto f = top.find("cluster");
  if (!f || f->node.IsNull()) return std::nullopt;
  marks.present = true;
  marks.section = *f;
  // `cluster: NAME` reads as {preset: NAME} (a new node: assigning to f->node would rewrite it).
  const YAML::Node node = [&] {
    if (!f->node.IsScalar()) return f->node;
    YAML::Node map(YAML::NodeType::Map);
    map["preset"] = f->node.Scalar();
    return map;
  }();
  MapReader m(top.doc(), node, f->mark, f->path, top.echo()["cluster"]);
  if (!m.valid()) return std::nullopt;
  // Where the preset name was written. (Marks, not Fields: assigning one YAML::Node to another
  // rewrites the node it refers to.)
  YAML::Mark preset_mark = f->mark;
  if (!f->node.IsScalar()) {
    if (auto p = m.find("preset")) preset_mark = p->mark;
  }
  const auto names = topologies::cluster_preset_names();
  std::string list;
  for (auto n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  std::optional<std::string> preset;
  if (m.has("preset")) {
    preset = m.string("preset", std::nullopt);
  } else {
    m.find("preset");
    m.missing("preset", "the cluster to start from: " + list + "; any figure can be overridden next to it");
  }
  std::optional<ClusterSpec> spec;
  if (preset) {
    spec = topologies::cluster_preset(*preset, 1);
    if (!spec) {
      m.doc().error(preset_mark, child_path(m.path(), "preset"),
                    unknown_name("cluster preset", *preset, names, "presets"));
    }
  }
  if (!spec) {
    m.ignore_unknown_keys();
    m.finish();
    return std::nullopt;
  }
  ClusterRead out;
  out.spec = *spec;
  ClusterSpec& s = out.spec;
  bool ok = true;
  marks.chips = field_or(m, "chips");
  out.chips_given = m.has("chips");
  if (out.chips_given) {
    if (auto r = m.integer("chips", 1, 10'000'000, std::nullopt))
      s.chips = static_cast<int>(*r);
    else
      ok = false;
  } else {
    m.find("chips");
    m.echo()["chips"] = nullptr;  // sized for the deployment by place_on_cluster
  }
  remember(marks, m, "", "node_chips");
  if (auto r = m.integer("node_chips", 1, 1024, s.node_chips))
    s.node_chips = static_cast<int>(*r);
  else
    ok = false;
  remember(marks, m, "", "nodes_per_rack");
  if (auto r = m.integer("nodes_per_rack", 1, 100'000, s.nodes_per_rack))
    s.nodes_per_rack = static_cast<int>(*r);
  else
    ok = false;
  if (auto r = m.choice("failure_domain", {"node", "rack", "scale_up_domain"},
                        std::string(topologies::failure_domain_name(s.failure_domain)))) {
    s.failure_domain = *r == "node"   ? topologies::FailureDomainLevel::kNode
                       : *r == "rack" ? topologies::FailureDomainLevel::kRack
                                      : topologies::FailureDomainLevel::kDomain;
  } else {
    ok = false;
  }
  ok = sub_map(m, "scale_up", [&](MapReader& u) { return read_scale_up(u, s, marks); }) && ok;
  ok = sub_map(m, "scale_out", [&](MapReader& o) { return read_scale_out(o, s, marks); }) && ok;
  ok = sub_map(m, "faults", [&](MapReader& fl) { return read_faults(fl, out.faults, marks); }) && ok;
  m.finish();
  if (!ok || !m.valid()) return std::nullopt;
  return out;
}

void read_placement(MapReader& pool, cluster::PoolConfig& p, PoolMarks& marks) {
  auto f = pool.find("placement");
  marks.placement_given = f.has_value() && !f->node.IsNull();
  marks.placement = f ? *f : Field{YAML::Node(), pool.mark(), child_path(pool.path(), "placement")};
  MapReader m(pool.doc(), f ? f->node : YAML::Node(), f ? f->mark : pool.mark(), child_path(pool.path(), "placement"),
              pool.echo()["placement"]);
  bool ok = m.valid();
  p.placement.name = p.name;
  static const std::vector<std::string_view> policies = {"pack", "rail_aligned", "spread", "explicit"};
  const auto policy = m.choice("policy", policies, "pack");
  if (policy) {
    p.placement.policy = static_cast<topologies::PlacementPolicy>(std::find(policies.begin(), policies.end(), *policy) -
                                                                  policies.begin());
  } else {
    ok = false;
  }
  if (auto r = m.choice("on_violation", {"error", "warn"}, "error")) {
    p.placement.on_violation = *r == "error" ? topologies::ViolationAction::kError : topologies::ViolationAction::kWarn;
  } else {
    ok = false;
  }
  auto cf = m.find("chips");
  if (policy == "explicit") {
    if (!cf) {
      m.missing("chips", "one list of chip numbers per instance, in rank order, like [[0, 1], [2, 3]]");
      ok = false;
    } else if (!cf->node.IsSequence()) {
      m.doc().error(cf->mark, cf->path, "expected a list of chip lists, got " + describe(cf->node));
      ok = false;
    } else {
      Json& echo = m.echo()["chips"] = Json::array();
      for (std::size_t i = 0; i < cf->node.size(); ++i) {
        const YAML::Node item = cf->node[i];
        const std::string path = index_path(cf->path, i);
        marks.placement_lists.push_back(Field{item, item.Mark(), path});
        std::vector<std::uint32_t> chips;
        Json row = Json::array();
        if (!item.IsSequence()) {
          m.doc().error(item.Mark(), path, "expected a list of chip numbers, got " + describe(item));
          ok = false;
          continue;
        }
        for (std::size_t k = 0; k < item.size(); ++k) {
          const YAML::Node c = item[k];
          std::int64_t v = -1;
          const std::string text = c.IsScalar() ? c.Scalar() : "";
          const bool number =
              !text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() < 10;
          if (number) v = std::stoll(text);
          if (!number || v >= 100'000'000) {
            m.doc().error(c.Mark(), index_path(path, k), "expected a chip number (0 or more), got " + describe(c));
            ok = false;
            continue;
          }
          chips.push_back(static_cast<std::uint32_t>(v));
          row.push_back(v);
        }
        p.placement.chips.push_back(std::move(chips));
        echo.push_back(std::move(row));
      }
    }
  } else if (cf) {
    m.doc().error(cf->mark, cf->path,
                  "chip lists go with policy: explicit (this pool's policy is " + policy.value_or("unknown") + ")");
    ok = false;
  }
  m.finish();
  marks.placement_ok = ok && m.valid();
}

void place_on_cluster(Document& doc, const std::vector<cluster::PoolConfig>& pool_configs,
                      const std::optional<ClusterRead>& read, const ClusterMarks& marks,
                      const std::vector<const PoolMarks*>& pools, Json& echo,
                      std::optional<cluster::ClusterConfig>& out) {
  if (!marks.present) {
    for (std::size_t i = 0; i < pools.size(); ++i) {
      if (pools[i]->placement_given) {
        doc.error(pools[i]->placement.mark, pools[i]->placement.path,
                  "a placement needs a cluster: section (the chips and fabric to place on), e.g. "
                  "cluster: {preset: h100-superpod}");
      }
    }
    // Without a cluster the resolved scenario has no placements (it must load back as given).
    if (echo.contains("deployment") && echo["deployment"].contains("pools")) {
      for (auto& p : echo["deployment"]["pools"]) p.erase("placement");
    }
    return;
  }
  // Build and place only a scenario without other problems (they would make the sizes wrong).
  if (!read || doc.has_errors()) return;
  for (const PoolMarks* m : pools) {
    if (!m->all_ok || !m->placement_ok) return;
  }
  ClusterRead r = *read;
  ClusterSpec& spec = r.spec;
  // Size: as given (whole nodes and domains), or what the deployment needs.
  if (r.chips_given) {
    spec.chips = topologies::round_up_chips(spec, spec.chips);
  } else {
    long long nodes = 0, explicit_end = 0;
    for (const auto& p : pool_configs) {
      nodes += nodes_needed(spec, p);
      for (const auto& list : p.placement.chips) {
        for (std::uint32_t c : list) explicit_end = std::max<long long>(explicit_end, c + 1LL);
      }
    }
    const long long want = std::max(nodes * spec.node_chips, explicit_end);
    spec.chips = topologies::round_up_chips(spec, static_cast<int>(std::min<long long>(want, 10'000'000)));
  }
  echo["cluster"]["chips"] = spec.chips;
  bool ok = true;
  for (const auto& problem : topologies::validate_cluster(spec)) {
    const Field f = problem.key == "chips" ? marks.chips : where(marks, problem.key);
    doc.error(f.mark, f.path, problem.message);
    ok = false;
  }
  if (!ok) return;
  std::shared_ptr<const topologies::Fabric> fabric =
      topologies::shared_fabric(spec, doc.caches != nullptr ? &doc.caches->fabrics : nullptr);
  for (const auto& problem : topologies::validate_faults(*fabric, r.faults)) {
    const Field& f = problem.scheduled >= 0 ? marks.events[static_cast<std::size_t>(problem.scheduled)]
                                            : marks.random[static_cast<std::size_t>(problem.random)];
    doc.error(f.mark, f.path,
              problem.message + (r.chips_given ? ""
                                               : " (the cluster was sized for the deployment: set "
                                                 "cluster.chips for a bigger one)"));
    ok = false;
  }
  std::vector<topologies::PoolPlacementSpec> specs;
  for (const auto& p : pool_configs) {
    topologies::PoolPlacementSpec ps = p.placement;
    ps.name = p.name;
    ps.shape = cluster::instance_shape(p.plan);
    ps.instances = p.instances;
    specs.push_back(std::move(ps));
  }
  topologies::ClusterPlacement placement = topologies::place_pools(*fabric, specs);
  for (const auto& issue : placement.issues()) {
    const Field* f = &marks.chips;
    if (issue.pool >= 0) {
      const PoolMarks& pm = *pools[static_cast<std::size_t>(issue.pool)];
      f = issue.list >= 0 && static_cast<std::size_t>(issue.list) < pm.placement_lists.size()
              ? &pm.placement_lists[static_cast<std::size_t>(issue.list)]
              : (pm.placement_given ? &pm.placement : &pm.pool);
    }
    if (issue.error) {
      doc.error(f->mark, f->path, issue.message);
      ok = false;
    } else {
      doc.warn(f->mark, f->path, issue.message);
    }
  }
  for (std::size_t i = 0; i < pool_configs.size(); ++i) {
    const auto& p = pool_configs[i];
    if (p.chip.scale_up_domain != spec.scale_up.domain_chips) {
      doc.warn(pools[i]->chip.mark, pools[i]->chip.path,
               "the chip's scale-up domain (" + std::to_string(p.chip.scale_up_domain) +
                   " chips) differs from the cluster's (" + std::to_string(spec.scale_up.domain_chips) + " in " +
                   spec.name +
                   "): iteration costs still use the chip's links until the serving "
                   "model prices communication on the cluster graph");
    }
  }
  if (!ok) return;
  out = cluster::ClusterConfig{spec, std::move(fabric), std::move(placement), r.faults};
}

}  // namespace servesim::scenario
