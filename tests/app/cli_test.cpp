// The command line as users drive it: exit codes, outputs, and determinism.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/app.h"
#include "tests/app/cli_helpers.h"

using namespace servesim;
using namespace servesim::testing;
namespace fs = std::filesystem;

namespace {

// Fewer requests keep these runs fast; the scenario is otherwise the bundled default.
const std::string kSmall = "workload.requests=300";

}  // namespace

TEST_CASE("CLI: help and usage") {
  auto r = cli({"--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("run SCENARIO.yaml") != std::string::npos);
  r = cli({"run", "--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("--set") != std::string::npos);
  CHECK(r.out.find("--json") != std::string::npos);
  CHECK(cli({}).code == 2);
  r = cli({"simulate"});
  CHECK(r.code == 2);
  CHECK(r.err.find("unknown command 'simulate'") != std::string::npos);
  CHECK(cli({"run"}).code == 2);
  CHECK(cli({"run", kQuickstart, "--bogus"}).code == 2);
  CHECK(cli({"run", kQuickstart, "--seed", "abc"}).code == 2);
}

TEST_CASE("CLI: a bad scenario exits 2, lists every problem and writes nothing") {
  const fs::path dir = scratch("bad");
  const fs::path json = dir.string() + ".json";
  fs::remove(json);
  const auto r = cli({"run", kQuickstart, "--set", "deployment.pools[0].instances=0", "--set",
                      "workload.arrivals.rate=32", "--out", dir.string(), "--json", json.string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("error: --set #1: deployment.pools[0].instances: must be between 1 and 1000000, got 0") !=
        std::string::npos);
  CHECK(r.err.find("error: --set #2: workload.arrivals.rate: '32' has no unit") != std::string::npos);
  CHECK(r.err.find("2 problems found; nothing was run.") != std::string::npos);
  CHECK(r.out.empty());
  CHECK_FALSE(fs::exists(dir));
  CHECK_FALSE(fs::exists(json));
  const auto missing = cli({"run", "/nonexistent/scenario.yaml"});
  CHECK(missing.code == 2);
  CHECK(missing.err.find("cannot open the scenario file") != std::string::npos);
}

TEST_CASE("CLI: --json - prints the report and nothing else") {
  const auto r = cli({"run", kQuickstart, "--set", kSmall, "--json", "-"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema"] == "servesim.report/1");
  CHECK(j["summary"]["requests"]["arrived"] == 300);
  CHECK(j["scenario"]["workload"]["requests"] == 300);
  CHECK(j["simulation"]["wall_s"].is_number());
}

TEST_CASE("CLI: --out writes the report, the per-request CSV and the summary, with no leftovers") {
  const fs::path dir = scratch("out");
  const auto r = cli({"run", kQuickstart, "--set", kSmall, "--out", dir.string()});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("servesim: quickstart") != std::string::npos);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"report.html", "report.json", "requests.csv", "summary.txt"});
  const std::string csv = read(dir / "requests.csv");
  // Header plus one line per request.
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 301);
}

TEST_CASE("Determinism: the same scenario and seed give byte-identical JSON") {
  const auto a = cli({"run", kQuickstart, "--set", kSmall, "--reproducible", "--json", "-"});
  const auto b = cli({"run", kQuickstart, "--set", kSmall, "--reproducible", "--json", "-"});
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  // Without --reproducible only the host measurements differ.
  auto strip = [](const std::string& text) {
    auto j = nlohmann::ordered_json::parse(text);
    for (const char* k : {"wall_s", "events_per_s", "peak_rss_mb"}) j["simulation"].erase(k);
    return j.dump();
  };
  const auto c = cli({"run", kQuickstart, "--set", kSmall, "--json", "-"});
  CHECK(strip(c.out) == strip(a.out));
  // Another seed is another run.
  const auto d = cli({"run", kQuickstart, "--set", kSmall, "--seed", "7", "--reproducible", "--json", "-"});
  CHECK(d.out != a.out);
  CHECK(nlohmann::json::parse(d.out)["scenario"]["seed"] == 7);
}

TEST_CASE("CLI: accepted placement violations are warnings on stderr and in the JSON report") {
  // Quickstart on a GB200 rack: the pools' H100 chip has an 8-GPU scale-up domain, the rack 72,
  // which the loader accepts with a warning.
  const CliResult r = cli({"run", kQuickstart, "--set", kSmall, "--set", "cluster=gb200-nvl72", "--json", "-"});
  REQUIRE(r.code == 0);
  CHECK(r.err.find("warning: " + kQuickstart +
                   ":15:13: deployment.pools[0].chip: the chip's scale-up domain (8 "
                   "chips) differs from the cluster's (72 in gb200-nvl72)") == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0]["line"] == 15);
  CHECK(j["warnings"][0]["path"] == "deployment.pools[0].chip");
  CHECK(j["scenario"]["cluster"]["chips"] == 72);
}

TEST_CASE("CLI: --version, and the version and commit in the report, the table, the HTML and the trace") {
  const auto v = cli({"--version"});
  CHECK(v.code == 0);
  const std::string line = v.out.substr(0, v.out.find('\n'));
  CHECK(line.rfind("servesim 0.1.0 (commit ", 0) == 0);
  const auto r = cli({"run", kQuickstart, "--set", "workload.requests=50", "--json", "-", "--reproducible"});
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["servesim"]["version"] == "0.1.0");
  CHECK(line.find(j["servesim"]["commit"].get<std::string>()) != std::string::npos);
  CHECK(cli({"run", kQuickstart, "--set", "workload.requests=50"}).out.find("  build       " + line) !=
        std::string::npos);
}

TEST_CASE("CLI: run - reads the scenario from stdin; --no-requests-csv leaves the CSV out of --out") {
  const std::string cmd = std::string("cd ") + SERVESIM_SOURCE_DIR + " && " + SERVESIM_BINARY +
                          " run - --set workload.requests=40 --json - --reproducible < scenarios/quickstart.yaml";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string piped;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) piped.append(buf, n);
  CHECK(pclose(pipe) == 0);
  const auto file = cli({"run", kQuickstart, "--set", "workload.requests=40", "--json", "-", "--reproducible"});
  // The same simulation; only the scenario's name differs (a file's stem, here set by the file).
  const auto a = nlohmann::json::parse(piped), b = nlohmann::json::parse(file.out);
  CHECK(a["summary"] == b["summary"]);
  CHECK(a["simulation"]["fingerprint"] == b["simulation"]["fingerprint"]);

  const auto dir = scratch("no_csv");
  const auto o = cli({"run", kQuickstart, "--set", "workload.requests=40", "--out", dir.string(), "--no-requests-csv"});
  REQUIRE(o.code == 0);
  CHECK(std::filesystem::exists(dir / "report.json"));
  CHECK(std::filesystem::exists(dir / "summary.txt"));
  CHECK_FALSE(std::filesystem::exists(dir / "requests.csv"));
  CHECK(o.out.find("report.json, report.html, summary.txt") != std::string::npos);
  CHECK(cli({"run", kQuickstart, "--no-requests-csv"}).code == 2);  // needs --out
}

