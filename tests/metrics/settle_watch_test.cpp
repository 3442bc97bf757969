// SettleWatch: a rule settles exactly when the values still to come can no longer repair it, and a
// settled rule's final figure (the summary's) is beyond its limit.
#include <doctest/doctest.h>

#include "sim/metrics/settle_watch.h"
#include "sim/metrics/summary.h"

using namespace servesim;
using namespace servesim::metrics;

namespace {

SimTime at_ms(std::int64_t ms) { return SimTime::zero() + Duration::milliseconds(ms); }

SettleRule rule(SettleRule::Metric m, double quantile, double limit, const char* text, bool strict = false) {
  SettleRule r;
  r.metric = m;
  r.quantile = quantile;
  r.limit = limit;
  r.strict = strict;
  r.text = text;
  return r;
}

// Request i arrives at i ms and gets its first token `ttft_ms` later; 2 output tokens, done 10 ms on.
void serve_one(Recorder& rec, std::uint32_t i, std::int64_t ttft_ms) {
  const auto t = static_cast<std::int64_t>(i);
  rec.request_arrived(RequestId(i), at_ms(t), 16, 2, 0);
  rec.first_token(RequestId(i), at_ms(t + ttft_ms));
  rec.request_completed(RequestId(i), at_ms(t + ttft_ms + 10));
}

}  // namespace

TEST_CASE("SettleWatch: a p99 limit settles once n - floor(0.99 (n - 1)) values are above it") {
  // n = 100 expected: the p99 interpolates between the order statistics at floor(0.99 x 99) = 98
  // and 99, so it is above 1,000 ms for sure once 100 - 98 = 2 values are.
  RunMetrics m;
  m.add_pool(PoolInfo{"p", "combined", 1, 1, 1, {"x"}});
  SettleWatch w(m, {rule(SettleRule::Metric::kTtft, 0.99, 1000, "ttft_p99 <= 1 s")}, SloTargets{});
  w.add_class(ClassInfo{});
  w.expect_requests(100);
  for (std::uint32_t i = 0; i < 50; ++i) serve_one(w, i, 100);
  CHECK_FALSE(w.settled());
  serve_one(w, 50, 1500);
  CHECK_FALSE(w.settled());  // one above: the p99 could still end at or below 1 s
  serve_one(w, 51, 1001);
  const auto s = w.settled();
  REQUIRE(s);
  CHECK(s->rule == 0);
  CHECK(s->why.find("ttft_p99 <= 1 s cannot hold: 2 of at most 100") == 0);
  // The rest of the run at its best (every other TTFT 0 ms): the p99 is still above the limit.
  for (std::uint32_t i = 52; i < 100; ++i) serve_one(w, i, 0);
  const Summary sum = summarize(m, at_ms(2000), SloTargets{});
  CHECK(sum.ttft_ms.count == 100);
  CHECK(sum.ttft_ms.p99 > 1000);
}

TEST_CASE("SettleWatch: a strict limit settles on values equal to it; a mean on its sum") {
  RunMetrics m;
  m.add_pool(PoolInfo{"p", "combined", 1, 1, 1, {"x"}});
  // E2E = TTFT + 10 ms. Mean TTFT < 100 ms over at most 10 requests breaks once the sum reaches
  // 1,000 ms (strict) ; p50 E2E <= 50 ms needs 10 - floor(0.5 x 9) = 6 values above 50 ms.
  SettleWatch w(m,
                {rule(SettleRule::Metric::kTtft, -1, 100, "ttft_mean < 100 ms", true),
                 rule(SettleRule::Metric::kE2e, 0.5, 50, "e2e_p50 <= 50 ms")},
                SloTargets{});
  w.add_class(ClassInfo{});
  w.expect_requests(10);
  for (std::uint32_t i = 0; i < 5; ++i) serve_one(w, i, 41);  // E2E 51 ms: five above 50; TTFT sum 205
  CHECK_FALSE(w.settled());
  serve_one(w, 5, 795);  // TTFT sum 1,000 ms: not yet, a 1e-9 margin guards the floating sum
  auto s = w.settled();
  REQUIRE(s);
  CHECK(s->rule == 1);  // six E2E values above 50 ms
  CHECK(s->why.find("e2e_p50 <= 50 ms cannot hold: 6 of at most 10") == 0);
}

TEST_CASE("SettleWatch: SLO attainment settles when the misses exceed (1 - a) x n; no limit, no settling") {
  SloTargets slo;
  slo.ttft = Duration::milliseconds(200);
  for (const std::int64_t expected : {100, 0}) {
    CAPTURE(expected);
    RunMetrics m;
    m.add_pool(PoolInfo{"p", "combined", 1, 1, 1, {"x"}});
    // At least 99% of at most 100 requests within 200 ms: one miss leaves 99 / 100 possible, two
    // leave 98 / 100 at best.
    SettleWatch w(m, {rule(SettleRule::Metric::kAttainment, -1, 0.99, "slo_attainment >= 99%")}, slo);
    w.add_class(ClassInfo{"default", 0, slo, 0});
    w.expect_requests(expected);
    serve_one(w, 0, 300);
    CHECK_FALSE(w.settled());
    w.request_arrived(RequestId(1), at_ms(1), 16, 2, 0);
    w.request_rejected(RequestId(1), at_ms(5), RejectReason::kQueueFull);
    if (expected == 0) {
      CHECK_FALSE(w.settled());  // a workload without a request limit never settles
      continue;
    }
    const auto s = w.settled();
    REQUIRE(s);
    CHECK(s->why.find("2 of at most 100 requests already missed") != std::string::npos);
    for (std::uint32_t i = 2; i < 100; ++i) serve_one(w, i, 10);
    const Summary sum = summarize(m, at_ms(2000), slo);
    CHECK(sum.slo_attainment == doctest::Approx(0.98));
  }
}

TEST_CASE("SettleWatch: every call reaches the run's recorder unchanged") {
  RunMetrics plain, inner;
  SettleWatch w(inner, {rule(SettleRule::Metric::kTtft, 0.9, 5, "ttft_p90 <= 5 ms")}, SloTargets{});
  for (Recorder* r : {static_cast<Recorder*>(&plain), static_cast<Recorder*>(&w)}) {
    r->add_pool(PoolInfo{"p", "combined", 1, 1, 1, {"x"}});
    r->add_class(ClassInfo{});
    r->expect_requests(3);
    for (std::uint32_t i = 0; i < 3; ++i) serve_one(*r, i, 7 * (i + 1));
    r->inter_token_gap(Duration::milliseconds(4), 3);
  }
  const Summary a = summarize(plain, at_ms(100), SloTargets{}), b = summarize(inner, at_ms(100), SloTargets{});
  CHECK(a.ttft_ms.mean == b.ttft_ms.mean);
  CHECK(a.tpot_ms.p90 == b.tpot_ms.p90);
  CHECK(a.itl_ms.mean == b.itl_ms.mean);
  CHECK(a.completed == b.completed);
  CHECK(w.settled());  // every TTFT (7, 14, 21 ms) is above 5 ms
}
