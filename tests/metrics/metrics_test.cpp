#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "sim/metrics/histogram.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/summary.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::metrics;

namespace {

// The reference quantile, written from the definition in histogram.h ("linear" in numpy): sort,
// r = q (n - 1), interpolate between ranks floor(r) and floor(r) + 1.
double reference_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double r = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(r));
  if (lo + 1 >= v.size()) return v[lo];
  return v[lo] + (r - static_cast<double>(lo)) * (v[lo + 1] - v[lo]);
}

bool close(double got, double want, double rel) {
  return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
}

SimTime at_ms(std::int64_t ms) { return SimTime::zero() + Duration::milliseconds(ms); }

}  // namespace

TEST_CASE("summarize: quantiles equal a sort-based linear-interpolation reference") {
  Rng rng(1, "summarize_differential");
  std::vector<std::size_t> sizes = {1, 2, 3, 4, 5, 10, 11, 99, 100, 101};
  for (int i = 0; i < 100; ++i) sizes.push_back(rng.uniform_int(1, 500));
  for (std::size_t n : sizes) {
    std::vector<double> values(n);
    // Half the scenarios draw from 5 integers (heavy duplication), half from a continuous range.
    const bool duplicates = rng.uniform01() < 0.5;
    for (double& v : values) {
      v = duplicates ? static_cast<double>(rng.uniform_int(0, 4)) : 1000.0 * rng.uniform01();
    }
    const std::vector<double> original = values;
    double sum = 0;
    for (double v : original) sum += v;

    const Distribution d = summarize(values);
    INFO("n = ", n, (duplicates ? " with duplicates" : ""));
    CHECK(d.count == static_cast<std::int64_t>(n));
    CHECK(close(d.mean, sum / static_cast<double>(n), 1e-12));
    CHECK(close(d.p50, reference_quantile(original, 0.50), 1e-12));
    CHECK(close(d.p90, reference_quantile(original, 0.90), 1e-12));
    CHECK(close(d.p99, reference_quantile(original, 0.99), 1e-12));
    // quantile_sorted is the same definition on sorted input.
    std::vector<double> sorted = original;
    std::sort(sorted.begin(), sorted.end());
    for (double q : {0.0, 0.25, 0.5, 0.9, 0.99, 1.0}) {
      CHECK(close(quantile_sorted(sorted, q), reference_quantile(original, q), 1e-12));
    }
  }
}

TEST_CASE("summarize: one and two values, by hand") {
  std::vector<double> one = {7.0};
  const Distribution d1 = summarize(one);
  CHECK(d1.count == 1);
  CHECK(d1.p50 == 7.0);
  CHECK(d1.p99 == 7.0);
  // Two values {10, 20}: r = q x 1, so p50 = 15, p90 = 19, p99 = 19.9.
  std::vector<double> two = {20.0, 10.0};
  const Distribution d2 = summarize(two);
  CHECK(d2.mean == approx(15.0));
  CHECK(d2.p50 == approx(15.0));
  CHECK(d2.p90 == approx(19.0));
  CHECK(d2.p99 == approx(19.9));
  std::vector<double> none;
  const Distribution d0 = summarize(none);
  CHECK(d0.count == 0);
  CHECK(d0.p50 == 0.0);
}

