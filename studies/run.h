// One scenario run: the simulation of a loaded scenario with the recorders a caller asks for, its
// summary, and the host figures around it. Every study (serve, sweep, diff, plan, validate) and
// `servesim run` go through execute().
#pragma once

#include <cstdint>

#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "core/errors.h"

#include "sim/cluster/simulation.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/settle_watch.h"
#include "sim/metrics/summary.h"
#include "sim/scenario/scenario.h"

namespace servesim::studies {

struct RunOutput {
  std::unique_ptr<metrics::RunMetrics> metrics;
  metrics::Summary summary;
  std::uint64_t events = 0;
  std::uint64_t fingerprint = 0;
  double wall_s = 0;
  // The run stopped early because a settle rule could no longer hold (ExecuteOptions::settle): why,
  // and the simulated time it stopped at. The metrics and summary are those of the run so far.
  std::optional<metrics::SettleWatch::Settled> settled;
  double settled_at_s = 0;
};

struct ExecuteOptions {
  bool paranoid = false;                       // recompute every invariant after every event (tests)
  bool time_series = false;                    // record metrics::TimeSeries (RunOutput::metrics->time_series())
  std::optional<metrics::TraceOptions> trace;  // record a metrics::TraceLog
  cluster::RunProgress* progress = nullptr;    // published for a progress display
  cluster::BudgetLimits budget;                // what the run may cost (none by default)
  // Where each request's full record goes as it finishes (in id order; the requests.csv writer),
  // and whether RunOutput::metrics keeps every full record too (requests(); tests). By default a
  // record leaves when its request finishes and the run's memory follows the requests in flight.
  metrics::RequestSink* requests = nullptr;
  bool keep_records = false;
  // Stop the run once one of these can no longer hold (sim/metrics/settle_watch.h); empty: run to
  // the end.
  std::vector<metrics::SettleRule> settle;
};

// A run stopped by its budget or by the end of the simulated clock (core/time.h): bad input for
// the limits it was given, reported like any (exit code 2, an error answer in serve and sweep).
class LimitExceeded : public InputError {
 public:
  using InputError::InputError;
};

// Runs a loaded scenario. Throws LimitExceeded (above).
RunOutput execute(const scenario::Scenario& scenario, const ExecuteOptions& options = {});

// The per-hypothesis limits of the screening commands (serve, sweep, plan) as their options give
// them; defaults in README.md (Limits). `threads`: hypotheses run at once in this process (the
// machine's memory is shared among them).
struct HypothesisLimits {
  std::optional<double> wall_s = 600;
  std::optional<double> memory_gb;  // default: physical memory / threads
  std::optional<double> simulated_s = 86400;
};
cluster::BudgetLimits budget_of(const HypothesisLimits& limits, int threads);

// The OpenMP threads a study runs with: `requested` (default: the cores available), capped at the
// cores available (more would only wait, each holding a hypothesis's memory). Sets `error` when
// `requested` is below 1, and `note` (a sentence for the user) when it was capped.
int thread_count(std::optional<int> requested, std::string& error, std::string& note);

// The peak resident set of this process so far, in MB (getrusage).
double peak_rss_mb();

}  // namespace servesim::studies
