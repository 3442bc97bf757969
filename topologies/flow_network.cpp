#include "topologies/flow_network.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"

namespace servesim::topologies {
namespace {

constexpr double kPsPerS = 1e12;
constexpr double kTolerance = 1e-9;  // relative to a link's capacity

// Min-heap order for the filling: smallest share first, then the lower link id.
struct FillAfter {
  bool operator()(const std::pair<double, std::uint32_t>& a, const std::pair<double, std::uint32_t>& b) const {
    return a.first > b.first || (a.first == b.first && a.second > b.second);
  }
};

}  // namespace

FlowNetwork::FlowNetwork(Fabric& fabric, Options options) : FlowNetwork(std::as_const(fabric), options) {
  faulty_fabric_ = &fabric;
}

FlowNetwork::FlowNetwork(const Fabric& fabric, Options options) : fabric_(fabric), options_(options) {
  SERVESIM_CHECK(options_.utilization_bin > Duration::zero() && options_.max_bins >= 2);
  const std::size_t R = fabric.resource_count();
  link_.resize(R);
  for (std::uint32_t r = 0; r < R; ++r) link_[r].capacity = fabric.resource_capacity(r);
  if (options_.track_utilization) {
    link_bytes_.assign(R, 0.0);
    link_class_.resize(R);
    for (std::uint32_t r = 0; r < R; ++r) link_class_[r] = static_cast<std::uint8_t>(fabric.resource_class(r));
  }
  for (auto& s : series_) s.bin = options_.utilization_bin;
}

// --- slots and link lists ---

std::uint32_t FlowNetwork::new_slot() {
  if (!free_slots_.empty()) {
    const std::uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  const auto s = static_cast<std::uint32_t>(hot_.size());
  hot_.emplace_back();
  remaining_.push_back(0);
  size_.push_back(0);
  cap_.push_back(0);
  credited_.push_back(0);
  last_ps_.push_back(0);
  finish_ps_.push_back(0);
  generation_.push_back(0);
  heap_pos_.push_back(kNone);
  tag_.push_back(0);
  label_.push_back(0);
  src_.emplace_back();
  dst_.emplace_back();
  live_.push_back(0);
  stalled_.push_back(0);
  return s;
}

void FlowNetwork::link_insert(std::uint32_t f) {
  FlowHot& fh = hot_[f];
  const bool grouped = !link_group_.empty();
  if (grouped) {
    for (std::uint32_t h = 0; h < fh.hops; ++h) {
      if (link_group_[fh.links[h].value] != kNone) sync_reserve(fh.links[h].value);
    }
  }
  // The flow's cap: the slowest link of its route.
  double cap = std::numeric_limits<double>::infinity();
  for (std::uint32_t h = 0; h < fh.hops; ++h) cap = std::min(cap, link_[fh.links[h].value].capacity);
  cap_[f] = cap;
  for (std::uint32_t h = 0; h < fh.hops; ++h) {
    LinkHot& lk = link_[fh.links[h].value];
    lk.demand += cap;
    lk.load += fh.rate;
    const std::uint32_t e = f * kMaxHops + h;
    fh.next[h] = lk.head;
    fh.prev[h] = kNone;
    if (lk.head != kNone) hot_[lk.head / kMaxHops].prev[lk.head % kMaxHops] = e;
    lk.head = e;
    if (grouped && link_group_[fh.links[h].value] != kNone) ++groups_[link_group_[fh.links[h].value]].carried;
  }
}

void FlowNetwork::link_remove(std::uint32_t f) {
  FlowHot& fh = hot_[f];
  const bool grouped = !link_group_.empty();
  for (std::uint32_t h = 0; h < fh.hops; ++h) {
    LinkHot& lk = link_[fh.links[h].value];
    if (grouped && link_group_[fh.links[h].value] != kNone) --groups_[link_group_[fh.links[h].value]].carried;
    lk.demand -= cap_[f];
    lk.load -= fh.rate;
    const std::uint32_t p = fh.prev[h], n = fh.next[h];
    if (p != kNone)
      hot_[p / kMaxHops].next[p % kMaxHops] = n;
    else
      lk.head = n;
    if (n != kNone) hot_[n / kMaxHops].prev[n % kMaxHops] = p;
    if (lk.head == kNone) lk.demand = lk.load = 0;  // exact when empty
    fh.next[h] = fh.prev[h] = kNone;
  }
}

// --- the completion heap ---

// A 4-ary heap of (finish time, slot): comparisons read only the heap's own entries.
bool FlowNetwork::heap_less(const HeapEntry& a, const HeapEntry& b) {
  return a.finish_ps < b.finish_ps || (a.finish_ps == b.finish_ps && a.slot < b.slot);
}

void FlowNetwork::heap_sift_up(std::size_t i) {
  const HeapEntry x = heap_[i];
  while (i > 0) {
    const std::size_t p = (i - 1) / 4;
    if (!heap_less(x, heap_[p])) break;
    heap_[i] = heap_[p];
    heap_pos_[heap_[i].slot] = static_cast<std::uint32_t>(i);
    i = p;
  }
  heap_[i] = x;
  heap_pos_[x.slot] = static_cast<std::uint32_t>(i);
}

void FlowNetwork::heap_sift_down(std::size_t i) {
  const HeapEntry x = heap_[i];
  const std::size_t n = heap_.size();
  while (true) {
    const std::size_t first = 4 * i + 1;
    if (first >= n) break;
    std::size_t c = first;
    const std::size_t last = std::min(first + 4, n);
    for (std::size_t k = first + 1; k < last; ++k) {
      if (heap_less(heap_[k], heap_[c])) c = k;
    }
    if (!heap_less(heap_[c], x)) break;
    heap_[i] = heap_[c];
    heap_pos_[heap_[i].slot] = static_cast<std::uint32_t>(i);
    i = c;
  }
  heap_[i] = x;
  heap_pos_[x.slot] = static_cast<std::uint32_t>(i);
}

void FlowNetwork::heap_remove(std::uint32_t f) {
  const std::uint32_t i = heap_pos_[f];
  if (i == kNone) return;
  heap_pos_[f] = kNone;
  const HeapEntry last = heap_.back();
  heap_.pop_back();
  if (last.slot == f) return;
  heap_[i] = last;
  heap_pos_[last.slot] = i;
  heap_sift_up(i);
  heap_sift_down(heap_pos_[last.slot]);
}

void FlowNetwork::heap_update(std::uint32_t f) {
  if (finish_ps_[f] == SimTime::never().ps()) {
    heap_remove(f);
    return;
  }
  if (heap_pos_[f] == kNone) {
    heap_.push_back(HeapEntry{finish_ps_[f], f});
    heap_sift_up(heap_.size() - 1);
    return;
  }
  const std::uint32_t i = heap_pos_[f];
  const bool earlier = finish_ps_[f] < heap_[i].finish_ps;
  heap_[i].finish_ps = finish_ps_[f];
  if (earlier)
    heap_sift_up(i);
  else
    heap_sift_down(i);
}

// --- utilization ---

void FlowNetwork::add_class_bytes(std::size_t cls, std::int64_t t0, std::int64_t t1) {
  LinkUsageSeries& s = series_[cls];
  const double load = class_load_[cls];
  while (t0 < t1) {
    const std::int64_t w = s.bin.ps();
    const auto b = static_cast<std::size_t>(t0 / w);
    if (b >= options_.max_bins) {
      // Merge pairs: half as many bins, twice as wide.
      for (std::size_t i = 0; i < s.bytes.size(); ++i) {
        s.bytes[i / 2] = (i % 2 == 0 ? 0.0 : s.bytes[i / 2]) + s.bytes[i];
      }
      s.bytes.resize((s.bytes.size() + 1) / 2);
      s.bin = s.bin * 2;
      continue;
    }
    if (s.bytes.size() <= b) s.bytes.resize(b + 1, 0.0);
    const std::int64_t end = std::min<std::int64_t>(t1, static_cast<std::int64_t>(b + 1) * w);
    s.bytes[b] += load * static_cast<double>(end - t0) / kPsPerS;
    t0 = end;
  }
}

void FlowNetwork::flush_classes(SimTime now) {
  if (!options_.track_utilization) return;
  for (std::size_t c = 0; c < kClasses; ++c) {
    if (class_delta_[c] == 0) continue;
    advance_class(c, now);
    class_load_[c] = std::max(0.0, class_load_[c] + class_delta_[c]);
    class_delta_[c] = 0;
  }
}

void FlowNetwork::credit_links(std::uint32_t f) {
  if (!options_.track_utilization) return;
  const double delivered = size_[f] - remaining_[f];
  const double delta = delivered - credited_[f];
  credited_[f] = delivered;
  const FlowHot& fh = hot_[f];
  for (std::uint32_t h = 0; h < fh.hops; ++h) link_bytes_[fh.links[h].value] += delta;
}

void FlowNetwork::account_until(SimTime now) {
  SERVESIM_CHECK_MSG(options_.track_utilization, "account_until on a network that tracks no utilization");
  touch(now);
  flush();
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f]) continue;
    remaining_[f] = std::max(0.0, remaining_[f] - hot_[f].rate * static_cast<double>(now.ps() - last_ps_[f]) / kPsPerS);
    last_ps_[f] = now.ps();
    credit_links(f);
  }
  for (std::size_t c = 0; c < kClasses; ++c) advance_class(c, now);
}

