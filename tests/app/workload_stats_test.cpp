// `servesim workload stats`: on the shipped traces, on a scenario, on bad input.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/app.h"
#include "tests/app/cli_helpers.h"
#include "tests/approx.h"
#include "tests/scratch.h"

using namespace servesim;

namespace {

using Result = testing::CliResult;
using testing::cli;

const std::string kTraces = std::string(SERVESIM_SOURCE_DIR) + "/workloads/traces/";

nlohmann::json stats_json(const std::string& path, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"workload", "stats", path, "--json", "-"};
  args.insert(args.end(), extra.begin(), extra.end());
  const Result r = cli(args);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("workload stats: the Azure conversation trace, as JSON and as a table") {
  // 19366 rows, prompt tokens summing to 22361870 (Python over the CSV; tests/workloads has the
  // full derivation).
  const auto j = stats_json(kTraces + "azure_llm_2023_conv.csv");
  CHECK(j["schema"] == "servesim.workload_stats/1");
  CHECK(j["kind"] == "azure trace");
  CHECK(j["requests"] == 19366);
  CHECK(j["prompt_tokens"]["mean"].get<double>() == approx(22361870.0 / 19366));
  CHECK(j["prompt_tokens"]["p50"] == 1020.0);
  CHECK(j["rate_windows"].size() == 10);
  CHECK(j["prefix"]["reuse_ratio"] == 0.0);
  const Result r = cli({"workload", "stats", kTraces + "azure_llm_2023_conv.csv", "--windows", "4"});
  CHECK(r.code == 0);
  CHECK(r.out.find("requests    19,366 in 3501.722 s") != std::string::npos);
  CHECK(r.out.find("rate over time (4 windows of 875.430 s)") != std::string::npos);
}

TEST_CASE("workload stats: the Mooncake conversation trace's prefix reuse") {
  // Reused 54098411 of 144793823 prompt tokens (Python, tests/workloads/stats_test.cpp).
  const auto j = stats_json(kTraces + "mooncake_fast25_conversation_trace.jsonl");
  CHECK(j["kind"] == "mooncake trace");
  CHECK(j["requests"] == 12031);
  CHECK(j["prefix"]["reused_tokens"] == 54098411);
  CHECK(j["prefix"]["prompt_tokens"] == 144793823);
  CHECK(j["prefix"]["reuse_ratio"].get<double>() == approx(0.3736237491).epsilon(1e-9));
}

TEST_CASE("workload stats: a scenario's workload, with its seed and request count") {
  const std::string quickstart = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/quickstart.yaml";
  const auto j = stats_json(quickstart, {"--set", "workload.requests=500"});
  CHECK(j["requests"] == 500);
  CHECK(j["kind"] == "scenario 'quickstart', seed 42");
  // Lognormal prompts with median 1024 on [16, 12288]: the sample median is near 1024.
  CHECK(j["prompt_tokens"]["p50"].get<double>() > 900);
  CHECK(j["prompt_tokens"]["p50"].get<double>() < 1150);
  CHECK(j["prompt_tokens"]["min"].get<int>() >= 16);
  // The same figures for the same seed; another seed moves them.
  CHECK(stats_json(quickstart, {"--set", "workload.requests=500"}) == j);
  CHECK(stats_json(quickstart, {"--set", "workload.requests=500", "--seed", "7"}) != j);
}

TEST_CASE("workload stats: bad rows stop it with file:line:col, or are skipped and counted") {
  const auto path = testing::scratch_path("stats_bad.csv");
  std::ofstream(path) << "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,1\n1,-4,1\n2,10,1\n";
  Result r = cli({"workload", "stats", path.string()});
  CHECK(r.code == 2);
  CHECK(r.err.find(path.string() + ":3:3: trace (column num_prefill_tokens): token counts cannot "
                                   "be negative") != std::string::npos);
  CHECK(r.out.empty());
  const auto j = stats_json(path.string(), {"--skip-bad-rows"});
  CHECK(j["requests"] == 2);
  CHECK(j["classes"][0]["skipped_rows"] == 1);
  r = cli({"workload", "stats", path.string(), "--skip-bad-rows"});
  CHECK(r.out.find("skipped     1 bad trace rows; the first: " + path.string() + ":3:3") != std::string::npos);
}

TEST_CASE("workload stats: usage errors") {
  CHECK(cli({"workload"}).code == 2);
  CHECK(cli({"workload", "--help"}).code == 0);
  CHECK(cli({"workload", "stats", "--help"}).code == 0);
  Result r = cli({"workload", "summarize"});
  CHECK(r.code == 2);
  CHECK(r.err.find("unknown workload command 'summarize'") != std::string::npos);
  CHECK(cli({"workload", "stats"}).code == 2);
  r = cli({"workload", "stats", kTraces + "splitwise_conv.csv", "--format", "parquet"});
  CHECK(r.code == 2);
  CHECK(r.err.find("unknown --format 'parquet'") != std::string::npos);
  r = cli({"workload", "stats", "/nonexistent/trace.csv"});
  CHECK(r.code == 2);
  CHECK(r.err.find("/nonexistent/trace.csv: trace: cannot open the trace file") != std::string::npos);
  CHECK(cli({"workload", "stats", kTraces + "splitwise_conv.csv", "--seed", "3"}).code == 2);
}

TEST_CASE("Scenarios under scenarios/workloads load, run, and report every class") {
  const std::string dir = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/workloads/";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++n;
    CAPTURE(entry.path().filename().string());
    const Result r = cli({"run", entry.path().string(), "--reproducible", "--json", "-"});
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto j = nlohmann::json::parse(r.out);
    const auto& classes = j["summary"]["classes"];
    REQUIRE(classes.size() >= 1);
    std::int64_t arrived = 0;
    for (const auto& c : classes) {
      CHECK(c["requests"]["arrived"].get<std::int64_t>() > 0);
      arrived += c["requests"]["arrived"].get<std::int64_t>();
    }
    CHECK(arrived == j["summary"]["requests"]["arrived"].get<std::int64_t>());
    // And `workload stats` reads the same scenario.
    CHECK(cli({"workload", "stats", entry.path().string(), "--json", "-"}).code == 0);
  }
  CHECK(n >= 5);
}

TEST_CASE("workload stats: closed-loop classes are summarised in their own rows, untimed") {
  const auto j = stats_json(std::string(SERVESIM_SOURCE_DIR) + "/scenarios/workloads/multi_tenant.yaml");
  // The closed-loop class 'batch' has no limit of its own and the workload none either: 100,000
  // of its requests are summarised (StatsOptions::closed_loop_requests), apart from the others.
  CHECK(j["untimed_requests"] == 100000);
  REQUIRE(j["classes"].size() == 3);
  CHECK(j["classes"][2]["name"] == "batch");
  CHECK(j["classes"][2]["timed"] == false);
  CHECK(j["classes"][2]["requests"] == 100000);
  CHECK(j["requests"] == j["classes"][0]["requests"].get<int>() + j["classes"][1]["requests"].get<int>());
  // Batch prompts are uniform on [4000, 12000]; the whole-workload figures cover chat (Zipf
  // prompts behind shared prefixes) and vision (about 400 tokens) only, well below 4,000 on average.
  CHECK(j["classes"][2]["prompt_tokens"]["min"].get<int>() >= 4000);
  CHECK(j["prompt_tokens"]["mean"].get<double>() < 4000);
}
