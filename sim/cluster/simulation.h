// The serving model and its event loop.
//
// Requests enter through the workload's RequestSource (workloads/source.h): the loop schedules an
// arrival event per Arrival the source hands out, takes the request when it fires, and tells the
// source about first tokens (staggered closed-loop starts) and finished requests (closed-loop
// clients and sessions send their next request then). Requests are routed to an instance of the
// pool, wait in their lane's queue, and are batched iteration by iteration until their last token.
// One event per batch iteration (plus one per pipeline stage hand-off with pp > 1; decode runs
// carry several decode steps in one) and one per arrival: nothing per token. A dispatch of an
// idle instance runs in the loop at the place its event would take, without a queue round trip.
//
// Disaggregated deployments (encode / prefill / decode pools) add: the encode pool's batches
// (EncodeFinished), flows on the cluster's FlowNetwork for image embeddings (encode -> prefill)
// and KV caches (prefill -> decode), one NetworkDue event for the earliest flow completion, and
// the fault timeline (FaultOccurred, InstanceRepaired). See sim/cluster/README.md.
//
// Invariants, CHECKed as the run goes: time never goes back; every request is in exactly one of
// waiting / prefilling / decoding / done; KV blocks in use never exceed a lane's capacity. With
// set_paranoid(true) every lane's aggregates are recomputed from scratch after every event.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim/cluster/batch_scheduler.h"
#include "sim/cluster/config.h"
#include "sim/cluster/events.h"
#include "sim/cluster/instance.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/request_state.h"
#include "sim/cluster/router.h"
#include "core/check.h"
#include "core/event_queue.h"
#include "core/ring_queue.h"
#include "core/slab_allocator.h"
#include "sim/metrics/recorder.h"
#include "topologies/flow_network.h"
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
  // Where each pool's instances live (the scenario's cluster, or the default one); null for an
  // aggregated deployment without a cluster.
  const topologies::ClusterPlacement* placement() const { return placement_; }
  bool instance_up(std::uint32_t instance) const { return instances_[instance].up; }
  // Requests a failure hit, in the order it hit them (tests).
  const std::vector<std::uint32_t>& failed_requests() const { return failed_log_; }
  // True when no lane holds a request or a KV block other than its prefix cache's (every request
  // has left the cluster).
  bool drained() const;
  // How many TP rank pairs each transfer's single flow stands for (0: one flow per rank pair).
  int flow_ranks() const { return flow_ranks_; }

 private:
  struct Pool {
    const PoolConfig* config = nullptr;  // in config_.pools
    PoolRole role = PoolRole::kCombined;
    bool free_kv = false;  // the router's load is the negated free KV blocks (decode placement)
    bool caching = false;  // its lanes have prefix caches
    bool kv_aware = false; // its router is a KvAwareRouter
    double swap_s_per_token = 0;  // swap preemption: host-link seconds per KV token, 0 = off
    bool a2a_on_nics = false;  // its all-to-all and the flows share its chips' NICs (book_a2a)
    std::unique_ptr<models::CostModel> encode_cost;  // encode pools
    std::int64_t admissible_tokens = 0;
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
    bool up = true;
    std::uint32_t epoch = 0;          // bumped when a failure empties it
    double nic_share = 0;             // of its chips' NICs, held for its all-to-all now
    std::uint32_t nic_group = 0;      // a2a_on_nics pools: its chips' NIC links (reserve group)
    // Decode instances: the multi-step run in flight (see DecodeRun).
    struct DecodeRun {
      std::vector<SimTime> ends;          // when step k ends
      // Step k > 0's context-dependent cost terms, expanded into components when it is applied
      // (step 0's are the batch's); what the steps share.
      std::vector<IterationCostModel::DecodeStepParts> parts;
      IterationCostModel::DecodeSteps steps;
      std::uint32_t size = 0;             // steps in the run (0 or 1: no run)
      std::uint32_t applied = 0;          // steps whose effects are applied
      std::uint32_t generation = 0;       // of the BatchFinished event that ends it
    } run;
    // Encode pools: the waiting requests and the batch in flight.
    RingQueue<std::uint32_t> encode_waiting;
    std::vector<std::uint32_t> encode_batch;
    bool encode_busy = false;
  };
  // A request's cold state on its way through the stages: the TTFT segment clock (the time since
  // `mark` goes to the part the next transition names), and its transfers.
  struct Journey {
    SimTime arrival, mark, prefill_end, transfer_start, transfer_end;
    std::array<std::int64_t, metrics::kTtftParts> ttft{};
    double kv_bytes = 0;
    std::uint32_t image_tokens = 0;
    std::uint32_t target = kNoInstance;  // prefill instance of its embeddings; decode instance of its KV
    std::uint16_t target_lane = 0;
    std::uint16_t flows = 0;             // flows in flight
    bool in_prefill = false, preempted = false, ttft_done = false, streamed = false;
    bool transferred = false;
    bool flows_reserved = false;         // KV room reserved on `target` (a decode instance)
    std::uint32_t epoch = 0;             // bumped by failures: its flows in flight are stale
  };
  enum FlowKind : std::uint64_t { kEmbeddingFlow = 0, kKvFlow = 1 };

  void handle(const RequestArrived& e);
  void handle(const BatchFinished& e);

  // --- decode runs ---
  // A decode instance (pp = 1) whose batch is decode-only, with no request ready or waiting to
  // join and none about to leave before the k-th step, runs steps 0 .. k-1 in one event: their
  // batches are known at dispatch (every context grows by one per step; DecodeLookahead), so
  // their costs and ends are too. Only the event at the last step's end is scheduled; the steps
  // before it are applied (tokens, blocks, metrics, exactly as per-step events would) when the
  // run ends, or earlier: cut_run() when a request is about to join (its KV arrived) ends the
  // run at the step in flight, and a failure settles what ran before it. A run books the KV
  // blocks its steps will take when it starts (as vLLM's multi-step scheduling pre-allocates
  // slots for its steps), so the decode placement sees free KV net of them, where per-step
  // events would show them taken one step at a time: the one difference in behaviour, measured
  // in sim/cluster/README.md. Runs are off while a time series or trace records (they want
  // every step at its time).
  // `steps_ready`: run.steps already holds decode_steps() of the batch (try_dispatch costed its
  // first step that way).
  SimTime plan_run(std::uint32_t instance, Lane& lane, SimTime first_end, bool steps_ready);
  void apply_run_step(Lane& lane, Instance::DecodeRun& run);
  // The decode part of a step of `lane`'s batch that ended at `end` (gaps, first tokens of fresh
  // requests, the lane's step; its iteration sums are the caller's to record); the requests that
  // finished are left in finished_. Returns the drafts the step accepted (speculative decoding:
  // its tokens beyond one per request).
  std::int64_t decode_step_ended(Lane& lane, SimTime end);
  void settle_run(std::uint32_t instance, SimTime t);
  void cut_run(std::uint32_t instance);
  void end_run(std::uint32_t instance);
  void handle(const StageFreed& e);
  void handle(const DispatchRequested& e);
  void handle(const EncodeFinished& e);
  void handle(const NetworkDue& e);
  void handle(const FaultOccurred& e);
  void handle(const InstanceRepaired& e);

  // --- stages ---
  void enter(std::uint32_t r);                      // a new or re-queued request's first stage
  void route_encode(std::uint32_t r);
  void try_encode(std::uint32_t instance);
  // Picks the prefill (or combined) instance; kNoInstance after rejecting r.
  std::uint32_t pick_prefill(std::uint32_t r);
  // Prefix caching: request r's segment keys, and the kv_aware pick for it (local index).
  PrefixKeys prefix_keys_of(const workloads::Request& in) const;
  std::uint32_t pick_kv_aware(Pool& pool, std::uint32_t r);
  void enqueue_prefill(std::uint32_t r, std::uint32_t index);
  void prefill_done(std::uint32_t r, Lane& lane);  // disaggregated prefill ended
  // Reserves KV room on a decode instance (the journey's target); false when none has it.
  bool place_decode(std::uint32_t r);
  void start_kv_flows(std::uint32_t r, double bytes);
  void start_flows(std::uint32_t r, std::uint32_t src, std::uint32_t dst, std::uint32_t dst_lane,
                   double bytes, FlowKind kind);
  void flow_done(const topologies::FlowDone& d);
  void kv_arrived(std::uint32_t r);
  void drain_awaiting();
  // `at`: when the token was emitted (now, or a decode run's step before now).
  void first_token_of(std::uint32_t r, bool disaggregated, SimTime at);
  void advance(std::uint32_t r, metrics::TtftPart part) { advance(r, part, now_); }
  void advance(std::uint32_t r, metrics::TtftPart part, SimTime at) {
    Journey& j = journey(r);
    j.ttft[static_cast<std::size_t>(part)] += (at - j.mark).ps();
    j.mark = at;
  }
  void reschedule_network();
  // All-to-all and flows on the same NICs (a pool with a2a_on_nics; README): whether a flow
  // crosses one of the instance's chips' NICs, and the share of each the all-to-all holds from
  // now on for the flow network (0 releases it).
  bool nics_carry_flows(std::uint32_t instance) const;
  // The share of its NICs an instance's all-to-all gets over an iteration of `iteration_ps`
  // (comm_cost.h, a2a_nic_share), from the flows on them now.
  double a2a_nic_share(std::uint32_t instance, std::int64_t iteration_ps);
  std::vector<topologies::FlowNetwork::ResourceTraffic> nic_traffic_;  // a2a_nic_share's scratch
  void book_a2a(std::uint32_t instance, double share);
  // Runs f(), which changes `lane` outside a batch step, recording the gauges' change.
  // (Inside a step that records `lane` itself, that step's record covers the change.)
  template <class F>
  void changing(std::uint32_t instance, Lane& lane, F&& f) {
    if (!series_ || &lane == gauged_lane_) [[likely]] {
      f();
      return;
    }
    const LaneGauges outer = gauges_before_;
    gauges_before_ = lane_gauges(lane);
    f();
    note_gauges(pools_[instances_[instance].pool], lane);
    gauges_before_ = outer;
  }
  [[gnu::noinline]] void record_link_usage(SimTime end);
  void note_free_kv(std::uint32_t instance);
  void add_load(Pool& pool, std::uint32_t local, std::int64_t delta) {
    if (!pool.free_kv) pool.router->add_load(local, delta);
  }
  void fail_instance(std::uint32_t instance, SimTime repair_at);
  // The report's groups (tp, dp, ep, cp, pp): ranks, whether one spans two scale-up domains, the
  // tier; with placed groups, from the layouts the collectives are costed on.
  std::vector<metrics::GroupTier> group_tiers(const PoolConfig& pc, int pool,
                                              const IterationCostModel::PlacedGroups* placed) const;
  // The pool's groups on the scenario's cluster graph (describe_group over every instance), or
  // none when the placement has no instance of it.
  std::optional<IterationCostModel::PlacedGroups> placed_groups(int pool, const PoolConfig& pc) const;
  // Random faults are drawn up to the horizon, or this far when the run has none.
  static constexpr Duration kMaxFaultTime = Duration::milliseconds(86'400'000);
  void schedule_dispatch(std::uint32_t instance);
  // Swap preemption: the host-link copies the lane's form_batch started join its iteration.
  void add_swap_time(const Pool& pool, Lane& lane, Batch& batch);

  void schedule(SimTime t, const Event& e) { queue_.push(t, priority_of(e), e); }
  // Schedules the arrivals the source handed out into arrivals_, and clears it.
  void schedule_arrivals();
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
  const Lane* gauged_lane_ = nullptr;  // that lane

  int encode_pool_ = -1, prefill_pool_ = -1, decode_pool_ = -1;  // prefill_pool_: or combined
  bool runs_ = false;  // decode runs enabled (config, no series or trace)
  bool disaggregated_ = false;
  // Journeys of the requests in flight (RequestState::journey), slots reused once they leave: a
  // finished request's figures are in the recorder, so memory follows the requests in flight.
  std::vector<Journey> journeys_;
  std::vector<std::uint32_t> free_journeys_;
  Journey& journey(std::uint32_t r) { return journeys_[requests_[r].journey]; }
  const Journey& journey(std::uint32_t r) const { return journeys_[requests_[r].journey]; }
  void release_journey(std::uint32_t r);
  bool caching_ = false;             // some pool has prefix caches
  SlabVector<PrefixKeys> prefix_keys_;  // indexed like requests_, when caching_
  std::optional<ClusterConfig> default_cluster_;
  const topologies::ClusterPlacement* placement_ = nullptr;
  std::unique_ptr<topologies::Fabric> fabric_;  // the run's own copy (faults change it)
  std::unique_ptr<topologies::FlowNetwork> net_;
  // Transfers move as one flow of rank pair 0 standing for all `flow_ranks_` rank pairs (exact:
  // rank_flows_symmetric); 0 when every rank pair has its own flow.
  int flow_ranks_ = 0;
  int rank_flows_symmetric() const;
  SimTime net_due_ = SimTime::never();
  std::uint32_t net_generation_ = 0;
  std::vector<topologies::FlowDone> flow_done_;
  RingQueue<std::uint32_t> awaiting_decode_;  // prefilled, waiting for decode KV room
  RingQueue<std::uint32_t> dispatches_;  // instances whose dispatch was requested at now_
  std::vector<topologies::FaultEvent> faults_;
  std::vector<std::uint32_t> failed_log_, evicted_;
  std::vector<models::ImageSize> images_;
  std::vector<std::uint32_t> admitted_;

  // Scratch buffers reused by every event (no allocation per event once warm).
  std::vector<std::uint32_t> finished_;
  std::vector<Preemption> preempted_;
  std::vector<std::int64_t> stage_ps_;
};

}  // namespace servesim::cluster
