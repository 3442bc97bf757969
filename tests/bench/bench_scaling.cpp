// servesim_bench_scaling: how CPU time and memory grow with the cluster and with the traffic.
//
//   build/servesim_bench_scaling SCENARIO.yaml --instances 100,1000,10000 [--per-instance R]
//       [--rate-per-instance X] [--pool K] [--runs N] [--once-above X] [--set KEY=VALUE]...
//   build/servesim_bench_scaling SCENARIO.yaml --requests 10000,100000 --fixed-instances N
//       [--rate-per-instance X] [--pool K] [--runs N] [--once-above X] [--set KEY=VALUE]...
//
// Instances series: pool K (default 0) gets each instance count n in turn, with R x n requests
// (default 20 per instance) arriving at X x n per second (default: the scenario's rate over its
// instance count), so that the load per instance stays fixed and the events grow as n.
// Requests series: the pool keeps N instances at X x N per second and the request count takes each
// value in turn. Each point is run N times (default 3; once when its instance or request count is
// above --once-above), each run in a fresh child process.
//
// Per point: events, the run's CPU seconds (building the cluster, simulating, summarising: the
// child's CPU clock around execute(), not the scenario's reading), events per CPU second, the
// child's peak resident set, and that peak per request. The medians over the runs, then the fitted
// exponents: the slope of log(median) on log(the series' variable) by least squares over all points,
// and between each pair of neighbouring points, for CPU time, events, CPU per event and peak memory.
// An exponent of 1 is linear, 0 flat. The figures are timed, not counted: on a shared machine
// quote medians, and count instructions with callgrind for the stable measure.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "bench_clock.h"
#include "child_process.h"
#include "core/errors.h"
#include "studies/run.h"

namespace {

using servesim::bench::cpu_seconds;
using servesim::bench::median;

struct Point {
  double x = 0;  // instances or requests
  double instances = 0, requests = 0;
  double events = 0, cpu_s = 0, rss_mb = 0;
};

std::vector<double> parse_list(const char* text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0' || v < 1) return {};
    out.push_back(v);
  }
  return out;
}

// Least-squares slope of log y on log x.
double exponent(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = x.size();
  if (n < 2) return NAN;
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += std::log(x[i]);
    my += std::log(y[i]);
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxy += (std::log(x[i]) - mx) * (std::log(y[i]) - my);
    sxx += (std::log(x[i]) - mx) * (std::log(x[i]) - mx);
  }
  return sxy / sxx;
}

