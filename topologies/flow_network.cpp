#include "topologies/flow_network.h"

#include <algorithm>
#include <cmath>

#include "sim/core/check.h"

namespace servesim::topologies {
namespace {

constexpr double kPsPerS = 1e12;
constexpr double kTolerance = 1e-9;  // relative to a link's capacity

// Min-heap order for the filling: smallest share first, then the lower link id.
bool fill_after(const std::pair<double, std::uint32_t>& a, const std::pair<double, std::uint32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second > b.second);
}

}  // namespace

FlowNetwork::FlowNetwork(Fabric& fabric, Options options) : fabric_(fabric), options_(options) {
  SERVESIM_CHECK(options_.utilization_bin > Duration::zero() && options_.max_bins >= 2);
  const std::size_t L = fabric.link_count();
  capacity_.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    capacity_[l] = fabric.link(LinkId(static_cast<std::uint32_t>(l))).bandwidth_bytes_per_s;
  }
  link_load_.assign(L, 0.0);
  link_bytes_.assign(L, 0.0);
  link_peak_.assign(L, 0.0);
  link_last_ps_.assign(L, 0);
  head_.assign(L, kNone);
  link_flows_.assign(L, 0);
  link_mark_.assign(L, 0);
  residual_.assign(L, 0.0);
  level_.assign(L, -1.0);
  unfrozen_.assign(L, 0);
  for (auto& s : series_) s.bin = options_.utilization_bin;
}

// --- slots and link lists ---

std::uint32_t FlowNetwork::new_slot() {
  if (!free_slots_.empty()) {
    const std::uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  const auto s = static_cast<std::uint32_t>(rate_.size());
  rate_.push_back(0);
  remaining_.push_back(0);
  size_.push_back(0);
  new_rate_.push_back(0);
  last_ps_.push_back(0);
  finish_ps_.push_back(0);
  bottleneck_.push_back(kNone);
  new_bottleneck_.push_back(kNone);
  generation_.push_back(0);
  heap_pos_.push_back(kNone);
  mark_.push_back(0);
  vmark_.push_back(0);
  tag_.push_back(0);
  label_.push_back(0);
  src_.push_back(ChipId());
  dst_.push_back(ChipId());
  route_.emplace_back();
  live_.push_back(0);
  stalled_.push_back(0);
  next_.resize(next_.size() + kMaxHops, kNone);
  prev_.resize(prev_.size() + kMaxHops, kNone);
  return s;
}

void FlowNetwork::link_insert(std::uint32_t f) {
  const Route& r = route_[f];
  for (std::uint32_t h = 0; h < r.hops; ++h) {
    const std::uint32_t l = r.links[h].value;
    const std::uint32_t e = f * kMaxHops + h;
    next_[e] = head_[l];
    prev_[e] = kNone;
    if (head_[l] != kNone) prev_[head_[l]] = e;
    head_[l] = e;
    ++link_flows_[l];
  }
}

void FlowNetwork::link_remove(std::uint32_t f) {
  const Route& r = route_[f];
  for (std::uint32_t h = 0; h < r.hops; ++h) {
    const std::uint32_t l = r.links[h].value;
    const std::uint32_t e = f * kMaxHops + h;
    if (prev_[e] != kNone) next_[prev_[e]] = next_[e]; else head_[l] = next_[e];
    if (next_[e] != kNone) prev_[next_[e]] = prev_[e];
    next_[e] = prev_[e] = kNone;
    --link_flows_[l];
  }
}

// --- the completion heap ---

bool FlowNetwork::heap_less(std::uint32_t a, std::uint32_t b) const {
  return finish_ps_[a] < finish_ps_[b] || (finish_ps_[a] == finish_ps_[b] && a < b);
}

void FlowNetwork::heap_sift_up(std::size_t i) {
  const std::uint32_t f = heap_[i];
  while (i > 0) {
    const std::size_t p = (i - 1) / 2;
    if (!heap_less(f, heap_[p])) break;
    heap_[i] = heap_[p];
    heap_pos_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = p;
  }
  heap_[i] = f;
  heap_pos_[f] = static_cast<std::uint32_t>(i);
}

void FlowNetwork::heap_sift_down(std::size_t i) {
  const std::uint32_t f = heap_[i];
  const std::size_t n = heap_.size();
  while (true) {
    std::size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && heap_less(heap_[c + 1], heap_[c])) ++c;
    if (!heap_less(heap_[c], f)) break;
    heap_[i] = heap_[c];
    heap_pos_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = c;
  }
  heap_[i] = f;
  heap_pos_[f] = static_cast<std::uint32_t>(i);
}

