// servesim_bench: runs a scenario several times, each in a fresh child process, and prints the
// wall time, events per second and peak memory of every run and their medians.
//
//   build/servesim_bench SCENARIO.yaml [--runs N] [--set KEY=VALUE]...
//                        [--max-wall S] [--max-rss MB] [--min-events-per-s N]
//
// "run" time covers building the cluster, simulating and summarising (what `servesim run`
// reports as wall_s); "process" time covers the whole child from fork to exit, including reading
// the scenario and its trace: the figure comparable to timing another simulator's command;
// "cpu" is that child's CPU time (user + system), which on a shared machine counts only the time
// the child itself ran.
// Peak memory is the child's maximum resident set (wait4's ru_maxrss), so runs do not inherit
// each other's peaks. With --max-wall (process seconds), --max-rss or --min-events-per-s the
// program exits 1 when a median misses its target.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_options.h"
#include "child_process.h"
#include "core/errors.h"
#include "studies/run.h"

namespace {

struct Sample {
  double run_s = 0;
  double process_s = 0;
  double cpu_s = 0;
  double events = 0;
  double rss_mb = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = servesim::bench::po;
  po::options_description visible("usage: servesim_bench SCENARIO.yaml [options]\n\noptions");
  int runs = 5;
  double max_wall = 0, max_rss = 0, min_eps = 0;
  visible.add_options()("help,h", "show this help")("runs", po::value<int>(&runs)->default_value(5),
                                                    "runs, each in a fresh process")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a scenario value (repeatable)")(
      "max-wall", po::value<double>(&max_wall)->default_value(0), "target: median process seconds at most")(
      "max-rss", po::value<double>(&max_rss)->default_value(0), "target: median peak MB at most")(
      "min-events-per-s", po::value<double>(&min_eps)->default_value(0), "target: median events/s at least");
  po::variables_map vm;
  if (auto done = servesim::bench::parse_options(argc, argv, visible, "scenario", vm)) return *done;
  const auto files = servesim::bench::positionals(vm, "scenario");
  if (files.size() != 1) return servesim::bench::usage_error("give exactly one scenario file", visible);
  if (runs < 1) return servesim::bench::usage_error("--runs must be at least 1", visible);
  if (!(max_wall >= 0 && max_rss >= 0 && min_eps >= 0)) {
    return servesim::bench::usage_error("targets must be at least 0", visible);
  }
  const std::string scenario_path = files.front();
  servesim::scenario::LoadOptions options;
  if (vm.count("set")) options.sets = vm["set"].as<std::vector<std::string>>();

  // Validate once in this process so that bad input is reported before forking.
  try {
    servesim::scenario::load_scenario_file(scenario_path, options);
  } catch (const servesim::InputError& e) {
    for (const auto& d : e.diagnostics()) std::fprintf(stderr, "error: %s\n", d.to_string().c_str());
    return 2;
  }

  std::printf("servesim_bench %s, %d runs, one process each\n", scenario_path.c_str(), runs);
  std::printf("%4s %10s %12s %10s %12s %14s %10s\n", "run", "run_s", "process_s", "cpu_s", "events", "events_per_s",
              "peak_MB");
  std::vector<Sample> samples;
  for (int r = 0; r < runs; ++r) {
    const auto child = servesim::bench::run_in_child([&] {
      const auto sc = servesim::scenario::load_scenario_file(scenario_path, options);
      const auto out = servesim::studies::execute(sc);
      char line[128];
      std::snprintf(line, sizeof line, "%.9f %llu\n", out.wall_s, static_cast<unsigned long long>(out.events));
      return std::string(line);
    });
    if (!child) {
      std::fprintf(stderr, "run %d failed\n", r + 1);
      return 1;
    }
    Sample s;
    unsigned long long events = 0;
    std::sscanf(child->output.c_str(), "%lf %llu", &s.run_s, &events);
    s.events = static_cast<double>(events);
    s.process_s = child->process_s;
    s.cpu_s = child->cpu_s;
    s.rss_mb = child->rss_mb;
    samples.push_back(s);
    std::printf("%4d %10.3f %12.3f %10.3f %12.0f %14.0f %10.1f\n", r + 1, s.run_s, s.process_s, s.cpu_s, s.events,
                s.events / s.run_s, s.rss_mb);
  }
  std::vector<double> run_s, process_s, cpu_s, eps, rss;
  for (const auto& s : samples) {
    run_s.push_back(s.run_s);
    process_s.push_back(s.process_s);
    cpu_s.push_back(s.cpu_s);
    eps.push_back(s.events / s.run_s);
    rss.push_back(s.rss_mb);
  }
  const double m_run = median(run_s), m_proc = median(process_s), m_eps = median(eps), m_rss = median(rss);
  std::printf("median %8.3f %12.3f %10.3f %12.0f %14.0f %10.1f\n", m_run, m_proc, median(cpu_s), samples[0].events,
              m_eps, m_rss);
  bool ok = true;
  if (max_wall > 0) {
    const bool pass = m_proc <= max_wall;
    ok = ok && pass;
    std::printf("target: process wall <= %g s: %s (median %.3f s)\n", max_wall, pass ? "met" : "MISSED", m_proc);
  }
  if (max_rss > 0) {
    const bool pass = m_rss <= max_rss;
    ok = ok && pass;
    std::printf("target: peak memory <= %g MB: %s (median %.1f MB)\n", max_rss, pass ? "met" : "MISSED", m_rss);
  }
  if (min_eps > 0) {
    const bool pass = m_eps >= min_eps;
    ok = ok && pass;
    std::printf("target: events/s >= %g: %s (median %.0f)\n", min_eps, pass ? "met" : "MISSED", m_eps);
  }
  return ok ? 0 : 1;
}
