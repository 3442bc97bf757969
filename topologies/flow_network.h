// The flow-level network: transfers between chips (KV caches, embeddings, activations) as flows
// on routed paths, sharing link bandwidth max-min fairly.
//
// Model: a flow of S bytes from chip a to chip b pins one route (Fabric::route, ECMP by its flow
// label). At every instant the rates are the max-min fair allocation over the flows' links
// (Bertsekas & Gallager, Data Networks, sec. 6.5.2): no rate can grow without shrinking one that
// is no larger. Rates only change when a flow starts, ends, or is rerouted, so a flow's rate is
// piecewise constant and its completion time is exact: now + remaining / rate (rounded up to the
// picosecond).
//
// Incremental update (what makes 100,000 concurrent flows cheap): after a change, only a set S of
// flows is re-solved, by progressive filling over the links S touches with every other flow held
// at its rate. The result is then checked against the max-min conditions of the flows just
// outside S on those links (their bottleneck still saturated and they the largest on it; no flow
// bottlenecked there smaller than them); any flow that fails joins S and S is solved again. When
// nothing fails, every flow has a saturated bottleneck on which it is the largest, which is the
// max-min allocation (it is unique), so the result equals a full recomputation (tested against
// one). In a non-blocking fabric most flows are bottlenecked at their endpoints' NICs and S stays
// a handful of flows.
//
// Faults: a failed link's flows are rerouted at once (a flow with no surviving route stalls at
// rate 0 until a link recovers); a failed chip aborts its flows. Each is reported to the caller.
// Link utilization: bytes carried and peak load per link, and the carried load of each link class
// over time in bins that double their width when they grow too many (compact for long runs).
// Deliberately ignored: slow start and congestion-control dynamics, per-packet effects, flows
// moving back to a better path after a recovery.
// Invariants: time never goes back; link loads never exceed capacity (to 1e-9); every byte a flow
// started with is delivered by its completion (rate x time integrates to its size).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/time.h"
#include "topologies/fabric.h"

namespace servesim::topologies {

struct FlowHandle {
  std::uint32_t slot = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t generation = 0;
  bool valid() const { return slot != std::numeric_limits<std::uint32_t>::max(); }
  bool operator==(const FlowHandle&) const = default;
};

// A flow that left the network: completed, or aborted by a fault (bytes = what it delivered).
struct FlowDone {
  FlowHandle flow;
  std::uint64_t tag = 0;
  SimTime at;
  double bytes = 0;
  bool aborted = false;
};

struct LinkUsageSeries {
  Duration bin;                       // width of each bin
  std::vector<double> bytes;          // bytes carried by the class's links in each bin
};

class FlowNetwork {
 public:
  struct Options {
    Duration utilization_bin = Duration::milliseconds(1);
    std::size_t max_bins = 4096;      // beyond this, bins are merged pairwise (width doubles)
  };

  FlowNetwork(Fabric& fabric, Options options);
  explicit FlowNetwork(Fabric& fabric) : FlowNetwork(fabric, Options{}) {}

  // Starts a flow of `bytes` (> 0) from src to dst at `now`. `tag` is the caller's (returned in
  // FlowDone); `label` picks among equal-cost routes. A flow with no route starts stalled.
  FlowHandle start(SimTime now, ChipId src, ChipId dst, double bytes, std::uint64_t tag,
                   std::uint64_t label = 0);
  // Removes a flow before it completes; false when it already left.
  bool cancel(SimTime now, FlowHandle f);

  // The earliest completion among active flows (SimTime::never() when none can complete).
  SimTime next_completion() const;
  // Completes, one by one in time order, every flow due at or before `now`, appending them.
  void complete_until(SimTime now, std::vector<FlowDone>& done);

  // Faults. Links in `links` go down (their flows are rerouted or stall); flows from or to
  // `chips` are aborted and appended to `aborted`.
  void fail(SimTime now, const std::vector<LinkId>& links, const std::vector<ChipId>& chips,
            std::vector<FlowDone>& aborted);
  // Links come back; stalled flows that now have a route start moving.
  void recover(SimTime now, const std::vector<LinkId>& links);