double FlowNetwork::link_bytes(LinkId l) const {
  SERVESIM_CHECK_MSG(options_.track_utilization, "link_bytes on a network that tracks no utilization");
  return link_bytes_[l.index()];
}

const LinkUsageSeries& FlowNetwork::class_usage(LinkClass c) const {
  SERVESIM_CHECK_MSG(options_.track_utilization, "class_usage on a network that tracks no utilization");
  return series_[static_cast<std::size_t>(c)];
}

double FlowNetwork::link_load(LinkId l) {
  flush();
  double load = 0;
  for (std::uint32_t e = link_[l.index()].head; e != kNone;) {
    load += hot_[e / kMaxHops].rate;
    e = hot_[e / kMaxHops].next[e % kMaxHops];
  }
  return load;
}

// --- rates ---

void FlowNetwork::set_rate(std::uint32_t f, double rate, SimTime now) {
  FlowHot& fh = hot_[f];
  remaining_[f] -= fh.rate * static_cast<double>(now.ps() - last_ps_[f]) / kPsPerS;
  if (remaining_[f] < 0) remaining_[f] = 0;
  last_ps_[f] = now.ps();
  const double delta = rate - fh.rate;
  if (delta != 0) {
    const bool track = options_.track_utilization;
    for (std::uint32_t h = 0; h < fh.hops; ++h) {
      const std::uint32_t l = fh.links[h].value;
      link_[l].load += delta;
      if (track) class_delta_[link_class_[l]] += delta;
    }
  }
  fh.rate = rate;
  if (rate > 0) {
    const double ps = std::ceil(remaining_[f] / rate * kPsPerS);
    finish_ps_[f] = now.ps() + static_cast<std::int64_t>(std::min(ps, 9.0e18 - static_cast<double>(now.ps())));
  } else {
    finish_ps_[f] = remaining_[f] > 0 ? SimTime::never().ps() : now.ps();
  }
  heap_update(f);
}

