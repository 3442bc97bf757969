#include "studies/run.h"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/units.h"

namespace servesim::studies {

namespace {

[[noreturn]] void exceeded(const scenario::Scenario& sc, const std::string& key, const std::string& why) {
  throw LimitExceeded({Diagnostic{sc.source, 0, 0, key, why}}, "nothing was written");
}

}  // namespace

cluster::BudgetLimits budget_of(const HypothesisLimits& limits, int threads) {
  cluster::BudgetLimits b;
  b.wall_s = limits.wall_s;
  if (limits.memory_gb) {
    b.memory_bytes = static_cast<std::int64_t>(*limits.memory_gb * 1e9);
  } else if (const std::int64_t machine = cluster::physical_memory_bytes(); machine > 0) {
    b.memory_bytes = machine / std::max(1, threads);
  }
  if (limits.simulated_s) b.simulated = Duration::seconds(*limits.simulated_s);
  return b;
}

int thread_count(std::optional<int> requested, std::string& error, std::string& note) {
  const int cores = std::max(1, omp_get_num_procs());
  if (!requested) return cores;
  if (*requested < 1) {
    error = "--threads must be at least 1";
    return 1;
  }
  if (*requested > cores) {
    note = "--threads " + std::to_string(*requested) + ": using the " + std::to_string(cores) + " cores available";
    return cores;
  }
  return *requested;
}

RunOutput execute(const scenario::Scenario& scenario, const ExecuteOptions& options) {
  const cluster::BudgetLimits& limits = options.budget;
  if (limits.simulated && scenario.config.horizon && *scenario.config.horizon > *limits.simulated) {
    exceeded(scenario, "simulation.horizon",
             "the horizon (" + format_quantity(scenario.config.horizon->to_seconds(), Dimension::kDuration) +
                 ") is beyond the simulated-time limit of " +
                 format_quantity(limits.simulated->to_seconds(), Dimension::kDuration) + " per hypothesis");
  }
  RunOutput out;
  out.metrics = std::make_unique<metrics::RunMetrics>(options.keep_records ? metrics::RunMetrics::Records::kKeep
                                                                           : metrics::RunMetrics::Records::kRelease);
  out.metrics->set_request_sink(options.requests);
  if (options.time_series) out.metrics->enable_time_series();
  if (options.trace) out.metrics->enable_trace(*options.trace);
  const auto start = std::chrono::steady_clock::now();
  std::optional<metrics::SettleWatch> watch;
  if (!options.settle.empty()) watch.emplace(*out.metrics, options.settle, scenario.config.slo);
  std::optional<cluster::RunBudget> budget;
  std::optional<cluster::Simulation> sim;
  sim.emplace(scenario.config, watch ? static_cast<metrics::Recorder&>(*watch) : *out.metrics);
  if (watch) sim->set_settle(&*watch);
  sim->set_paranoid(options.paranoid);
  sim->set_progress(options.progress);
  if (limits.wall_s || limits.memory_bytes || limits.simulated || limits.events || limits.cancel) {
    sim->set_budget(&budget.emplace(limits));
  }
  const cluster::RunResult r = sim->run();
  // The run's state (requests in flight, lanes, the flow network) goes before the summary takes
  // memory of its own: the two do not add up at the end of the run.
  sim.reset();
  if (budget && budget->exceeded()) exceeded(scenario, "", budget->why());
  if (r.settled) {
    out.settled = watch->settled();
    out.settled_at_s = r.end.to_seconds();
  }
  out.summary = metrics::summarize(*out.metrics, r.end, scenario.config.slo);
  if (r.reached_horizon && !scenario.config.horizon) {
    const metrics::Summary& q = out.summary;
    exceeded(scenario, "simulation.horizon",
             "the run reached the end of the simulated clock (" +
                 format_quantity(scenario.config.clock_limit.to_seconds(), Dimension::kDuration) + ") with " +
                 format_count(q.in_flight) + " requests unfinished (" + format_count(q.completed) +
                 " completed): the deployment cannot serve this traffic in the clock's range; give "
                 "simulation.horizon to measure a window of it");
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.events = r.events;
  out.fingerprint = r.fingerprint;
  return out;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace servesim::studies
