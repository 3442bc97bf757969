// `servesim sweep SCENARIO --vary KEY=SPEC ...`: see sweep.cpp and README.md (Sweeps).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "studies/run.h"
#include "studies/study_io.h"
#include "studies/sweep_ranks.h"

namespace servesim::studies {

// The sweep as the command line asks for it (app/sweep_command.cpp names the options).
struct SweepRequest {
  std::vector<std::string> files;       // exactly one scenario
  std::vector<std::string> vary;        // "KEY=SPEC"
  std::vector<std::string> sets;        // applied to every variant
  std::optional<std::int64_t> samples;  // draw N variants instead of the grid
  std::string sampling = "lhs";         // lhs | random
  std::uint64_t seed = 0;               // of the sampling
  std::string objective = "output_tokens_per_s_per_chip";
  std::vector<std::string> constraints;  // "METRIC OP VALUE"
  std::string pareto = "output_tokens_per_s_per_chip,tpot_p50";
  std::optional<double> chip_hour_price;
  std::size_t top = 10;
  std::optional<int> threads;         // per process; default: the cores available
  std::optional<std::string> out;     // folder (default ./<scenario>.sweep)
  std::optional<std::string> json;    // "-": the result lines instead of the table
  SweepRanks* ranks = nullptr;        // this process among the sweep's (required)
  StudyProgress* progress = nullptr;  // variants done of all
  HypothesisLimits limits;            // per variant (run.h); one over a limit is an invalid result
};

// Runs (or resumes) the sweep, writes results.jsonl and summary.txt under the folder, and
// answers the table, or the result lines as `json` with `request.json`. Messages (resuming, bad
// input) go to `out` / `err` on rank 0 only; other ranks answer nothing.
StudyOutput sweep(const SweepRequest& request, std::ostream& out, std::ostream& err);

}  // namespace servesim::studies
