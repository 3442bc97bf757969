// What the serving model reports while it runs, and the standard implementation that keeps it.
//
// The event loop calls a Recorder at request milestones and once per batch iteration; it never
// threads a metrics store through its handlers. RunMetrics keeps, for every request of the run,
// the compact times the summary's exact figures need (RequestTimes, 40 B), and, only while the
// request is in flight, the rest of its record (where it ran, preemptions, its TTFT parts): when
// it finishes, that record goes to a RequestSink (the per-request CSV) in id order and leaves, so
// the memory of full records follows the requests in flight. It also keeps per-pool time by
// component, the slowest requests by TTFT, and inter-token gaps in a log-bucketed histogram (a
// decode iteration reports its gap once with the number of tokens that saw it, so the cost per
// iteration is O(1), not O(batch)).
// This module knows nothing about models or operators: pools register their component names, and
// request classes (tenants) their names, priorities and SLO targets; every record carries its
// class id, so each class gets its own latency figures and SLO attainment.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/id_chunks.h"
#include "core/id_slots.h"
#include "core/ids.h"
#include "core/time.h"
#include "sim/metrics/histogram.h"
#include "sim/metrics/time_series.h"
#include "sim/metrics/trace_log.h"

namespace servesim::metrics {

// A 128-bit integer accumulator for sums of products of int64 figures (GCC/Clang extension).
__extension__ using WideSum = __int128;

enum class RequestStatus : std::uint8_t { kInFlight, kCompleted, kRejected };

enum class RejectReason : std::uint8_t {
  kNone,
  kExceedsMaxModelLen,  // prompt + output longer than the deployment's max_model_len
  kQueueFull,           // the instance's waiting queue was at its limit
  kTtftBudget,          // still waiting for its prefill when its TTFT budget had passed
  kNoCapacity,          // no instance of a stage was up, or its KV could never fit one
  kLostToFailure,       // its instance failed and the failure policy is "lose"
  kCount
};
std::string_view reject_reason_name(RejectReason r);

// The parts of a request's time to first token: consecutive segments of [arrival, first token],
// so they add up to its TTFT exactly (sim/cluster/README.md says which transition starts which).
enum class TtftPart : std::uint8_t {
  kQueueing,             // waiting for admission in any pool (incl. re-queues after failures)
  kEncode,               // its encode batch on the encode pool
  kEmbeddingTransfer,    // image embeddings moving to the prefill instance
  kPrefill,              // the prefill iterations that ran its chunks
  kPrefillInterference,  // between its chunks, other work of its lane
  kKvTransferExposed,    // after its prefill ended, until its KV reached the decode instance
  kFirstDecode,          // the decode iteration that emitted its first token (disaggregated)
  kPreemption,           // from a preemption (or failure) until it was admitted again
  kOther,
  kCount
};
inline constexpr std::size_t kTtftParts = static_cast<std::size_t>(TtftPart::kCount);
std::string_view ttft_part_name(TtftPart p);

// Which fabric tier a group kind of a pool's instances crosses (pools[].groups).
struct GroupTier {
  std::string group;  // tp, dp, ep, cp, pp
  int ranks = 1;
  bool leaves_domain = false;
  std::string tier;  // "scale_up" plane name or "scale_out"
  int domain_chips = 0;
};

struct SloTargets {
  std::optional<Duration> ttft;
  std::optional<Duration> tpot;
  std::optional<Duration> e2e;
  bool any() const { return ttft || tpot || e2e; }
};

// A completed request's latencies as the summary reports them (TPOT over the tokens after the
// first, when there are any), and whether they meet a class's targets.
struct CompletedLatencies {
  Duration ttft, e2e;
  std::optional<double> tpot_s;
  bool meets(const SloTargets& slo) const {
    return !(slo.ttft && ttft > *slo.ttft) && !(slo.e2e && e2e > *slo.e2e) &&
           !(slo.tpot && tpot_s && *tpot_s > slo.tpot->to_seconds());
  }
};
inline CompletedLatencies completed_latencies(SimTime arrival, SimTime first_token, SimTime completion,
                                              std::uint32_t output_tokens) {
  CompletedLatencies l{first_token - arrival, completion - arrival, std::nullopt};
  if (output_tokens > 1) {
    l.tpot_s = (completion - first_token).to_seconds() / static_cast<double>(output_tokens - 1);
  }
  return l;
}

// A request class as the summary reports it.
struct ClassInfo {
  std::string name = "default";
  int priority = 0;
  SloTargets slo;                       // its own targets (already resolved by the loader)
  std::int64_t skipped_trace_rows = 0;  // bad trace rows skipped while reading its trace
};

struct RequestRecord {
  SimTime arrival;
  SimTime first_token = SimTime::never();
  SimTime completion = SimTime::never();
  std::uint32_t prompt_tokens = 0;
  std::uint32_t output_tokens = 0;
  std::uint32_t pool = 0;
  std::uint32_t instance = 0;
  std::uint32_t preemptions = 0;
  RequestStatus status = RequestStatus::kInFlight;
  RejectReason reject_reason = RejectReason::kNone;
  std::uint16_t class_id = 0;
  // Where its time to first token went (TtftPart order), ms; zero until its first token.
  std::array<float, kTtftParts> ttft_parts_ms{};
};

// What the summary needs of a request (kept for every request of the run: 40 B).
struct RequestTimes {
  SimTime arrival;
  SimTime first_token = SimTime::never();
  SimTime completion = SimTime::never();
  std::uint32_t prompt_tokens = 0;
  std::uint32_t output_tokens = 0;
  std::uint16_t class_id = 0;
  RequestStatus status = RequestStatus::kInFlight;
  RejectReason reject_reason = RejectReason::kNone;
};

// Receives each request's full record once, in id order, when the request has finished and
// every request before it has too (the requests still in flight at the end of the run come last,
// in id order, with status kInFlight): what a whole-run table written at the end would hold.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // `classes`: the run's registered classes (r.class_id indexes them; empty: one "default").
  virtual void request(std::uint32_t id, const RequestRecord& r, const std::vector<ClassInfo>& classes) = 0;
};

