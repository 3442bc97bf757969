// The SVG writer and the HTML report: ticks, labels, what is drawn, and what is said when there
// is nothing to draw.
#include <doctest/doctest.h>

#include <array>

#include <string>

#include "reports/html_report.h"
#include "reports/report.h"
#include "reports/svg.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::reports;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("svg::ticks: 1-2-5 steps on linear axes, decades on log axes") {
  // [0, 37] wants ~6 ticks: 37 / 6 = 6.2 -> step 10: 0, 10, 20, 30.
  CHECK(svg::ticks(0, 37, svg::Scale::kLinear) == std::vector<double>{0, 10, 20, 30});
  // [0, 1] / 5 = 0.2 -> 0, 0.2, ..., 1.
  CHECK(svg::ticks(0, 1, svg::Scale::kLinear, 5).size() == 6);
  // Four decades: 1, 10, 100, 1000, 10000 only.
  CHECK(svg::ticks(1, 1e4, svg::Scale::kLog) == std::vector<double>{1, 10, 100, 1000, 10000});
  // Two decades: 2 and 5 in between.
  CHECK(svg::ticks(10, 1000, svg::Scale::kLog) == std::vector<double>{10, 20, 50, 100, 200, 500, 1000});
  CHECK(svg::ticks(5, 5, svg::Scale::kLinear).empty());
}

TEST_CASE("svg::tick_label: short numbers with k/M/G and percent") {
  CHECK(svg::tick_label(0.5) == "0.5");
  CHECK(svg::tick_label(250) == "250");
  CHECK(svg::tick_label(5000) == "5000");
  CHECK(svg::tick_label(15000) == "15k");
  CHECK(svg::tick_label(2e6) == "2M");
  CHECK(svg::tick_label(0.25, true) == "25%");
  CHECK(svg::escape("a<b & \"c\">") == "a&lt;b &amp; &quot;c&quot;&gt;");
}

TEST_CASE("svg::render: one polyline per series, a legend with several, 'no data' with none") {
  svg::LineChart c;
  c.title = "t";
  c.x.unit = "s";
  c.series.push_back({"a", {0, 1, 2}, {1, 2, 3}});
  std::string out = svg::render(c);
  CHECK(count(out, "<polyline") == 1);
  CHECK(out.find("<svg") == 0);
  CHECK(count(out, "<rect x=") == 0);  // no legend for one series
  c.series.push_back({"b", {0, 1, 2}, {3, 2, 1}});
  out = svg::render(c);
  CHECK(count(out, "<polyline") == 2);
  CHECK(count(out, "<rect x=") == 2);  // legend swatches
  // A log axis skips values <= 0; with nothing left it says so.
  svg::LineChart empty;
  empty.x.scale = svg::Scale::kLog;
  empty.series.push_back({"z", {0, -1}, {1, 2}});
  out = svg::render(empty);
  CHECK(out.find("no data") != std::string::npos);
  CHECK(count(out, "<polyline") == 0);
}

TEST_CASE("svg::render: stacked bars, one rect per non-zero segment, legend skips all-zero ones") {
  svg::StackedBars b;
  b.bars = {"prefill", "decode"};
  b.segments = {"gemm", "attention", "unused", "idle"};
  b.values = {{0.5, 0.2, 0.0, 0.3}, {0.1, 0.6, 0.0, 0.3}};
  const std::string out = svg::render(b);
  // 2 bars x 3 non-zero segments, plus 3 legend swatches, plus the background.
  CHECK(count(out, "<rect") == 6 + 3 + 1);
  CHECK(out.find(">unused<") == std::string::npos);
  CHECK(out.find("#d9d9d9") != std::string::npos);  // idle is grey
}

