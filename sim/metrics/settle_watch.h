// An early verdict: while a run goes, whether one of its constraints can no longer hold whatever
// the rest of the run does, so that a screening loop (serve's `early_stop`) can stop a hopeless
// hypothesis there instead of simulating it to the end.
//
// Models: a Recorder that passes every call on to the run's own recorder and keeps, per rule, the
// count (or sum) of the values recorded so far that already break it. A rule settles when the
// values still to come cannot repair it, given only that the run ends with at most `expected`
// requests (the workload's request limit, workload.h; without one nothing settles):
//   - quantile q of a latency <= L (summary.cpp: linear interpolation between the order
//     statistics at floor(q (n - 1)) and the next): once more than L is recorded for at least
//     n - floor(q (n - 1)) values with n = expected, the order statistic at floor(q (n - 1)) is
//     above L and so is the quantile, for every final count <= expected (n - floor(q (n - 1))
//     does not decrease with n);
//   - the mean of a latency <= L: once the sum recorded exceeds L x expected (values are not
//     negative, the final count is at most expected);
//   - SLO attainment >= a (requests finished within their class's targets over those finished,
//     summary.cpp): once the requests that missed (rejected, or completed beyond a target) exceed
//     (1 - a) x expected.
// A strict limit (`<`, `>`) settles on equality too. Latencies are compared in milliseconds as the
// summary computes them, so a settled rule's final value is beyond its limit exactly.
// Ignores: requests still in flight (a request waiting longer than L for its first token counts
// only once it gets it: settling later, never wrongly); ITL, throughput and count constraints
// (they never settle early).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/id_chunks.h"
#include "sim/metrics/recorder.h"

namespace servesim::metrics {

struct SettleRule {
  enum class Metric : std::uint8_t { kTtft, kTpot, kE2e, kAttainment };
  Metric metric = Metric::kTtft;
  double quantile = -1;  // 0.5, 0.9, 0.99; negative for the mean (latencies only)
  double limit = 0;      // milliseconds (latencies) or a share in [0, 1] (attainment)
  bool strict = false;   // `<` / `>`: the limit itself breaks the rule
  std::string text;      // the constraint as written, for the verdict
};

class SettleWatch final : public Recorder {
 public:
  // `slo`: the run's targets, which apply to every request when the run registers no class (as in
  // summarize()).
  SettleWatch(Recorder& inner, std::vector<SettleRule> rules, SloTargets slo)
      : inner_(inner), rules_(std::move(rules)), run_slo_(slo) {
    broken_.assign(rules_.size(), 0.0);
  }

  struct Settled {
    std::size_t rule = 0;  // index into the rules given
    std::string why;       // a sentence
  };
  // The first rule that has settled, or nothing. Cheap (a few compares) while nothing has.
  std::optional<Settled> settled() const;
  // Requests the run may still take in, as expect_requests() gave them (0: unknown).
  std::int64_t expected() const { return expected_; }

  PoolId add_pool(PoolInfo info) override { return inner_.add_pool(std::move(info)); }
  void add_class(ClassInfo info) override;
  void expect_requests(std::int64_t n) override;
  void request_arrived(RequestId id, SimTime t, std::int64_t prompt_tokens, std::int64_t output_tokens,
                       std::uint16_t class_id) override;
  void request_routed(RequestId id, PoolId pool, InstanceId instance) override {
    inner_.request_routed(id, pool, instance);
  }
  void request_rejected(RequestId id, SimTime t, RejectReason reason) override;
  void first_token(RequestId id, SimTime t) override;
  void request_completed(RequestId id, SimTime t) override;
  void request_preempted(RequestId id, PoolId pool) override { inner_.request_preempted(id, pool); }
  void inter_token_gap(Duration gap, std::int64_t count) override { inner_.inter_token_gap(gap, count); }
  void inter_token_gaps(std::span<const SimTime> ends, std::int64_t count) override {
    inner_.inter_token_gaps(ends, count);
  }
  void iteration(PoolId pool, const std::int64_t* component_ps) override { inner_.iteration(pool, component_ps); }
  void iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t steps) override {
    inner_.iterations(pool, component_ps, steps);
  }
  void kv_usage_peak(PoolId pool, double fraction) override { inner_.kv_usage_peak(pool, fraction); }
  TimeSeries* time_series() override { return inner_.time_series(); }
  TraceLog* trace_log() override { return inner_.trace_log(); }
  void ttft_parts(RequestId id, const std::int64_t* ps) override { inner_.ttft_parts(id, ps); }
  void decode_iteration(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens) override {
    inner_.decode_iteration(pool, component_ps, tokens);
  }
  void decode_iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens,
                         std::int64_t steps) override {
    inner_.decode_iterations(pool, component_ps, tokens, steps);
  }
  void kv_transfer(PoolId pool, double bytes, Duration total, Duration exposed, Duration ttft) override {
    inner_.kv_transfer(pool, bytes, total, exposed, ttft);
  }
  void request_requeued(RequestId id) override { inner_.request_requeued(id); }
  void prefix_cache(PoolId pool, const PrefixCacheCounts& counts) override { inner_.prefix_cache(pool, counts); }
  void run_ended() override { inner_.run_ended(); }

 private:
  struct Seen {
    SimTime arrival, first = SimTime::never();
    std::int64_t output_tokens = 0;
    std::uint16_t class_id = 0;
  };
  // Adds a value of `metric` (milliseconds) to every rule on it.
  void add(SettleRule::Metric metric, double ms);
  void missed_slo();
  const SloTargets& slo_of(std::uint16_t class_id) const { return slo_.empty() ? run_slo_ : slo_[class_id]; }

  Recorder& inner_;
  std::vector<SettleRule> rules_;
  std::vector<double> broken_;  // per rule: values beyond the limit (quantiles, attainment) or their sum (means)
  SloTargets run_slo_;
  std::vector<SloTargets> slo_;  // per class
  IdChunks<Seen> seen_;          // per request id, while in flight
  std::int64_t expected_ = 0;
};

}  // namespace servesim::metrics
