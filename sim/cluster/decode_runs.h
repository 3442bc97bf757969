// Decode runs: several decode steps of one instance in one event.
//
// Models: a decode instance (pp = 1, free-KV placement, no speculative decoding, an even
// attention-DP split, no all-to-all on its NICs) whose batch is decode-only, with no request ready
// or waiting to join and none about to leave before the k-th step, runs steps 0 .. k-1 in one
// event: their batches are known at dispatch (every context grows by one per step;
// DecodeSet::Lookahead), so their costs and ends are too. Only the BatchFinished at the last
// step's end is scheduled; the steps before it are applied (tokens, blocks, metrics, exactly as
// per-step events would) when the run ends, or earlier: cut() when a request is about to join
// (its KV arrived) ends the run at the step in flight, stop() (a failure) and settle_all() (the
// end of the window) apply what ran before. A run books the KV blocks its steps will take when it
// starts (as vLLM's multi-step scheduling pre-allocates slots for its steps), so the decode
// placement sees free KV net of them, where per-step events would show them taken one step at a
// time: the one difference in behaviour (README, "Decode runs").
// Runs do not depend on what is recorded: a time series or a trace hears of each step as it is
// applied (RunObserver::run_step: its tokens and the KV blocks the next step took at its end, the
// next step's span), what the per-step events would have recorded.
// Costs are taken as needed: a run's steps are costed in chunks (4 steps, then twice as
// many each time), since most runs are cut long before their last step (a KV arrival: 42% of the
// planned steps on the serve EPD bench, 95% on the 100k-chip one). Until the last chunk is
// costed, the run's BatchFinished waits in the queue at the end of the last costed step, in the
// place among same-time events its final time will have (EventQueue::refile keeps its
// sequence), and the instance's first stage counts as busy for good (its end is not known, and it
// is after now): when that provisional event comes up, extend() costs the next chunk and the
// event moves on, without being an event of the run. A step costs the same whenever it is costed
// (its shape is known at planning; the cost model's answer depends on the shape alone), so the
// results are those of costing all steps at once.
// Ignores: nothing per step is lost; the steps a settle applies reach the recorder as one sum
// (integer sums, the same totals).
// Invariants: a run's steps before its last finish nobody and change no batch (CHECKed as they are
// applied); a BatchFinished whose run generation is not the instance's is stale.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/time.h"
#include "sim/cluster/agenda.h"
#include "sim/cluster/deployment.h"
#include "sim/cluster/lifecycle.h"
#include "sim/cluster/run_observer.h"

namespace servesim::cluster {

// The decode part of a step of `lane`'s batch that ended at `end`: inter-token gaps, first tokens
// of fresh requests, the lane's step; the requests that finished are left in `finished`. Returns
// the drafts the step accepted (speculative decoding: its tokens beyond one per request).
std::int64_t end_decode_step(Lane& lane, SimTime end, Lifecycle& lifecycle, RunObserver& observer,
                             std::vector<RequestId>& finished);

class DecodeRuns {
 public:
  DecodeRuns(const SimulationConfig& config, Deployment& deployment, Lifecycle& lifecycle, RunObserver& observer,
             Agenda& agenda);

  // The generation a BatchFinished of `instance` must carry to be live.
  std::uint32_t generation(std::uint32_t instance) const {
    const DecodeRun* run = find(instance);
    return run != nullptr ? run->generation : 0;
  }
  bool active(std::uint32_t instance) const {
    const DecodeRun* run = find(instance);
    return run != nullptr && run->size > 0;
  }
  // Whether a batch of `lane` of `instance` dispatched now may start a run.
  bool eligible(std::uint32_t instance, const Lane& lane, bool preempted) const;
  // Plans the run of `lane`'s batch whose first step ends at first_end; returns when its last
  // step ends (first_end when it is one step). `steps_ready`: the batch's decode_steps are the
  // cost model's decode_steps() of it already (the dispatch costed its first step that way).
  SimTime plan(std::uint32_t instance, Lane& lane, SimTime first_end, bool steps_ready);
  // Whether `e` (live) is a run's BatchFinished whose time is provisional: the end of the steps
  // costed so far, not the run's last.
  bool provisional(const BatchFinished& e) const {
    const DecodeRun* r = find(e.instance);
    return r != nullptr && r->costed < r->size;
  }
  // Costs the run's next chunk of steps (the provisional event at now came up); returns when its
  // BatchFinished happens now: the run's last step's end, or the new provisional time.
  SimTime extend(std::uint32_t instance);
  // The run's last step ended (its BatchFinished is being handled): apply the steps before it.
  void finish(std::uint32_t instance);
  // A request is about to join: the run ends with the step in flight.
  void cut(std::uint32_t instance);
  // A failure: the steps that ended before it count, the rest never run.
  void stop(std::uint32_t instance);
  // The end of the window: steps that ended within it count, as their events would have.
  void settle_all(SimTime end);

 private:
  struct DecodeRun {
    std::vector<SimTime> ends;  // when step k ends
    // Step k > 0's context-dependent cost terms, expanded into components when it is applied
    // (step 0's are the batch's).
    std::vector<IterationCostModel::DecodeStepParts> parts;
    std::uint32_t size = 0;        // steps in the run (0 or 1: no run)
    std::uint32_t applied = 0;     // steps whose effects are applied
    std::uint32_t generation = 0;  // of the BatchFinished event that ends it
    std::uint32_t costed = 0;      // steps whose ends and parts are known (applied < costed <= size)
    std::uint32_t chunk = 0;       // steps the next costing takes
    SimTime queued;                // when its BatchFinished is in the queue
    models::BatchShape next;       // the shape of step `costed` (uncapped runs)
    // The shapes of steps `costed`, ... (capped runs; it reads the lane's cap ring for steps
    // ahead of the lane's own, which a run's applied steps do not change).
    std::optional<DecodeSet::Lookahead> ahead;
    IterationCostModel::RunBindings bindings;  // what its first chunk bound (uncapped runs)
  };
  const DecodeRun* find(std::uint32_t instance) const {
    const std::uint32_t k = instance - first_;
    return k < runs_.size() ? &runs_[k] : nullptr;
  }
  DecodeRun& run(std::uint32_t instance) { return runs_[instance - first_]; }
  void apply_step(Lane& lane, DecodeRun& run);
  // Costs the next chunk of the run's steps (costed < size).
  void cost_chunk(std::uint32_t instance, DecodeRun& run);
  // Costs steps until the first that ends after t is costed, or all are.
  void cost_through(std::uint32_t instance, DecodeRun& run, SimTime t) {
    while (run.costed < run.size && run.ends[run.costed - 1] <= t) cost_chunk(instance, run);
  }
  void settle(std::uint32_t instance, SimTime t);
  void end(std::uint32_t instance);

  static constexpr std::uint32_t kFirstChunk = 4;  // steps a run costs first (then 8, 16, ...)

  Deployment& deployment_;
  Lifecycle& lifecycle_;
  RunObserver& observer_;
  Agenda& agenda_;
  bool enabled_ = false;
  std::uint64_t cap_ = 1;        // decode_steps_per_event
  std::uint32_t first_ = 0;      // the decode pool's first instance
  std::vector<DecodeRun> runs_;  // per decode instance, when enabled
  std::vector<RequestId> finished_;
  std::vector<Preemption> preempted_;
};

}  // namespace servesim::cluster
