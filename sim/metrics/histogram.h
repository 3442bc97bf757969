// Latency distributions.
//
// percentiles(): exact, from all values, with linear interpolation between closest ranks (the
// definition numpy calls "linear"): the q-quantile of n sorted values x is
// x[floor(r)] + (r - floor(r)) (x[floor(r) + 1] - x[floor(r)]) with r = q (n - 1).
//
// LogHistogram: weighted values in log-linear buckets, 128 per power of two, indexed straight
// from the bits of the double (exponent and top 7 mantissa bits, as HdrHistogram does), so adding
// a value takes no logarithm. A bucket spans at most 1/128 of its lower bound and is represented
// by its midpoint, and quantiles interpolate between ranks as the exact ones do: each is within
// 0.4% of the exact quantile of the values added. Memory is
// fixed by the value range, not the count: used for inter-token gaps, of which a run has one per
// emitted token. Mean and count are exact.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

namespace servesim::metrics {

struct Distribution {
  std::int64_t count = 0;
  double mean = 0;
  double p50 = 0, p90 = 0, p99 = 0;
};

// Reorders `values` (selection, O(n)).
Distribution summarize(std::vector<double>& values);
double quantile_sorted(const std::vector<double>& sorted, double q);

class LogHistogram {
 public:
  // Values <= 0 are counted in a zero bucket; values must be finite.
  void add(double value, std::int64_t weight) {
    // The common case inline: a positive finite value in a bucket that exists.
    if (weight > 0 && value > 0 && value <= std::numeric_limits<double>::max()) [[likely]] {
      const auto slot = static_cast<std::uint64_t>(bucket_of(value) - offset_);
      if (slot < buckets_.size()) [[likely]] {
        count_ += weight;
        sum_ += value * static_cast<double>(weight);
        buckets_[slot] += weight;
        return;
      }
    }
    add_slow(value, weight);
  }
  std::int64_t count() const { return count_; }
  double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  double quantile(double q) const;
  Distribution summary() const;

 private:
  static constexpr int kSubBucketBits = 7;
  static std::int64_t bucket_of(double value) {
    // Positive finite doubles order like their bit patterns; dropping the low mantissa bits groups
    // them into 2^kSubBucketBits buckets per binade.
    return static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(value) >> (52 - kSubBucketBits));
  }
  void add_slow(double value, std::int64_t weight);
  double value_at_rank(std::int64_t rank) const;
  static double midpoint_of(std::int64_t bucket);
  std::vector<std::int64_t> buckets_;  // buckets_[i] counts bucket offset_ + i
  std::int64_t offset_ = 0;
  std::int64_t zeros_ = 0;
  std::int64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace servesim::metrics
