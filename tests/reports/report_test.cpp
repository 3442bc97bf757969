// The JSON report carries every key of the DESIGN.md contract, and nothing host-dependent unless
// asked for.
#include <doctest/doctest.h>

#include <array>

#include <sstream>

#include "reports/report.h"
#include "tests/approx.h"

using namespace servesim;

namespace {

metrics::Summary sample_summary() {
  metrics::RunMetrics m;
  metrics::PoolInfo info;
  info.name = "serving";
  info.role = "combined";
  info.instances = 2;
  info.chips = 4;
  info.components = {"gemm", "attention"};
  const PoolId pool = m.add_pool(info);
  m.request_arrived(RequestId(0), SimTime::zero(), 100, 10);
  m.request_routed(RequestId(0), pool, InstanceId(1));
  m.first_token(RequestId(0), SimTime::from_ps(1'000'000'000));
  m.inter_token_gap(Duration::milliseconds(1), 9);
  m.request_completed(RequestId(0), SimTime::from_ps(10'000'000'000));
  const std::int64_t times[] = {3'000'000'000, 1'000'000'000};
  m.iteration(pool, times);
  metrics::SloTargets slo;
  slo.ttft = Duration::milliseconds(2);
  return metrics::summarize(m, SimTime::from_ps(10'000'000'000), slo);
}

}  // namespace

TEST_CASE("Report: every key of the DESIGN.md contract is present") {
  reports::RunInfo run;
  run.name = "t";
  run.events = 42;
  run.wall_s = 0.5;
  run.peak_rss_mb = 12;
  const auto j = reports::build_report(nlohmann::ordered_json::object(), sample_summary(), run);
  CHECK(j["schema"] == "servesim.report/1");
  CHECK(j.contains("scenario"));
  for (const char* k : {"arrived", "completed", "rejected", "in_flight"}) {
    CHECK(j["summary"]["requests"].contains(k));
  }
  for (const char* k :
       {"input_tokens_per_s", "output_tokens_per_s", "requests_per_s", "output_tokens_per_s_per_chip"}) {
    CHECK(j["summary"]["throughput"].contains(k));
  }
  for (const char* d : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    for (const char* k : {"mean", "p50", "p90", "p99"}) CHECK(j["summary"][d].contains(k));
  }
  CHECK(j["summary"]["slo"].contains("attainment"));
  CHECK(j["summary"]["slo"].contains("goodput_requests_per_s"));
  const auto& pool = j["pools"][0];
  for (const char* k :
       {"name", "role", "instances", "chips", "utilization", "breakdown", "kv_cache_peak_fraction", "preemptions"}) {
    CHECK(pool.contains(k));
  }
  for (const char* k : {"events", "simulated_s", "wall_s", "events_per_s", "peak_rss_mb"}) {
    CHECK(j["simulation"].contains(k));
  }
  // One request in a 10 ms run (1e10 ps): TTFT 1 ms, within the 2 ms SLO; 1 + 9 = 10 tokens in
  // 10 ms = 1,000 tokens/s.
  CHECK(j["summary"]["ttft_ms"]["mean"] == approx(1.0));
  CHECK(j["summary"]["slo"]["attainment"] == 1.0);
  CHECK(j["summary"]["throughput"]["output_tokens_per_s"] == approx(1000.0));
  // 42 events in 0.5 s.
  CHECK(j["simulation"]["events_per_s"] == 84.0);
  // Busy 4 ms of 2 instances x 10 ms: gemm 3 / 20, attention 1 / 20, idle 16 / 20.
  CHECK(pool["breakdown"]["gemm"] == approx(0.15));
  CHECK(pool["breakdown"]["idle"] == approx(0.8));
}

TEST_CASE("Report: host measurements are null when left out, so equal runs give equal bytes") {
  reports::RunInfo run;
  run.events = 7;
  const auto a = reports::build_report(nlohmann::ordered_json::object(), sample_summary(), run).dump();
  const auto b = reports::build_report(nlohmann::ordered_json::object(), sample_summary(), run).dump();
  CHECK(a == b);
  const auto j = nlohmann::json::parse(a);
  CHECK(j["simulation"]["wall_s"].is_null());
  CHECK(j["simulation"]["events_per_s"].is_null());
  CHECK(j["simulation"]["peak_rss_mb"].is_null());
}

TEST_CASE("Report: the per-request CSV has one row per request") {
  metrics::RunMetrics m;
  metrics::PoolInfo info;
  info.components = {"x"};
  m.add_pool(info);
  m.request_arrived(RequestId(0), SimTime::zero(), 5, 1);
  m.request_arrived(RequestId(1), SimTime::from_ps(500'000'000'000), 7, 2);
  m.request_rejected(RequestId(1), SimTime::from_ps(500'000'000'000), metrics::RejectReason::kQueueFull);
  // Request 2: TTFT 3 ms = 1 ms queueing + 2 ms prefill, then 4 ms to completion.
  m.request_arrived(RequestId(2), SimTime::zero(), 9, 3);
  m.first_token(RequestId(2), SimTime::from_ps(3'000'000'000));
  std::array<std::int64_t, metrics::kTtftParts> parts{};
  parts[static_cast<std::size_t>(metrics::TtftPart::kQueueing)] = 1'000'000'000;
  parts[static_cast<std::size_t>(metrics::TtftPart::kPrefill)] = 2'000'000'000;
  m.ttft_parts(RequestId(2), parts.data());
  m.request_completed(RequestId(2), SimTime::from_ps(7'000'000'000));
  std::ostringstream out;
  reports::write_requests_csv(out, m);
  CHECK(out.str() ==
        "id,arrival_s,first_token_s,completion_s,prompt_tokens,output_tokens,status,reject_reason,"
        "preemptions,instance,class,queueing_ms,encode_ms,embedding_transfer_ms,prefill_ms,"
        "prefill_interference_ms,kv_transfer_exposed_ms,first_decode_ms,preemption_ms,other_ms,"
        "decode_ms\n"
        "0,0.000000000,,,5,1,in_flight,,0,0,default,,,,,,,,,,\n"
        "1,0.500000000,,0.500000000,7,2,rejected,queue_full,0,0,default,,,,,,,,,,\n"
        "2,0.000000000,0.003000000,0.007000000,9,3,completed,,0,0,default,1.000000,0.000000,"
        "0.000000,2.000000,0.000000,0.000000,0.000000,0.000000,0.000000,4.000000\n");
}

TEST_CASE("Report: requests.csv streamed as requests finish is the table written at the end") {
  // The same milestones into metrics that keep every record (the table written whole at the end)
  // and into metrics that release them, with the CSV as their sink: request 1 finishes before
  // request 0, so its row waits for 0's; 2 is still in flight when the run ends.
  auto feed = [](metrics::RunMetrics& m) {
    metrics::PoolInfo info;
    info.components = {"x"};
    m.add_pool(info);
    m.add_class(metrics::ClassInfo{"chat", 0, {}, 0});
    m.add_class(metrics::ClassInfo{"batch", 1, {}, 0});
    m.request_arrived(RequestId(0), SimTime::zero(), 5, 2, 1);
    m.request_routed(RequestId(0), PoolId(0), InstanceId(3));
    m.request_arrived(RequestId(1), SimTime::from_ps(1'000), 7, 1, 0);
    m.first_token(RequestId(1), SimTime::from_ps(2'000'000'000));
    m.request_completed(RequestId(1), SimTime::from_ps(2'000'000'000));
    m.request_arrived(RequestId(2), SimTime::from_ps(3'000), 9, 3, 0);
    m.request_preempted(RequestId(0), PoolId(0));
    m.first_token(RequestId(0), SimTime::from_ps(4'000'000'000));
    m.request_completed(RequestId(0), SimTime::from_ps(5'000'000'000));
    m.run_ended();
  };
  metrics::RunMetrics kept;
  feed(kept);
  std::ostringstream whole;
  reports::write_requests_csv(whole, kept);
  std::string streamed;
  std::vector<std::int64_t> rows_after;  // rows handed over after each flush
  {
    reports::RequestsCsv csv([&](std::string_view text) { streamed += text; });
    metrics::RunMetrics released(metrics::RunMetrics::Records::kRelease);
    released.set_request_sink(&csv);
    feed(released);
    csv.finish();
    CHECK(csv.rows() == 3);
    CHECK(released.records_held() == 0);
    // The most held at once: when 2 arrived, 0 (in flight), 1 (finished, its row waiting for
    // 0's) and 2.
    CHECK(released.peak_records_held() == 3);
    CHECK(released.times().size() == 3);
  }
  CHECK(streamed == whole.str());
  CHECK(streamed.find("\n0,0.000000000,0.004000000,0.005000000,5,2,completed,,1,3,batch,") != std::string::npos);
}

TEST_CASE("Report: summary.classes gives each class its counts, latencies and SLO figures") {
  const auto j = reports::build_report(nlohmann::ordered_json::object(), sample_summary(), reports::RunInfo{});
  const auto& classes = j["summary"]["classes"];
  REQUIRE(classes.size() == 1);
  const auto& c = classes[0];
  for (const char* k : {"name", "priority", "requests", "requests_per_s", "ttft_ms", "tpot_ms", "e2e_ms", "slo",
                        "skipped_trace_rows"}) {
    CAPTURE(k);
    CHECK(c.contains(k));
  }
  CHECK(c["name"] == "default");
  CHECK(c["requests"]["completed"] == 1);
  // The target as given (2 ms), and the request's TTFT of 1 ms meets it.
  CHECK(c["slo"]["ttft_ms"] == 2.0);
  CHECK(c["slo"]["tpot_ms"].is_null());
  CHECK(c["slo"]["attainment"] == 1.0);
  CHECK(c["ttft_ms"]["mean"] == j["summary"]["ttft_ms"]["mean"]);
}
