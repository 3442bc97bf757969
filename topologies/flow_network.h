// The flow-level network: transfers between chips (KV caches, embeddings, activations) as flows
// on routed paths, sharing link bandwidth max-min fairly.
//
// Model: a flow of S bytes from chip a to chip b takes the resources Fabric::flow_route gives it:
// one pinned path (ECMP by its flow label) or, under adaptive routing, its NIC links and the
// bundles of the tiers it crosses. "Links" below are these resources (ids: Fabric's resources). At every instant the
// rates are the max-min fair allocation over the flows' links (Bertsekas & Gallager, Data Networks, sec. 6.5.2): no
// rate can grow without shrinking one that is no larger. Rates only change when a flow starts, ends, or is rerouted, so
// a flow's rate is piecewise constant and its completion time is exact: now + remaining / rate (rounded up to the
// picosecond).
//
// Incremental update (what makes 100,000 concurrent flows cheap): after a change, only a set S of
// flows is re-solved, by progressive filling over the links S touches with every other flow held
// at its rate. The result is then checked against the max-min conditions of the flows just
// outside S on those links (their bottleneck still saturated and they the largest on it; no flow
// bottlenecked there smaller than them); any flow that fails joins S and S is solved again. When
// nothing fails, every flow has a saturated bottleneck on which it is the largest, which is the
// max-min allocation (it is unique), so the result equals a full recomputation (tested against
// one). Three facts keep S and the links it visits small. Each flow is capped by the slowest link
// of its route (it could never go faster); a link whose flows' caps add up to no more than its
// capacity can never bind (it is passive and never visited); and a link whose load is below its
// capacity binds nobody now (it is slack): it is only checked, through its running load, for
// whether S's new rates would overfill it, in which case it joins the solve. In a non-blocking
// fabric the core is passive or slack, most flows are bottlenecked at their endpoints' NICs, and
// S stays a handful of flows.
//
// Changes at one instant are settled together: start, cancel, completion, fail and recover only
// record what changed; the allocation is brought up to date (one update for the batch) when time
// moves on or a rate, finish time or next completion is asked for (`flush`). A completion and the
// flow the caller starts in its place at the same instant cost one update; so do 100,000 flows
// started at once (one progressive filling over all of them).
//
// Faults: a failed link's flows are rerouted at once (a flow with no surviving route stalls at
// rate 0 until a link recovers); a failed chip aborts its flows. Each is reported to the caller.
// Reservations: a share of a link's bandwidth can be held for traffic that is not a flow here (an
// instance's expert all-to-all on its chips' NICs, sim/cluster); the flows on the link share what
// is left, max-min as before (the capacity the solve sees is the link's times 1 - the share).
// Link utilization: bytes carried per link (credited when a flow leaves a route, or on
// account_until), and the bytes each link class carried over time, in bins that double their
// width when they grow too many (compact for long runs). A network whose caller reads neither
// (Options::track_utilization off) keeps no such accounting; its rates and times are the same.
// Deliberately ignored: slow start and congestion-control dynamics, per-packet effects, flows
// moving back to a better path after a recovery.
// Invariants: time never goes back; link loads never exceed capacity (to 1e-9); every byte a flow
// started with is delivered by its completion (rate x time integrates to its size).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"
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
  Duration bin;               // width of each bin
  std::vector<double> bytes;  // bytes carried by the class's links in each bin
};

class FlowNetwork {
 public:
  struct Options {
    Duration utilization_bin = Duration::milliseconds(1);
    std::size_t max_bins = 4096;  // beyond this, bins are merged pairwise (width doubles)
    // Off: no bytes per link or link class are kept (account_until, link_bytes and class_usage
    // must not be called); nothing else changes.
    bool track_utilization = true;
  };

  // Over a fabric that faults change (fail and recover take its links down and up).
  FlowNetwork(Fabric& fabric, Options options);
  explicit FlowNetwork(Fabric& fabric) : FlowNetwork(fabric, Options{}) {}
  // Over a fabric it only reads (one that runs without faults share): failing or recovering a
  // link is a bug.
  FlowNetwork(const Fabric& fabric, Options options);

  // Starts a flow of `bytes` (> 0) from src to dst at `now`. `tag` is the caller's (returned in
  // FlowDone); `label` picks among equal-cost routes. A flow with no route starts stalled.
  FlowHandle start(SimTime now, ChipId src, ChipId dst, double bytes, std::uint64_t tag, std::uint64_t label = 0);
  // Removes a flow before it completes; false when it already left.
  bool cancel(SimTime now, FlowHandle f);

  // The earliest completion among active flows (SimTime::never() when none can complete).
  SimTime next_completion();
  // Completes, one by one in time order, every flow due at or before `now`, appending them.
  void complete_until(SimTime now, std::vector<FlowDone>& done);

  // Faults. Links in `links` go down (their flows are rerouted or stall); flows from or to
  // `chips` are aborted and appended to `aborted`.
  void fail(SimTime now, const std::vector<LinkId>& links, const std::vector<ChipId>& chips,
            std::vector<FlowDone>& aborted);
  // Links come back; stalled flows that now have a route start moving.
  void recover(SimTime now, const std::vector<LinkId>& links);

