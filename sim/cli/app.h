// The servesim command line: parses arguments (Boost.Program_options), loads the scenario, runs
// it and writes the outputs. main() is a one-line call into run_cli so that tests and the
// benchmark drive exactly what users run.
//
// Exit codes (DESIGN.md): 0 ok; 2 bad input (every problem listed on stderr with
// file:line:col and key path; nothing written); 1 internal error.
// Outputs are written to a temporary file beside the target and renamed into place, so a failed
// or interrupted run never leaves a half-written report.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster/simulation.h"
#include "core/errors.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/summary.h"
#include "sim/scenario/scenario.h"

namespace servesim::app {

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

// Writes `text` to `path` through a temporary file beside it and a rename (nothing half-written).
void write_atomically(const std::filesystem::path& path, const std::string& text);
// Prints every diagnostic ("error: file:line:col: path: message") and the count.
void print_diagnostics(const InputError& e, std::ostream& err);

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace servesim::app