void FlowNetwork::set_bottleneck(FlowHot& f, std::uint32_t link) {
  if (f.bottleneck < kCap) --link_[f.bottleneck].bottlenecked;
  f.bottleneck = link;
  if (link < kCap) ++link_[link].bottlenecked;
}

void FlowNetwork::add_bottlenecked_flows(std::uint32_t l) {
  const std::uint32_t in_set = 2 * epoch_;
  for (std::uint32_t e = link_[l].head; e != kNone;) {
    FlowHot& g = hot_[e / kMaxHops];
    if (g.bottleneck == l && g.mark != in_set) {
      g.mark = in_set;
      set_.push_back(e / kMaxHops);
    }
    e = g.next[e % kMaxHops];
  }
}

void FlowNetwork::solve() {
  const std::uint32_t in_set = 2 * epoch_;
  // Residual capacity of every active link S touches, with the flows outside S held at their
  // rates. (Passive links cannot bind and are not visited.)
  for (std::uint32_t i = 0; i < links_.size(); ++i) {
    const std::uint32_t l = links_[i];
    const LinkHot& lk = link_[l];
    double residual = lk.capacity;
    std::uint32_t count = 0, outsiders = 0;
    for (std::uint32_t e = lk.head; e != kNone;) {
      const FlowHot& g = hot_[e / kMaxHops];
      if (g.mark == in_set) {
        ++count;
      } else {
        residual -= g.rate;
        ++outsiders;
      }
      e = g.next[e % kMaxHops];
    }
    LinkScratch& sc = scratch_[i];
    sc.overloaded = residual < -kTolerance * lk.capacity;
    sc.residual = std::max(0.0, residual);
    sc.unfrozen = count;
    sc.outsiders = outsiders;
    sc.level = -1.0;
    sc.max_rate = 0.0;
  }
  solved_flows_ += set_.size();
  if (links_.empty()) {
    // No link S touches can bind: every flow runs at its cap (what the filling below gives).
    for (std::uint32_t f : set_) {
      hot_[f].new_rate = cap_[f];
      hot_[f].new_bottleneck = kCap;
    }
    return;
  }
  for (std::uint32_t f : set_) {
    hot_[f].new_bottleneck = kNone;
    hot_[f].new_rate = 0.0;
  }
  // Progressive filling over S (Bertsekas & Gallager sec. 6.5.2): the tightest constraint (a
  // link's fair share, or a flow's own cap) saturates first and fixes the rates of its S flows.
  auto freeze = [&](FlowHot& g, double rate, std::uint32_t bottleneck) {
    g.new_rate = rate;
    g.new_bottleneck = bottleneck;
    for (std::uint32_t h = 0; h < g.hops; ++h) {
      const LinkHot& mk = link_[g.links[h].value];
      if (mk.mark != 2 * epoch_) continue;  // passive or slack
      LinkScratch& ms = scratch_[mk.local];
      ms.residual = std::max(0.0, ms.residual - rate);
      ms.max_rate = std::max(ms.max_rate, rate);
      --ms.unfrozen;
    }
  };
  auto freeze_link = [&](std::uint32_t i, double share) {
    scratch_[i].level = share;
    const std::uint32_t l = links_[i];
    for (std::uint32_t e = link_[l].head; e != kNone;) {
      FlowHot& g = hot_[e / kMaxHops];
      e = g.next[e % kMaxHops];
      if (g.mark == in_set && g.new_bottleneck == kNone) freeze(g, share, l);
    }
  };
  if (links_.size() + set_.size() <= 128) {
    // Small sets: scan for the tightest constraint; each scan freezes a whole level.
    std::size_t left = set_.size();
    while (left > 0) {
      double best = std::numeric_limits<double>::infinity();
      std::uint32_t best_link = kNone;
      for (std::uint32_t i = 0; i < links_.size(); ++i) {
        const LinkScratch& sc = scratch_[i];
        if (sc.unfrozen > 0 && sc.residual / sc.unfrozen < best) {
          best = sc.residual / sc.unfrozen;
          best_link = i;
        }
      }
      for (std::uint32_t f : set_) {
        if (hot_[f].new_bottleneck == kNone && cap_[f] < best) {
          best = cap_[f];
          best_link = kNone;
        }
      }
      if (best_link != kNone) {
        freeze_link(best_link, best);
      } else {
        // The smallest caps bind first (a link at exactly the same share waits for the next scan).
        for (std::uint32_t f : set_) {
          if (hot_[f].new_bottleneck == kNone && cap_[f] == best) freeze(hot_[f], best, kCap);
        }
      }
      left = 0;
      for (std::uint32_t f : set_) left += hot_[f].new_bottleneck == kNone;
    }
    return;
  }
  // Large sets: a heap of (share, local link index) or (cap, kCapBit | position in S), with
  // stale entries skipped.
  constexpr std::uint32_t kCapBit = 1u << 31;
  fill_heap_.clear();
  for (std::uint32_t i = 0; i < links_.size(); ++i) {
    if (scratch_[i].unfrozen > 0) fill_heap_.emplace_back(scratch_[i].residual / scratch_[i].unfrozen, i);
  }
  for (std::uint32_t k = 0; k < set_.size(); ++k) fill_heap_.emplace_back(cap_[set_[k]], kCapBit | k);
  std::make_heap(fill_heap_.begin(), fill_heap_.end(), FillAfter{});
  while (!fill_heap_.empty()) {
    std::pop_heap(fill_heap_.begin(), fill_heap_.end(), FillAfter{});
    const auto [share, id] = fill_heap_.back();
    fill_heap_.pop_back();
    if (id & kCapBit) {
      FlowHot& g = hot_[set_[id & ~kCapBit]];
      if (g.new_bottleneck != kNone) continue;
      freeze(g, share, kCap);
    } else {
      LinkScratch& sc = scratch_[id];
      if (sc.unfrozen == 0 || share != sc.residual / sc.unfrozen) continue;  // stale entry
      // Re-push the links whose share changed: those of the flows this level freezes.
      const std::uint32_t l = links_[id];
      sc.level = share;
      for (std::uint32_t e = link_[l].head; e != kNone;) {
        FlowHot& g = hot_[e / kMaxHops];
        e = g.next[e % kMaxHops];
        if (g.mark != in_set || g.new_bottleneck != kNone) continue;
        freeze(g, share, l);
        for (std::uint32_t h = 0; h < g.hops; ++h) {
          const LinkHot& mk = link_[g.links[h].value];
          if (mk.mark != 2 * epoch_ || mk.local == id) continue;
          const LinkScratch& ms = scratch_[mk.local];
          if (ms.unfrozen > 0) {
            fill_heap_.emplace_back(ms.residual / ms.unfrozen, mk.local);
            std::push_heap(fill_heap_.begin(), fill_heap_.end(), FillAfter{});
          }
        }
      }
      continue;
    }
    // A cap froze a flow: its links' shares changed.
    const FlowHot& g = hot_[set_[id & ~kCapBit]];
    for (std::uint32_t h = 0; h < g.hops; ++h) {
      const LinkHot& mk = link_[g.links[h].value];
      if (mk.mark != 2 * epoch_) continue;
      const LinkScratch& ms = scratch_[mk.local];
      if (ms.unfrozen > 0) {
        fill_heap_.emplace_back(ms.residual / ms.unfrozen, mk.local);
        std::push_heap(fill_heap_.begin(), fill_heap_.end(), FillAfter{});
      }
    }
  }
}

