#include "sim/metrics/recorder.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::metrics {

std::string_view reject_reason_name(RejectReason r) {
  switch (r) {
    case RejectReason::kNone: return "none";
    case RejectReason::kExceedsMaxModelLen: return "exceeds_max_model_len";
    case RejectReason::kQueueFull: return "queue_full";
    case RejectReason::kTtftBudget: return "ttft_budget";
    case RejectReason::kNoCapacity: return "no_capacity";
    case RejectReason::kLostToFailure: return "lost_to_failure";
    case RejectReason::kCount: break;
  }
  return "?";
}

std::string_view ttft_part_name(TtftPart p) {
  static constexpr std::string_view kNames[] = {"queueing",
                                                "encode",
                                                "embedding_transfer",
                                                "prefill",
                                                "prefill_interference",
                                                "kv_transfer_exposed",
                                                "first_decode",
                                                "preemption",
                                                "other"};
  return kNames[static_cast<std::size_t>(p)];
}

PoolId RunMetrics::add_pool(PoolInfo info) {
  PoolTotals p;
  p.component_ps.assign(info.components.size(), 0);
  p.decode_weighted_ps.assign(info.components.size(), 0);
  p.info = std::move(info);
  if (series_) series_->add_pool(p.info.name, p.info.kv_blocks);
  if (trace_) trace_->add_pool(p.info.name, p.info.instances, p.info.stages);
  pools_.push_back(std::move(p));
  return PoolId(static_cast<std::uint32_t>(pools_.size() - 1));
}

void RunMetrics::enable_time_series() {
  SERVESIM_CHECK_MSG(pools_.empty(), "enable the time series before the pools are added");
  series_ = std::make_unique<TimeSeries>();
}

void RunMetrics::enable_trace(const TraceOptions& options) {
  SERVESIM_CHECK_MSG(pools_.empty(), "enable the trace before the pools are added");
  trace_ = std::make_unique<TraceLog>(options);
}

void RunMetrics::add_class(ClassInfo info) { classes_.push_back(std::move(info)); }

RunMetrics::RunMetrics(Records records) : keep_(records), times_(12, false), live_(records == Records::kRelease) {}

void RunMetrics::expect_requests(std::int64_t n) {
  if (n > 0) {
    times_.reserve(static_cast<std::size_t>(n));
    live_.reserve(static_cast<std::size_t>(n));
  }
}

RequestRecord RunMetrics::record(std::uint32_t id) const {
  const RequestTimes& t = times_[id];
  const Extras& x = live_[id];
  RequestRecord r;
  r.arrival = t.arrival;
  r.first_token = t.first_token;
  r.completion = t.completion;
  r.prompt_tokens = t.prompt_tokens;
  r.output_tokens = t.output_tokens;
  r.pool = x.pool;
  r.instance = x.instance;
  r.preemptions = x.preemptions;
  r.status = t.status;
  r.reject_reason = t.reject_reason;
  r.class_id = t.class_id;
  r.ttft_parts_ms = x.ttft_parts_ms;
  return r;
}

const std::vector<RequestRecord>& RunMetrics::requests() const {
  SERVESIM_CHECK_MSG(keep_ == Records::kKeep, "RunMetrics::requests() needs Records::kKeep");
  // Refreshed in place: references into it stay valid while the request count does not change.
  records_.resize(times_.size());
  for (std::uint32_t i = 0; i < times_.size(); ++i) records_[i] = record(i);
  return records_;
}

void RunMetrics::consider_slow(std::uint32_t id, const RequestRecord& r) {
  if (r.first_token == SimTime::never()) return;
  // Longest TTFT first, ties by lower id: a total order, so the kept set does not depend on the
  // order requests leave in.
  const std::int64_t ttft = (r.first_token - r.arrival).ps();
  auto before = [](std::int64_t t, std::uint32_t i, const SlowRequest& s) {
    const std::int64_t st = (s.record.first_token - s.record.arrival).ps();
    return t != st ? t > st : i < s.id;
  };
  if (slowest_.size() == kSlowestTtft && !before(ttft, id, slowest_.back())) return;
  auto at = slowest_.begin();
  while (at != slowest_.end() && !before(ttft, id, *at)) ++at;
  slowest_.insert(at, SlowRequest{id, r});
  if (slowest_.size() > kSlowestTtft) slowest_.pop_back();
}

void RunMetrics::leave(std::uint32_t id) {
  const RequestRecord r = record(id);
  consider_slow(id, r);
  if (sink_ != nullptr) sink_->request(id, r, classes_);
  live_.release(id);
}

void RunMetrics::finished(std::uint32_t id) {
  if (sink_ == nullptr) {
    leave(id);
    return;
  }
  // The sink takes records in id order: this one and those after it that already finished go
  // once every request before them has.
  while (next_to_leave_ < times_.size() && times_[next_to_leave_].status != RequestStatus::kInFlight) {
    leave(next_to_leave_++);
  }
}

void RunMetrics::run_ended() {
  // The requests still in flight leave too (in id order, with those finished after them).
  if (sink_ != nullptr) {
    while (next_to_leave_ < times_.size()) leave(next_to_leave_++);
    return;
  }
  for (std::uint32_t i = 0; i < times_.size(); ++i) {
    if (times_[i].status == RequestStatus::kInFlight) leave(i);
  }
}

