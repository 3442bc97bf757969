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

#include "child_process.h"
#include "studies/run.h"
#include "core/errors.h"

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

int usage() {
  std::fprintf(stderr,
               "usage: servesim_bench SCENARIO.yaml [--runs N] [--set KEY=VALUE]... "
               "[--max-wall S] [--max-rss MB] [--min-events-per-s N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario_path;
  servesim::scenario::LoadOptions options;
  int runs = 5;
  double max_wall = 0, max_rss = 0, min_eps = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--runs") {
      const char* v = value();
      if (!v || (runs = std::atoi(v)) < 1) return usage();
    } else if (a == "--set") {
      const char* v = value();
      if (!v) return usage();
      options.sets.emplace_back(v);
    } else if (a == "--max-wall") {
      const char* v = value();
      if (!v) return usage();
      max_wall = std::atof(v);
    } else if (a == "--max-rss") {
      const char* v = value();
      if (!v) return usage();
      max_rss = std::atof(v);
    } else if (a == "--min-events-per-s") {
      const char* v = value();
      if (!v) return usage();
      min_eps = std::atof(v);
    } else if (a.rfind("--", 0) == 0 || !scenario_path.empty()) {
      return usage();
    } else {
      scenario_path = a;
    }
  }
  if (scenario_path.empty()) return usage();

  // Validate once in this process so that bad input is reported before forking.
  try {
    servesim::scenario::load_scenario_file(scenario_path, options);
  } catch (const servesim::InputError& e) {
    for (const auto& d : e.diagnostics()) std::fprintf(stderr, "error: %s\n", d.to_string().c_str());
    return 2;
  }

  std::printf("servesim_bench %s, %d runs, one process each\n", scenario_path.c_str(), runs);
  std::printf("%4s %10s %12s %10s %12s %14s %10s\n", "run", "run_s", "process_s", "cpu_s", "events",
              "events_per_s", "peak_MB");
  std::vector<Sample> samples;
  for (int r = 0; r < runs; ++r) {
    const auto child = servesim::bench::run_in_child([&] {
      const auto sc = servesim::scenario::load_scenario_file(scenario_path, options);
      const auto out = servesim::studies::execute(sc);
      char line[128];
      std::snprintf(line, sizeof line, "%.9f %llu\n", out.wall_s,
                    static_cast<unsigned long long>(out.events));
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
    std::printf("%4d %10.3f %12.3f %10.3f %12.0f %14.0f %10.1f\n", r + 1, s.run_s, s.process_s,
                s.cpu_s, s.events, s.events / s.run_s, s.rss_mb);
  }
  std::vector<double> run_s, process_s, cpu_s, eps, rss;
  for (const auto& s : samples) {
    run_s.push_back(s.run_s);
    process_s.push_back(s.process_s);
    cpu_s.push_back(s.cpu_s);
    eps.push_back(s.events / s.run_s);
    rss.push_back(s.rss_mb);
  }
  const double m_run = median(run_s), m_proc = median(process_s), m_eps = median(eps),
               m_rss = median(rss);
  std::printf("median %8.3f %12.3f %10.3f %12.0f %14.0f %10.1f\n", m_run, m_proc, median(cpu_s),
              samples[0].events, m_eps, m_rss);
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
