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
    for (auto& g : p.integrals) merge(g);
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
  SERVESIM_CHECK_MSG(t.ps() >= p.last_ps, "a time series went back in time");
  if (t.ps() > p.last_ps) {
    bucket_of(SimTime::from_ps(t.ps() - 1));
    for (std::size_t g = 0; g < kGauges; ++g) {
      integrate(p.integrals[g], p.last_ps, t.ps(), static_cast<double>(p.value[g]));
    }
    p.last_ps = t.ps();
  }
  p.value[kWaiting] += d_waiting;
  p.value[kRunning] += d_running;
  p.value[kKvBlocks] += d_kv_blocks;
  SERVESIM_CHECK_MSG(p.value[kWaiting] >= 0 && p.value[kRunning] >= 0 && p.value[kKvBlocks] >= 0,
                     "a time-series gauge went negative");
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
  if (end.ps() > 0) bucket_of(SimTime::from_ps(end.ps() - 1));
  for (PoolSeries& p : pools_) {
    SERVESIM_CHECK(end.ps() >= p.last_ps);
    for (std::size_t g = 0; g < kGauges; ++g) {
      integrate(p.integrals[g], p.last_ps, end.ps(), static_cast<double>(p.value[g]));
    }
    p.last_ps = end.ps();
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
