// TimeSeries: counters land in their bucket, gauges are time-weighted, and widening the buckets
// (doubling their width as the run grows) loses nothing: every figure equals one recomputed
// from the raw events at the final width.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "sim/metrics/time_series.h"
#include "sim/metrics/trace_log.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::metrics;

namespace {

SimTime at_us(double us) { return SimTime::from_ps(static_cast<std::int64_t>(std::llround(us * 1e6))); }

}  // namespace

TEST_CASE("TimeSeries: a short run keeps 1 us buckets; gauges are means over each bucket") {
  TimeSeries ts;
  ts.add_pool("p", 100);
  ts.arrival(at_us(0.5));
  ts.arrival(at_us(3.2));
  ts.output_tokens(PoolId(0), at_us(3.9), 7);
  // 2 waiting from 10.5 us to 30.25 us, then 0.
  ts.gauges_changed(PoolId(0), at_us(10.5), 2, 0, 0);
  ts.gauges_changed(PoolId(0), at_us(30.25), -2, 0, 0);
  // 50 KV blocks from 40 us on, to the end at 100 us.
  ts.gauges_changed(PoolId(0), at_us(40), 0, 0, 50);
  ts.finish(at_us(100));
  CHECK(ts.width_ps() == 1'000'000);
  CHECK(ts.buckets() == 100);
  CHECK(ts.arrivals()[0] == 1);
  CHECK(ts.arrivals()[3] == 1);
  CHECK(ts.pools()[0].counters[TimeSeries::kOutputTokens][3] == 7);
  const auto& p = ts.pools()[0];
  // Bucket 10 is [10, 11) us: 2 for its second half = mean 1; bucket 30: 2 for a quarter = 0.5.
  CHECK(ts.gauge_mean(p, TimeSeries::kWaiting, 9) == 0.0);
  CHECK(ts.gauge_mean(p, TimeSeries::kWaiting, 10) == approx(1.0));
  CHECK(ts.gauge_mean(p, TimeSeries::kWaiting, 20) == approx(2.0));
  CHECK(ts.gauge_mean(p, TimeSeries::kWaiting, 30) == approx(0.5));
  CHECK(ts.gauge_mean(p, TimeSeries::kWaiting, 31) == 0.0);
  CHECK(ts.gauge_mean(p, TimeSeries::kKvBlocks, 39) == 0.0);
  CHECK(ts.gauge_mean(p, TimeSeries::kKvBlocks, 99) == approx(50.0));
}

TEST_CASE("TimeSeries: widening is exact: buckets equal a recomputation from the raw events") {
  Rng rng(3, "time_series_differential");
  struct Change {
    std::int64_t t_ps, d;
  };
  std::vector<std::int64_t> arrivals;
  std::vector<Change> changes;
  TimeSeries ts;
  ts.add_pool("p", 1000);
  std::int64_t t = 0, level = 0;
  // ~2,000 events over ~1.5 s: the width grows from 1 us to 2^13 us or so.
  for (int i = 0; i < 2000; ++i) {
    t += static_cast<std::int64_t>(rng.uniform01() * 1.5e9);
    if (rng.uniform01() < 0.5) {
      arrivals.push_back(t);
      ts.arrival(SimTime::from_ps(t));
    } else {
      const std::int64_t d = level > 0 && rng.uniform01() < 0.5 ? -1 : 1;
      level += d;
      changes.push_back({t, d});
      ts.gauges_changed(PoolId(0), SimTime::from_ps(t), 0, d, 0);
    }
  }
  const std::int64_t end = t + 12345;
  ts.finish(SimTime::from_ps(end));
  const std::int64_t w = ts.width_ps();
  CHECK(ts.buckets() > TimeSeries::kMaxBuckets / 2);
  CHECK(ts.buckets() <= TimeSeries::kMaxBuckets);
  CHECK(w * static_cast<std::int64_t>(ts.buckets()) >= end);
  std::vector<std::int64_t> want_arrivals(ts.buckets(), 0);
  for (const std::int64_t a : arrivals) ++want_arrivals[static_cast<std::size_t>(a / w)];
  std::vector<double> want_running(ts.buckets(), 0.0);
  std::int64_t value = 0, last = 0;
  auto integrate_to = [&](std::int64_t to) {
    for (std::int64_t s = last; s < to;) {
      const std::int64_t e = std::min(to, (s / w + 1) * w);
      want_running[static_cast<std::size_t>(s / w)] += static_cast<double>(value * (e - s));
      s = e;
    }
    last = to;
  };
  for (const Change& c : changes) {
    integrate_to(c.t_ps);
    value += c.d;
  }
  integrate_to(end);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < ts.buckets(); ++i) {
    CHECK(ts.arrivals()[i] == want_arrivals[i]);
    total += ts.arrivals()[i];
    CHECK(ts.pools()[0].integrals[TimeSeries::kRunning][i] == approx(want_running[i]).epsilon(1e-9));
  }
  CHECK(total == static_cast<std::int64_t>(arrivals.size()));
}

TEST_CASE("TimeSeries: a count at exactly the end belongs to the last bucket") {
  TimeSeries ts;
  ts.add_pool("p", 1);
  ts.completion(PoolId(0), at_us(10));
  ts.finish(at_us(10));
  // [0, 10 us] in 1 us buckets: ten buckets, the completion at 10 us in the tenth.
  CHECK(ts.buckets() == 10);
  CHECK(ts.pools()[0].counters[TimeSeries::kCompletions][9] == 1);
  CHECK(ts.pools()[0].counters[TimeSeries::kCompletions][10] == 0);
}