  // Holds `share` (in [0, 1)) of resource l's bandwidth from `now` on, for traffic outside the
  // flow network (0 releases it); its flows are re-solved on what is left. O(1) when no flow
  // crosses it. A failed link keeps its share for when it recovers.
  void reserve(SimTime now, LinkId l, double share);
  double reserved(LinkId l) const {
    if (!link_group_.empty() && link_group_[l.index()] != kNone) return groups_[link_group_[l.index()]].share;
    return reserved_.empty() ? 0.0 : reserved_[l.index()];
  }
  // Whether some flow's route crosses resource l now (started, not completed, not stalled).
  bool carries(LinkId l) const { return link_[l.index()].head != kNone; }

  // Reserve groups: resources whose reserved share moves together (an instance's NIC links,
  // booked at every iteration). reserve_group(g, s) is reserve(l, s) on each of its resources in
  // order, except that while no flow crosses any of them it only records s, and a resource takes
  // it when a flow arrives on it (before its cap is read): the same capacities wherever a flow
  // sees them, in O(1) instead of O(resources). A resource belongs to at most one group.
  std::uint32_t add_reserve_group(std::span<const LinkId> resources);
  // True when a flow crosses one of the group's resources (its flows are then re-solved).
  bool reserve_group(SimTime now, std::uint32_t group, double share);
  // Whether some flow crosses one of the group's resources now: a count kept by the link lists.
  bool group_carries(std::uint32_t group) const { return groups_[group].carried > 0; }
  // The flows crossing one resource now: their summed rate (bytes/s) and the bytes they have
  // left, the resource's whole capacity (bytes/s, before any reserved share), and whether it
  // binds them (their rates fill what its reserved share leaves, to 1e-9).
  struct ResourceTraffic {
    double rate = 0, remaining = 0, capacity = 0;
    bool saturated = false;
  };
  // One entry per resource of reserve group `group` that flows cross now, in the group's order
  // (settles pending changes first).
  void group_traffic(SimTime now, std::uint32_t group, std::vector<ResourceTraffic>& out);

  // Settles the changes recorded so far (the queries below do it themselves).
  void flush();

  bool active(FlowHandle f) const;
  double rate(FlowHandle f);  // bytes/s now
  double remaining(FlowHandle f, SimTime now);
  SimTime finish_time(FlowHandle f);
  bool stalled(FlowHandle f) const;
  Route route(FlowHandle f) const;
  std::size_t active_flows() const { return active_count_; }
  std::size_t stalled_flows() const;

  // Utilization, carried up to `now`, per resource (a link, or a bundle under adaptive routing).
  // Only with Options::track_utilization.
  void account_until(SimTime now);
  double link_bytes(LinkId l) const;
  double link_load(LinkId l);  // bytes/s now (sums the link's flows)
  bool link_passive(LinkId l) const { return link_[l.index()].demand <= link_[l.index()].capacity; }
  const LinkUsageSeries& class_usage(LinkClass c) const;

  // Counters for benchmarks: incremental updates, flows re-solved, rounds (solve + check).
  std::uint64_t updates() const { return updates_; }
  std::uint64_t solved_flows() const { return solved_flows_; }
  std::uint64_t settle_rounds() const { return settle_rounds_; }

  // Reference for tests: every active flow's max-min rate by progressive filling over all flows
  // from scratch, indexed by slot (0 for free slots).
  std::vector<double> reference_rates();
  // Checks capacities and the max-min conditions of every flow; returns the first problem or "".
  std::string check();

  const Fabric& fabric() const { return fabric_; }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::size_t kClasses = static_cast<std::size_t>(LinkClass::kCount);

  // What the incremental update reads for every flow it meets, in two cache lines: the first
  // holds the rate, the set mark and the list pointers it follows along a link.
  struct alignas(64) FlowHot {
    double rate = 0;
    double new_rate = 0;
    std::uint32_t mark = 0;            // 2 x epoch: in S; 2 x epoch + 1: found violating
    std::uint32_t bottleneck = kNone;  // a link, or kCap (the flow's own cap)
    std::uint32_t new_bottleneck = kNone;
    std::uint8_t hops = 0;
    std::array<std::uint32_t, kMaxHops> next{};  // entry (slot x kMaxHops + hop) after this one
    std::array<std::uint32_t, kMaxHops> prev{};
    std::array<LinkId, kMaxHops> links{};
  };
  // Per link: capacity, the sum of its flows' caps (passive when it does not exceed the
  // capacity), the list of its flows, and the update's marks (40 B: a 100k-chip fabric has some
  // 860,000 links and bundles). Scratch values of the links an update visits live in `scratch_`,
  // indexed by `local`; the bytes carried and the link class, read only to track utilization, in
  // link_bytes_ and link_class_.
  struct LinkHot {
    double capacity = 0;
    double demand = 0;
    double load = 0;  // the sum of its flows' rates
    std::uint32_t head = kNone;
    std::uint32_t mark = 0;
    std::uint32_t local = 0;
    std::uint32_t bottlenecked = 0;  // flows whose bottleneck this link is
  };
  struct LinkScratch {
    double residual = 0;
    double level = -1;    // the share at which S flows froze here (-1: none)
    double max_rate = 0;  // the largest new rate of S flows on the link
    std::uint32_t unfrozen = 0;
    std::uint32_t outsiders = 0;
    bool overloaded = false;  // the flows outside S alone exceed the capacity (it just shrank)
  };
  static constexpr std::uint32_t kCap = kNone - 1;