void RunMetrics::request_arrived(RequestId id, SimTime t, std::int64_t prompt_tokens, std::int64_t output_tokens,
                                 std::uint16_t class_id) {
  SERVESIM_CHECK(id.index() == times_.size());
  SERVESIM_CHECK(class_id == 0 || class_id < classes_.size());
  RequestTimes r;
  r.class_id = class_id;
  r.arrival = t;
  r.prompt_tokens = static_cast<std::uint32_t>(prompt_tokens);
  r.output_tokens = static_cast<std::uint32_t>(output_tokens);
  times_.push_back(r);
  live_.push_back(Extras{});
  if (series_) series_->arrival(t);
}

void RunMetrics::request_routed(RequestId id, PoolId pool, InstanceId instance) {
  Extras& x = live_[id.value];
  x.pool = pool.value;
  x.instance = instance.value;
}

void RunMetrics::request_rejected(RequestId id, SimTime t, RejectReason reason) {
  RequestTimes& r = times_[id.value];
  SERVESIM_CHECK(r.status == RequestStatus::kInFlight);
  r.status = RequestStatus::kRejected;
  r.reject_reason = reason;
  r.completion = t;
  if (series_) series_->rejection(t);
  finished(id.value);
}

void RunMetrics::first_token(RequestId id, SimTime t) {
  RequestTimes& r = times_[id.value];
  SERVESIM_CHECK(r.first_token == SimTime::never());
  r.first_token = t;
  input_tokens_ += r.prompt_tokens;
  ++output_tokens_;
}

void RunMetrics::request_completed(RequestId id, SimTime t) {
  RequestTimes& r = times_[id.value];
  SERVESIM_CHECK(r.status == RequestStatus::kInFlight && r.first_token != SimTime::never());
  r.status = RequestStatus::kCompleted;
  r.completion = t;
  if (series_) series_->completion(PoolId(live_[id.value].pool), t);
  finished(id.value);
}

void RunMetrics::request_preempted(RequestId id, PoolId pool) {
  ++live_[id.value].preemptions;
  ++pools_[pool.index()].preemptions;
}

void RunMetrics::inter_token_gap(Duration gap, std::int64_t count) {
  itl_.add(gap.to_seconds(), count);
  output_tokens_ += count;
}

void RunMetrics::inter_token_gaps(std::span<const SimTime> ends, std::int64_t count) {
  // One virtual call per decode run's settle instead of one per step (the qualified calls are
  // direct).
  for (std::size_t k = 1; k < ends.size(); ++k) RunMetrics::inter_token_gap(ends[k] - ends[k - 1], count);
}

void RunMetrics::iteration(PoolId pool, const std::int64_t* component_ps) { iterations(pool, component_ps, 1); }

void RunMetrics::iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t steps) {
  PoolTotals& p = pools_[pool.index()];
  for (std::size_t i = 0; i < p.component_ps.size(); ++i) p.component_ps[i] += component_ps[i];
  p.iterations += steps;
}

void RunMetrics::kv_usage_peak(PoolId pool, double fraction) {
  PoolTotals& p = pools_[pool.index()];
  p.kv_peak_fraction = std::max(p.kv_peak_fraction, fraction);
}

void RunMetrics::ttft_parts(RequestId id, const std::int64_t* ps) {
  Extras& r = live_[id.value];
  for (std::size_t i = 0; i < kTtftParts; ++i) {
    ttft_sums_[i] += static_cast<double>(ps[i]);
    r.ttft_parts_ms[i] = static_cast<float>(static_cast<double>(ps[i]) * 1e-9);
  }
  ++ttft_requests_;
}

void RunMetrics::decode_iteration(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens) {
  decode_iterations(pool, component_ps, tokens, 1);
}

void RunMetrics::decode_iterations(PoolId pool, const std::int64_t* component_ps, std::int64_t tokens,
                                   std::int64_t steps) {
  // Sum over the steps of tokens x their component times = tokens x the summed times, exactly.
  PoolTotals& p = pools_[pool.index()];
  // Most components of a step are zero (a dense model has no experts, swap, CP ...): skipping
  // them saves the 128-bit multiply-adds and leaves the sums as they were.
  WideSum* sums = p.decode_weighted_ps.data();
  for (std::size_t i = 0; i < p.decode_weighted_ps.size(); ++i) {
    if (component_ps[i] != 0) sums[i] += static_cast<WideSum>(tokens) * component_ps[i];
  }
  p.decode_tokens += static_cast<double>(tokens * steps);
}

void RunMetrics::kv_transfer(PoolId pool, double bytes, Duration total, Duration exposed, Duration ttft) {
  PoolTotals& p = pools_[pool.index()];
  ++p.transfers;
  p.transfer_bytes += bytes;
  p.transfer_ps += static_cast<double>(total.ps());
  p.exposed_ps += static_cast<double>(exposed.ps());
  p.transferred_ttft_ps += static_cast<double>(ttft.ps());
}

void RunMetrics::request_requeued(RequestId) { ++requeued_; }

void RunMetrics::prefix_cache(PoolId pool, const PrefixCacheCounts& counts) {
  pools_[pool.index()].prefix_cache = counts;
}

}  // namespace servesim::metrics
