// The command line as users drive it: exit codes, outputs, and determinism.
#include <doctest/doctest.h>

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
  CHECK(r.err.find("warning: " + kQuickstart + ":15:13: deployment.pools[0].chip: the chip's scale-up domain (8 "
                   "chips) differs from the cluster's (72 in gb200-nvl72)") == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0]["line"] == 15);
  CHECK(j["warnings"][0]["path"] == "deployment.pools[0].chip");
  CHECK(j["scenario"]["cluster"]["chips"] == 72);
}