int usage() {
  std::fprintf(stderr,
               "usage: servesim_bench_scaling SCENARIO.yaml (--instances N,N,... [--per-instance R] | "
               "--requests N,N,... --fixed-instances N) [--rate-per-instance X] [--pool K] "
               "[--runs N] [--once-above X] [--set KEY=VALUE]...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario_path;
  servesim::scenario::LoadOptions base;
  std::vector<double> instances_list, requests_list;
  double per_instance = 20, rate_per_instance = 0, fixed_instances = 0;
  int pool = 0, runs = 3;
  double once_above = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a.rfind("--", 0) == 0 && !v) return usage();
    if (a == "--instances") {
      if ((instances_list = parse_list(argv[++i])).empty()) return usage();
    } else if (a == "--requests") {
      if ((requests_list = parse_list(argv[++i])).empty()) return usage();
    } else if (a == "--per-instance") {
      if ((per_instance = std::atof(argv[++i])) <= 0) return usage();
    } else if (a == "--rate-per-instance") {
      if ((rate_per_instance = std::atof(argv[++i])) <= 0) return usage();
    } else if (a == "--fixed-instances") {
      if ((fixed_instances = std::atof(argv[++i])) < 1) return usage();
    } else if (a == "--pool") {
      if ((pool = std::atoi(argv[++i])) < 0) return usage();
    } else if (a == "--runs") {
      if ((runs = std::atoi(argv[++i])) < 1) return usage();
    } else if (a == "--once-above") {
      if ((once_above = std::atof(argv[++i])) <= 0) return usage();
    } else if (a == "--set") {
      base.sets.emplace_back(argv[++i]);
    } else if (a.rfind("--", 0) == 0 || !scenario_path.empty()) {
      return usage();
    } else {
      scenario_path = a;
    }
  }
  const bool by_instances = !instances_list.empty();
  if (scenario_path.empty() || by_instances == !requests_list.empty() || (!by_instances && fixed_instances < 1)) {
    return usage();
  }

  // The scenario's own rate per instance unless given.
  const std::string instances_key = "deployment.pools[" + std::to_string(pool) + "].instances";
  try {
    const auto sc = servesim::scenario::load_scenario_file(scenario_path, base);
    const auto& pools = sc.config.pools;
    if (static_cast<std::size_t>(pool) >= pools.size()) {
      std::fprintf(stderr, "error: %s has %zu pools, no pool %d\n", scenario_path.c_str(), pools.size(), pool);
      return 2;
    }
    if (rate_per_instance == 0) {
      // The first class's base rate (a Poisson or Gamma process).
      double rate = 0;
      const auto& classes = sc.config.workload.classes;
      if (!classes.empty()) {
        if (const auto* p = std::get_if<servesim::workloads::PoissonArrivals>(&classes[0].arrivals))
          rate = p->rate.per_s;
        if (const auto* g = std::get_if<servesim::workloads::GammaArrivals>(&classes[0].arrivals)) rate = g->rate.per_s;
      }
      if (!(rate > 0)) {
        std::fprintf(stderr, "error: %s has no open-loop rate; give --rate-per-instance\n", scenario_path.c_str());
        return 2;
      }
      rate_per_instance = rate / static_cast<double>(pools[static_cast<std::size_t>(pool)].instances);
    }
  } catch (const servesim::InputError& e) {
    for (const auto& d : e.diagnostics()) std::fprintf(stderr, "error: %s\n", d.to_string().c_str());
    return 2;
  }

  const std::vector<double>& xs = by_instances ? instances_list : requests_list;
  std::printf(
      "servesim_bench_scaling %s: %s series, %.4g requests/s per instance, %s, %d run%s per "
      "point (median), one process each\n",
      scenario_path.c_str(), by_instances ? "instances" : "requests", rate_per_instance,
      by_instances ? (std::to_string(static_cast<long long>(per_instance)) + " requests per instance").c_str()
                   : (std::to_string(static_cast<long long>(fixed_instances)) + " instances").c_str(),
      runs, runs == 1 ? "" : "s");
  std::printf("%10s %11s %12s %10s %14s %10s %12s\n", "instances", "requests", "events", "cpu_s", "events/cpu_s",
              "peak_MB", "peak_B/req");
  std::vector<Point> points;
  for (const double x : xs) {
    Point p;
    p.x = x;
    p.instances = by_instances ? x : fixed_instances;
    p.requests = by_instances ? std::round(per_instance * x) : x;
    servesim::scenario::LoadOptions options = base;
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.9g /s", rate_per_instance * p.instances);
    options.sets.push_back(instances_key + "=" + std::to_string(static_cast<long long>(p.instances)));
    options.sets.push_back("workload.requests=" + std::to_string(static_cast<long long>(p.requests)));
    options.sets.push_back(std::string("workload.arrivals.rate=") + rate);
    std::vector<double> events, cpu, rss;
    const int point_runs = once_above > 0 && x > once_above ? 1 : runs;
    for (int r = 0; r < point_runs; ++r) {
      const auto child = servesim::bench::run_in_child([&] {
        const auto sc = servesim::scenario::load_scenario_file(scenario_path, options);
        const double c0 = cpu_seconds();
        const auto out = servesim::studies::execute(sc);
        const double c = cpu_seconds() - c0;
        char line[128];
        std::snprintf(line, sizeof line, "%.9f %llu\n", c, static_cast<unsigned long long>(out.events));
        return std::string(line);
      });
      if (!child) {
        std::fprintf(stderr, "the run at %g failed\n", x);
        return 1;
      }
      double c = 0;
      unsigned long long e = 0;
      std::sscanf(child->output.c_str(), "%lf %llu", &c, &e);
      events.push_back(static_cast<double>(e));
      cpu.push_back(c);
      rss.push_back(child->rss_mb);
    }
    p.events = median(events);
    p.cpu_s = median(cpu);
    p.rss_mb = median(rss);
    points.push_back(p);
    std::printf("%10.0f %11.0f %12.0f %10.3f %14.0f %10.1f %12.0f\n", p.instances, p.requests, p.events, p.cpu_s,
                p.events / p.cpu_s, p.rss_mb, p.rss_mb * 1048576.0 / p.requests);
    std::fflush(stdout);
  }

  auto fit = [&](std::size_t from, std::size_t to, auto&& y) {
    std::vector<double> lx, ly;
    for (std::size_t i = from; i < to; ++i) {
      lx.push_back(points[i].x);
      ly.push_back(y(points[i]));
    }
    return exponent(lx, ly);
  };
  auto cpu = [](const Point& p) { return p.cpu_s; };
  auto ev = [](const Point& p) { return p.events; };
  auto per_event = [](const Point& p) { return p.cpu_s / p.events; };
  auto mem = [](const Point& p) { return p.rss_mb; };
  const char* var = by_instances ? "instances" : "requests";
  std::printf(
      "exponents in %s (least squares over all points): cpu %.2f, events %.2f, cpu per event "
      "%.2f, peak memory %.2f\n",
      var, fit(0, points.size(), cpu), fit(0, points.size(), ev), fit(0, points.size(), per_event),
      fit(0, points.size(), mem));
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    std::printf("  %g -> %g: cpu %.2f, events %.2f, cpu per event %.2f, peak memory %.2f\n", points[i].x,
                points[i + 1].x, fit(i, i + 2, cpu), fit(i, i + 2, ev), fit(i, i + 2, per_event), fit(i, i + 2, mem));
  }
  return 0;
}