bool FlowNetwork::verify() {
  const std::uint32_t in_set = 2 * epoch_, flagged = 2 * epoch_ + 1;
  violators_.clear();
  for (std::uint32_t i = 0; i < links_.size(); ++i) {
    const LinkScratch& sc = scratch_[i];
    if (sc.outsiders == 0) continue;
    const std::uint32_t l = links_[i];
    const LinkHot& lk = link_[l];
    const double tol = kTolerance * lk.capacity;
    const bool saturated = sc.residual <= tol;
    for (std::uint32_t e = lk.head; e != kNone;) {
      const std::uint32_t gi = e / kMaxHops;
      FlowHot& g = hot_[gi];
      e = g.next[e % kMaxHops];
      if (g.mark == in_set || g.mark == flagged) continue;
      // g's bottleneck must stay saturated with g the largest on it; and no S flow that l now
      // bottlenecks may be smaller than g.
      const bool lost_bottleneck = g.bottleneck == l && (!saturated || sc.max_rate > g.rate + tol);
      const bool too_large = saturated && ((sc.level >= 0 && sc.level < g.rate - tol) || sc.overloaded);
      if (lost_bottleneck || too_large) {
        g.mark = flagged;
        violators_.push_back(gi);
      }
    }
  }
  return violators_.empty();
}

void FlowNetwork::commit(SimTime now) {
  for (std::uint32_t f : set_) {
    FlowHot& fh = hot_[f];
    const double r = fh.new_rate;
    if (std::fabs(r - fh.rate) > 1e-12 * std::max(r, fh.rate)) set_rate(f, r, now);
    if (fh.bottleneck != fh.new_bottleneck) set_bottleneck(fh, fh.new_bottleneck);
  }
  flush_classes(now);
}

// Slack links S's new rates would overfill become tight (they join the next solve).
bool FlowNetwork::promote_overfilled() {
  if (slack_.empty()) return false;
  const std::uint32_t slack = 2 * epoch_ + 1;
  slack_delta_.assign(slack_.size(), 0.0);
  for (std::uint32_t f : set_) {
    const FlowHot& g = hot_[f];
    const double d = g.new_rate - g.rate;
    if (d == 0) continue;
    for (std::uint32_t h = 0; h < g.hops; ++h) {
      const LinkHot& lk = link_[g.links[h].value];
      if (lk.mark == slack) slack_delta_[lk.local] += d;
    }
  }
  bool promoted = false;
  for (std::size_t i = 0; i < slack_.size(); ++i) {
    const std::uint32_t l = slack_[i];
    LinkHot& lk = link_[l];
    if (lk.mark != slack || !(lk.load + slack_delta_[i] > lk.capacity * (1 + kTolerance))) continue;
    lk.mark = 2 * epoch_;
    lk.local = static_cast<std::uint32_t>(links_.size());
    links_.push_back(l);
    if (scratch_.size() < links_.size()) scratch_.resize(links_.size());
    promoted = true;
  }
  return promoted;
}