TEST_CASE("LogHistogram: quantiles within 0.4% of the exact weighted quantile") {
  // The histogram interpolates between the values of ranks floor(r) and floor(r) + 1,
  // r = q (count - 1), each represented by its bucket midpoint. A bucket spans at most 1/128 of
  // its lower bound, so a midpoint is within 1/256 = 0.39% of any value in it, and so is a convex
  // combination of two midpoints of the same combination of the values. Reference: the same
  // interpolation in the expanded, sorted weighted sample.
  Rng rng(2, "log_histogram");
  for (int scenario = 0; scenario < 20; ++scenario) {
    LogHistogram h;
    std::vector<std::pair<double, std::int64_t>> data;
    const int n = static_cast<int>(rng.uniform_int(1, 300));
    double sum = 0;
    std::int64_t count = 0;
    for (int i = 0; i < n; ++i) {
      // Six decades (1 us to 1 s, as inter-token gaps) and weights up to 64 (tokens per batch).
      const double v = 1e-6 * std::pow(10.0, 6.0 * rng.uniform01());
      const auto w = static_cast<std::int64_t>(rng.uniform_int(1, 64));
      h.add(v, w);
      data.emplace_back(v, w);
      sum += v * static_cast<double>(w);
      count += w;
    }
    std::sort(data.begin(), data.end());
    auto element = [&](std::int64_t k) {
      // Element k of the expanded sample.
      std::int64_t seen = 0;
      for (const auto& [v, w] : data) {
        seen += w;
        if (k < seen) return v;
      }
      return data.back().first;
    };
    auto exact_at_rank = [&](double rank) {
      const auto k = static_cast<std::int64_t>(std::floor(rank));
      const double lo = element(k);
      const double hi = k + 1 < count ? element(k + 1) : lo;
      return lo + (rank - static_cast<double>(k)) * (hi - lo);
    };
    CHECK(h.count() == count);
    CHECK(close(h.mean(), sum / static_cast<double>(count), 1e-12));
    bool within = true;
    for (int i = 0; i <= 100; ++i) {
      const double q = i / 100.0;
      const double exact = exact_at_rank(q * static_cast<double>(count - 1));
      within = within && std::fabs(h.quantile(q) - exact) <= 0.004 * exact;
    }
    CHECK(within);
    const Distribution s = h.summary();
    CHECK(s.count == count);
    CHECK(std::fabs(s.p99 - exact_at_rank(0.99 * static_cast<double>(count - 1))) <= 0.004 * s.p99);
  }
}

TEST_CASE("LogHistogram: zeros and negatives go to the zero bucket") {
  LogHistogram h;
  CHECK(h.quantile(0.5) == 0.0);  // empty
  h.add(0.0, 2);
  h.add(-1.0, 1);
  h.add(2.0, 2);
  h.add(5.0, 0);   // zero weight: ignored
  h.add(5.0, -2);  // negative weight: ignored
  // 5 values: ranks 0..2 at or below zero, ranks 3..4 at 2.0.
  CHECK(h.count() == 5);
  // mean = (0 x 2 - 1 + 2 x 2) / 5 = 3 / 5: exact, negatives included.
  CHECK(h.mean() == approx(0.6));
  // rank = q x 4. q = 0.5: rank 2, the last zero. q = 0.75: rank 3 exactly, the first 2.0.
  CHECK(h.quantile(0.0) == 0.0);
  CHECK(h.quantile(0.5) == 0.0);
  CHECK(std::fabs(h.quantile(0.75) - 2.0) <= 0.004 * 2.0);
  CHECK(std::fabs(h.quantile(1.0) - 2.0) <= 0.004 * 2.0);
}

namespace {

// The hand-built run of the summary tests. Times in ms, end of run at 10 s.
//   id  arrival  prompt  output  first token  end  status
//   0       0     100      5        100        500 completed  TTFT 100, E2E 500, TPOT 400/4 = 100
//   1    1000     200      3       1300       1700 completed  TTFT 300, E2E 700, TPOT 400/2 = 200
//   2    2000      50      1       2050       2050 completed  TTFT  50, E2E  50, no TPOT
//   3    3000      80      4         -        3000 rejected (queue full)
//   4    4000    9000      4         -        4000 rejected (exceeds max_model_len)
//   5    5000     300     10       5400          - in flight  TTFT 400
//   6    6000      70      2         -           - in flight
// Pools: "decode" (2 instances, 1 stage, 8 chips; attention, mlp), "prefill" (1 instance,
// 2 stages, 4 chips; compute).
struct Run {
  RunMetrics m;
  PoolId decode, prefill;
};

void build_run(Run& run) {
  RunMetrics& m = run.m;
  run.decode = m.add_pool(PoolInfo{"decode", "decode", 2, 8, 1, {"attention", "mlp"}});
  run.prefill = m.add_pool(PoolInfo{"prefill", "prefill", 1, 4, 2, {"compute"}});
  m.expect_requests(7);
  const std::int64_t arrival_ms[] = {0, 1000, 2000, 3000, 4000, 5000, 6000};
  const std::int64_t prompt[] = {100, 200, 50, 80, 9000, 300, 70};
  const std::int64_t output[] = {5, 3, 1, 4, 4, 10, 2};
  for (std::uint32_t i = 0; i < 7; ++i) {
    m.request_arrived(RequestId(i), at_ms(arrival_ms[i]), prompt[i], output[i]);
    m.request_routed(RequestId(i), run.decode, InstanceId(i % 2));
  }
  m.first_token(RequestId(0), at_ms(100));
  m.inter_token_gap(Duration::milliseconds(100), 4);  // request 0's 4 later tokens
  m.request_completed(RequestId(0), at_ms(500));
  m.first_token(RequestId(1), at_ms(1300));
  m.inter_token_gap(Duration::milliseconds(200), 2);  // request 1's 2 later tokens
  m.request_completed(RequestId(1), at_ms(1700));
  m.first_token(RequestId(2), at_ms(2050));
  m.request_completed(RequestId(2), at_ms(2050));
  m.request_rejected(RequestId(3), at_ms(3000), RejectReason::kQueueFull);
  m.request_rejected(RequestId(4), at_ms(4000), RejectReason::kExceedsMaxModelLen);
  m.first_token(RequestId(5), at_ms(5400));
  m.inter_token_gap(Duration::milliseconds(50), 3);  // request 5's 3 tokens so far
  m.request_preempted(RequestId(5), run.decode);

  // Component time in ps: decode attention 1.0 + 0.5 = 1.5 s, mlp 2.0 + 0.5 = 2.5 s;
  // prefill compute 3 s (summed over its 2 stages).
  constexpr std::int64_t kS = 1'000'000'000'000;
  const std::int64_t d1[] = {kS, 2 * kS};
  const std::int64_t d2[] = {kS / 2, kS / 2};
  const std::int64_t p1[] = {3 * kS};
  m.iteration(run.decode, d1);
  m.iteration(run.decode, d2);
  m.iteration(run.prefill, p1);
  m.kv_usage_peak(run.decode, 0.3);
  m.kv_usage_peak(run.decode, 0.7);
  m.kv_usage_peak(run.decode, 0.5);  // the peak stays 0.7
}

}  // namespace