  std::uint32_t new_slot();
  void link_insert(std::uint32_t f);
  void link_remove(std::uint32_t f);
  void settle(SimTime now);
  void solve();
  bool verify();
  void commit(SimTime now);
  void set_rate(std::uint32_t f, double rate, SimTime now);
  void flush_classes(SimTime now);
  void credit_links(std::uint32_t f);
  bool active_link(std::uint32_t l) const { return link_[l].demand > link_[l].capacity; }
  bool promote_overfilled();
  // Carries the class's load since it last changed into its series. Inline: most calls find no
  // time passed (flows that leave at one instant) or no load.
  void advance_class(std::size_t cls, SimTime now) {
    const std::int64_t t0 = class_last_ps_[cls];
    class_last_ps_[cls] = now.ps();
    if (t0 < now.ps() && class_load_[cls] > 0) add_class_bytes(cls, t0, now.ps());
  }
  void add_class_bytes(std::size_t cls, std::int64_t t0, std::int64_t t1);
  void heap_update(std::uint32_t f);
  void heap_remove(std::uint32_t f);
  void heap_sift_up(std::size_t i);
  void heap_sift_down(std::size_t i);
  struct HeapEntry {
    std::int64_t finish_ps;
    std::uint32_t slot;
  };
  static bool heap_less(const HeapEntry& a, const HeapEntry& b);
  void finish_flow(std::uint32_t f, SimTime at, bool aborted, std::vector<FlowDone>* out);
  void reroute(std::uint32_t f);
  void refresh_capacity(LinkId l);
  void set_capacity(std::uint32_t resource);  // the fabric's capacity less the reserved share
  void set_bottleneck(FlowHot& f, std::uint32_t link);
  // Adds to S the flows whose bottleneck `link` is; inline for the common link that has none.
  void add_bottlenecked(std::uint32_t link) {
    if (link_[link].bottlenecked > 0) add_bottlenecked_flows(link);
  }
  void add_bottlenecked_flows(std::uint32_t link);
  void touch(SimTime now);

  const Fabric& fabric_;
  Fabric* faulty_fabric_ = nullptr;  // fabric_, when faults may change it
  Options options_;
  SimTime now_ = SimTime::zero();
  bool pending_ = false;  // changes at now_ not yet settled

  // Per flow slot: the hot part, then the rest.
  std::vector<FlowHot> hot_;
  std::vector<double> remaining_, size_, cap_, credited_;
  std::vector<std::int64_t> last_ps_, finish_ps_;
  std::vector<std::uint32_t> generation_, heap_pos_;
  std::vector<std::uint64_t> tag_, label_;
  std::vector<ChipId> src_, dst_;
  std::vector<std::uint8_t> live_, stalled_;
  std::vector<std::uint32_t> free_slots_;
  std::size_t active_count_ = 0;

  std::vector<LinkHot> link_;
  // With track_utilization (else empty): per link, bytes carried (credited when a flow leaves it,
  // or on account_until) and its class.
  std::vector<double> link_bytes_;
  std::vector<std::uint8_t> link_class_;
  std::vector<double> reserved_;  // per resource, the share held (empty until the first reserve)
  struct ReserveGroup {
    double share = 0;
    std::uint64_t carried = 0;         // (flow, hop) entries on its resources
    std::uint32_t begin = 0, end = 0;  // in group_resources_
  };
  std::vector<ReserveGroup> groups_;
  std::vector<LinkId> group_resources_;
  std::vector<std::uint32_t> link_group_;     // per resource, its group (empty until the first group)
  void sync_reserve(std::uint32_t resource);  // an empty resource takes its group's share
  std::vector<std::uint32_t> moved_;          // scratch: the flows of a resource whose capacity changes
  std::vector<LinkScratch> scratch_;

  // Per link class: load now, changes not yet carried into the series, the binned series.
  std::array<double, kClasses> class_load_{};
  std::array<double, kClasses> class_delta_{};
  std::array<std::int64_t, kClasses> class_last_ps_{};
  std::array<LinkUsageSeries, kClasses> series_;

  // The completion heap (slots ordered by finish time, then slot).
  std::vector<HeapEntry> heap_;

  // Scratch for settle: the set S, the links it touches (and extra ones to check), the filling
  // heap, the flows found violating.
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> set_, links_, seed_links_, violators_, slack_;
  std::vector<double> slack_delta_;
  std::vector<std::pair<double, std::uint32_t>> fill_heap_;

  std::uint64_t updates_ = 0, solved_flows_ = 0, settle_rounds_ = 0;
};

}  // namespace servesim::topologies
