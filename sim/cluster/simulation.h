// The serving model and its event loop.
//
// Requests enter through the workload's RequestSource (workloads/source.h): the loop schedules an
// arrival event per Arrival the source hands out, takes the request when it fires, and tells the
// source about first tokens (staggered closed-loop starts) and finished requests (closed-loop
// clients and sessions send their next request then). Requests are routed to an instance of the
// pool, wait in their lane's queue, and are batched iteration by iteration until their last token.
// One event per batch iteration (plus one per pipeline stage hand-off with pp > 1), one per
// arrival, and one per dispatch of an idle instance: nothing per token.
//
// Invariants, CHECKed as the run goes: time never goes back; every request is in exactly one of
// waiting / prefilling / decoding / done; KV blocks in use never exceed a lane's capacity. With
// set_paranoid(true) every lane's aggregates are recomputed from scratch after every event.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/cluster/batch_scheduler.h"
#include "sim/cluster/config.h"
#include "sim/cluster/events.h"
#include "sim/cluster/instance.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/request_state.h"
#include "sim/cluster/router.h"
#include "sim/core/check.h"
#include "sim/core/event_queue.h"
#include "sim/core/slab_allocator.h"
#include "sim/metrics/recorder.h"
#include "workloads/source.h"

namespace servesim::cluster {

struct RunResult {
  SimTime end;              // the end of the measured window
  std::uint64_t events = 0;
  bool reached_horizon = false;
  // A hash of the event stream: every event's time, type and ids, in order (an OMNeT++-style
  // fingerprint). Equal fingerprints mean the same simulation step by step; golden tests pin it.
  std::uint64_t fingerprint = 0;
};

// What a run publishes for a progress display on another thread: simulated time, arrivals issued
// and events so far, updated every 4,096 events and at the end (relaxed atomics; display only).
struct RunProgress {
  std::atomic<std::int64_t> now_ps{0};
  std::atomic<std::int64_t> arrivals{0};
  std::atomic<std::int64_t> events{0};
};

class Simulation {
 public:
  // The config must have passed the scenario loader's validation (fits in memory, plans valid).
  Simulation(const SimulationConfig& config, metrics::Recorder& recorder);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  RunResult run();
  void set_paranoid(bool on) { paranoid_ = on; }
  void set_progress(RunProgress* progress) { progress_ = progress; }

  // Read access for tests.
  const SlabVector<RequestState>& requests() const { return requests_; }
  // Request r as the source made it (prefix and session identity, image count), kept when the
  // workload has such identity (keeps_inputs(); a plain workload's requests are their lengths,
  // class and stream, all in requests()). Its hash ids and images are readable through source()
  // until it finishes.
  bool keeps_inputs() const { return keep_inputs_; }
  const workloads::Request& input(std::uint32_t r) const {
    SERVESIM_CHECK(keep_inputs_);
    return inputs_[r];
  }
  const workloads::RequestSource& source() const { return *source_; }
  std::int64_t instance_load(std::uint32_t instance) const;
  // True when no lane holds a request or a KV block (every request has left the cluster).
  bool drained() const;

 private:
  struct Pool {
    const PoolConfig* config = nullptr;  // in config_.pools
    PoolId metrics_id;
    std::unique_ptr<IterationCostModel> cost;
    std::unique_ptr<BatchScheduler> scheduler;
    std::unique_ptr<Router> router;
    std::uint32_t first_instance = 0;
  };
  struct Instance {
    std::uint32_t pool = 0;
    std::vector<Lane> lanes;
    std::vector<SimTime> stage_free;  // when each pipeline stage finishes its current work
    std::uint32_t next_lane = 0;      // dispatch rotation
    std::uint32_t next_assign = 0;    // lane assignment rotation for ties
    bool dispatch_pending = false;
  };

  void handle(const RequestArrived& e);
  void handle(const BatchFinished& e);
  void handle(const StageFreed& e);
  void handle(const DispatchRequested& e);

  void schedule(SimTime t, const Event& e) { queue_.push(t, priority_of(e), e); }
  // Schedules the arrivals the source handed out into arrivals_, and clears it.
  void schedule_arrivals();
  void route(std::uint32_t r);
  void reject(std::uint32_t r, metrics::RejectReason reason);
  void complete(std::uint32_t r);
  void client_done(std::uint32_t r, bool completed);
  void try_dispatch(std::uint32_t instance);
  // A change of outstanding work in the unit of the pool's router (tokens or requests).
  static std::int64_t load_units(const Pool& pool, std::int64_t tokens, std::int64_t requests);
  void check_all() const;
  // The time series' gauges for one lane, read before and after a step that changes them.
  struct LaneGauges {
    std::int64_t waiting = 0, running = 0, kv_blocks = 0;
  };
  static LaneGauges lane_gauges(const Lane& lane);
  // Reports the change since gauges_before_ (recording only: kept out of line).
  [[gnu::noinline]] void note_gauges(const Pool& pool, const Lane& lane);
  [[gnu::noinline]] void trace_iteration(const Pool& pool, std::uint32_t instance, std::uint32_t lane,
                                         SimTime end);
  [[gnu::noinline]] void publish_progress(std::uint64_t events);

  SimulationConfig config_;
  metrics::Recorder& recorder_;
  std::vector<Pool> pools_;
  std::vector<Instance> instances_;
  SlabVector<RequestState> requests_;
  // What the source needs back about request r (finished, first_token).
  workloads::Request source_view(std::uint32_t r) const;

  std::unique_ptr<workloads::RequestSource> source_;
  bool keep_inputs_ = false;
  SlabVector<workloads::Request> inputs_;  // indexed like requests_, when keep_inputs_
  std::vector<workloads::Arrival> arrivals_;
  EventQueue<Event> queue_;
  SimTime now_;
  CheckContext check_context_;
  bool paranoid_ = false;
  metrics::TimeSeries* series_ = nullptr;  // optional sinks (Recorder::time_series, trace_log)
  metrics::TraceLog* trace_ = nullptr;
  RunProgress* progress_ = nullptr;
  LaneGauges gauges_before_;  // a lane's gauges before the step being recorded

  // Scratch buffers reused by every event (no allocation per event once warm).
  std::vector<std::uint32_t> finished_;
  std::vector<Preemption> preempted_;
  std::vector<std::int64_t> stage_ps_;
};

}  // namespace servesim::cluster
