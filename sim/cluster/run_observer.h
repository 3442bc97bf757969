// What a run reports while it goes: every hook of the serving model into the metrics, in one place.
//
// Models: the run's recorder (request milestones, iterations, inter-token gaps, attribution) and
// its optional sinks, the time series (per pool: waiting / running / KV-block gauges, output
// tokens; link bytes at the end) and the trace log (a span per batch, KV transfer and failure).
// The serving code calls one method per thing that happened; which sinks hear of it is decided
// here. Gauges are recorded as the change a step made to one lane: begin_step() reads the lane's
// gauges, end_step() reports the difference; changing() does both around a change made outside a
// batch step.
// Ignores: nothing the serving code does depends on it (it only reads what it is shown).
// Invariants: with neither sink, each optional hook costs one null test; no hook allocates.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/ids.h"
#include "core/time.h"
#include "sim/cluster/lane.h"
#include "sim/metrics/recorder.h"
#include "topologies/flow_network.h"
#include "workloads/source.h"

namespace servesim::cluster {

// What a run publishes for a progress display on another thread: simulated time, arrivals issued
// and events so far, updated every 4,096 events and at the end (relaxed atomics; display only).
struct RunProgress {
  std::atomic<std::int64_t> now_ps{0};
  std::atomic<std::int64_t> arrivals{0};
  std::atomic<std::int64_t> events{0};
};

class RunObserver {
 public:
  explicit RunObserver(metrics::Recorder& recorder)
      : recorder_(recorder), series_(recorder.time_series()), trace_(recorder.trace_log()) {}

  // Set-up: the recorder itself (pools, classes, expected requests), and what it records.
  metrics::Recorder& recorder() { return recorder_; }
  bool records_series() const { return series_ != nullptr; }
  bool records_trace() const { return trace_ != nullptr; }
  void set_progress(RunProgress* progress) { progress_ = progress; }
  // Set-up: the next instance (global index) belongs to `pool`.
  void add_instance(PoolId pool) { pool_of_.push_back(pool); }

  // --- request milestones ---
  void arrived(RequestId r, SimTime t, const workloads::Request& in) {
    recorder_.request_arrived(r, t, in.prompt_tokens, in.output_tokens, in.class_id);
  }
  void routed(RequestId r, PoolId pool, std::uint32_t instance) {
    recorder_.request_routed(r, pool, InstanceId(instance));
  }
  // A request joined a waiting queue of `pool` (outside a batch step).
  void enqueued(PoolId pool, SimTime t) {
    if (series_) [[unlikely]]
      series_->gauges_changed(pool, t, 1, 0, 0);
  }
  // n requests left a queue no lane holds (a failed instance's shared queue).
  void dequeued(PoolId pool, SimTime t, std::int64_t n) {
    if (series_) [[unlikely]]
      series_->gauges_changed(pool, t, -n, 0, 0);
  }
  void rejected(RequestId r, SimTime t, metrics::RejectReason reason) { recorder_.request_rejected(r, t, reason); }
  void completed(RequestId r, SimTime t) { recorder_.request_completed(r, t); }
  void first_token(RequestId r, SimTime t) { recorder_.first_token(r, t); }
  void ttft_parts(RequestId r, const std::int64_t* ps) { recorder_.ttft_parts(r, ps); }
  void kv_transfer(PoolId pool, double bytes, Duration transfer, Duration exposed, Duration ttft) {
    recorder_.kv_transfer(pool, bytes, transfer, exposed, ttft);
  }
  void preempted(RequestId r, PoolId pool) { recorder_.request_preempted(r, pool); }
  void requeued(RequestId r) { recorder_.request_requeued(r); }

