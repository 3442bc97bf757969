// `servesim plan SCENARIO.yaml`: the fewest chips or lowest cost that meets the SLOs, searched over
// parallel plans, batch caps, instance counts and pool ratios (plan.cpp, plan_search.h; README.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "studies/run.h"
#include "studies/study_io.h"

namespace servesim::studies {

// The search as the command line asks for it (app/plan_command.cpp names the options). Lists are
// comma-separated integers or "auto"; nullopt is "auto" too.
struct PlanRequest {
  std::string scenario;
  std::string target = "chips";
  std::vector<std::string> constraints;  // "METRIC OP VALUE"
  std::string attainment = "99%";        // without constraints: the scenario's slo: met by this share
  std::optional<std::string> tp, pp, dp, ep, cp, max_batch_size, max_batched_tokens;
  std::optional<std::string> ratios;  // "1:2,1:3"
  std::optional<std::int64_t> max_chips;
  std::size_t max_candidates = 512;
  std::size_t max_runs = 2000;  // the run budget of the whole search (both stages)
  std::optional<double> chip_hour_price;
  std::vector<std::string> sets;
  std::optional<std::uint64_t> seed;
  std::optional<int> threads;  // default: the cores available
  std::size_t top = 5;
  bool refine = true;  // false: instance counts stay multiples of the ratio
  bool reproducible = false;
  StudyProgress* progress = nullptr;  // runs done over deployments
  HypothesisLimits limits;            // per probe (run.h); one over a limit is an invalid probe
};

// The exit code of a search that ran and found no deployment meeting the constraints (its JSON
// and table are written all the same): 3, apart from 0 (found), 1 (internal error) and 2 (bad
// input).
inline constexpr int kPlanNothingFeasible = 3;

// Runs the search: its JSON (schema servesim.plan/1, README.md) and table. Bad input is printed on
// `err` with exit code 2.
StudyOutput plan(const PlanRequest& request, std::ostream& err);

}  // namespace servesim::studies
