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

#include "bench_clock.h"
#include "app/app.h"

namespace {

using servesim::bench::cpu_seconds;
using servesim::bench::median;
using servesim::bench::now_seconds;

int usage() {
  std::fprintf(stderr,
               "usage: servesim_bench_plan SCENARIO.yaml [--rounds R] [--min-runs-per-s-per-core X] "
               "[-- PLAN OPTIONS...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string scenario = argv[1];
  int rounds = 3;
  double min_per_core = 0;
  std::vector<std::string> plan_args = {"plan", scenario};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) plan_args.emplace_back(argv[i]);
      break;
    }
    if (i + 1 >= argc) return usage();
    if (a == "--rounds") {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--min-runs-per-s-per-core") {
      min_per_core = std::atof(argv[++i]);
    } else {
      return usage();
    }
  }
  if (rounds < 1) return usage();
  plan_args.emplace_back("--json");
  plan_args.emplace_back("-");
  plan_args.emplace_back("--reproducible");

  std::string command;
  for (const auto& a : plan_args) command += (command.empty() ? "" : " ") + a;
  std::printf("servesim %s\n", command.c_str());
  std::printf("%6s %11s %6s %9s %10s %14s %10s\n", "round", "deployments", "runs", "wall s", "runs/s",
              "runs/s/core", "sweep runs");
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
