#include "sim/cluster/decode_runs.h"

#include <algorithm>
#include <span>

namespace servesim::cluster {

std::int64_t end_decode_step(Lane& lane, SimTime end, Lifecycle& lifecycle, RunObserver& observer,
                             std::vector<RequestId>& finished) {
  const std::uint32_t decodes = lane.batch().decodes;
  // Speculative decoding: the accepted drafts are emitted with the step's own tokens (gaps of 0).
  const std::int64_t accepted = lane.decode_set().step_accepted();
  lane.decode_gaps(end, decodes, [&](Duration gap, std::int64_t count) { observer.gap(gap, count); });
  if (accepted > 0) observer.gap(Duration::zero(), accepted);
  // Requests whose KV came from a prefill instance: this step emitted their first token (with the
  // tokens of the steps before it when their first response was held).
  lane.answer_fresh([&](RequestId r, std::int64_t tokens) {
    lifecycle.first_token(r, true, end);
    if (tokens > 1) [[unlikely]]
      observer.gap(Duration::zero(), tokens - 1);
  });
  lane.clear_fresh();
  finished.clear();
  lane.finish_decode_step(finished);
  return accepted;
}

DecodeRuns::DecodeRuns(const SimulationConfig& config, Deployment& deployment, Lifecycle& lifecycle,
                       RunObserver& observer, Agenda& agenda)
    : deployment_(deployment),
      lifecycle_(lifecycle),
      observer_(observer),
      agenda_(agenda),
      cap_(static_cast<std::uint64_t>(config.decode_steps_per_event)) {
  if (deployment.decode_pool() < 0) return;
  const Pool& dp = deployment.decode();
  // Runs assume one token per request per step and an even split over the dp ranks: off with
  // speculative decoding or per-rank batches, and for an all-to-all that shares its NICs.
  enabled_ = config.decode_steps_per_event > 1 && dp.load.unit() == LoadUnit::kFreeBlocks && dp.config->plan.pp == 1 &&
             !dp.config->speculative.enabled() && dp.config->attention_dp == AttentionDpBalance::kEven &&
             !dp.a2a_on_nics;
  if (!enabled_) return;
  first_ = dp.first_instance;
  runs_.resize(static_cast<std::size_t>(dp.config->instances));
}

bool DecodeRuns::eligible(std::uint32_t instance, const Lane& lane, bool preempted) const {
  return enabled_ && find(instance) != nullptr && lane.batch().chunks.empty() && !preempted && lane.ready() == 0 &&
         !lane.has_waiting() && !lane.decode_set().holding() &&
         (lane.decode_set().fresh().empty() || !lifecycle_.wants_first_token());
}

SimTime DecodeRuns::plan(std::uint32_t instance, Lane& lane, SimTime first_end, bool steps_ready) {
  Pool& pool = deployment_.pool_of(instance);
  DecodeRun& r = run(instance);
  // Steps 0 .. k - 1, where step k - 1 is the first in which a request emits its last token (or
  // the cap, decode_steps_per_event), and every step's KV blocks are free now (nobody else takes
  // blocks before a cut). The run's length depends on nothing else: it books its steps' blocks,
  // and what the free-KV router and inbound reservations see is the free blocks after them, so a
  // run length chosen for speed (planning fewer steps when runs tend to be cut) would change the
  // answers.
  const std::uint64_t limit =
      std::min({cap_, lane.decode_set().steps_to_first_finish() + 1, lane.decode_set().lookahead_limit()});
  if (limit < 2) return first_end;
  if (r.ends.size() < limit) {
    r.ends.resize(static_cast<std::size_t>(limit));
    r.parts.resize(static_cast<std::size_t>(limit));
  }
  r.ends[0] = first_end;
  // The steps whose blocks are free now (what they need does not depend on their times).
  std::int64_t free = lane.free_blocks();
  std::int64_t booked = 0;
  std::uint32_t k = 1;
  for (; k < limit; ++k) {
    const std::int64_t need = lane.decode_set().step_blocks_ahead(k);
    if (need > free) break;  // that step preempts: it is dispatched on its own
    free -= need;
    booked += need;
  }
  if (k < 2) return first_end;
  // The steps' costs (iteration_cost.h): what they share once, then their contexts' terms. They
  // have no all-to-all stretch (cost()'s nic_share below 1): runs are off for a pool whose all-to-all
  // shares its NICs with the flows.
  SERVESIM_CHECK(!pool.a2a_on_nics);
  Batch& batch = lane.batch();
  if (!steps_ready) batch.steps = pool.cost->decode_steps(static_cast<std::int64_t>(batch.decodes));
  r.size = k;
  r.applied = 0;
  ++r.generation;
  lane.book(booked);
  r.ahead.emplace(lane.decode_set());
  // Uncapped: only the contexts grow, and the cost model walks a chunk's steps from its first
  // shape. Capped (windows, top-k): each step's shape from the lookahead.
  if (!lane.decode_set().capped()) {
    r.next = r.ahead->next();
    r.bindings.start();
  }
  r.costed = 1;
  r.chunk = kFirstChunk;
  cost_chunk(instance, r);
  r.queued = r.ends[r.costed - 1];
  // Busy until the run's end; while that is not known, for good (a time after now, which is all
  // that is asked of it until the run ends, is cut or stops).
  deployment_.instance(instance).stage_free.front() = r.costed == k ? r.queued : SimTime::never();
  return r.queued;
}

void DecodeRuns::cost_chunk(std::uint32_t instance, DecodeRun& r) {
  const Pool& pool = deployment_.pool_of(instance);
  const Lane& lane = deployment_.instance(instance).lanes.front();
  const Batch& batch = lane.batch();
  const std::uint32_t n = std::min(r.chunk, r.size - r.costed);
  const std::uint32_t at = r.costed;
  if (lane.decode_set().capped()) {
    SimTime t = r.ends[at - 1];
    for (std::uint32_t j = at; j < at + n; ++j) {
      t = t + Duration::picoseconds(pool.cost->decode_step(batch.steps, r.ahead->next(), r.parts[j]));
      r.ends[j] = t;
    }
  } else {
    pool.cost->decode_run(batch.steps, r.next, n, r.ends[at - 1], r.ends.data() + at, r.parts.data() + at, &r.bindings);
    // Step `at + n`'s shape: every context grew by one per step (integer sums below 2^53, exact
    // as decode_run's own additions).
    r.next.decode_kv_tokens += static_cast<double>(n) * r.next.decode_seqs;
  }
  r.costed += n;
  r.chunk *= 2;
}

SimTime DecodeRuns::extend(std::uint32_t instance) {
  DecodeRun& r = run(instance);
  cost_through(instance, r, r.queued);
  r.queued = r.ends[r.costed - 1];
  if (r.costed == r.size) deployment_.instance(instance).stage_free.front() = r.queued;
  return r.queued;
}

void DecodeRuns::apply_step(Lane& lane, DecodeRun& r) {
  // What a BatchFinished and a dispatch do for a decode-only step with nobody joining or leaving
  // (the router's load is free KV, published by settle; the recorder's iteration sums, by settle
  // too).
  end_decode_step(lane, r.ends[r.applied], lifecycle_, observer_, finished_);
  SERVESIM_CHECK_MSG(finished_.empty(), "a decode run's step before its last finished a request");
  lane.unbook(lane.decode_set().step_blocks_ahead(0));  // the next step takes the blocks booked for it
  preempted_.clear();
  const std::uint32_t decodes = lane.prepare_decode_step(preempted_);
  SERVESIM_CHECK_MSG(preempted_.empty() && decodes == lane.batch().decodes, "a decode run's step changed its batch");
  ++r.applied;
}

void DecodeRuns::settle(std::uint32_t instance, SimTime t) {
  DecodeRun& r = run(instance);
  if (r.applied + 1 >= r.size || r.ends[r.applied] > t) return;
  cost_through(instance, r, t);
  const Pool& pool = deployment_.pool_of(instance);
  Lane& lane = deployment_.instance(instance).lanes.front();
  Batch& batch = lane.batch();
  // The batch's components are the step in flight's (step `applied`). The steps applied here go
  // to the recorder as one sum: integer sums, the same totals as one call per step.
  ComponentTimes sum = batch.components;
  const std::uint32_t first = r.applied;
  const bool recording = observer_.records_steps();
  const std::uint32_t local = pool.local(instance);
  std::int64_t used = lane.used_blocks();
  apply_step(lane, r);  // the batch's step: it may carry fresh requests and joins
  // A time series and a trace hear of each step as from its events (the next step's span too:
  // step `first + 1` ends before the run's last, or is it).
  if (recording) [[unlikely]]
    observer_.run_step(pool.metrics_id, local, batch, r.ends[first], lane.used_blocks() - used, r.ends[first + 1]);
  // The steps after it join and free nobody: their gaps (one per request each, in step order, as
  // decode_gaps reports them), then their effects on the lane in one call.
  std::uint32_t last = r.applied;
  while (last + 1 < r.size && r.ends[last] <= t) ++last;
  if (last > r.applied) {
    const std::uint32_t decodes = batch.decodes;
    observer_.gaps(std::span<const SimTime>(r.ends.data() + r.applied - 1, last - r.applied + 1), decodes);
    std::int64_t taken = 0;
    if (recording) [[unlikely]] {
      // Step `applied + j` (j from 0) ends, then the next one's preparation takes its blocks:
      // step_blocks_ahead(j + 1) from here (Lane::quiet_decode_steps).
      used = lane.used_blocks();
      for (std::uint32_t s = r.applied; s < last; ++s) {
        const std::int64_t blocks = lane.decode_set().step_blocks_ahead(s - r.applied + 1);
        taken += blocks;
        observer_.run_step(pool.metrics_id, local, batch, r.ends[s], blocks, r.ends[s + 1]);
      }
    }
    lane.quiet_decode_steps(last - r.applied, decodes, r.ends[last - 1]);
    SERVESIM_CHECK_MSG(!recording || lane.used_blocks() - used == taken,
                       "a decode run's recorded steps took other blocks than its steps");
    r.applied = last;
  }
  // Steps first + 1 .. applied - 1 join the sum (step `applied` is the one in flight now).
  pool.cost->add_steps_components(batch.steps, r.parts.data() + first + 1, r.applied - first - 1, sum);
  const std::int64_t steps = r.applied - first;
  observer_.iterations(pool.metrics_id, sum.data(), steps);
  observer_.decode_iterations(pool.metrics_id, sum.data(), batch.decodes, steps);
  pool.cost->step_components(batch.steps, r.parts[r.applied], batch.components);
}

void DecodeRuns::finish(std::uint32_t instance) {
  if (!active(instance)) return;
  settle(instance, agenda_.now());
  end(instance);
}

void DecodeRuns::stop(std::uint32_t instance) { finish(instance); }

void DecodeRuns::cut(std::uint32_t instance) {
  if (!active(instance)) return;
  settle(instance, agenda_.now());
  Instance& inst = deployment_.instance(instance);
  DecodeRun& r = run(instance);
  if (r.applied + 1 == r.size) return;  // the step in flight is its last already
  // The steps after the one in flight will not run: their booked blocks are free again.
  Lane& lane = inst.lanes.front();
  std::int64_t unbooked = 0;
  for (std::uint32_t k = 1; k < r.size - r.applied; ++k) unbooked += lane.decode_set().step_blocks_ahead(k);
  lane.unbook(unbooked);
  // The event that would have ended the run leaves the queue where it can (else it pops stale).
  const std::uint32_t cut = r.generation;
  const std::uint32_t epoch = inst.epoch;
  agenda_.erase(r.queued, priority_of(Event(BatchFinished{})), [&](const Event& ev) {
    const auto* b = std::get_if<BatchFinished>(&ev);
    return b != nullptr && b->instance == instance && b->run == cut && b->epoch == epoch;
  });
  r.size = r.applied + 1;
  r.costed = r.size;
  r.queued = r.ends[r.applied];
  ++r.generation;
  inst.stage_free.front() = r.ends[r.applied];
  agenda_.schedule(r.ends[r.applied], BatchFinished{instance, 0, inst.epoch, r.generation});
  deployment_.note_free_kv(instance);
}

void DecodeRuns::end(std::uint32_t instance) {
  DecodeRun& r = run(instance);
  r.size = 0;
  r.applied = 0;
}

void DecodeRuns::settle_all(SimTime end) {
  for (std::uint32_t k = 0; k < runs_.size(); ++k) settle(first_ + k, end);
}

}  // namespace servesim::cluster