// A request among the slowest by TTFT (RunMetrics::slowest_ttft).
struct SlowRequest {
  std::uint32_t id = 0;
  RequestRecord record;
};
inline constexpr std::size_t kSlowestTtft = 20;

struct PoolInfo {
  std::string name;
  std::string role;
  int instances = 0;
  int chips = 0;                        // in all
  int stages = 1;                       // pipeline stages per instance: each is busy or idle on its own
  std::vector<std::string> components;  // names of the time components, in index order
  std::int64_t kv_blocks = 0;           // KV-cache blocks of the whole pool (for occupancy over time)
  // The parallel plan {tp, pp, dp, ep, moe_tp, cp} and the tiers its groups cross.
  std::array<int, 6> plan{1, 1, 1, 1, 1, 1};
  std::vector<GroupTier> groups{};
};

// A pool's prefix caches, summed over its lanes at the end of a run (sim/cluster/prefix_cache.h).
struct PrefixCacheCounts {
  std::int64_t lookups = 0;        // admissions of requests with a prefix
  std::int64_t hits = 0;           // of those, with at least one cached segment
  std::int64_t lookup_tokens = 0;  // their prompt tokens (prefill targets)
  std::int64_t hit_tokens = 0;     // of those, found cached (not prefilled)
  std::int64_t inserted_blocks = 0;
  std::int64_t evicted_blocks = 0;
  std::int64_t capacity_blocks = 0;  // over all lanes
  void add(const PrefixCacheCounts& o) {
    lookups += o.lookups;
    hits += o.hits;
    lookup_tokens += o.lookup_tokens;
    hit_tokens += o.hit_tokens;
    inserted_blocks += o.inserted_blocks;
    evicted_blocks += o.evicted_blocks;
    capacity_blocks += o.capacity_blocks;
  }
};

