#include "studies/run.h"

#include <sys/resource.h>

#include <chrono>

namespace servesim::studies {

RunOutput execute(const scenario::Scenario& scenario, const ExecuteOptions& options) {
  RunOutput out;
  out.metrics = std::make_unique<metrics::RunMetrics>();
  if (options.time_series) out.metrics->enable_time_series();
  if (options.trace) out.metrics->enable_trace(*options.trace);
  const auto start = std::chrono::steady_clock::now();
  cluster::Simulation sim(scenario.config, *out.metrics);
  sim.set_paranoid(options.paranoid);
  sim.set_progress(options.progress);
  const cluster::RunResult r = sim.run();
  out.summary = metrics::summarize(*out.metrics, r.end, scenario.config.slo);
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
