// servesim_bench_serve: the `serve` loop's throughput on one core, and where a hypothesis's time
// goes.
//
//   build/servesim_bench_serve SCENARIO.yaml [--hypotheses N] [--rounds R] [--min-per-s-per-core X]
//                              [--vary KEY=V1,V2,... ...] [--constraint TEXT ...] [--early-stop]
//
// Builds N request lines against SCENARIO, each varying one key from the base (the key rotates
// over arrival rate, batch cap, token budget and instance count; the values over a short list),
// and answers them with the same serve() the command runs, on one thread, R times. Prints per
// round hypotheses/s of wall time and per CPU second of this process (= per core: the loop is
// single-threaded), and their medians; exits 1 when the median per core misses
// --min-per-s-per-core. Then times the phases of one hypothesis on a sample (reading and parsing
// the file, loading and validating with the override, building and running the simulation,
// summarising and writing the answer) to show what the scenario cache saves. With --constraint
// each line asks for a verdict (and --early-stop lets hopeless ones stop when it settles); each
// round then counts the feasible, infeasible and early verdicts.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_clock.h"
#include "bench_options.h"
#include "core/errors.h"
#include "reports/report.h"
#include "sim/scenario/caches.h"
#include "studies/run.h"
#include "studies/serve.h"

namespace {

using servesim::bench::cpu_seconds;
using servesim::bench::median;
using servesim::bench::now_seconds;

struct Variation {
  std::string key;
  std::vector<std::string> values;
};

// One key per line; values that keep the deployment valid. --vary replaces them.
std::vector<Variation> variations_ = {
    {"workload.arrivals.rate", {"250 /s", "300 /s", "350 /s", "400 /s", "450 /s"}},
    {"deployment.pools[0].scheduler.max_batch_size", {"64", "96", "128", "192", "256"}},
    {"deployment.pools[0].scheduler.max_batched_tokens", {"1024", "1536", "2048", "3072", "4096"}},
    {"deployment.pools[0].instances", {"112", "120", "128", "136", "144"}},
};
const std::vector<Variation>& variations() { return variations_; }

// --vary KEY=V1,V2,...: a key and its values (no empty value).
bool parse_vary(const std::string& text, Variation& v) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  v.key = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = rest.find(',', from);
    v.values.push_back(rest.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (v.values.back().empty()) return false;
    if (comma == std::string::npos) return true;
    from = comma + 1;
  }
}

std::string request_line(const std::string& scenario, std::size_t i, const std::vector<std::string>& constraints,
                         bool early_stop) {
  const auto& vars = variations();
  const Variation& var = vars[i % vars.size()];
  const std::string& value = var.values[(i / vars.size()) % var.values.size()];
  // Numbers as JSON numbers, quantities with units as strings.
  const bool number = value.find_first_not_of("0123456789.") == std::string::npos;
  std::string line = "{\"id\": " + std::to_string(i) + ", \"scenario\": " + nlohmann::json(scenario).dump() +
                     ", \"set\": {\"" + var.key + "\": " + (number ? value : nlohmann::json(value).dump()) + "}";
  if (!constraints.empty()) line += ", \"constraints\": " + nlohmann::json(constraints).dump();
  if (early_stop) line += ", \"early_stop\": true";
  return line + "}";
}