void FlowNetwork::heap_remove(std::uint32_t f) {
  const std::uint32_t i = heap_pos_[f];
  if (i == kNone) return;
  heap_pos_[f] = kNone;
  const std::uint32_t last = heap_.back();
  heap_.pop_back();
  if (last == f) return;
  heap_[i] = last;
  heap_pos_[last] = i;
  heap_sift_up(i);
  heap_sift_down(heap_pos_[last]);
}

void FlowNetwork::heap_update(std::uint32_t f) {
  if (finish_ps_[f] == SimTime::never().ps()) {
    heap_remove(f);
    return;
  }
  if (heap_pos_[f] == kNone) {
    heap_.push_back(f);
    heap_sift_up(heap_.size() - 1);
    return;
  }
  heap_sift_up(heap_pos_[f]);
  heap_sift_down(heap_pos_[f]);
}

// --- utilization ---

void FlowNetwork::advance_class(std::size_t cls, SimTime now) {
  LinkUsageSeries& s = series_[cls];
  std::int64_t t0 = class_last_ps_[cls];
  const std::int64_t t1 = now.ps();
  const double load = class_load_[cls];
  class_last_ps_[cls] = t1;
  if (!(load > 0)) return;
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

void FlowNetwork::move_link_load(std::uint32_t l, double delta, SimTime now) {
  link_bytes_[l] += link_load_[l] * static_cast<double>(now.ps() - link_last_ps_[l]) / kPsPerS;
  link_last_ps_[l] = now.ps();
  double load = link_load_[l] + delta;
  if (load < kTolerance * capacity_[l]) load = std::max(0.0, load);
  link_load_[l] = load;
  link_peak_[l] = std::max(link_peak_[l], load);
  const auto cls = static_cast<std::size_t>(fabric_.link(LinkId(l)).link_class);
  advance_class(cls, now);
  class_load_[cls] += delta;
}

void FlowNetwork::account_until(SimTime now) {
  touch(now);
  for (std::size_t l = 0; l < link_load_.size(); ++l) {
    link_bytes_[l] += link_load_[l] * static_cast<double>(now.ps() - link_last_ps_[l]) / kPsPerS;
    link_last_ps_[l] = now.ps();
  }
  for (std::size_t c = 0; c < series_.size(); ++c) advance_class(c, now);
}

// --- rates ---

void FlowNetwork::set_rate(std::uint32_t f, double rate, SimTime now) {
  remaining_[f] -= rate_[f] * static_cast<double>(now.ps() - last_ps_[f]) / kPsPerS;
  if (remaining_[f] < 0) remaining_[f] = 0;
  last_ps_[f] = now.ps();
  const double delta = rate - rate_[f];
  if (delta != 0) {
    const Route& r = route_[f];
    for (std::uint32_t h = 0; h < r.hops; ++h) move_link_load(r.links[h].value, delta, now);
  }
  rate_[f] = rate;
  if (rate > 0) {
    const double ps = std::ceil(remaining_[f] / rate * kPsPerS);
    finish_ps_[f] = now.ps() + static_cast<std::int64_t>(std::min(ps, 9.0e18 - static_cast<double>(now.ps())));
  } else {
    finish_ps_[f] = remaining_[f] > 0 ? SimTime::never().ps() : now.ps();
  }
  heap_update(f);
}

void FlowNetwork::solve() {
  // Residual capacity of every touched link with the flows outside S held at their rates.
  for (std::uint32_t l : links_) {
    double residual = fabric_.link_up(LinkId(l)) ? capacity_[l] : 0.0;
    std::uint32_t in_set = 0;
    for (std::uint32_t e = head_[l]; e != kNone; e = next_[e]) {
      const std::uint32_t g = e / kMaxHops;
      if (mark_[g] == epoch_) ++in_set; else residual -= rate_[g];
    }
    residual_[l] = std::max(0.0, residual);
    unfrozen_[l] = in_set;
    level_[l] = -1.0;
  }
  for (std::uint32_t f : set_) {
    new_bottleneck_[f] = kNone;
    new_rate_[f] = 0.0;
  }
  solved_flows_ += set_.size();
  // Progressive filling over S: the link with the smallest fair share saturates first and fixes
  // the rate of every S flow on it (Bertsekas & Gallager sec. 6.5.2).
  fill_heap_.clear();
  for (std::uint32_t l : links_) {
    if (unfrozen_[l] > 0) fill_heap_.emplace_back(residual_[l] / unfrozen_[l], l);
  }
  std::make_heap(fill_heap_.begin(), fill_heap_.end(), fill_after);
  while (!fill_heap_.empty()) {
    std::pop_heap(fill_heap_.begin(), fill_heap_.end(), fill_after);
    const auto [share, l] = fill_heap_.back();
    fill_heap_.pop_back();
    if (unfrozen_[l] == 0 || share != residual_[l] / unfrozen_[l]) continue;  // stale entry
    level_[l] = share;
    for (std::uint32_t e = head_[l]; e != kNone; e = next_[e]) {
      const std::uint32_t g = e / kMaxHops;
      if (mark_[g] != epoch_ || new_bottleneck_[g] != kNone) continue;
      new_rate_[g] = share;
      new_bottleneck_[g] = l;
      const Route& r = route_[g];
      for (std::uint32_t h = 0; h < r.hops; ++h) {
        const std::uint32_t m = r.links[h].value;
        residual_[m] = std::max(0.0, residual_[m] - share);
        --unfrozen_[m];
        if (m != l && unfrozen_[m] > 0) {
          fill_heap_.emplace_back(residual_[m] / unfrozen_[m], m);
          std::push_heap(fill_heap_.begin(), fill_heap_.end(), fill_after);
        }
      }
    }
  }
}

bool FlowNetwork::verify() {
  violators_.clear();
  for (std::uint32_t l : links_) {
    const double tol = kTolerance * capacity_[l];
    const bool saturated = residual_[l] <= tol;
    double max_in_set = 0.0;
    for (std::uint32_t e = head_[l]; e != kNone; e = next_[e]) {
      const std::uint32_t g = e / kMaxHops;
      if (mark_[g] == epoch_) max_in_set = std::max(max_in_set, new_rate_[g]);
    }
    for (std::uint32_t e = head_[l]; e != kNone; e = next_[e]) {
      const std::uint32_t g = e / kMaxHops;
      if (mark_[g] == epoch_ || vmark_[g] == epoch_) continue;
      const double r = rate_[g];
      // g's bottleneck must stay saturated with g the largest on it; and no S flow that l now
      // bottlenecks may be smaller than g.
      const bool lost_bottleneck = bottleneck_[g] == l && (!saturated || max_in_set > r + tol);
      const bool too_large = saturated && level_[l] >= 0 && level_[l] < r - tol;
      if (lost_bottleneck || too_large) {
        vmark_[g] = epoch_;
        violators_.push_back(g);
      }
    }
  }
  return violators_.empty();
}

void FlowNetwork::commit(SimTime now) {
  for (std::uint32_t f : set_) {
    const double r = new_rate_[f];
    if (std::fabs(r - rate_[f]) > 1e-12 * std::max(r, rate_[f])) set_rate(f, r, now);
    bottleneck_[f] = new_bottleneck_[f];
  }
}

void FlowNetwork::settle(SimTime now) {
  if (++epoch_ == 0) {
    std::fill(mark_.begin(), mark_.end(), 0);
    std::fill(vmark_.begin(), vmark_.end(), 0);
    std::fill(link_mark_.begin(), link_mark_.end(), 0);
    epoch_ = 1;
  }
  links_.clear();
  auto add_link = [&](std::uint32_t l) {
    if (link_mark_[l] != epoch_) {
      link_mark_[l] = epoch_;
      links_.push_back(l);
    }
  };
  auto add_flow_links = [&](std::uint32_t f) {
    const Route& r = route_[f];
    for (std::uint32_t h = 0; h < r.hops; ++h) add_link(r.links[h].value);
  };
  for (std::uint32_t l : seed_links_) add_link(l);
  for (std::uint32_t f : set_) {
    mark_[f] = epoch_;
    add_flow_links(f);
  }
  while (true) {
    ++settle_rounds_;
    solve();
    if (verify()) break;
    for (std::uint32_t g : violators_) {
      mark_[g] = epoch_;
      set_.push_back(g);
      add_flow_links(g);
    }
  }
  commit(now);
  set_.clear();
  seed_links_.clear();
}

// --- flows ---

void FlowNetwork::touch(SimTime now) {
  SERVESIM_CHECK_MSG(now >= now_, "the flow network's time went back");
  now_ = now;
}

FlowHandle FlowNetwork::start(SimTime now, ChipId src, ChipId dst, double bytes, std::uint64_t tag,
                              std::uint64_t label) {
  SERVESIM_CHECK(bytes > 0 && std::isfinite(bytes));
  touch(now);
  const std::uint32_t f = new_slot();
  live_[f] = 1;
  stalled_[f] = 0;
  size_[f] = remaining_[f] = bytes;
  rate_[f] = 0;
  last_ps_[f] = now.ps();
  tag_[f] = tag;
  label_[f] = label;
  src_[f] = src;
  dst_[f] = dst;
  bottleneck_[f] = kNone;
  ++active_count_;
  route_[f].hops = 0;
  if (src == dst) {
    remaining_[f] = 0;  // nothing to move: it completes at once
    finish_ps_[f] = now.ps();
    heap_update(f);
  } else if (!fabric_.route(src, dst, label, route_[f])) {
    stalled_[f] = 1;
    route_[f].hops = 0;
    finish_ps_[f] = SimTime::never().ps();
  } else {
    link_insert(f);
    set_.push_back(f);
    settle(now);
  }
  return FlowHandle{f, generation_[f]};
}

bool FlowNetwork::active(FlowHandle h) const {
  return h.valid() && h.slot < live_.size() && live_[h.slot] && generation_[h.slot] == h.generation;
}

double FlowNetwork::rate(FlowHandle h) const { return active(h) ? rate_[h.slot] : 0.0; }

double FlowNetwork::remaining(FlowHandle h, SimTime now) const {
  if (!active(h)) return 0.0;
  return std::max(0.0, remaining_[h.slot] -
                           rate_[h.slot] * static_cast<double>(now.ps() - last_ps_[h.slot]) / kPsPerS);
}

SimTime FlowNetwork::finish_time(FlowHandle h) const {
  return active(h) ? SimTime::from_ps(finish_ps_[h.slot]) : SimTime::never();
}

bool FlowNetwork::stalled(FlowHandle h) const { return active(h) && stalled_[h.slot]; }

const Route& FlowNetwork::route(FlowHandle h) const {
  SERVESIM_CHECK(active(h));
  return route_[h.slot];
}

std::size_t FlowNetwork::stalled_flows() const {
  std::size_t n = 0;
  for (std::size_t f = 0; f < live_.size(); ++f) n += live_[f] && stalled_[f];
  return n;
}

SimTime FlowNetwork::next_completion() const {
  return heap_.empty() ? SimTime::never() : SimTime::from_ps(finish_ps_[heap_[0]]);
}

void FlowNetwork::finish_flow(std::uint32_t f, SimTime at, bool aborted, std::vector<FlowDone>* out) {
  set_rate(f, 0.0, at);
  if (out != nullptr) {
    out->push_back(FlowDone{FlowHandle{f, generation_[f]}, tag_[f], at,
                            aborted ? size_[f] - remaining_[f] : size_[f], aborted});
  }
  heap_remove(f);
  link_remove(f);
  for (std::uint32_t h = 0; h < route_[f].hops; ++h) seed_links_.push_back(route_[f].links[h].value);
  route_[f].hops = 0;
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
  settle(now);
  return true;
}

void FlowNetwork::complete_until(SimTime now, std::vector<FlowDone>& done) {
  while (!heap_.empty() && finish_ps_[heap_[0]] <= now.ps()) {
    const std::uint32_t f = heap_[0];
    const SimTime at = SimTime::from_ps(finish_ps_[f]);
    touch(at);
    finish_flow(f, at, false, &done);
    settle(at);
  }
  touch(now);
}

void FlowNetwork::reroute(std::uint32_t f) {
  if (fabric_.route(src_[f], dst_[f], label_[f], route_[f])) {
    stalled_[f] = 0;
    link_insert(f);
    set_.push_back(f);
  } else {
    stalled_[f] = 1;
    route_[f].hops = 0;
    bottleneck_[f] = kNone;
  }
}

void FlowNetwork::fail(SimTime now, const std::vector<LinkId>& links, const std::vector<ChipId>& chips,
                       std::vector<FlowDone>& aborted) {
  touch(now);
  for (LinkId l : links) fabric_.set_link_up(l, false);
  std::vector<std::uint8_t> dead(fabric_.chips(), 0);
  for (ChipId c : chips) dead[c.index()] = 1;
  std::vector<std::uint32_t> moved;
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f]) continue;
    if (dead[src_[f].index()] || dead[dst_[f].index()]) {
      finish_flow(f, now, true, &aborted);
      continue;
    }
    const Route& r = route_[f];
    bool hit = false;
    for (std::uint32_t h = 0; h < r.hops && !hit; ++h) hit = !fabric_.link_up(r.links[h]);
    if (hit) moved.push_back(f);
  }
  for (std::uint32_t f : moved) {
    set_rate(f, 0.0, now);
    link_remove(f);
    for (std::uint32_t h = 0; h < route_[f].hops; ++h) seed_links_.push_back(route_[f].links[h].value);
    reroute(f);
    if (stalled_[f]) {
      finish_ps_[f] = SimTime::never().ps();
      heap_update(f);
    }
  }
  settle(now);
}