void FlowNetwork::settle(SimTime now) {
  ++updates_;
  if (++epoch_ >= (1u << 30)) {
    for (auto& h : hot_) h.mark = 0;
    for (auto& l : link_) l.mark = 0;
    epoch_ = 1;
  }
  const std::uint32_t in_set = 2 * epoch_;
  links_.clear();
  slack_.clear();
  const std::uint32_t tight = 2 * epoch_, slack = 2 * epoch_ + 1;
  auto add_link = [&](std::uint32_t l) {
    LinkHot& lk = link_[l];
    if (lk.mark == tight || lk.mark == slack || lk.demand <= lk.capacity) return;  // seen, or passive
    if (lk.load >= lk.capacity * (1 - kTolerance)) {
      lk.mark = tight;
      lk.local = static_cast<std::uint32_t>(links_.size());
      links_.push_back(l);
      if (scratch_.size() < links_.size()) scratch_.resize(links_.size());
    } else {
      lk.mark = slack;
      lk.local = static_cast<std::uint32_t>(slack_.size());
      slack_.push_back(l);
    }
  };
  auto add_flow_links = [&](std::uint32_t f) {
    const FlowHot& fh = hot_[f];
    for (std::uint32_t h = 0; h < fh.hops; ++h) add_link(fh.links[h].value);
  };
  // S starts with the flows that changed (each once, if it is still there) and those
  // bottlenecked where the load changed (they are the first to move); the checks bring in the
  // rest.
  std::size_t kept = 0;
  for (std::uint32_t f : set_) {
    if (!live_[f] || hot_[f].hops == 0 || hot_[f].mark == in_set) continue;
    hot_[f].mark = in_set;
    set_[kept++] = f;
  }
  set_.resize(kept);
  for (std::uint32_t f : set_) add_flow_links(f);
  for (std::uint32_t l : seed_links_) add_link(l);
  const std::size_t changed = set_.size();
  for (std::size_t i = 0; i < changed; ++i) {
    const FlowHot& fh = hot_[set_[i]];
    for (std::uint32_t h = 0; h < fh.hops; ++h) add_bottlenecked(fh.links[h].value);
  }
  for (std::uint32_t l : seed_links_) add_bottlenecked(l);
  // Second order: flows bottlenecked where those first movers meet them.
  const std::size_t first_order = set_.size();
  for (std::size_t i = changed; i < first_order; ++i) {
    const FlowHot& fh = hot_[set_[i]];
    for (std::uint32_t h = 0; h < fh.hops; ++h) {
      if (active_link(fh.links[h].value)) add_bottlenecked(fh.links[h].value);
    }
  }
  for (std::size_t i = changed; i < set_.size(); ++i) add_flow_links(set_[i]);
  if (set_.empty() && links_.empty()) {
    // Nothing to re-solve (the changed links are passive, or bottleneck no flow): a round would
    // solve, check and commit nothing (a slack link cannot overfill with no rate moving, and the
    // class loads were flushed when the rates changed).
    ++settle_rounds_;
  } else {
    while (true) {
      ++settle_rounds_;
      solve();
      const bool promoted = promote_overfilled();
      if (verify() && !promoted) break;
      for (std::uint32_t g : violators_) {
        hot_[g].mark = in_set;
        set_.push_back(g);
        add_flow_links(g);
      }
    }
    commit(now);
  }
  set_.clear();
  seed_links_.clear();
}

// --- flows ---

void FlowNetwork::touch(SimTime now) {
  SERVESIM_CHECK_MSG(now >= now_, "the flow network's time went back");
  if (now > now_) flush();
  SERVESIM_CHECK_MSG(heap_.empty() || heap_[0].finish_ps >= now.ps(),
                     "a flow was due before this change: call complete_until(now) first");
  now_ = now;
}

void FlowNetwork::flush() {
  if (!pending_) return;
  pending_ = false;
  settle(now_);
}

FlowHandle FlowNetwork::start(SimTime now, ChipId src, ChipId dst, double bytes, std::uint64_t tag,
                              std::uint64_t label) {
  SERVESIM_CHECK(bytes > 0 && std::isfinite(bytes));
  touch(now);
  const std::uint32_t f = new_slot();
  live_[f] = 1;
  stalled_[f] = 0;
  size_[f] = remaining_[f] = bytes;
  credited_[f] = 0;
  last_ps_[f] = now.ps();
  tag_[f] = tag;
  label_[f] = label;
  src_[f] = src;
  dst_[f] = dst;
  FlowHot& fh = hot_[f];
  fh.rate = 0;
  fh.bottleneck = kNone;  // a fresh slot's was cleared when it was freed
  fh.hops = 0;
  finish_ps_[f] = SimTime::never().ps();
  ++active_count_;
  Route r;
  if (src == dst) {
    remaining_[f] = 0;  // nothing to move: it completes at once
    finish_ps_[f] = now.ps();
    heap_update(f);
  } else if (!fabric_.flow_route(src, dst, label, r)) {
    stalled_[f] = 1;
    finish_ps_[f] = SimTime::never().ps();
  } else {
    fh.hops = r.hops;
    std::copy(r.begin(), r.end(), fh.links.begin());
    link_insert(f);
    set_.push_back(f);
    pending_ = true;
  }
  return FlowHandle{f, generation_[f]};
}

bool FlowNetwork::active(FlowHandle h) const {
  return h.valid() && h.slot < live_.size() && live_[h.slot] && generation_[h.slot] == h.generation;
}

double FlowNetwork::rate(FlowHandle h) {
  flush();
  return active(h) ? hot_[h.slot].rate : 0.0;
}