class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual PoolId add_pool(PoolInfo info) = 0;
  // Classes are registered in class-id order, before any request arrives.
  virtual void add_class(ClassInfo info) = 0;
  // How many requests the run expects (a capacity hint; 0 when unknown).
  virtual void expect_requests(std::int64_t n) = 0;
  virtual void request_arrived(RequestId id, SimTime t, std::int64_t prompt_tokens, std::int64_t output_tokens,
                               std::uint16_t class_id = 0) = 0;
  virtual void request_routed(RequestId id, PoolId pool, InstanceId instance) = 0;
  virtual void request_rejected(RequestId id, SimTime t, RejectReason reason) = 0;
  virtual void first_token(RequestId id, SimTime t) = 0;
  virtual void request_completed(RequestId id, SimTime t) = 0;
  virtual void request_preempted(RequestId id, PoolId pool) = 0;
  // `count` tokens were emitted `gap` after each one's previous token.
  virtual void inter_token_gap(Duration gap, std::int64_t count) = 0;
  // The gaps between consecutive `ends` (a decode run's steps), `count` tokens each, in order:
  // what inter_token_gap once per gap records.
  virtual void inter_token_gaps(std::span<const SimTime> ends, std::int64_t count) {
    for (std::size_t k = 1; k < ends.size(); ++k) inter_token_gap(ends[k] - ends[k - 1], count);
  }
  // One batch iteration of an instance of `pool`: time per component summed over its pipeline
  // stages (stage-busy time).
  virtual void iteration(PoolId pool, const std::int64_t* component_ps) = 0;
  // `steps` iterations at once (the steps of a decode run, sim/cluster/simulation.h): their time
  // per component summed over them. The same totals as `steps` calls of iteration().
  virtual void iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t steps) = 0;
  virtual void kv_usage_peak(PoolId pool, double fraction) = 0;
  // Optional sinks, null unless the run asked for them; the simulation asks once, when it is
  // built, and records into them directly (non-virtual, so the hot loop pays a null test).
  virtual TimeSeries* time_series() { return nullptr; }
  virtual TraceLog* trace_log() { return nullptr; }
  // --- attribution (defaults ignore them) ---
  // At its first token: the request's TTFT by part, picoseconds, kTtftParts of them.
  virtual void ttft_parts(RequestId, const std::int64_t*) {}
  // A decode-carrying iteration of `pool` that emitted `tokens` decode tokens (for the token-
  // weighted TPOT split).
  virtual void decode_iteration(PoolId, const std::int64_t*, std::int64_t) {}
  // `steps` decode iterations of `pool` that emitted `tokens` decode tokens each, their component
  // times summed over them: the same sums as `steps` calls of decode_iteration().
  virtual void decode_iterations(PoolId, const std::int64_t*, std::int64_t, std::int64_t) {}
  // A request's KV transfer, reported at its first token to its prefill and decode pools.
  virtual void kv_transfer(PoolId, double, Duration, Duration, Duration) {}
  // A request put back in a queue after its instance failed.
  virtual void request_requeued(RequestId) {}
  // At the end of a run, for each pool with a prefix cache.
  virtual void prefix_cache(PoolId, const PrefixCacheCounts&) {}
  // The run ended: nothing more is recorded of its requests.
  virtual void run_ended() {}
};

class RunMetrics final : public Recorder {
 public:
  // kKeep: every request's full record stays to the end (requests(); tests and small studies).
  // kRelease: a request's full record leaves once it has gone to the sink (or, without a sink,
  // once the request finished); the times stay.
  enum class Records : std::uint8_t { kKeep, kRelease };
  explicit RunMetrics(Records records = Records::kKeep);
  // Where full records go, in id order (before the first request arrives); may be null.
  void set_request_sink(RequestSink* sink) { sink_ = sink; }