void FlowNetwork::recover(SimTime now, const std::vector<LinkId>& links) {
  touch(now);
  for (LinkId l : links) {
    fabric_.set_link_up(l, true);
    seed_links_.push_back(l.value);
  }
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (live_[f] && stalled_[f]) reroute(f);
  }
  settle(now);
}

// --- references for tests ---

std::vector<double> FlowNetwork::reference_rates() const {
  const std::size_t L = capacity_.size();
  std::vector<double> residual(L);
  std::vector<std::vector<std::uint32_t>> on(L);
  std::vector<double> out(live_.size(), 0.0);
  std::vector<bool> frozen(live_.size(), true);
  for (std::size_t l = 0; l < L; ++l) residual[l] = fabric_.link_up(LinkId(static_cast<std::uint32_t>(l))) ? capacity_[l] : 0.0;
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f] || route_[f].hops == 0) continue;
    frozen[f] = false;
    for (LinkId l : route_[f]) on[l.index()].push_back(f);
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
      for (LinkId m : route_[f]) residual[m.index()] = std::max(0.0, residual[m.index()] - best);
    }
  }
  return out;
}

std::string FlowNetwork::check() const {
  const std::size_t L = capacity_.size();
  std::vector<double> load(L, 0.0), top(L, 0.0);
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f]) continue;
    for (LinkId l : route_[f]) {
      load[l.index()] += rate_[f];
      top[l.index()] = std::max(top[l.index()], rate_[f]);
    }
  }
  for (std::size_t l = 0; l < L; ++l) {
    if (load[l] > capacity_[l] * (1 + 1e-9)) return "link " + std::to_string(l) + " is over capacity";
  }
  for (std::uint32_t f = 0; f < live_.size(); ++f) {
    if (!live_[f] || route_[f].hops == 0) continue;
    bool has_bottleneck = false;
    for (LinkId l : route_[f]) {
      const double cap = capacity_[l.index()];
      if (load[l.index()] >= cap * (1 - 1e-9) && rate_[f] >= top[l.index()] - 1e-9 * cap) has_bottleneck = true;
    }
    if (!has_bottleneck) return "flow in slot " + std::to_string(f) + " has no bottleneck";
  }
  return "";
}

}  // namespace servesim::topologies
