#include "topologies/placement.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "core/check.h"
#include "core/units.h"

namespace servesim::topologies {

// --- first version: contiguous stages on a two-tier fabric ---

std::vector<std::string> validate_placement(const FabricSpec& f, int tp, int pp) {
  std::vector<std::string> out;
  (void)pp;
  if (tp > f.scale_up_domain && tp % f.scale_up_domain != 0) {
    out.push_back("a tensor-parallel group of " + std::to_string(tp) + " chips is wider than the scale-up domain of " +
                  std::to_string(f.scale_up_domain) + " chips and must fill whole domains: use tp <= " +
                  std::to_string(f.scale_up_domain) + " or a multiple of it");
  }
  return out;
}

InstancePlacement place_instance(const FabricSpec& f, int tp, int pp) {
  InstancePlacement p;
  p.tp = f.scale_up;
  // Stage k occupies chips [k tp, (k + 1) tp) from the instance's first chip; a hop crosses the
  // scale-out network when its two stages sit in different domains.
  for (int k = 0; k + 1 < pp; ++k) {
    const bool crosses = (k * tp) / f.scale_up_domain != ((k + 1) * tp) / f.scale_up_domain;
    p.pp_hops.push_back(crosses ? f.scale_out : f.scale_up);
  }
  return p;
}

// --- groups ---

std::string_view group_name(GroupKind k) {
  switch (k) {
    case GroupKind::kTp: return "tensor-parallel";
    case GroupKind::kDp: return "data-parallel";
    case GroupKind::kEp: return "expert-parallel";
    case GroupKind::kMoe: return "MoE";
    case GroupKind::kCp: return "context-parallel";
    case GroupKind::kPp: return "pipeline";
  }
  return "?";
}

int group_size(const InstanceShape& s, GroupKind k) {
  switch (k) {
    case GroupKind::kTp: return s.tp;
    case GroupKind::kDp: return s.dp;
    case GroupKind::kEp: return s.ep;
    case GroupKind::kMoe: return s.tp * s.dp;
    case GroupKind::kCp: return s.cp;
    case GroupKind::kPp: return s.pp;
  }
  return 1;
}

int group_count(const InstanceShape& s, GroupKind k) { return s.chips() / group_size(s, k); }

std::vector<int> group_ranks(const InstanceShape& s, GroupKind k, int index) {
  SERVESIM_CHECK(s.valid() && index >= 0 && index < group_count(s, k));
  std::vector<int> out;
  const int M = s.tp * s.dp;  // a MoE group: one (stage, c) block
  auto rank = [&](int stage, int c, int d, int t) { return ((stage * s.cp + c) * s.dp + d) * s.tp + t; };
  switch (k) {
    case GroupKind::kTp: {  // index = (stage, c, d)
      const int stage = index / (s.cp * s.dp), c = (index / s.dp) % s.cp, d = index % s.dp;
      for (int t = 0; t < s.tp; ++t) out.push_back(rank(stage, c, d, t));
      break;
    }
    case GroupKind::kDp: {  // index = (stage, c, t)
      const int stage = index / (s.cp * s.tp), c = (index / s.tp) % s.cp, t = index % s.tp;
      for (int d = 0; d < s.dp; ++d) out.push_back(rank(stage, c, d, t));
      break;
    }
    case GroupKind::kCp: {  // index = (stage, d, t)
      const int stage = index / (s.dp * s.tp), d = (index / s.tp) % s.dp, t = index % s.tp;
      for (int c = 0; c < s.cp; ++c) out.push_back(rank(stage, c, d, t));
      break;
    }
    case GroupKind::kMoe: {  // index = (stage, c)
      for (int r = 0; r < M; ++r) out.push_back(index * M + r);
      break;
    }
    case GroupKind::kEp: {  // index = (stage, c, expert-TP rank m): ep ranks moe_tp apart
      const int block = index / s.moe_tp, m = index % s.moe_tp;
      for (int e = 0; e < s.ep; ++e) out.push_back(block * M + e * s.moe_tp + m);
      break;
    }
    case GroupKind::kPp: {  // index = position in a stage
      for (int stage = 0; stage < s.pp; ++stage) out.push_back(stage * s.stage_chips() + index);
      break;
    }
  }
  return out;
}

std::string_view policy_name(PlacementPolicy p) {
  switch (p) {
    case PlacementPolicy::kPack: return "pack";
    case PlacementPolicy::kRailAligned: return "rail_aligned";
    case PlacementPolicy::kSpread: return "spread";
    case PlacementPolicy::kExplicit: return "explicit";
  }
  return "?";
}

std::string format_chips(std::span<const ChipId> chips) {
  std::string out;
  std::size_t i = 0;
  while (i < chips.size()) {
    std::size_t j = i;
    while (j + 1 < chips.size() && chips[j + 1].value == chips[j].value + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(chips[i].value);
    if (j > i) out += "-" + std::to_string(chips[j].value);
    i = j + 1;
  }
  return out;
}

// --- the placement itself ---

std::span<const ChipId> ClusterPlacement::chips(int pool, int instance) const {
  const std::size_t p = static_cast<std::size_t>(pool);
  if (!placed_[placed_first_[p] + static_cast<std::size_t>(instance)]) return {};
  const std::size_t n = static_cast<std::size_t>(shapes_[p].chips());
  return std::span<const ChipId>(chips_.data() + first_[p] + n * static_cast<std::size_t>(instance), n);
}

std::vector<ChipId> ClusterPlacement::group(int pool, int instance, GroupKind kind, int index) const {
  const auto all = chips(pool, instance);
  std::vector<ChipId> out;
  if (all.empty()) return out;
  for (int r : group_ranks(shape(pool), kind, index)) out.push_back(all[static_cast<std::size_t>(r)]);
  return out;
}

InstanceRef ClusterPlacement::owner(ChipId c) const { return owner_[c.index()]; }
int ClusterPlacement::rank_of(ChipId c) const { return rank_[c.index()]; }

std::vector<InstanceRef> ClusterPlacement::instances_on(std::span<const ChipId> chips) const {
  std::vector<InstanceRef> out;
  for (ChipId c : chips) {
    if (c.index() < owner_.size() && owner_[c.index()].pool >= 0) out.push_back(owner_[c.index()]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool ClusterPlacement::has_errors() const {
  return std::any_of(issues_.begin(), issues_.end(), [](const PlacementIssue& i) { return i.error; });
}

namespace {

// Free chips and the allocation policies over them.
class ChipPool {
 public:
  explicit ChipPool(const Fabric& f) : f_(f), used_(f.chips(), 0) {
    // Nodes and domains are consecutive chip ranges of equal size.
    node_ = 0;
    while (static_cast<std::size_t>(node_) < f.chips() &&
           f.place(ChipId(static_cast<std::uint32_t>(node_))).node == 0) {
      ++node_;
    }
    domain_ = 0;
    while (static_cast<std::size_t>(domain_) < f.chips() &&
           f.place(ChipId(static_cast<std::uint32_t>(domain_))).domain == 0) {
      ++domain_;
    }
    nodes_ = static_cast<int>(f.chips()) / node_;
    std::uint32_t last = std::numeric_limits<std::uint32_t>::max();
    for (std::size_t c = 0; c < f.chips(); ++c) {
      const std::uint32_t fd = f.place(ChipId(static_cast<std::uint32_t>(c))).failure_domain;
      if (fd != last) fd_start_.push_back(static_cast<int>(c));
      last = fd;
    }
    fd_start_.push_back(static_cast<int>(f.chips()));
  }

  int chips() const { return static_cast<int>(used_.size()); }
  int free_chips() const { return chips() - static_cast<int>(std::count(used_.begin(), used_.end(), 1)); }
  bool used(int c) const { return used_[static_cast<std::size_t>(c)] != 0; }
  void take(int c) { used_[static_cast<std::size_t>(c)] = 1; }
  int failure_domains() const { return static_cast<int>(fd_start_.size()) - 1; }

  bool free_run(int lo, int len) const {
    for (int c = lo; c < lo + len; ++c) {
      if (used_[static_cast<std::size_t>(c)]) return false;
    }
    return true;
  }

  // Pack an instance of `size` chips within chips [lo, hi), starting the search at node `cursor`
  // (advanced past nodes that cannot take an instance of this size). Returns the first chip.
  std::optional<int> pack(int size, int tp, int lo, int hi, int& cursor) const {
    const int N = node_;
    if (size <= N) {
      const int align = N % size == 0 ? size : (N % tp == 0 ? tp : 1);
      for (int n = std::max(cursor, lo / N); n * N < hi; ++n) {
        bool any = false;
        for (int off = 0; off + size <= N; off += align) {
          const int first = n * N + off;
          if (first < lo || first + size > hi) continue;
          if (free_run(first, size)) return first;
          any = any || !used(first);
        }
        if (!any && n == cursor) ++cursor;
      }
      return std::nullopt;
    }
    // Whole nodes; inside one scale-up domain when the instance fits in one.
    const int k = (size + N - 1) / N;
    for (int n = std::max(cursor, lo / N); (n + k) * N <= hi; ++n) {
      const int first = n * N;
      if (size <= domain_ && first / domain_ != (first + size - 1) / domain_) continue;
      if (free_run(first, k * N)) return first;
    }
    return std::nullopt;
  }

  const Fabric& fabric() const { return f_; }
  int node_chips() const { return node_; }
  int nodes() const { return nodes_; }
  int fd_lo(int fd) const { return fd_start_[static_cast<std::size_t>(fd)]; }
  int fd_hi(int fd) const { return fd_start_[static_cast<std::size_t>(fd) + 1]; }

 private:
  const Fabric& f_;
  std::vector<std::uint8_t> used_;
  int node_ = 1, domain_ = 1, nodes_ = 0;
  std::vector<int> fd_start_;
};

std::string plural(long long n, const std::string& word) { return format_count(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

ClusterPlacement place_pools(const Fabric& fabric, std::span<const PoolPlacementSpec> pools) {
  ClusterPlacement out;
  ChipPool free(fabric);
  const std::size_t P = pools.size();
  out.owner_.assign(fabric.chips(), InstanceRef{});
  out.rank_.assign(fabric.chips(), -1);
  std::size_t total = 0, placed_total = 0;
  for (const auto& p : pools) {
    SERVESIM_CHECK(p.shape.valid() && p.instances >= 0);
    out.shapes_.push_back(p.shape);
    out.counts_.push_back(p.instances);
    out.first_.push_back(total);
    out.placed_first_.push_back(placed_total);
    total += static_cast<std::size_t>(p.shape.chips()) * static_cast<std::size_t>(p.instances);
    placed_total += static_cast<std::size_t>(p.instances);
  }
  out.chips_.assign(total, ChipId());
  out.placed_.assign(placed_total, 0);
  auto issue = [&](int pool, int instance, int list, bool error, std::string message) {
    out.issues_.push_back(PlacementIssue{pool, instance, list, error, std::move(message)});
  };
  auto assign = [&](std::size_t pool, int instance, const std::vector<int>& chips) {
    const std::size_t n = chips.size();
    for (std::size_t r = 0; r < n; ++r) {
      const int c = chips[r];
      free.take(c);
      out.chips_[out.first_[pool] + n * static_cast<std::size_t>(instance) + r] = ChipId(static_cast<std::uint32_t>(c));
      out.owner_[static_cast<std::size_t>(c)] = InstanceRef{static_cast<int>(pool), instance};
      out.rank_[static_cast<std::size_t>(c)] = static_cast<int>(r);
    }
    out.placed_[out.placed_first_[pool] + static_cast<std::size_t>(instance)] = 1;
  };

  if (total > fabric.chips()) {
    std::string need;
    for (std::size_t p = 0; p < P; ++p) {
      need += (p ? " + " : "") + format_count(pools[p].instances) + " x " + format_count(pools[p].shape.chips());
    }
    issue(-1, -1, -1, true,
          "the pools need " + plural(static_cast<long long>(total), "chip") + " (" + need + ") but the cluster has " +
              plural(static_cast<long long>(fabric.chips()), "chip"));
    return out;
  }

  // Explicit lists first: they claim exactly what they name.
  for (std::size_t p = 0; p < P; ++p) {
    const auto& spec = pools[p];
    if (spec.policy != PlacementPolicy::kExplicit) continue;
    const int pi = static_cast<int>(p);
    if (static_cast<int>(spec.chips.size()) != spec.instances) {
      issue(pi, -1, -1, true,
            "the explicit placement gives " + plural(static_cast<long long>(spec.chips.size()), "chip list") + " for " +
                plural(spec.instances, "instance") + "; give one list per instance");
      continue;
    }
    for (int i = 0; i < spec.instances; ++i) {
      const auto& list = spec.chips[static_cast<std::size_t>(i)];
      if (static_cast<int>(list.size()) != spec.shape.chips()) {
        issue(pi, i, i, true,
              "lists " + plural(static_cast<long long>(list.size()), "chip") + " but an instance has " +
                  plural(spec.shape.chips(), "chip") + " (tp x cp x dp x pp)");
        continue;
      }
      bool ok = true;
      std::set<std::uint32_t> seen;
      for (std::uint32_t c : list) {
        if (c >= fabric.chips()) {
          issue(pi, i, i, true,
                "chip " + std::to_string(c) + " does not exist: the cluster has chips 0-" +
                    std::to_string(fabric.chips() - 1));
          ok = false;
        } else if (!seen.insert(c).second) {
          issue(pi, i, i, true, "chip " + std::to_string(c) + " is listed twice");
          ok = false;
        } else if (free.used(static_cast<int>(c))) {
          const InstanceRef o = out.owner_[c];
          issue(pi, i, i, true,
                "chip " + std::to_string(c) + " is already given to " +
                    (o.pool == pi ? "instance " + std::to_string(o.instance) + " of this pool"
                                  : "instance " + std::to_string(o.instance) + " of pool '" +
                                        pools[static_cast<std::size_t>(o.pool)].name + "'"));
          ok = false;
        }
      }
      if (ok) assign(p, i, std::vector<int>(list.begin(), list.end()));
    }
  }

  // The policies.
  for (std::size_t p = 0; p < P; ++p) {
    const auto& spec = pools[p];
    if (spec.policy == PlacementPolicy::kExplicit) continue;
    const int pi = static_cast<int>(p);
    const InstanceShape& s = spec.shape;
    const int size = s.chips();
    const int N = free.node_chips();
    int cursor = 0;
    int next_fd = 0;
    std::vector<int> chips(static_cast<std::size_t>(size));
    for (int i = 0; i < spec.instances; ++i) {
      bool done = false;
      const int S = s.stage_chips();
      if (spec.policy == PlacementPolicy::kRailAligned && s.pp > 1 && S < N) {
        // Stage k on node (block + k), all at the same offset: one rail per stage position.
        const int align = N % S == 0 ? S : (N % s.tp == 0 ? s.tp : 1);
        for (int block = cursor; !done && block + s.pp <= free.nodes(); block += s.pp) {
          bool any = false;
          for (int off = 0; !done && off + S <= N; off += align) {
            bool fits = true;
            for (int k = 0; k < s.pp && fits; ++k) fits = free.free_run((block + k) * N + off, S);
            any = any || fits;
            if (!fits) continue;
            for (int k = 0; k < s.pp; ++k) {
              const std::size_t at = static_cast<std::size_t>(k) * static_cast<std::size_t>(S);  // stage k's first
              for (int q = 0; q < S; ++q) chips[at + static_cast<std::size_t>(q)] = (block + k) * N + off + q;
            }
            done = true;
          }
          if (!any && block == cursor) cursor += s.pp;
        }
      } else if (spec.policy == PlacementPolicy::kSpread && free.failure_domains() > 1) {
        const int F = free.failure_domains();
        for (int k = 0; k < F && !done; ++k) {
          const int fd = (next_fd + k) % F;
          if (free.fd_hi(fd) - free.fd_lo(fd) < size) break;  // instances bigger than a domain
          int c0 = free.fd_lo(fd) / N;
          if (auto first = free.pack(size, s.tp, free.fd_lo(fd), free.fd_hi(fd), c0)) {
            std::iota(chips.begin(), chips.end(), *first);
            next_fd = fd + 1;
            done = true;
          }
        }
      }
      if (!done && !(spec.policy == PlacementPolicy::kRailAligned && s.pp > 1 && S < N)) {
        if (auto first = free.pack(size, s.tp, 0, free.chips(), cursor)) {
          std::iota(chips.begin(), chips.end(), *first);
          done = true;
        }
      }
      if (!done) {
        issue(pi, i, -1, true,
              "cannot place instance " + std::to_string(i) + " of " + format_count(spec.instances) + " (" +
                  plural(size, "chip") + ", policy " + std::string(policy_name(spec.policy)) +
                  "): " + plural(free.free_chips(), "chip") + " are free but not in a fitting block");
        break;
      }
      assign(p, i, chips);
    }
  }

  // Checks of the groups the placement made.
  for (std::size_t p = 0; p < P; ++p) {
    const auto& spec = pools[p];
    const int pi = static_cast<int>(p);
    const bool error = spec.on_violation == ViolationAction::kError;
    const int domain_chips = [&] {
      int d = 0;
      while (static_cast<std::size_t>(d) < fabric.chips() &&
             fabric.place(ChipId(static_cast<std::uint32_t>(d))).domain == 0) {
        ++d;
      }
      return d;
    }();
    for (GroupKind kind : {GroupKind::kTp, GroupKind::kEp}) {
      const int gsize = group_size(spec.shape, kind);
      if (gsize <= 1) continue;
      // An EP group bigger than a domain leaves it by design; a TP group never should.
      if (kind == GroupKind::kEp && gsize > domain_chips) continue;
      int bad = 0, first_instance = -1;
      std::string example;
      for (int i = 0; i < spec.instances; ++i) {
        if (out.chips(pi, i).empty()) continue;
        for (int gi = 0; gi < group_count(spec.shape, kind); ++gi) {
          const auto g = out.group(pi, i, kind, gi);
          std::set<std::uint32_t> domains;
          for (ChipId c : g) domains.insert(fabric.place(c).domain);
          if (domains.size() <= 1) continue;
          if (bad++ == 0) {
            first_instance = i;
            example = "instance " + std::to_string(i) + ", " + std::string(group_name(kind)) + " group " +
                      std::to_string(gi) + " on chips " + format_chips(g) + " spans " +
                      plural(static_cast<long long>(domains.size()), "scale-up domain");
          }
          break;
        }
      }
      if (bad == 0) continue;
      const std::string what = kind == GroupKind::kTp
                                   ? "tensor-parallel group that spans scale-up domains, so its all-reduces cross the "
                                     "scale-out network"
                                   : "expert-parallel group of " + std::to_string(gsize) +
                                         " that leaves its scale-up domain of " + std::to_string(domain_chips) +
                                         " chips, so its all-to-all crosses the scale-out network";
      issue(pi, first_instance, spec.policy == PlacementPolicy::kExplicit ? first_instance : -1, error,
            plural(bad, "instance") + " of " + format_count(spec.instances) + " ha" + (bad == 1 ? "s" : "ve") + " a " +
                what + " (first: " + example + ")" +
                (error ? "; choose another placement or set on_violation: warn to accept it" : ""));
    }
  }
  return out;
}

}  // namespace servesim::topologies