// Counts of a round's verdicts: feasible, infeasible (run to the end), infeasible stopped early.
struct Verdicts {
  long long feasible = 0, infeasible = 0, early = 0;
};
Verdicts count_verdicts(const std::string& answers) {
  Verdicts v;
  std::istringstream lines(answers);
  std::string line;
  while (std::getline(lines, line)) {
    const auto a = nlohmann::json::parse(line);
    if (!a.contains("verdict")) continue;
    if (a["verdict"].value("early", false)) {
      ++v.early;
    } else if (a["verdict"]["feasible"] == true) {
      ++v.feasible;
    } else {
      ++v.infeasible;
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = servesim::bench::po;
  po::options_description visible("usage: servesim_bench_serve SCENARIO.yaml [options]\n\noptions");
  long long hypotheses = 1000;
  int rounds = 3;
  double min_per_core = 0;
  std::vector<std::string> constraints, vary;
  visible.add_options()("help,h", "show this help")(
      "vary", po::value<std::vector<std::string>>(&vary),
      "KEY=V1,V2,...: vary this key over these values instead of the default four keys; repeatable")(
      "constraint", po::value<std::vector<std::string>>(&constraints),
      "a constraint every line asks its verdict for ('ttft_p99 <= 2 s'); repeatable")(
      "early-stop", "every line asks to stop when its verdict settles (early_stop)")(
      "remember",
      "answer lines asked before in the round from their first run (serve's default; off here, so that "
      "the figures are the simulation's: the default lines repeat after 20)")(
      "hypotheses", po::value<long long>(&hypotheses)->default_value(1000), "hypotheses per round")(
      "rounds", po::value<int>(&rounds)->default_value(3), "rounds")(
      "min-per-s-per-core", po::value<double>(&min_per_core)->default_value(0),
      "target: median hypotheses per second per core at least");
  po::variables_map vm;
  if (auto done = servesim::bench::parse_options(argc, argv, visible, "scenario", vm)) return *done;
  const auto files = servesim::bench::positionals(vm, "scenario");
  if (files.size() != 1) return servesim::bench::usage_error("give exactly one scenario file", visible);
  if (hypotheses < 1 || rounds < 1)
    return servesim::bench::usage_error("--hypotheses and --rounds must be at least 1", visible);
  if (!(min_per_core >= 0)) return servesim::bench::usage_error("--min-per-s-per-core must be at least 0", visible);
  if (!vary.empty()) {
    variations_.clear();
    for (const std::string& text : vary) {
      Variation v;
      if (!parse_vary(text, v))
        return servesim::bench::usage_error("--vary expects KEY=V1,V2,..., got " + text, visible);
      variations_.push_back(std::move(v));
    }
  }
  const std::string scenario = files.front();
  const auto n = static_cast<std::size_t>(hypotheses);

  std::string input;
  const bool early_stop = vm.count("early-stop") > 0;
  const bool remember = vm.count("remember") > 0;
  for (std::size_t i = 0; i < n; ++i) input += request_line(scenario, i, constraints, early_stop) + "\n";

  std::printf("servesim_bench_serve %s: %zu hypotheses per round, one key varied per line, 1 thread\n",
              scenario.c_str(), n);
  std::printf("%6s %10s %10s %8s %16s %18s\n", "round", "wall_s", "cpu_s", "errors", "hypotheses/s",
              "hypotheses/s/core");
  std::vector<double> per_s, per_core;
  for (int r = 0; r < rounds; ++r) {
    servesim::studies::ScenarioCache cache;
    std::istringstream in(input);
    std::ostringstream out;
    const double w0 = now_seconds(), c0 = cpu_seconds();
    servesim::studies::ServeOptions serve_options;
    serve_options.remember_results = remember;
    const auto stats = servesim::studies::serve(in, out, cache, serve_options);
    const double wall = now_seconds() - w0, cpu = cpu_seconds() - c0;
    if (stats.errors > 0) {
      std::istringstream answers(out.str());
      std::string line;
      while (std::getline(answers, line)) {
        if (line.find("\"ok\":false") != std::string::npos) {
          std::fprintf(stderr, "an answer failed: %s\n", line.c_str());
          break;
        }
      }
      return 1;
    }
    per_s.push_back(static_cast<double>(n) / wall);
    per_core.push_back(static_cast<double>(n) / cpu);
    std::printf("%6d %10.3f %10.3f %8lld %16.1f %18.1f\n", r + 1, wall, cpu, static_cast<long long>(stats.errors),
                per_s.back(), per_core.back());
    if (remember) {
      std::printf("       answered from an earlier run: %lld of %zu\n", static_cast<long long>(cache.results().hits()),
                  n);
    }
    if (!constraints.empty()) {
      const Verdicts v = count_verdicts(out.str());
      std::printf("       verdicts: %lld feasible, %lld infeasible, %lld infeasible stopped early\n", v.feasible,
                  v.infeasible, v.early);
    }
  }
  std::printf("median: %.1f hypotheses/s, %.1f hypotheses/s per core\n", median(per_s), median(per_core));

  // Where one hypothesis's time goes (medians over a sample of lines, CPU time).
  const std::size_t sample = std::min<std::size_t>(n, 60);
  std::vector<double> parse_s, load_s, run_s, answer_s, events;
  servesim::scenario::Caches caches;  // as a serve session keeps them
  for (std::size_t i = 0; i < sample; ++i) {
    const auto& var = variations()[i % variations().size()];
    const std::string value = var.values[(i / variations().size()) % var.values.size()];
    servesim::scenario::LoadOptions options;
    options.sets = {var.key + "=" + value};
    options.caches = &caches;
    double t = cpu_seconds();
    const auto doc = servesim::scenario::parse_scenario_file(scenario);
    parse_s.push_back(cpu_seconds() - t);
    t = cpu_seconds();
    const auto sc = servesim::scenario::load_scenario(*doc, options);
    load_s.push_back(cpu_seconds() - t);
    t = cpu_seconds();
    const auto run = servesim::studies::execute(sc);
    run_s.push_back(cpu_seconds() - t);
    events.push_back(static_cast<double>(run.events));
    t = cpu_seconds();
    servesim::reports::RunInfo info;
    const auto report = servesim::reports::build_report(nlohmann::ordered_json::object(), run.summary, info);
    const std::string text = report["summary"].dump() + report["pools"].dump();
    answer_s.push_back(cpu_seconds() - t);
    if (text.empty()) return 1;
  }
  const double total = median(parse_s) + median(load_s) + median(run_s) + median(answer_s);
  std::printf(
      "one hypothesis (median CPU time over %zu): read+parse the file %.3f ms (%.1f%%, saved "
      "by the cache), load+validate %.3f ms (%.1f%%), build+simulate+summarise %.3f ms "
      "(%.1f%%, %.0f events, %.2f M events/s), answer JSON %.3f ms (%.1f%%)\n",
      sample, 1e3 * median(parse_s), 100 * median(parse_s) / total, 1e3 * median(load_s), 100 * median(load_s) / total,
      1e3 * median(run_s), 100 * median(run_s) / total, median(events), median(events) / median(run_s) / 1e6,
      1e3 * median(answer_s), 100 * median(answer_s) / total);
  if (min_per_core > 0 && median(per_core) < min_per_core) {
    std::printf("FAIL: %.1f hypotheses/s per core is below the target %.1f\n", median(per_core), min_per_core);
    return 1;
  }
  return 0;
}
