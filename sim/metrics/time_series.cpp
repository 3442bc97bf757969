#include "sim/metrics/time_series.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::metrics {

void TimeSeries::add_pool(std::string name, std::int64_t kv_blocks) {
  PoolSeries p;
  p.name = std::move(name);
  p.kv_blocks = kv_blocks;
  pools_.push_back(std::move(p));
}

std::uint32_t TimeSeries::add_link(std::string name, double capacity_bytes_per_s) {
  SERVESIM_CHECK(capacity_bytes_per_s > 0);
  LinkSeries l;
  l.name = std::move(name);
  l.capacity_bytes_per_s = capacity_bytes_per_s;
  links_.push_back(std::move(l));
  return static_cast<std::uint32_t>(links_.size() - 1);
}

void TimeSeries::widen() {
  // Bucket i of the doubled width holds old buckets 2i and 2i + 1: sums and integrals add up.
  auto merge = [](auto& a) {
    for (std::size_t i = 0; i < kMaxBuckets / 2; ++i) a[i] = a[2 * i] + a[2 * i + 1];
    std::fill(a.begin() + kMaxBuckets / 2, a.end(), 0);
  };
  merge(arrivals_);
  merge(rejections_);
  for (PoolSeries& p : pools_) {
    for (auto& c : p.counters) merge(c);
    // A change's offset in the merged bucket is its old offset, plus the old width when it was
    // in the second half.
    for (std::size_t g = 0; g < kGauges; ++g) {
      auto& m = p.moments[g];
      for (std::size_t i = 0; i < kMaxBuckets / 2; ++i) {
        m[i] = m[2 * i] + m[2 * i + 1] + Wide{width_ps_} * p.changes[g][2 * i + 1];
      }
      std::fill(m.begin() + kMaxBuckets / 2, m.end(), Wide{0});
      merge(p.changes[g]);
    }
  }
  for (LinkSeries& l : links_) merge(l.bytes);
  width_ps_ *= 2;
}

std::size_t TimeSeries::bucket_of(SimTime t) {
  SERVESIM_CHECK(t.ps() >= 0);
  while (t.ps() >= width_ps_ * static_cast<std::int64_t>(kMaxBuckets)) widen();
  return static_cast<std::size_t>(t.ps() / width_ps_);
}

void TimeSeries::integrate(std::array<double, kMaxBuckets>& integral, std::int64_t from_ps, std::int64_t to_ps,
                           double value) {
  if (value == 0 || to_ps <= from_ps) return;
  // The caller has widened the buckets so that to_ps - 1 is covered.
  auto b = static_cast<std::size_t>(from_ps / width_ps_);
  while (from_ps < to_ps) {
    const std::int64_t bucket_end = std::min(to_ps, static_cast<std::int64_t>(b + 1) * width_ps_);
    integral[b] += value * static_cast<double>(bucket_end - from_ps);
    from_ps = bucket_end;
    ++b;
  }
}

void TimeSeries::gauges_changed(PoolId pool, SimTime t, std::int64_t d_waiting, std::int64_t d_running,
                                std::int64_t d_kv_blocks) {
  if (d_waiting == 0 && d_running == 0 && d_kv_blocks == 0) return;
  PoolSeries& p = pools_[pool.index()];
  // The bucket t - 1 is in: a change on a bucket's boundary is kept by the bucket before it, at
  // offset `width` (it adds nothing there), so the buckets widen as if it were not recorded yet.
  const std::size_t b = bucket_of(SimTime::from_ps(std::max<std::int64_t>(t.ps() - 1, 0)));
  const std::int64_t offset = t.ps() - static_cast<std::int64_t>(b) * width_ps_;
  const std::array<std::int64_t, kGauges> d = {d_waiting, d_running, d_kv_blocks};
  for (std::size_t g = 0; g < kGauges; ++g) {
    p.changes[g][b] += d[g];
    p.moments[g][b] += Wide{d[g]} * offset;
  }
}

void TimeSeries::link_bytes(std::uint32_t link, SimTime from, SimTime to, double bytes) {
  SERVESIM_CHECK(to >= from && bytes >= 0);
  LinkSeries& l = links_[link];
  if (to == from) {
    l.bytes[bucket_of(from)] += bytes;
    return;
  }
  bucket_of(SimTime::from_ps(to.ps() - 1));
  integrate(l.bytes, from.ps(), to.ps(), bytes / static_cast<double>((to - from).ps()));
}

void TimeSeries::finish(SimTime end) {
  end_ = end;
  // Every change is at or before the end: its bucket (that of t - 1) is covered.
  const std::size_t last = bucket_of(SimTime::from_ps(std::max<std::int64_t>(end.ps() - 1, 0)));
  for (PoolSeries& p : pools_) {
    for (std::size_t g = 0; g < kGauges; ++g) {
      // Bucket i: its start value over its length inside [0, end], plus each change in it over
      // the rest of that length (a change at `end` itself, in bucket `last`, adds nothing).
      std::int64_t value = 0;
      for (std::size_t i = 0; i <= last; ++i) {
        SERVESIM_CHECK_MSG(value >= 0, "a time-series gauge went negative");
        const std::int64_t len = std::min(width_ps_, end.ps() - static_cast<std::int64_t>(i) * width_ps_);
        const Wide integral = Wide{value} * len + Wide{p.changes[g][i]} * len - p.moments[g][i];
        p.integrals[g][i] = static_cast<double>(integral);
        value += p.changes[g][i];
      }
      SERVESIM_CHECK_MSG(value >= 0, "a time-series gauge went negative");
      for (std::size_t i = last + 1; i < kMaxBuckets; ++i) {
        SERVESIM_CHECK_MSG(p.changes[g][i] == 0 && p.moments[g][i] == 0, "a time-series gauge changed after the end");
      }
      p.value[g] = value;
    }
  }
  buckets_ = std::max<std::size_t>(1, static_cast<std::size_t>((end.ps() + width_ps_ - 1) / width_ps_));
  // [0, end] is closed: what was counted at exactly `end` on a bucket boundary belongs to the
  // last bucket, not to an empty one after it.
  if (buckets_ < kMaxBuckets) {
    auto fold = [&](std::array<std::int64_t, kMaxBuckets>& a) {
      a[buckets_ - 1] += a[buckets_];
      a[buckets_] = 0;
    };
    fold(arrivals_);
    fold(rejections_);
    for (PoolSeries& p : pools_) {
      for (auto& c : p.counters) fold(c);
    }
  }
}

std::int64_t TimeSeries::bucket_length_ps(std::size_t i) const {
  const std::int64_t start = static_cast<std::int64_t>(i) * width_ps_;
  return std::clamp<std::int64_t>(end_.ps() - start, 0, width_ps_);
}

double TimeSeries::gauge_mean(const PoolSeries& p, Gauge g, std::size_t i) const {
  const std::int64_t len = bucket_length_ps(i);
  return len > 0 ? p.integrals[g][i] / static_cast<double>(len) : static_cast<double>(p.value[g]);
}

}  // namespace servesim::metrics