  bool active(FlowHandle f) const;
  double rate(FlowHandle f) const;            // bytes/s now
  double remaining(FlowHandle f, SimTime now) const;
  SimTime finish_time(FlowHandle f) const;
  bool stalled(FlowHandle f) const;
  const Route& route(FlowHandle f) const;
  std::size_t active_flows() const { return active_count_; }
  std::size_t stalled_flows() const;

  // Utilization, carried up to `now`.
  void account_until(SimTime now);
  double link_bytes(LinkId l) const { return link_bytes_[l.index()]; }
  double link_load(LinkId l) const { return link_load_[l.index()]; }   // bytes/s now
  double link_peak(LinkId l) const { return link_peak_[l.index()]; }
  const LinkUsageSeries& class_usage(LinkClass c) const { return series_[static_cast<std::size_t>(c)]; }

  // Counters for benchmarks: flows re-solved and rounds of the incremental update.
  std::uint64_t solved_flows() const { return solved_flows_; }
  std::uint64_t settle_rounds() const { return settle_rounds_; }

  // Reference for tests: every active flow's max-min rate by progressive filling over all flows
  // from scratch, indexed by slot (0 for free slots).
  std::vector<double> reference_rates() const;
  // Checks capacities and the max-min conditions of every flow; returns the first problem or "".
  std::string check() const;

  const Fabric& fabric() const { return fabric_; }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  std::uint32_t new_slot();
  void link_insert(std::uint32_t f);
  void link_remove(std::uint32_t f);
  void settle(SimTime now);
  void solve();
  bool verify();
  void commit(SimTime now);
  void set_rate(std::uint32_t f, double rate, SimTime now);
  void move_link_load(std::uint32_t link, double delta, SimTime now);
  void advance_class(std::size_t cls, SimTime now);
  void heap_update(std::uint32_t f);
  void heap_remove(std::uint32_t f);
  void heap_sift_up(std::size_t i);
  void heap_sift_down(std::size_t i);
  bool heap_less(std::uint32_t a, std::uint32_t b) const;
  void finish_flow(std::uint32_t f, SimTime at, bool aborted, std::vector<FlowDone>* out);
  void reroute(std::uint32_t f);
  void touch(SimTime now);

  Fabric& fabric_;
  Options options_;
  SimTime now_ = SimTime::zero();

  // Per flow slot.
  std::vector<double> rate_, remaining_, size_, new_rate_;
  std::vector<std::int64_t> last_ps_, finish_ps_;
  std::vector<std::uint32_t> bottleneck_, new_bottleneck_, generation_, heap_pos_, mark_;
  std::vector<std::uint64_t> tag_, label_;
  std::vector<ChipId> src_, dst_;
  std::vector<Route> route_;
  std::vector<std::uint8_t> live_, stalled_;
  std::vector<std::uint32_t> free_slots_;
  // Per (slot, hop): the intrusive list of flows on each link.
  std::vector<std::uint32_t> next_, prev_;
  std::size_t active_count_ = 0;

  // Per link.
  std::vector<double> capacity_, link_load_, link_bytes_, link_peak_;
  std::vector<std::int64_t> link_last_ps_;
  std::vector<std::uint32_t> head_, link_flows_;
  std::vector<std::uint32_t> link_mark_;
  std::vector<double> residual_, level_;
  std::vector<std::uint32_t> unfrozen_;

  // Per link class: load now and the binned series.
  std::array<double, static_cast<std::size_t>(LinkClass::kCount)> class_load_{};
  std::array<std::int64_t, static_cast<std::size_t>(LinkClass::kCount)> class_last_ps_{};
  std::array<LinkUsageSeries, static_cast<std::size_t>(LinkClass::kCount)> series_;

  // The completion heap (slots ordered by finish time, then slot).
  std::vector<std::uint32_t> heap_;

  // Scratch for settle: the set S, the links it touches, extra links to check, the filling heap.
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> set_, links_, seed_links_, violators_, vmark_;
  std::vector<std::pair<double, std::uint32_t>> fill_heap_;

  std::uint64_t solved_flows_ = 0, settle_rounds_ = 0;
};

}  // namespace servesim::topologies