TEST_CASE("summarize(RunMetrics): counts add up by status and reason") {
  Run run;
  build_run(run);
  const Summary s = summarize(run.m, at_ms(10'000), SloTargets{});
  CHECK(s.arrived == 7);
  CHECK(s.completed == 3);
  CHECK(s.rejected == 2);
  CHECK(s.in_flight == 2);
  CHECK(s.arrived == s.completed + s.rejected + s.in_flight);
  CHECK(s.rejected_by_reason[static_cast<std::size_t>(RejectReason::kQueueFull)] == 1);
  CHECK(s.rejected_by_reason[static_cast<std::size_t>(RejectReason::kExceedsMaxModelLen)] == 1);
  CHECK(s.rejected_by_reason[static_cast<std::size_t>(RejectReason::kNone)] == 0);
  CHECK(s.simulated_s == approx(10.0));
  CHECK_FALSE(s.slo_attainment.has_value());  // no targets given
  CHECK_FALSE(s.goodput_requests_per_s.has_value());
}

TEST_CASE("summarize(RunMetrics): latency distributions derived by hand") {
  Run run;
  build_run(run);
  const Summary s = summarize(run.m, at_ms(10'000), SloTargets{});
  // TTFT over every request with a first token (0, 1, 2, 5): sorted {50, 100, 300, 400} ms.
  // mean 850 / 4 = 212.5; p50 r = 1.5 -> 100 + 0.5 x 200 = 200; p90 r = 2.7 -> 300 + 0.7 x 100
  // = 370; p99 r = 2.97 -> 397.
  CHECK(s.ttft_ms.count == 4);
  CHECK(s.ttft_ms.mean == approx(212.5));
  CHECK(s.ttft_ms.p50 == approx(200.0));
  CHECK(s.ttft_ms.p90 == approx(370.0));
  CHECK(s.ttft_ms.p99 == approx(397.0));
  // E2E over completed requests: sorted {50, 500, 700} ms. mean 1250 / 3; p50 r = 1 -> 500;
  // p90 r = 1.8 -> 500 + 0.8 x 200 = 660; p99 r = 1.98 -> 696.
  CHECK(s.e2e_ms.count == 3);
  CHECK(s.e2e_ms.mean == approx(1250.0 / 3.0));
  CHECK(s.e2e_ms.p50 == approx(500.0));
  CHECK(s.e2e_ms.p90 == approx(660.0));
  CHECK(s.e2e_ms.p99 == approx(696.0));
  // TPOT over completed requests with more than one output token: {100, 200} ms.
  // mean 150; p50 150; p90 190; p99 199.
  CHECK(s.tpot_ms.count == 2);
  CHECK(s.tpot_ms.mean == approx(150.0));
  CHECK(s.tpot_ms.p50 == approx(150.0));
  CHECK(s.tpot_ms.p90 == approx(190.0));
  CHECK(s.tpot_ms.p99 == approx(199.0));
  // ITL: 3 x 50 ms, 4 x 100 ms, 2 x 200 ms = 9 gaps. mean (150 + 400 + 400) / 9 = 105.56 ms
  // (exact). p50: rank 4 -> 100 ms; p90: rank 7.2 -> 200 ms (bucket midpoints, within 0.4%).
  CHECK(s.itl_ms.count == 9);
  CHECK(s.itl_ms.mean == approx(950.0 / 9.0));
  CHECK(std::fabs(s.itl_ms.p50 - 100.0) <= 0.004 * 100.0);
  CHECK(std::fabs(s.itl_ms.p90 - 200.0) <= 0.004 * 200.0);
}

TEST_CASE("summarize(RunMetrics): throughput counts every emitted token over the whole run") {
  Run run;
  build_run(run);
  const Summary s = summarize(run.m, at_ms(10'000), SloTargets{});
  // Output tokens: one first token each for requests 0, 1, 2, 5 (4) plus 4 + 2 + 3 later ones
  // = 13, over 10 s = 1.3 /s; per chip 1.3 / (8 + 4) chips.
  CHECK(run.m.output_tokens() == 13);
  CHECK(s.output_tokens_per_s == approx(1.3));
  CHECK(s.output_tokens_per_s_per_chip == approx(1.3 / 12.0));
  // Input tokens: the prompts of the requests that reached a first token, 100 + 200 + 50 + 300
  // = 650, over 10 s = 65 /s.
  CHECK(run.m.input_tokens() == 650);
  CHECK(s.input_tokens_per_s == approx(65.0));
  // 3 completed requests over 10 s.
  CHECK(s.requests_per_s == approx(0.3));
}

TEST_CASE("summarize(RunMetrics): SLO attainment and goodput derived by hand") {
  Run run;
  build_run(run);
  const SimTime end = at_ms(10'000);
  // Finished = 3 completed + 2 rejected = 5; rejections miss every target.
  SUBCASE("TTFT <= 350 ms: requests 0 (100), 1 (300), 2 (50) meet it") {
    SloTargets slo;
    slo.ttft = Duration::milliseconds(350);
    const Summary s = summarize(run.m, end, slo);
    REQUIRE(s.slo_attainment.has_value());
    CHECK(*s.slo_attainment == approx(3.0 / 5.0));
    CHECK(*s.goodput_requests_per_s == approx(3.0 / 10.0));
  }
  SUBCASE("TTFT <= 300 ms: a target met exactly counts (request 1 at 300)") {
    SloTargets slo;
    slo.ttft = Duration::milliseconds(300);
    const Summary s = summarize(run.m, end, slo);
    REQUIRE(s.slo_attainment.has_value());
    CHECK(*s.slo_attainment == approx(3.0 / 5.0));
  }
  SUBCASE("TTFT <= 350 ms and TPOT <= 150 ms: request 1 (TPOT 200) misses; 2 has no TPOT") {
    SloTargets slo;
    slo.ttft = Duration::milliseconds(350);
    slo.tpot = Duration::milliseconds(150);
    const Summary s = summarize(run.m, end, slo);
    REQUIRE(s.slo_attainment.has_value());
    CHECK(*s.slo_attainment == approx(2.0 / 5.0));
    CHECK(*s.goodput_requests_per_s == approx(2.0 / 10.0));
  }
  SUBCASE("E2E <= 500 ms: a target met exactly counts (request 0 at 500), request 1 (700) misses") {
    SloTargets slo;
    slo.e2e = Duration::milliseconds(500);
    const Summary s = summarize(run.m, end, slo);
    REQUIRE(s.slo_attainment.has_value());
    CHECK(*s.slo_attainment == approx(2.0 / 5.0));
  }
  SUBCASE("TTFT <= 99 ms: only request 2 (50) meets it") {
    SloTargets slo;
    slo.ttft = Duration::milliseconds(99);
    const Summary s = summarize(run.m, end, slo);
    REQUIRE(s.slo_attainment.has_value());
    CHECK(*s.slo_attainment == approx(1.0 / 5.0));
    CHECK(*s.goodput_requests_per_s == approx(1.0 / 10.0));
  }
}

TEST_CASE("summarize(RunMetrics): utilization and breakdown shares with idle sum to 1") {
  Run run;
  build_run(run);
  const Summary s = summarize(run.m, at_ms(10'000), SloTargets{});
  REQUIRE(s.pools.size() == 2);
  const PoolSummary& d = s.pools[0];
  // Decode capacity = 2 instances x 1 stage x 10 s = 20 s. attention 1.5 / 20 = 0.075,
  // mlp 2.5 / 20 = 0.125, utilization 0.2, idle 0.8.
  CHECK(d.name == "decode");
  CHECK(d.role == "decode");
  CHECK(d.instances == 2);
  CHECK(d.chips == 8);
  CHECK(d.iterations == 2);
  CHECK(d.preemptions == 1);
  CHECK(d.kv_cache_peak_fraction == approx(0.7));
  CHECK(d.utilization == approx(0.2));
  REQUIRE(d.breakdown.size() == 3);
  CHECK(d.breakdown[0].first == "attention");
  CHECK(d.breakdown[0].second == approx(0.075));
  CHECK(d.breakdown[1].first == "mlp");
  CHECK(d.breakdown[1].second == approx(0.125));
  CHECK(d.breakdown[2].first == "idle");
  CHECK(d.breakdown[2].second == approx(0.8));
  // Prefill capacity = 1 instance x 2 stages x 10 s = 20 s: compute 3 / 20 = 0.15, idle 0.85.
  const PoolSummary& p = s.pools[1];
  CHECK(p.name == "prefill");
  CHECK(p.iterations == 1);
  CHECK(p.preemptions == 0);
  CHECK(p.utilization == approx(0.15));
  REQUIRE(p.breakdown.size() == 2);
  CHECK(p.breakdown[1].first == "idle");
  CHECK(p.breakdown[1].second == approx(0.85));
  for (const PoolSummary& pool : s.pools) {
    double total = 0;
    for (const auto& [name, share] : pool.breakdown) total += share;
    CHECK(total == approx(1.0));
  }
}

TEST_CASE("RunMetrics: records each request's milestones where summarize reads them") {
  Run run;
  build_run(run);
  const auto& reqs = run.m.requests();
  REQUIRE(reqs.size() == 7);
  CHECK(reqs[0].status == RequestStatus::kCompleted);
  CHECK(reqs[3].status == RequestStatus::kRejected);
  CHECK(reqs[3].reject_reason == RejectReason::kQueueFull);
  CHECK(reqs[3].completion == at_ms(3000));  // the rejection time
  CHECK(reqs[5].status == RequestStatus::kInFlight);
  CHECK(reqs[5].preemptions == 1);
  CHECK(reqs[6].first_token == SimTime::never());
  CHECK(reqs[1].instance == 1);                                  // routed to InstanceId(1 % 2)
  CHECK(run.m.pools()[0].component_ps[1] == 2'500'000'000'000);  // mlp 2.5 s in ps
}

TEST_CASE("RunMetrics: steps recorded as one sum give the totals of one call per step") {
  // Three decode steps of 4 tokens each, components {attention, mlp} in ps: {10, 7}, {11, 7},
  // {12, 7}. Per step: busy sums {33, 21}, 3 iterations, token-weighted sums 4 x {33, 21} =
  // {132, 84} over 12 tokens. As one call: the summed times {33, 21} with 3 steps of 4 tokens.
  const std::int64_t steps[3][2] = {{10, 7}, {11, 7}, {12, 7}};
  const std::int64_t sum[2] = {33, 21};
  RunMetrics each, once;
  const PoolId a = each.add_pool(PoolInfo{"decode", "decode", 1, 1, 1, {"attention", "mlp"}});
  const PoolId b = once.add_pool(PoolInfo{"decode", "decode", 1, 1, 1, {"attention", "mlp"}});
  for (const auto& c : steps) {
    each.iteration(a, c);
    each.decode_iteration(a, c, 4);
  }
  once.iterations(b, sum, 3);
  once.decode_iterations(b, sum, 4, 3);
  const auto& pe = each.pools()[a.index()];
  const auto& po = once.pools()[b.index()];
  CHECK(pe.component_ps == po.component_ps);
  CHECK(po.component_ps == std::vector<std::int64_t>{33, 21});
  CHECK(pe.iterations == 3);
  CHECK(po.iterations == 3);
  CHECK((pe.decode_weighted_ps == po.decode_weighted_ps));
  CHECK(static_cast<std::int64_t>(po.decode_weighted_ps[0]) == 132);
  CHECK(static_cast<std::int64_t>(po.decode_weighted_ps[1]) == 84);
  CHECK(pe.decode_tokens == 12);
  CHECK(po.decode_tokens == 12);
}
