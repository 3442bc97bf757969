// servesim_bench_plan: how fast `servesim plan` screens deployments.
//
//   build/servesim_bench_plan SCENARIO.yaml [--rounds R] [--min-runs-per-s-per-core X] [-- PLAN OPTIONS...]
//
// Runs the plan command in-process (the same run_cli the binary runs, with --json - and
// --reproducible) R times and prints per round: the candidate deployments, the simulations it ran
// (hypotheses), wall time, hypotheses per second of wall time and per CPU second of this process
// (= per core, whatever --threads is), and how many runs an exhaustive sweep over 1 .. the found
// instance count of each candidate would have needed. Then the medians; exits 1 when the median
// per core misses --min-runs-per-s-per-core. The plan's answer is checked to be the same in every
// round (determinism) and printed once.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/app.h"
#include "bench_clock.h"
#include "bench_options.h"

namespace {

using servesim::bench::cpu_seconds;
using servesim::bench::median;
using servesim::bench::now_seconds;

}  // namespace

int main(int argc, char** argv) {
  namespace po = servesim::bench::po;
  po::options_description visible("usage: servesim_bench_plan SCENARIO.yaml [options] [-- PLAN OPTIONS...]\n\noptions");
  int rounds = 3;
  double min_per_core = 0;
  visible.add_options()("help,h", "show this help")("rounds", po::value<int>(&rounds)->default_value(3), "rounds")(
      "min-runs-per-s-per-core", po::value<double>(&min_per_core)->default_value(0),
      "target: median runs per CPU second at least");
  po::variables_map vm;
  if (auto done = servesim::bench::parse_options(argc, argv, visible, "args", vm)) return *done;
  // The scenario, then (after --) the options of `servesim plan`.
  const auto args = servesim::bench::positionals(vm, "args");
  if (args.empty()) return servesim::bench::usage_error("give a scenario file", visible);
  if (rounds < 1) return servesim::bench::usage_error("--rounds must be at least 1", visible);
  if (!(min_per_core >= 0))
    return servesim::bench::usage_error("--min-runs-per-s-per-core must be at least 0", visible);
  const std::string scenario = args.front();
  std::vector<std::string> plan_args = {"plan", scenario};
  plan_args.insert(plan_args.end(), args.begin() + 1, args.end());
  plan_args.emplace_back("--json");
  plan_args.emplace_back("-");
  plan_args.emplace_back("--reproducible");

  std::string command;
  for (const auto& a : plan_args) command += (command.empty() ? "" : " ") + a;
  std::printf("servesim %s\n", command.c_str());
  std::printf("%6s %11s %6s %9s %10s %14s %10s\n", "round", "deployments", "runs", "wall s", "runs/s", "runs/s/core",
              "sweep runs");
  std::vector<double> per_s, per_core;
  std::string first;
  nlohmann::ordered_json answer;
  for (int r = 0; r < rounds; ++r) {
    std::ostringstream out, err;
    const double w0 = now_seconds(), c0 = cpu_seconds();
    const int code = servesim::app::run_cli(plan_args, out, err);
    const double wall = now_seconds() - w0, cpu = cpu_seconds() - c0;
    if (code != 0) {
      std::fprintf(stderr, "plan failed (exit %d):\n%s", code, err.str().c_str());
      return 1;
    }
    if (r == 0) {
      first = out.str();
      answer = nlohmann::ordered_json::parse(first);
    } else if (out.str() != first) {
      std::fprintf(stderr, "round %d gave a different answer than round 1\n", r + 1);
      return 1;
    }
    const double runs = answer["runs"].get<double>();
    // An exhaustive sweep over 1 .. n instances per candidate, n the least the plan found (or the
    // most it probed, for candidates that failed).
    double sweep = 0;
    for (const auto& c : answer["candidates"]) {
      int most = 0;
      for (const auto& p : c["probes"]) {
        for (const auto& n : p["instances"]) most = std::max(most, n.get<int>());
      }
      sweep += most;
    }
    per_s.push_back(runs / wall);
    per_core.push_back(runs / cpu);
    std::printf("%6d %11zu %6.0f %9.3f %10.1f %14.1f %10.0f\n", r + 1, answer["candidates"].size(), runs, wall,
                runs / wall, runs / cpu, sweep);
  }
  std::printf("median: %.1f runs/s, %.1f runs/s per core\n", median(per_s), median(per_core));
  if (!answer["best"].empty()) {
    const auto& best = answer["candidates"][answer["best"][0].get<std::size_t>()];
    std::printf("answer: %s, %s instances, %lld chips\n", best["label"].get<std::string>().c_str(),
                best["instances"].dump().c_str(), static_cast<long long>(best["chips"].get<std::int64_t>()));
  } else {
    std::printf("answer: no deployment meets the constraints\n");
  }
  if (min_per_core > 0 && median(per_core) < min_per_core) {
    std::printf("FAIL: median %.1f runs/s per core < %.1f\n", median(per_core), min_per_core);
    return 1;
  }
  return 0;
}