double FlowNetwork::remaining(FlowHandle h, SimTime now) {
  flush();
  if (!active(h)) return 0.0;
  return std::max(0.0,
                  remaining_[h.slot] - hot_[h.slot].rate * static_cast<double>(now.ps() - last_ps_[h.slot]) / kPsPerS);
}

SimTime FlowNetwork::finish_time(FlowHandle h) {
  flush();
  return active(h) ? SimTime::from_ps(finish_ps_[h.slot]) : SimTime::never();
}

bool FlowNetwork::stalled(FlowHandle h) const { return active(h) && stalled_[h.slot]; }

Route FlowNetwork::route(FlowHandle h) const {
  SERVESIM_CHECK(active(h));
  const FlowHot& fh = hot_[h.slot];
  Route r;
  r.hops = fh.hops;
  std::copy(fh.links.begin(), fh.links.begin() + fh.hops, r.links.begin());
  if (fh.hops > 0) r.plane = fabric_.link(fh.links[0]).plane;  // the first hop is a chip's own link
  return r;
}

std::size_t FlowNetwork::stalled_flows() const {
  std::size_t n = 0;
  for (std::size_t f = 0; f < live_.size(); ++f) n += live_[f] && stalled_[f];
  return n;
}

SimTime FlowNetwork::next_completion() {
  flush();
  return heap_.empty() ? SimTime::never() : SimTime::from_ps(heap_[0].finish_ps);
}

void FlowNetwork::finish_flow(std::uint32_t f, SimTime at, bool aborted, std::vector<FlowDone>* out) {
  FlowHot& fh = hot_[f];
  // A due flow's last bytes arrive now; an aborted one delivered what it moved so far.
  remaining_[f] =
      aborted ? std::max(0.0, remaining_[f] - fh.rate * static_cast<double>(at.ps() - last_ps_[f]) / kPsPerS) : 0.0;
  last_ps_[f] = at.ps();
  const double delivered = size_[f] - remaining_[f];
  const double credit = delivered - credited_[f];
  credited_[f] = delivered;
  // One pass over its links: its rate leaves their loads and classes, its bytes are credited,
  // it leaves their lists, and they seed the update.
  const double rate = fh.rate, cap = cap_[f];
  const bool grouped = !link_group_.empty(), track = options_.track_utilization;
  for (std::uint32_t h = 0; h < fh.hops; ++h) {
    const std::uint32_t l = fh.links[h].value;
    LinkHot& lk = link_[l];
    if (grouped && link_group_[l] != kNone) --groups_[link_group_[l]].carried;
    lk.demand -= cap;
    lk.load -= rate;
    if (track) {
      link_bytes_[l] += credit;
      class_delta_[link_class_[l]] -= rate;
    }
    const std::uint32_t p = fh.prev[h], n = fh.next[h];
    if (p != kNone)
      hot_[p / kMaxHops].next[p % kMaxHops] = n;
    else
      lk.head = n;
    if (n != kNone) hot_[n / kMaxHops].prev[n % kMaxHops] = p;
    if (lk.head == kNone) lk.demand = lk.load = 0;  // exact when empty
    fh.next[h] = fh.prev[h] = kNone;
    seed_links_.push_back(l);
  }
  fh.rate = 0;
  flush_classes(at);
  if (out != nullptr) {
    out->push_back(FlowDone{FlowHandle{f, generation_[f]}, tag_[f], at, aborted ? delivered : size_[f], aborted});
  }
  heap_remove(f);
  fh.hops = 0;
  set_bottleneck(fh, kNone);
  live_[f] = 0;
  stalled_[f] = 0;
  ++generation_[f];
  free_slots_.push_back(f);
  --active_count_;
}

bool FlowNetwork::cancel(SimTime now, FlowHandle h) {
  if (!active(h)) return false;
  touch(now);
  finish_flow(h.slot, now, true, nullptr);
  pending_ = true;
  return true;
}

void FlowNetwork::complete_until(SimTime now, std::vector<FlowDone>& done) {
  while (true) {
    flush();
    if (heap_.empty() || heap_[0].finish_ps > now.ps()) break;
    const std::int64_t at_ps = heap_[0].finish_ps;
    const SimTime at = SimTime::from_ps(at_ps);
    SERVESIM_CHECK_MSG(at >= now_, "the flow network's time went back");
    now_ = at;
    // Every flow due at this instant leaves together; the update waits for the next change or
    // query. No other flow can become due at `at`: its remaining bytes are positive there.
    while (!heap_.empty() && heap_[0].finish_ps == at_ps) finish_flow(heap_[0].slot, at, false, &done);
    pending_ = true;
    if (at == now) return;
  }
  touch(now);
}

void FlowNetwork::set_capacity(std::uint32_t r) {
  // The resource's flows' caps (the slowest resource of each route) and the resources' demands
  // depend on its capacity: its flows leave their links, it changes, they come back to be
  // re-solved.
  moved_.clear();
  for (std::uint32_t e = link_[r].head; e != kNone; e = hot_[e / kMaxHops].next[e % kMaxHops]) {
    moved_.push_back(e / kMaxHops);
  }
  for (std::uint32_t f : moved_) link_remove(f);
  const double share = reserved_.empty() ? 0.0 : reserved_[r];
  link_[r].capacity = fabric_.resource_capacity(r) * (1.0 - share);
  for (std::uint32_t f : moved_) {
    link_insert(f);
    set_.push_back(f);
  }
  seed_links_.push_back(r);
}

