#include "sim/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"

namespace servesim::metrics {

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double r = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(r));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (r - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Distribution summarize(std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<std::int64_t>(values.size());
  if (values.empty()) return d;
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  // Selection instead of a full sort: each quantile partitions the part above the previous one,
  // O(n) in all. The value after rank floor(r) is the smallest of the part above it.
  auto begin = values.begin();
  double* out[] = {&d.p50, &d.p90, &d.p99};
  const double qs[] = {0.50, 0.90, 0.99};
  for (int k = 0; k < 3; ++k) {
    const double r = qs[k] * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<std::ptrdiff_t>(std::floor(r));
    const auto nth = values.begin() + lo;
    std::nth_element(begin, nth, values.end());
    const double x_lo = *nth;
    const double x_hi = nth + 1 < values.end() ? *std::min_element(nth + 1, values.end()) : x_lo;
    *out[k] = x_lo + (r - static_cast<double>(lo)) * (x_hi - x_lo);
    begin = nth;
  }
  return d;
}

double LogHistogram::midpoint_of(std::int64_t bucket) {
  const auto lo_bits = static_cast<std::uint64_t>(bucket) << (52 - kSubBucketBits);
  const auto hi_bits = static_cast<std::uint64_t>(bucket + 1) << (52 - kSubBucketBits);
  double lo = 0, hi = 0;
  std::memcpy(&lo, &lo_bits, sizeof lo);
  std::memcpy(&hi, &hi_bits, sizeof hi);
  return 0.5 * (lo + hi);
}

void LogHistogram::add_slow(double value, std::int64_t weight) {
  SERVESIM_CHECK_MSG(std::isfinite(value), "a non-finite value in a latency histogram");
  if (weight <= 0) return;
  count_ += weight;
  sum_ += value * static_cast<double>(weight);
  if (!(value > 0)) {
    zeros_ += weight;
    return;
  }
  const std::int64_t index = bucket_of(value);
  // The common case first: a bucket that exists (an empty histogram has none, whatever offset_).
  const auto slot = static_cast<std::uint64_t>(index - offset_);
  if (slot < buckets_.size()) [[likely]] {
    buckets_[slot] += weight;
    return;
  }
  if (buckets_.empty()) {
    offset_ = index;
    buckets_.assign(1, 0);
  } else if (index < offset_) {
    buckets_.insert(buckets_.begin(), static_cast<std::size_t>(offset_ - index), 0);
    offset_ = index;
  } else if (index - offset_ >= static_cast<std::int64_t>(buckets_.size())) {
    buckets_.resize(static_cast<std::size_t>(index - offset_ + 1), 0);
  }
  buckets_[static_cast<std::size_t>(index - offset_)] += weight;
}

double LogHistogram::value_at_rank(std::int64_t rank) const {
  std::int64_t seen = zeros_;
  if (rank < seen) return 0.0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (rank < seen) return midpoint_of(offset_ + static_cast<std::int64_t>(i));
  }
  return midpoint_of(offset_ + static_cast<std::int64_t>(buckets_.size()) - 1);
}

double LogHistogram::quantile(double q) const {
  if (count_ == 0) return 0.0;
  // Linear interpolation between the values of ranks floor(r) and floor(r) + 1, r = q (count - 1),
  // as for the exact quantiles; each value is its bucket's midpoint.
  const double r = q * static_cast<double>(count_ - 1);
  const auto lo = static_cast<std::int64_t>(std::floor(r));
  const double x_lo = value_at_rank(lo);
  if (lo + 1 >= count_) return x_lo;
  const double x_hi = value_at_rank(lo + 1);
  return x_lo + (r - static_cast<double>(lo)) * (x_hi - x_lo);
}

Distribution LogHistogram::summary() const {
  Distribution d;
  d.count = count_;
  d.mean = mean();
  d.p50 = quantile(0.50);
  d.p90 = quantile(0.90);
  d.p99 = quantile(0.99);
  return d;
}

}  // namespace servesim::metrics