  PoolId add_pool(PoolInfo info) override;
  void add_class(ClassInfo info) override;
  void expect_requests(std::int64_t n) override;
  void request_arrived(RequestId id, SimTime t, std::int64_t prompt_tokens, std::int64_t output_tokens,
                       std::uint16_t class_id = 0) override;
  void request_routed(RequestId id, PoolId pool, InstanceId instance) override;
  void request_rejected(RequestId id, SimTime t, RejectReason reason) override;
  void first_token(RequestId id, SimTime t) override;
  void request_completed(RequestId id, SimTime t) override;
  void request_preempted(RequestId id, PoolId pool) override;
  void inter_token_gap(Duration gap, std::int64_t count) override;
  void inter_token_gaps(std::span<const SimTime> ends, std::int64_t count) override;
  void iteration(PoolId pool, const std::int64_t* component_ps) override;
  void iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t steps) override;
  void kv_usage_peak(PoolId pool, double fraction) override;
  void ttft_parts(RequestId id, const std::int64_t* ps) override;
  void decode_iteration(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens) override;
  void decode_iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens,
                         std::int64_t steps) override;
  void kv_transfer(PoolId pool, double bytes, Duration total, Duration exposed, Duration ttft) override;
  void request_requeued(RequestId id) override;
  void prefix_cache(PoolId pool, const PrefixCacheCounts& counts) override;
  void run_ended() override;
  TimeSeries* time_series() override { return series_.get(); }
  TraceLog* trace_log() override { return trace_.get(); }

  // Turn the optional sinks on (before the pools are added).
  void enable_time_series();
  void enable_trace(const TraceOptions& options);

  struct PoolTotals {
    PoolInfo info;
    std::vector<std::int64_t> component_ps;  // stage-busy time per component
    std::int64_t iterations = 0;
    std::int64_t preemptions = 0;
    double kv_peak_fraction = 0;
    // Decode iterations: component time weighted by the decode tokens each emitted, and the
    // tokens (sum of weights). Integer sums (ps x tokens), so that they do not depend on the order
    // iterations are added in (decode runs apply theirs late: sim/cluster/simulation.h).
    std::vector<WideSum> decode_weighted_ps;
    double decode_tokens = 0;
    // KV transfers of this pool's requests (as source or destination).
    std::int64_t transfers = 0;
    double transfer_bytes = 0, transfer_ps = 0, exposed_ps = 0, transferred_ttft_ps = 0;
    std::optional<PrefixCacheCounts> prefix_cache;
  };
  // Sum of TTFT parts over requests with a first token (ps), and how many reported parts.
  const std::array<double, kTtftParts>& ttft_part_sums() const { return ttft_sums_; }
  std::int64_t ttft_part_requests() const { return ttft_requests_; }
  std::int64_t requeued() const { return requeued_; }

  // Every request of the run, by id.
  const IdChunks<RequestTimes>& times() const { return times_; }
  // Every request's full record, by id (Records::kKeep only): a snapshot taken by this call, kept
  // in the RunMetrics (so a reference to it may outlive the expression that took it).
  const std::vector<RequestRecord>& requests() const;
  // The requests with a first token and the longest TTFTs (ties: lower id first), longest first,
  // at most kSlowestTtft; complete once the run ended.
  const std::vector<SlowRequest>& slowest_ttft() const { return slowest_; }
  // Full records held now (in flight, or finished and waiting for an older request to finish
  // before they go to the sink), and the most held at once.
  std::uint32_t records_held() const { return live_.held(); }
  std::uint32_t peak_records_held() const { return live_.peak_held(); }
  const std::vector<PoolTotals>& pools() const { return pools_; }
  const std::vector<ClassInfo>& classes() const { return classes_; }
  const LogHistogram& inter_token_gaps() const { return itl_; }
  std::int64_t output_tokens() const { return output_tokens_; }
  std::int64_t input_tokens() const { return input_tokens_; }

 private:
  // A request's record beyond its times, while it is held.
  struct Extras {
    std::uint32_t pool = 0, instance = 0, preemptions = 0;
    std::array<float, kTtftParts> ttft_parts_ms{};
  };
  RequestRecord record(std::uint32_t id) const;
  mutable std::vector<RequestRecord> records_;  // requests()' snapshot
  // Request id finished: it leaves (to the sink in id order, with the requests after it that
  // finished before it).
  void finished(std::uint32_t id);
  void leave(std::uint32_t id);
  void consider_slow(std::uint32_t id, const RequestRecord& r);

  Records keep_;
  RequestSink* sink_ = nullptr;
  IdChunks<RequestTimes> times_;
  IdSlots<Extras> live_;
  std::uint32_t next_to_leave_ = 0;  // with a sink: the oldest request not yet sent
  std::vector<SlowRequest> slowest_;
  std::vector<PoolTotals> pools_;
  std::vector<ClassInfo> classes_;
  LogHistogram itl_;
  std::int64_t output_tokens_ = 0;  // every token emitted, including by requests still in flight
  std::int64_t input_tokens_ = 0;   // prompt tokens of requests that reached their first token
  std::array<double, kTtftParts> ttft_sums_{};
  std::int64_t ttft_requests_ = 0;
  std::int64_t requeued_ = 0;
  std::unique_ptr<TimeSeries> series_;
  std::unique_ptr<TraceLog> trace_;
};

}  // namespace servesim::metrics