void FlowNetwork::refresh_capacity(LinkId l) {
  // The link's own resource and its bundle change capacity.
  for (std::uint32_t r : {l.value, fabric_.bundle_of(l)}) {
    if (r != Fabric::kNone) set_capacity(r);
  }
}

void FlowNetwork::reserve(SimTime now, LinkId l, double share) {
  SERVESIM_CHECK_MSG(share >= 0 && share < 1, "a reserved share is in [0, 1)");
  if (reserved_.empty()) {
    if (share == 0) return;
    reserved_.assign(link_.size(), 0.0);
  }
  const std::uint32_t r = l.value;
  SERVESIM_CHECK_MSG(link_group_.empty() || link_group_[r] == kNone, "a grouped resource is reserved by its group");
  if (reserved_[r] == share) return;
  reserved_[r] = share;
  if (link_[r].head == kNone) {
    // No flow crosses it: nothing to re-solve (a flow that starts reads the new capacity).
    link_[r].capacity = fabric_.resource_capacity(r) * (1.0 - share);
    return;
  }
  touch(now);
  set_capacity(r);
  pending_ = true;
}

std::uint32_t FlowNetwork::add_reserve_group(std::span<const LinkId> resources) {
  if (link_group_.empty()) link_group_.assign(link_.size(), kNone);
  const auto g = static_cast<std::uint32_t>(groups_.size());
  ReserveGroup grp;
  grp.begin = static_cast<std::uint32_t>(group_resources_.size());
  for (const LinkId l : resources) {
    SERVESIM_CHECK_MSG(link_group_[l.value] == kNone, "a resource belongs to one reserve group");
    link_group_[l.value] = g;
    SERVESIM_CHECK_MSG(reserved_.empty() || reserved_[l.value] == 0.0, "a group starts with nothing reserved");
    group_resources_.push_back(l);
    for (std::uint32_t e = link_[l.value].head; e != kNone; e = hot_[e / kMaxHops].next[e % kMaxHops]) ++grp.carried;
  }
  grp.end = static_cast<std::uint32_t>(group_resources_.size());
  groups_.push_back(grp);
  return g;
}

void FlowNetwork::sync_reserve(std::uint32_t r) {
  const double share = groups_[link_group_[r]].share;
  if (reserved_.empty() ? share == 0 : reserved_[r] == share) return;
  if (reserved_.empty()) reserved_.assign(link_.size(), 0.0);
  // Only an empty resource can be behind its group: reserve() as it would have run then.
  reserved_[r] = share;
  link_[r].capacity = fabric_.resource_capacity(r) * (1.0 - share);
}

void FlowNetwork::group_traffic(SimTime now, std::uint32_t g, std::vector<ResourceTraffic>& out) {
  flush();
  out.clear();
  for (std::uint32_t i = groups_[g].begin; i < groups_[g].end; ++i) {
    const std::uint32_t r = group_resources_[i].value;
    if (link_[r].head == kNone) continue;
    ResourceTraffic t;
    for (std::uint32_t e = link_[r].head; e != kNone; e = hot_[e / kMaxHops].next[e % kMaxHops]) {
      const std::uint32_t f = e / kMaxHops;
      t.rate += hot_[f].rate;
      t.remaining +=
          std::max(0.0, remaining_[f] - hot_[f].rate * static_cast<double>(now.ps() - last_ps_[f]) / kPsPerS);
    }
    t.capacity = fabric_.resource_capacity(r);
    t.saturated = t.rate >= link_[r].capacity * (1 - 1e-9);
    out.push_back(t);
  }
}

bool FlowNetwork::reserve_group(SimTime now, std::uint32_t g, double share) {
  SERVESIM_CHECK_MSG(share >= 0 && share < 1, "a reserved share is in [0, 1)");
  groups_[g].share = share;
  if (groups_[g].carried == 0) return false;  // each resource takes it when a flow arrives
  for (std::uint32_t i = groups_[g].begin; i < groups_[g].end; ++i) {
    const LinkId l = group_resources_[i];
    if (reserved_.empty()) {
      if (share == 0) continue;
      reserved_.assign(link_.size(), 0.0);
    }
    const std::uint32_t r = l.value;
    if (reserved_[r] == share) continue;
    reserved_[r] = share;
    if (link_[r].head == kNone) {
      link_[r].capacity = fabric_.resource_capacity(r) * (1.0 - share);
      continue;
    }
    touch(now);
    set_capacity(r);
    pending_ = true;
  }
  return true;
}

void FlowNetwork::reroute(std::uint32_t f) {
  FlowHot& fh = hot_[f];
  Route r;
  if (fabric_.flow_route(src_[f], dst_[f], label_[f], r)) {
    stalled_[f] = 0;
    fh.hops = r.hops;
    std::copy(r.begin(), r.end(), fh.links.begin());
    link_insert(f);
    set_.push_back(f);
  } else {
    stalled_[f] = 1;
    fh.hops = 0;
    set_bottleneck(fh, kNone);
  }
}

