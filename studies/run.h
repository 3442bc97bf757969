// One scenario run: the simulation of a loaded scenario with the recorders a caller asks for, its
// summary, and the host figures around it. Every study (serve, sweep, diff, plan, validate) and
// `servesim run` go through execute().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "sim/cluster/simulation.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/summary.h"
#include "sim/scenario/scenario.h"

namespace servesim::studies {

struct RunOutput {
  std::unique_ptr<metrics::RunMetrics> metrics;
  metrics::Summary summary;
  std::uint64_t events = 0;
  std::uint64_t fingerprint = 0;
  double wall_s = 0;
};

struct ExecuteOptions {
  bool paranoid = false;       // recompute every invariant after every event (tests)
  bool time_series = false;    // record metrics::TimeSeries (RunOutput::metrics->time_series())
  std::optional<metrics::TraceOptions> trace;  // record a metrics::TraceLog
  cluster::RunProgress* progress = nullptr;    // published for a progress display
};

// Runs a loaded scenario.
RunOutput execute(const scenario::Scenario& scenario, const ExecuteOptions& options = {});

// The peak resident set of this process so far, in MB (getrusage).
double peak_rss_mb();

}  // namespace servesim::studies
