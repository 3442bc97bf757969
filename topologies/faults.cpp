#include "topologies/faults.h"

#include <algorithm>
#include <map>

#include "core/rng.h"
#include "core/units.h"

namespace servesim::topologies {
namespace {

// Cables: the link of each pair whose source has the lower vertex id.
std::vector<LinkId> cables(const Fabric& f) {
  std::vector<LinkId> out;
  for (std::size_t i = 0; i < f.link_count(); ++i) {
    const Link& l = f.link(LinkId(static_cast<std::uint32_t>(i)));
    if (l.from.value < l.to.value) out.emplace_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

LinkId reverse(const Fabric& f, LinkId l) {
  const Link& a = f.link(l);
  for (LinkId r : f.links_of(a.to)) {
    if (f.link(r).from == a.to && f.link(r).to == a.from) return r;
  }
  return LinkId();
}

std::vector<ChipId> node_chips(const Fabric& f, std::uint32_t node) {
  std::vector<ChipId> out;
  // Chips are numbered node by node.
  for (std::size_t c = 0; c < f.chips(); ++c) {
    if (f.place(ChipId(static_cast<std::uint32_t>(c))).node == node) out.emplace_back(static_cast<std::uint32_t>(c));
  }
  return out;
}

}  // namespace

std::string_view fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kChip: return "chip";
    case FaultKind::kNode: return "node";
    case FaultKind::kLink: return "link";
    case FaultKind::kSwitch: return "switch";
  }
  return "?";
}

std::size_t component_count(const Fabric& f, FaultKind k) {
  switch (k) {
    case FaultKind::kChip: return f.chips();
    case FaultKind::kNode: return f.counts().nodes;
    case FaultKind::kLink: return f.link_count() / 2;
    case FaultKind::kSwitch: return f.vertices() - f.chips();
  }
  return 0;
}

std::vector<FaultProblem> validate_faults(const Fabric& f, const FaultSpec& spec) {
  std::vector<FaultProblem> out;
  for (std::size_t i = 0; i < spec.scheduled.size(); ++i) {
    const auto& s = spec.scheduled[i];
    const std::size_t n = s.target.kind == FaultKind::kLink ? f.link_count() : component_count(f, s.target.kind);
    if (s.target.index >= n) {
      const std::string what = s.target.kind == FaultKind::kLink ? "link" : std::string(fault_kind_name(s.target.kind));
      out.push_back({static_cast<int>(i), -1,
                     what + " " + std::to_string(s.target.index) + " does not exist: the cluster has " +
                         format_count(static_cast<std::int64_t>(n)) + " " + what + (n == 1 ? "" : "s") +
                         (s.target.kind == FaultKind::kLink ? " (one per direction)" : "") + ", numbered from 0"});
    }
    if (s.recover_at && *s.recover_at <= s.at) {
      out.push_back({static_cast<int>(i), -1, "recovers before (or when) it fails"});
    }
  }
  for (std::size_t i = 0; i < spec.random.size(); ++i) {
    if (!(spec.random[i].mtbf_s > 0)) {
      out.push_back({-1, static_cast<int>(i), "the mean time between failures must be positive"});
    }
    if (component_count(f, spec.random[i].kind) == 0) {
      out.push_back(
          {-1, static_cast<int>(i), "the cluster has no " + std::string(fault_kind_name(spec.random[i].kind)) + "s"});
    }
  }
  return out;
}

std::vector<FaultEvent> fault_timeline(const Fabric& f, const FaultSpec& spec, SimTime horizon, std::uint64_t seed) {
  std::vector<FaultEvent> out;
  for (const auto& s : spec.scheduled) {
    if (s.at > horizon) continue;
    out.push_back(FaultEvent{s.at, s.target, false});
    if (s.recover_at && *s.recover_at <= horizon) out.push_back(FaultEvent{*s.recover_at, s.target, true});
  }
  const std::vector<LinkId> cable_list = cables(f);
  for (const auto& r : spec.random) {
    const std::size_t n = component_count(f, r.kind);
    if (n == 0) continue;
    Rng rng(seed, "faults/" + std::string(fault_kind_name(r.kind)));
    // The fleet fails at n / MTBF; each failure hits a component uniformly at random (the
    // superposition of n independent exponential clocks). A component already down is skipped.
    const double rate = static_cast<double>(n) / r.mtbf_s;
    std::map<std::uint32_t, SimTime> down_until;
    double t = 0;
    while (true) {
      t += rng.exponential(rate);
      if (t > horizon.to_seconds()) break;
      const SimTime at = SimTime::zero() + Duration::seconds(t);
      std::uint32_t index = static_cast<std::uint32_t>(rng.uniform_int(0, n - 1));
      if (r.kind == FaultKind::kLink) index = cable_list[index].value;
      auto it = down_until.find(index);
      if (it != down_until.end() && it->second > at) continue;
      const FaultTarget target{r.kind, index};
      out.push_back(FaultEvent{at, target, false});
      SimTime back = SimTime::never();  // not repaired within the horizon
      if (r.mttr_s) {
        const double back_s = t + rng.exponential(1.0 / *r.mttr_s);
        if (back_s <= horizon.to_seconds()) {
          back = SimTime::zero() + Duration::seconds(back_s);
          out.push_back(FaultEvent{back, target, true});
        }
      }
      down_until[index] = back;
    }
  }
  std::sort(out.begin(), out.end(), [](const FaultEvent& a, const FaultEvent& b) {
    if (a.at != b.at) return a.at < b.at;
    if (a.up != b.up) return a.up;  // recoveries first
    return a.target < b.target;
  });
  return out;
}

FaultEffect fault_effect(const Fabric& f, const FaultTarget& t) {
  FaultEffect e;
  auto add_vertex_links = [&](VertexId v) {
    for (LinkId l : f.links_of(v)) e.links.push_back(l);
  };
  switch (t.kind) {
    case FaultKind::kChip:
      e.dead_chips.emplace_back(t.index);
      add_vertex_links(VertexId(t.index));
      break;
    case FaultKind::kNode:
      e.dead_chips = node_chips(f, t.index);
      for (ChipId c : e.dead_chips) add_vertex_links(VertexId(c.value));
      break;
    case FaultKind::kLink: {
      const LinkId l(t.index);
      e.links.push_back(l);
      if (const LinkId r = reverse(f, l); r.valid()) e.links.push_back(r);
      break;
    }
    case FaultKind::kSwitch: add_vertex_links(VertexId(static_cast<std::uint32_t>(f.chips() + t.index))); break;
  }
  std::sort(e.links.begin(), e.links.end());
  e.links.erase(std::unique(e.links.begin(), e.links.end()), e.links.end());
  e.touched_chips = e.dead_chips;
  for (LinkId l : e.links) {
    for (VertexId v : {f.link(l).from, f.link(l).to}) {
      if (v.index() < f.chips()) e.touched_chips.emplace_back(v.value);
    }
  }
  std::sort(e.touched_chips.begin(), e.touched_chips.end());
  e.touched_chips.erase(std::unique(e.touched_chips.begin(), e.touched_chips.end()), e.touched_chips.end());
  return e;
}

std::string describe(const Fabric& f, const FaultTarget& t) {
  switch (t.kind) {
    case FaultKind::kChip: return "chip " + std::to_string(t.index);
    case FaultKind::kNode: return "node " + std::to_string(t.index);
    case FaultKind::kLink: {
      const Link& l = f.link(LinkId(t.index));
      return "link " + std::to_string(t.index) + " (" + std::string(link_class_name(l.link_class)) + ", vertex " +
             std::to_string(l.from.value) + " -> " + std::to_string(l.to.value) + ")";
    }
    case FaultKind::kSwitch: {
      const VertexId v(static_cast<std::uint32_t>(f.chips() + t.index));
      return std::string(role_name(f.role(v))) + " switch " + std::to_string(t.index);
    }
  }
  return "?";
}

}  // namespace servesim::topologies