void FlowNetwork::fail(SimTime now, const std::vector<LinkId>& links, const std::vector<ChipId>& chips,
                       std::vector<FlowDone>& aborted) {
  touch(now);
  SERVESIM_CHECK_MSG(links.empty() || faulty_fabric_ != nullptr, "a link fails on a read-only fabric");
  for (LinkId l : links) {
    faulty_fabric_->set_link_up(l, false);
    refresh_capacity(l);
  }
  std::vector<std::uint8_t> dead(fabric_.chips(), 0);
  for (ChipId c : chips) dead[c.index()] = 1;
  std::vector<std::uint32_t> moved;
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f]) continue;
    if (dead[src_[f].index()] || dead[dst_[f].index()]) {
      finish_flow(f, now, true, &aborted);
      continue;
    }
    const FlowHot& fh = hot_[f];
    bool hit = false;
    for (std::uint32_t h = 0; h < fh.hops && !hit; ++h) hit = !(link_[fh.links[h].value].capacity > 0);
    if (hit) moved.push_back(f);
  }
  for (std::uint32_t f : moved) {
    set_rate(f, 0.0, now);
    credit_links(f);
    link_remove(f);
    FlowHot& fh = hot_[f];
    for (std::uint32_t h = 0; h < fh.hops; ++h) seed_links_.push_back(fh.links[h].value);
    set_bottleneck(fh, kNone);
    reroute(f);
    if (stalled_[f]) {
      finish_ps_[f] = SimTime::never().ps();
      heap_update(f);
    }
  }
  flush_classes(now);
  pending_ = true;
}

void FlowNetwork::recover(SimTime now, const std::vector<LinkId>& links) {
  touch(now);
  SERVESIM_CHECK_MSG(links.empty() || faulty_fabric_ != nullptr, "a link recovers on a read-only fabric");
  for (LinkId l : links) {
    faulty_fabric_->set_link_up(l, true);
    refresh_capacity(l);
  }
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (live_[f] && stalled_[f]) reroute(f);
  }
  pending_ = true;
}

// --- references for tests ---

std::vector<double> FlowNetwork::reference_rates() {
  flush();
  const std::size_t L = link_.size();
  std::vector<double> residual(L);
  std::vector<std::vector<std::uint32_t>> on(L);
  std::vector<double> out(live_.size(), 0.0);
  std::vector<bool> frozen(live_.size(), true);
  for (std::size_t l = 0; l < L; ++l) residual[l] = link_[l].capacity;
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f] || hot_[f].hops == 0) continue;
    frozen[f] = false;
    for (std::uint32_t h = 0; h < hot_[f].hops; ++h) on[hot_[f].links[h].index()].push_back(f);
  }
  // Textbook progressive filling: raise every unfrozen rate together; the link that fills first
  // freezes its flows; repeat.
  while (true) {
    double best = std::numeric_limits<double>::infinity();
    std::size_t best_l = L;
    for (std::size_t l = 0; l < L; ++l) {
      std::size_t n = 0;
      for (std::uint32_t f : on[l]) n += !frozen[f];
      if (n == 0) continue;
      const double share = residual[l] / static_cast<double>(n);
      if (share < best) {
        best = share;
        best_l = l;
      }
    }
    if (best_l == L) break;
    for (std::uint32_t f : on[best_l]) {
      if (frozen[f]) continue;
      frozen[f] = true;
      out[f] = best;
      for (std::uint32_t h = 0; h < hot_[f].hops; ++h) {
        const std::size_t m = hot_[f].links[h].index();
        residual[m] = std::max(0.0, residual[m] - best);
      }
    }
  }
  return out;
}

std::string FlowNetwork::check() {
  flush();
  const std::size_t L = link_.size();
  // Reserve groups: the count of flow hops on their resources; a resource a flow crosses holds
  // its group's share.
  std::vector<std::uint64_t> carried(groups_.size(), 0);
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f] || link_group_.empty()) continue;
    for (std::uint32_t h = 0; h < hot_[f].hops; ++h) {
      const std::uint32_t g = link_group_[hot_[f].links[h].value];
      if (g == kNone) continue;
      ++carried[g];
      if (reserved_.empty() ? groups_[g].share != 0 : reserved_[hot_[f].links[h].value] != groups_[g].share) {
        return "link " + std::to_string(hot_[f].links[h].value) + " carries a flow without its group's share";
      }
    }
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (carried[g] != groups_[g].carried) return "reserve group " + std::to_string(g) + " miscounts its flows";
  }
  std::vector<double> load(L, 0.0), top(L, 0.0);
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f]) continue;
    for (std::uint32_t h = 0; h < hot_[f].hops; ++h) {
      const std::size_t l = hot_[f].links[h].index();
      load[l] += hot_[f].rate;
      top[l] = std::max(top[l], hot_[f].rate);
    }
  }
  std::vector<std::uint32_t> bottlenecked(L, 0);
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (live_[f] && hot_[f].bottleneck < kCap) ++bottlenecked[hot_[f].bottleneck];
  }
  for (std::size_t l = 0; l < L; ++l) {
    if (load[l] > link_[l].capacity * (1 + 1e-9)) return "link " + std::to_string(l) + " is over capacity";
    if (bottlenecked[l] != link_[l].bottlenecked)
      return "link " + std::to_string(l) + " miscounts its bottlenecked flows";
    if (std::fabs(link_[l].load - load[l]) > 1e-6 * link_[l].capacity + 1.0) {
      return "link " + std::to_string(l) + "'s running load drifted from its flows' rates";
    }
  }
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f] || hot_[f].hops == 0) continue;
    bool has_bottleneck = false;
    for (std::uint32_t h = 0; h < hot_[f].hops; ++h) {
      const std::size_t l = hot_[f].links[h].index();
      const double cap = link_[l].capacity;
      if (load[l] >= cap * (1 - 1e-9) && hot_[f].rate >= top[l] - 1e-9 * cap) has_bottleneck = true;
    }
    if (!has_bottleneck) return "flow in slot " + std::to_string(f) + " has no bottleneck";
  }
  return "";
}

}  // namespace servesim::topologies