TEST_CASE("TimeSeries: link bytes spread evenly over the interval they crossed") {
  TimeSeries ts;
  const auto l = ts.add_link("leaf0-spine1", 1e9);
  // 4 kB over [1.5, 5.5) us: 1 kB per us, so 500 B in bucket 1, 1 kB in 2..4, 500 B in 5.
  ts.link_bytes(l, at_us(1.5), at_us(5.5), 4000);
  ts.finish(at_us(8));
  CHECK(ts.links()[0].bytes[0] == 0.0);
  CHECK(ts.links()[0].bytes[1] == approx(500));
  CHECK(ts.links()[0].bytes[3] == approx(1000));
  CHECK(ts.links()[0].bytes[5] == approx(500));
  CHECK(ts.links()[0].bytes[6] == 0.0);
}

TEST_CASE("TraceLog: keeps spans up to its limit, then counts the rest and remembers the cut") {
  TraceOptions opts;
  opts.limit = 3;
  opts.from = at_us(10);
  TraceLog log(opts);
  log.add_pool("p", 2, 1);
  CHECK_FALSE(log.wants(at_us(9)));
  CHECK(log.wants(at_us(10)));
  for (int i = 0; i < 5; ++i) {
    TraceSpan s;
    s.start_ps = 1'000'000 * (10 + i);
    s.end_ps = s.start_ps + 500'000;
    log.record(s);
  }
  CHECK(log.spans().size() == 3);
  CHECK(log.dropped() == 2);
  CHECK(log.cut_at_ps() == 13'000'000);  // the fourth span's start
}

TEST_CASE("TimeSeries: gauge changes recorded in any order of time give the same buckets, exactly") {
  // The changes of the differential test above, once in time order and once shuffled (a decode
  // run reports its steps' changes when it applies them, after later ones of other instances).
  Rng rng(5, "time_series_order");
  struct Change {
    std::int64_t t_ps, d_running, d_kv;
  };
  std::vector<Change> changes;
  std::int64_t t = 0, running = 0;
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<std::int64_t>(rng.uniform01() * 2e9);
    const std::int64_t d = running > 0 && rng.uniform01() < 0.5 ? -1 : 1;
    running += d;
    changes.push_back({t, d, d * 17});
  }
  const SimTime end = SimTime::from_ps(t + 999);
  TimeSeries in_order, shuffled;
  for (TimeSeries* ts : {&in_order, &shuffled}) ts->add_pool("p", 1 << 20);
  for (const Change& c : changes) in_order.gauges_changed(PoolId(0), SimTime::from_ps(c.t_ps), 0, c.d_running, c.d_kv);
  // Fisher-Yates with the test's generator; the last change (the latest time) first, so the
  // buckets widen before the rest arrive.
  std::vector<Change> order = changes;
  for (std::size_t i = order.size() - 1; i > 0; --i) {
    std::swap(order[i], order[static_cast<std::size_t>(rng.uniform_int(0, i))]);
  }
  std::swap(order.front(), *std::find_if(order.begin(), order.end(), [&](const Change& c) { return c.t_ps == t; }));
  for (const Change& c : order) shuffled.gauges_changed(PoolId(0), SimTime::from_ps(c.t_ps), 0, c.d_running, c.d_kv);
  in_order.finish(end);
  shuffled.finish(end);
  CHECK(in_order.width_ps() == shuffled.width_ps());
  CHECK(in_order.buckets() == shuffled.buckets());
  CHECK(in_order.pools()[0].integrals == shuffled.pools()[0].integrals);
  CHECK(in_order.pools()[0].value == shuffled.pools()[0].value);
  CHECK(in_order.pools()[0].value[TimeSeries::kRunning] == running);
  // The KV gauge is 17 x the running one, bucket by bucket.
  for (std::size_t i = 0; i < in_order.buckets(); ++i) {
    CHECK(in_order.pools()[0].integrals[TimeSeries::kKvBlocks][i] ==
          17 * in_order.pools()[0].integrals[TimeSeries::kRunning][i]);
  }
}

TEST_CASE("TimeSeries: a change on a bucket boundary at the end widens nothing and adds nothing") {
  // 256 buckets of 1 us cover [0, 256 us): the end at 256 us and a change at it keep 1 us buckets.
  TimeSeries ts;
  ts.add_pool("p", 100);
  ts.gauges_changed(PoolId(0), at_us(128), 0, 0, 10);
  ts.gauges_changed(PoolId(0), at_us(256), 0, 0, 5);
  ts.finish(at_us(256));
  CHECK(ts.width_ps() == 1'000'000);
  CHECK(ts.buckets() == 256);
  CHECK(ts.gauge_mean(ts.pools()[0], TimeSeries::kKvBlocks, 127) == 0.0);
  CHECK(ts.gauge_mean(ts.pools()[0], TimeSeries::kKvBlocks, 255) == 10.0);
  CHECK(ts.pools()[0].value[TimeSeries::kKvBlocks] == 15);
}

TEST_CASE("TraceLog: past its limit it keeps the spans that start first, whatever the order recorded") {
  TraceOptions opts;
  opts.limit = 3;
  TraceLog log(opts);
  log.add_pool("p", 4, 1);
  // Starts 50, 10, 40, 20, 30 us (a late run's steps come after later spans of other instances).
  for (const int us : {50, 10, 40, 20, 30}) {
    TraceSpan s;
    s.start_ps = 1'000'000LL * us;
    s.end_ps = s.start_ps + 1;
    s.instance = static_cast<std::uint32_t>(us / 10);
    log.record(s);
  }
  log.finish();
  REQUIRE(log.spans().size() == 3);
  CHECK(log.spans()[0].start_ps == 10'000'000);
  CHECK(log.spans()[1].start_ps == 20'000'000);
  CHECK(log.spans()[2].start_ps == 30'000'000);
  CHECK(log.dropped() == 2);
  CHECK(log.cut_at_ps() == 40'000'000);  // every span that starts before it is kept
}
