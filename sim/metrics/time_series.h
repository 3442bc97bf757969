// What a run looked like over time: per pool, in fixed-width buckets over [0, end].
//
// Models: counters (arrivals and rejections for the cluster; completions and output tokens per
// pool) and gauges per pool (waiting requests, running requests, KV blocks in use), plus the
// bytes carried by links that a network model reports. Gauges are time-weighted: a bucket holds
// the integral of the gauge over the bucket, so its value is the mean over the bucket (a change
// in the middle of a bucket counts for the part of the bucket after it), not a sample.
// Every record may come in any order of time: a gauge change is kept as its bucket's sum of
// changes and of changes x their offset in the bucket (integers), from which finish() computes
// the integrals exactly, so the series are the same whatever order the changes came in (a
// multi-step decode run reports its steps' changes when it applies them, after later ones of
// other instances).
//
// Bucket width is sized from the run without knowing its length in advance: it starts at 1 us
// and doubles (merging neighbouring buckets, which is exact for sums and integrals) whenever the
// run outgrows kMaxBuckets buckets, so a run ends with between kMaxBuckets / 2 and kMaxBuckets
// buckets (unless it is shorter than kMaxBuckets us). Memory is fixed: no allocation after the
// pools and links are added; recording is O(1) amortised per call (a link's bytes: one step per
// bucket they span), and finish() one pass over the buckets.
//
// Ignores: anything finer than a bucket (the peak inside a bucket, the order of events in it).
// Invariants: a gauge is never negative at a bucket's start or at the end (CHECKed by finish).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/time.h"

namespace servesim::metrics {

class TimeSeries {
 public:
  __extension__ typedef __int128 Wide;  // GCC and Clang; exact sums of change x picoseconds
  static constexpr std::size_t kMaxBuckets = 256;
  static constexpr std::int64_t kInitialWidthPs = 1'000'000;  // 1 us

  enum Gauge : std::size_t { kWaiting, kRunning, kKvBlocks, kGauges };
  enum PoolCounter : std::size_t { kCompletions, kOutputTokens, kPoolCounters };

  // Pools are added in the order of their PoolIds (RunMetrics adds them with the pools).
  void add_pool(std::string name, std::int64_t kv_blocks);
  // A link a network model reports on, with its capacity in bytes/s; returns its index.
  std::uint32_t add_link(std::string name, double capacity_bytes_per_s);

  void arrival(SimTime t) { count(t, arrivals_, 1); }
  void rejection(SimTime t) { count(t, rejections_, 1); }
  void completion(PoolId pool, SimTime t) { count(t, pools_[pool.index()].counters[kCompletions], 1); }
  void output_tokens(PoolId pool, SimTime t, std::int64_t n) {
    count(t, pools_[pool.index()].counters[kOutputTokens], n);
  }
  // The pool's waiting and running requests and KV blocks in use changed by these amounts at t.
  void gauges_changed(PoolId pool, SimTime t, std::int64_t d_waiting, std::int64_t d_running, std::int64_t d_kv_blocks);
  // `bytes` crossed link `link` at an even rate over [from, to].
  void link_bytes(std::uint32_t link, SimTime from, SimTime to, double bytes);

  // Closes the gauges at the end of the run. Call once, after the last record.
  void finish(SimTime end);

  // Read access (after finish).
  struct PoolSeries {
    std::string name;
    std::int64_t kv_blocks = 0;  // KV blocks of the whole pool, for occupancy
    std::array<std::array<std::int64_t, kMaxBuckets>, kPoolCounters> counters{};
    std::array<std::array<double, kMaxBuckets>, kGauges> integrals{};  // gauge x ps (by finish)
    std::array<std::int64_t, kGauges> value{};                         // gauge values at the end
    // While recording: per bucket, the sum of the changes in it and of each change x its
    // offset from the bucket's start in ps (128 bits: exact for any run).
    std::array<std::array<std::int64_t, kMaxBuckets>, kGauges> changes{};
    std::array<std::array<Wide, kMaxBuckets>, kGauges> moments{};
  };
  struct LinkSeries {
    std::string name;
    double capacity_bytes_per_s = 0;
    std::array<double, kMaxBuckets> bytes{};
  };
  std::int64_t width_ps() const { return width_ps_; }
  // Buckets that cover [0, end] (the last one may be partial); 0 before finish.
  std::size_t buckets() const { return buckets_; }
  SimTime end() const { return end_; }
  // The length of bucket i inside [0, end], in ps.
  std::int64_t bucket_length_ps(std::size_t i) const;
  const std::array<std::int64_t, kMaxBuckets>& arrivals() const { return arrivals_; }
  const std::array<std::int64_t, kMaxBuckets>& rejections() const { return rejections_; }
  const std::vector<PoolSeries>& pools() const { return pools_; }
  const std::vector<LinkSeries>& links() const { return links_; }
  // The mean of a gauge over bucket i.
  double gauge_mean(const PoolSeries& p, Gauge g, std::size_t i) const;

 private:
  // Doubles the width until t falls inside the covered span; returns t's bucket.
  std::size_t bucket_of(SimTime t);
  void count(SimTime t, std::array<std::int64_t, kMaxBuckets>& series, std::int64_t n) { series[bucket_of(t)] += n; }
  // Adds value x (to - from) to `integral`, split over the buckets [from, to) spans.
  void integrate(std::array<double, kMaxBuckets>& integral, std::int64_t from_ps, std::int64_t to_ps, double value);
  void widen();

  std::int64_t width_ps_ = kInitialWidthPs;
  std::array<std::int64_t, kMaxBuckets> arrivals_{};
  std::array<std::int64_t, kMaxBuckets> rejections_{};
  std::vector<PoolSeries> pools_;
  std::vector<LinkSeries> links_;
  std::size_t buckets_ = 0;
  SimTime end_;
};

}  // namespace servesim::metrics