TEST_CASE("CLI: rejected requests are counted in the table by reason, with the key that admits them") {
  // Prompts up to 12,288 + outputs up to 2,048 tokens against max_model_len 4,096: the long ones
  // are rejected (exceeds_max_model_len).
  const auto r =
      cli({"run", kQuickstart, "--set", "workload.requests=300", "--set", "deployment.pools[0].max_model_len=4096"});
  REQUIRE(r.code == 0);
  const auto at = r.out.find("  rejected    ");
  REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  CHECK(line.find("exceeds_max_model_len") != std::string::npos);
  CHECK(line.find("raise deployment.pools[N].max_model_len") != std::string::npos);
  const auto j = nlohmann::json::parse(cli({"run", kQuickstart, "--set", "workload.requests=300", "--set",
                                            "deployment.pools[0].max_model_len=4096", "--json", "-"})
                                           .out);
  const auto n = j["summary"]["requests"]["rejected_by_reason"]["exceeds_max_model_len"].get<std::int64_t>();
  CHECK(n > 0);
  CHECK(line.find(" " + std::to_string(n) + " exceeds_max_model_len") != std::string::npos);
}

TEST_CASE("CLI: keys, schema and bash completion") {
  const auto k = cli({"keys", "--json", "-"});
  REQUIRE(k.code == 0);
  const auto kj = nlohmann::json::parse(k.out);
  CHECK(kj["schema"] == "servesim.keys/1");
  CHECK(kj["keys"].size() > 300);
  const auto s = cli({"schema"});
  REQUIRE(s.code == 0);
  CHECK(s.out == read(std::string(SERVESIM_SOURCE_DIR) + "/schemas/serve.schema.json"));
  const auto c = cli({"completion", "bash"});
  REQUIRE(c.code == 0);
  // Generated from the options: plan's --max-runs and run's --no-requests-csv are there.
  CHECK(c.out.find("complete -o filenames -F _servesim servesim") != std::string::npos);
  CHECK(c.out.find("--max-runs") != std::string::npos);
  CHECK(c.out.find("--no-requests-csv") != std::string::npos);
  CHECK(cli({"completion", "zsh"}).code == 2);
}
