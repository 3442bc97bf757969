// One hypothesis in, one result out: the API that `serve` and `sweep` (and later `diff` and
// `plan`) share. A hypothesis is a parsed base scenario plus --set style overrides and an
// optional seed; evaluating it validates it exactly like a file, runs it and summarises it. Bad
// input is a result with its errors, never an exception, so a screening loop cannot be killed by
// one bad hypothesis.
//
// The result shape (JSON), shared by every command that returns hypotheses' results:
//   {"ok": true,  "summary": {...as in the report...}, "pools": [...],
//    "simulation": {"events", "fingerprint", "simulated_s"}, "early"?: {"constraint", "settled", "at_s", "events"}}
//   {"ok": false, "errors": [{"path", "message", "file", "line", "column"}]}
// It has no host measurements, so equal hypotheses give byte-identical results.
// `diff` asks for the resolved scenario too (Hypothesis::keep_scenario), to compare two scenarios
// key by key; `plan` loads a hypothesis first (to prune invalid deployments with the loader's own
// messages and to bound them) and evaluates the loaded scenario.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "sim/cluster/run_budget.h"
#include "sim/metrics/settle_watch.h"
#include "sim/metrics/summary.h"
#include "sim/scenario/caches.h"
#include "sim/scenario/scenario.h"

namespace servesim::studies {

struct Hypothesis {
  std::shared_ptr<const scenario::ScenarioDocument> base;
  std::vector<std::string> sets;        // "key.path=value", applied in order
  std::optional<std::uint64_t> seed;    // overrides the scenario's
  bool keep_scenario = false;           // fill Evaluation::scenario (not part of the result)
  scenario::Caches* caches = nullptr;   // the session's (sim/scenario/caches.h), when it has one
  cluster::BudgetLimits budget;         // what its run may cost (run.h); exceeded: an error result
  std::vector<std::string> file_roots;  // files the scenario names must lie here (LoadOptions)
  // Stop the run once one of these cannot hold (serve's early_stop): the result then has `early`.
  std::vector<metrics::SettleRule> settle;
};

struct Evaluation {
  bool ok = false;
  std::vector<Diagnostic> errors;   // when !ok
  bool limit_exceeded = false;      // the errors are the run's budget's (LimitExceeded)
  nlohmann::ordered_json result;    // the result shape above
  double wall_s = 0;                // load + run + summary, for benchmarks
  nlohmann::ordered_json scenario;  // the resolved scenario, with keep_scenario (null otherwise)
  std::vector<std::string> files;   // the files the scenario named (scenario::Scenario::files)
};

Evaluation evaluate(const Hypothesis& hypothesis);
// The base scenario with the hypothesis's overrides and seed, validated. Throws InputError.
scenario::Scenario load_hypothesis(const Hypothesis& hypothesis);
// Runs and summarises a scenario that is already loaded (the result shape above). Throws
// LimitExceeded (run.h) when the run exceeds `budget`.
// With `settle`, a run stopped early has `early` {constraint, settled: why, at_s, events} in its result and its
// figures are those of the run so far.
Evaluation evaluate(const scenario::Scenario& scenario, const cluster::BudgetLimits& budget = {},
                    const std::vector<metrics::SettleRule>& settle = {});

// {"ok": false, "errors": [...]} for diagnostics found before a hypothesis could be evaluated.
nlohmann::ordered_json error_result(const std::vector<Diagnostic>& errors);

}  // namespace servesim::studies