TEST_CASE("HTML report: self-contained, charts drawn, explicit notes for what the run lacks") {
  metrics::RunMetrics m;
  m.enable_time_series();
  metrics::PoolInfo info;
  info.name = "serving";
  info.role = "combined";
  info.instances = 1;
  info.chips = 1;
  info.components = {"gemm"};
  info.kv_blocks = 100;
  const PoolId pool = m.add_pool(info);
  // Three requests, 1 ms apart, each with TTFT 2 ms and 5 tokens 1 ms apart.
  for (int i = 0; i < 3; ++i) {
    const auto t0 = SimTime::zero() + Duration::milliseconds(i);
    m.request_arrived(RequestId(i), t0, 10, 5);
    m.request_routed(RequestId(i), pool, InstanceId(0));
    m.time_series()->gauges_changed(pool, t0, 1, 0, 0);
    m.first_token(RequestId(i), t0 + Duration::milliseconds(2));
    // Its TTFT: 0.5 ms queueing + 1.5 ms prefill.
    std::array<std::int64_t, metrics::kTtftParts> parts{};
    parts[static_cast<std::size_t>(metrics::TtftPart::kQueueing)] = 500'000'000;
    parts[static_cast<std::size_t>(metrics::TtftPart::kPrefill)] = 1'500'000'000;
    m.ttft_parts(RequestId(i), parts.data());
    m.inter_token_gap(Duration::milliseconds(1), 4);
    m.request_completed(RequestId(i), t0 + Duration::milliseconds(6));
  }
  m.time_series()->gauges_changed(pool, SimTime::zero() + Duration::milliseconds(8), -3, 0, 0);
  const std::int64_t busy[] = {4'000'000'000};
  m.iteration(pool, busy);
  const auto end = SimTime::zero() + Duration::milliseconds(10);
  m.time_series()->finish(end);
  auto report = build_report(nlohmann::ordered_json{{"name", "tiny"}}, metrics::summarize(m, end, {}), RunInfo{});
  const std::string without_series = html_report(report, latency_cdfs(m));
  CHECK(without_series.find("made without a time series") != std::string::npos);
  report["time_series"] = time_series_json(*m.time_series());
  const std::string h = html_report(report, latency_cdfs(m));
  CHECK(h.rfind("<!DOCTYPE html>", 0) == 0);
  // Nothing that would fetch from the network or run code.
  CHECK(h.find("<script") == std::string::npos);
  CHECK(h.find("http://") == h.find("http://www.w3.org/2000/svg"));
  CHECK(h.find("https://") == std::string::npos);
  // 3 CDFs + 4 charts over time + the breakdown bars + the per-request TTFT parts and decode bars
  // = 10 SVGs; no link chart.
  CHECK(count(h, "<svg") == 10);
  // The per-request bars: all three requests (equal TTFTs: by id), each 0.5 + 1.5 ms of TTFT and
  // 6 - 2 = 4 ms of decode, on an axis up to the longest bar (6 ms).
  CHECK(h.find("The 3 requests with the longest TTFT") != std::string::npos);
  CHECK(h.find("#0 (10 + 5 tokens)") < h.find("#1 (10 + 5 tokens)"));
  CHECK(h.find("#2 (10 + 5 tokens)") != std::string::npos);
  CHECK(count(h, "<title>queueing 0.5 ms</title>") == 3);
  CHECK(count(h, "<title>prefill 1.5 ms</title>") == 3);
  CHECK(count(h, "<title>decode 4 ms</title>") == 3);
  CHECK(h.find("No link data in this run") != std::string::npos);
  // The CDF of 3 equal TTFTs (2 ms) is drawn; TPOT = (6 - 2) / 4 = 1 ms.
  CHECK(h.find("TTFT CDF") != std::string::npos);
  CHECK(count(h, "<polyline") >= 3 + 5);
  // With a link, its chart replaces the note.
  metrics::TimeSeries ts;
  ts.add_pool("serving", 100);
  const auto l = ts.add_link("nvlink0", 1e9);
  ts.link_bytes(l, SimTime::zero(), end, 5e6);  // 5 MB in 10 ms at 1 GB/s = 50%
  ts.finish(end);
  report["time_series"] = time_series_json(ts);
  CHECK(report["time_series"]["links"][0]["utilization"][0] == approx(0.5));
  const std::string with_link = html_report(report, latency_cdfs(m));
  CHECK(with_link.find("No link data") == std::string::npos);
  CHECK(with_link.find("nvlink0") != std::string::npos);
  CHECK(count(with_link, "<svg") == 11);
  // Deterministic.
  CHECK(html_report(report, latency_cdfs(m)) == with_link);
}