  // --- iterations and tokens ---
  void iteration(PoolId pool, const std::int64_t* component_ps) { recorder_.iteration(pool, component_ps); }
  void iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t steps) {
    recorder_.iterations(pool, component_ps, steps);
  }
  void decode_iteration(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens) {
    recorder_.decode_iteration(pool, component_ps, tokens);
  }
  void decode_iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens, std::int64_t steps) {
    recorder_.decode_iterations(pool, component_ps, tokens, steps);
  }
  void gap(Duration gap, std::int64_t count) { recorder_.inter_token_gap(gap, count); }
  void gaps(std::span<const SimTime> ends, std::int64_t count) { recorder_.inter_token_gaps(ends, count); }
  // The tokens a batch of `pool` emitted when it ended at t.
  void output_tokens(PoolId pool, SimTime t, std::int64_t n) {
    if (series_) [[unlikely]]
      series_->output_tokens(pool, t, n);
  }

  // --- gauges (lanes of instance `instance`, a global index) ---
  // A batch step of `lane` begins changing it (read its gauges) and ends (report the change).
  void begin_step(const Lane& lane) {
    if (series_) [[unlikely]] {
      before_ = gauges(lane);
      gauged_ = &lane;
    }
  }
  void end_step(std::uint32_t instance, const Lane& lane, SimTime t) {
    if (series_) [[unlikely]] {
      note_gauges(instance, lane, t);
      gauged_ = nullptr;
    }
  }
  // Runs f(), which changes `lane` outside a batch step, recording the gauges' change. (Inside a
  // step that records `lane` itself, that step's record covers the change.)
  template <class F>
  void changing(std::uint32_t instance, const Lane& lane, SimTime t, F&& f) {
    if (!series_ || &lane == gauged_) [[likely]] {
      f();
      return;
    }
    const Gauges outer = before_;
    before_ = gauges(lane);
    f();
    note_gauges(instance, lane, t);
    before_ = outer;
  }

  // --- decode runs (decode_runs.h) ---
  // Whether a decode run's steps are reported one by one (a time series or a trace records).
  bool records_steps() const { return series_ != nullptr || trace_ != nullptr; }
  // A step of a decode run of instance `local` of `pool` ended at `end` with nobody joining or
  // leaving: what its BatchFinished and the next step's dispatch would have recorded (the
  // batch's tokens, the KV blocks the next step took, the next step's span up to `next_end`).
  [[gnu::noinline]] void run_step(PoolId pool, std::uint32_t local, const Batch& batch, SimTime end,
                                  std::int64_t kv_blocks_taken, SimTime next_end);

  // --- trace ---
  // Records the span make() builds when a trace is kept and wants its start; make runs only then.
  template <class Make>
  void trace(Make&& make) {
    if (trace_) [[unlikely]]
      record(make());
  }
  // A batch of `lane` of instance `local` of `pool`, dispatched at `start`, ending at `end`.
  static metrics::TraceSpan batch_span(PoolId pool, std::uint32_t local, std::uint32_t lane, SimTime start, SimTime end,
                                       const Batch& batch, std::size_t preemptions) {
    return metrics::TraceSpan{start.ps(),
                              end.ps(),
                              pool.value,
                              local,
                              static_cast<std::uint16_t>(lane),
                              metrics::TraceKind::kIteration,
                              {batch.decodes, static_cast<std::int64_t>(batch.chunks.size()), batch.prefill_tokens,
                               static_cast<std::int64_t>(preemptions)}};
  }
  // A KV transfer into instance `local` of the decode pool, from `start` to `end`.
  static metrics::TraceSpan transfer_span(PoolId pool, std::uint32_t local, SimTime start, SimTime end, RequestId r,
                                          double bytes, std::int64_t exposed_ps) {
    return metrics::TraceSpan{start.ps(),
                              end.ps(),
                              pool.value,
                              local,
                              0,
                              metrics::TraceKind::kTransfer,
                              {r.value, static_cast<std::int64_t>(bytes), exposed_ps / 1000, 0}};
  }
  // Instance `local` of `pool` down from `start` to its repair, `hit` requests lost or re-queued.
  static metrics::TraceSpan failure_span(PoolId pool, std::uint32_t local, SimTime start, SimTime repair,
                                         std::size_t hit, bool lost) {
    return metrics::TraceSpan{start.ps(),
                              repair.ps(),
                              pool.value,
                              local,
                              0,
                              metrics::TraceKind::kFailure,
                              {static_cast<std::int64_t>(hit), lost ? 1 : 0, 0, 0}};
  }

  // --- progress and the end of the run ---
  // Whether the progress display wants the figures after `events` events (then: publish).
  bool wants_progress(std::uint64_t events) const { return (events & 4095) == 0 && progress_ != nullptr; }
  [[gnu::noinline]] void publish(std::uint64_t events, SimTime now, std::int64_t issued);
  // At the end of a run: a pool's prefix caches summed over its lanes, and one lane's KV peak.
  void prefix_cache(PoolId pool, const metrics::PrefixCacheCounts& c) { recorder_.prefix_cache(pool, c); }
  void kv_peak(PoolId pool, const Lane& lane) {
    recorder_.kv_usage_peak(pool,
                            static_cast<double>(lane.peak_used_blocks()) / static_cast<double>(lane.total_blocks()));
  }
  // The run's window ended at `end`; `net` (may be null) carried the transfers, each flow standing
  // for `flow_copies` rank pairs.
  void finish(SimTime end, topologies::FlowNetwork* net, const topologies::Fabric* fabric, double flow_copies);
  void final_progress(std::uint64_t events, SimTime now, std::int64_t issued) {
    if (progress_) publish(events, now, issued);
  }

 private:
  struct Gauges {
    std::int64_t waiting = 0, running = 0, kv_blocks = 0;
  };
  static Gauges gauges(const Lane& lane) {
    return Gauges{static_cast<std::int64_t>(lane.waiting()), lane.running(), lane.used_blocks()};
  }
  // Reports the change since before_ (recording only: kept out of line).
  [[gnu::noinline]] void note_gauges(std::uint32_t instance, const Lane& lane, SimTime t);
  [[gnu::noinline]] void record(const metrics::TraceSpan& span);
  [[gnu::noinline]] void record_link_usage(topologies::FlowNetwork& net, const topologies::Fabric& fabric, SimTime end,
                                           double flow_copies);

  metrics::Recorder& recorder_;
  metrics::TimeSeries* series_ = nullptr;  // optional sinks (Recorder::time_series, trace_log)
  metrics::TraceLog* trace_ = nullptr;
  RunProgress* progress_ = nullptr;
  std::vector<PoolId> pool_of_;   // per instance
  Gauges before_;                 // a lane's gauges before the step being recorded
  const Lane* gauged_ = nullptr;  // that lane
};

}  // namespace servesim::cluster
