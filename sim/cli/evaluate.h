// One hypothesis in, one result out: the API that `serve` and `sweep` (and later `diff` and
// `plan`) share. A hypothesis is a parsed base scenario plus --set style overrides and an
// optional seed; evaluating it validates it exactly like a file, runs it and summarises it. Bad
// input is a result with its errors, never an exception, so a screening loop cannot be killed by
// one bad hypothesis.
//
// The result shape (JSON), shared by every command that returns hypotheses' results:
//   {"ok": true,  "summary": {...as in the report...}, "pools": [...],
//    "simulation": {"events", "fingerprint", "simulated_s"}}
//   {"ok": false, "errors": [{"path", "message", "file", "line", "column"}]}
// It has no host measurements, so equal hypotheses give byte-identical results.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/errors.h"
#include "sim/metrics/summary.h"
#include "sim/scenario/scenario.h"

namespace servesim::app {

struct Hypothesis {
  std::shared_ptr<const scenario::ScenarioDocument> base;
  std::vector<std::string> sets;        // "key.path=value", applied in order
  std::optional<std::uint64_t> seed;    // overrides the scenario's
};

struct Evaluation {
  bool ok = false;
  std::vector<Diagnostic> errors;       // when !ok
  nlohmann::ordered_json result;        // the result shape above
  double wall_s = 0;                    // load + run + summary, for benchmarks
};

Evaluation evaluate(const Hypothesis& hypothesis);

// {"ok": false, "errors": [...]} for diagnostics found before a hypothesis could be evaluated.
nlohmann::ordered_json error_result(const std::vector<Diagnostic>& errors);

}  // namespace servesim::app
