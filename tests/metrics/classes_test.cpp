// Per-class figures: each request is held to its own class's SLO targets; classes without targets
// stay out of the overall attainment.
#include <doctest/doctest.h>

#include "sim/metrics/recorder.h"
#include "sim/metrics/summary.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::metrics;

namespace {
SimTime at_ms(std::int64_t ms) { return SimTime::zero() + Duration::milliseconds(ms); }
}  // namespace

TEST_CASE("summarize(RunMetrics): classes get their own counts, latencies and SLO attainment") {
  // Class "chat" (priority 2) has TTFT <= 150 ms; class "batch" has no targets.
  //   id class  arrival first  done   status      TTFT
  //   0  chat      0     100    400  completed    100 ms (meets 150 ms)
  //   1  chat    100     400    700  completed    300 ms (misses)
  //   2  chat    200       -    200  rejected     (misses every target)
  //   3  batch     0     900   2000  completed
  //   4  batch   500       -      -  in flight
  RunMetrics m;
  m.add_pool(PoolInfo{"p", "combined", 1, 1, 1, {"x"}});
  SloTargets chat_slo;
  chat_slo.ttft = Duration::milliseconds(150);
  m.add_class(ClassInfo{"chat", 2, chat_slo, 0});
  m.add_class(ClassInfo{"batch", 0, SloTargets{}, 3});
  const std::int64_t arrival[] = {0, 100, 200, 0, 500};
  const std::uint16_t cls[] = {0, 0, 0, 1, 1};
  for (std::uint32_t i = 0; i < 5; ++i) m.request_arrived(RequestId(i), at_ms(arrival[i]), 10, 4, cls[i]);
  m.first_token(RequestId(0), at_ms(100));
  m.request_completed(RequestId(0), at_ms(400));
  m.first_token(RequestId(1), at_ms(400));
  m.request_completed(RequestId(1), at_ms(700));
  m.request_rejected(RequestId(2), at_ms(200), RejectReason::kQueueFull);
  m.first_token(RequestId(3), at_ms(900));
  m.request_completed(RequestId(3), at_ms(2000));

  const Summary s = summarize(m, at_ms(10'000), SloTargets{});
  REQUIRE(s.classes.size() == 2);
  const ClassSummary& chat = s.classes[0];
  const ClassSummary& batch = s.classes[1];
  CHECK(chat.name == "chat");
  CHECK(chat.priority == 2);
  CHECK(chat.arrived == 3);
  CHECK(chat.completed == 2);
  CHECK(chat.rejected == 1);
  CHECK(batch.in_flight == 1);
  CHECK(batch.skipped_trace_rows == 3);
  // Chat TTFTs 100 and 300 ms: mean 200, p50 200 (between the two).
  CHECK(chat.ttft_ms.mean == approx(200));
  CHECK(chat.ttft_ms.p50 == approx(200));
  CHECK(batch.ttft_ms.mean == approx(900));
  // Chat: 1 of 3 finished requests met 150 ms; goodput 1 / 10 s. Batch: no targets, no figure.
  CHECK(*chat.slo_attainment == approx(1.0 / 3));
  CHECK(*chat.goodput_requests_per_s == approx(0.1));
  CHECK_FALSE(batch.slo_attainment.has_value());
  // Overall: only the class with targets is judged, so the same 1 of 3 (batch's completed
  // request does not count as meeting anything).
  CHECK(*s.slo_attainment == approx(1.0 / 3));
  CHECK(s.arrived == 5);
  // Completed per second: chat 2 / 10 s, batch 1 / 10 s.
  CHECK(chat.requests_per_s == approx(0.2));
  CHECK(batch.requests_per_s == approx(0.1));
}

TEST_CASE("summarize(RunMetrics): without registered classes, one class 'default' holds the given SLO") {
  RunMetrics m;
  m.request_arrived(RequestId(0), at_ms(0), 10, 1);
  m.first_token(RequestId(0), at_ms(50));
  m.request_completed(RequestId(0), at_ms(50));
  SloTargets slo;
  slo.ttft = Duration::milliseconds(40);
  const Summary s = summarize(m, at_ms(1000), slo);
  REQUIRE(s.classes.size() == 1);
  CHECK(s.classes[0].name == "default");
  CHECK(*s.classes[0].slo_attainment == 0.0);  // 50 ms > 40 ms
  CHECK(*s.slo_attainment == 0.0);
  CHECK(s.classes[0].ttft_ms.mean == s.ttft_ms.mean);
}
