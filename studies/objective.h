// Objectives and constraints over results (evaluate.h's result shape): shared by `sweep`,
// `plan` and `diff`.
//
// Metrics by name, each with its unit and its better direction:
//   ttft_, tpot_, itl_, e2e_ + mean|p50|p90|p99   latency, ms in the result; lower is better
//   output_tokens_per_s, input_tokens_per_s, requests_per_s, goodput (SLO-meeting requests/s)
//                                                  rates, /s; higher is better
//   output_tokens_per_s_per_chip, goodput_per_chip rates per chip, /s; higher is better
//   slo_attainment                                 fraction (0.99 or 99%); higher is better
//   chips, completed, rejected                     counts; chips and rejected lower is better
//   cost                                           USD per million output tokens, from
//                                                  --chip-hour-price: chips x price / (output
//                                                  tokens/s x 3600) x 1e6; lower is better
//   cost_per_hour                                  USD per hour: chips x price; lower is better
// A constraint is "METRIC OP VALUE" with OP one of <=, <, >=, >, and the value carries the
// metric's unit where it has one ("ttft_p99 <= 2 s", "tpot_p50 <= 50 ms", "goodput >= 10 /s").
// An objective is a metric name, optionally "min:" or "max:" to override its direction.
// A metric a result cannot give (goodput without an SLO, cost without a price, a failed variant)
// is missing: a constraint on it fails, an objective on it ranks last.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::studies {

struct Pricing {
  std::optional<double> chip_hour_usd;
};

struct Objective {
  std::string metric;
  bool maximize = true;
  std::string text() const { return (maximize ? "max:" : "min:") + metric; }
};

struct Constraint {
  std::string metric;
  enum class Op { kLe, kLt, kGe, kGt } op = Op::kLe;
  double value = 0;  // in the result's unit (ms for latency, 1/s for rates, a fraction)
  std::string text;  // as given
};

// Parse errors are complete sentences, returned in `error` (the parse returns nullopt).
std::optional<Objective> parse_objective(const std::string& text, std::string& error);

// A per-request target: "ttft <= 2 s", "tpot <= 50 ms" or "e2e <= 10 s" (a bare latency name,
// no percentile) means what `slo: {ttft: 2 s}` means in a scenario: each request is held to it,
// and the result is judged by its SLO attainment. Returns the override that sets the scenario's
// target ("slo.ttft=2 s"); nullopt (and no error) when `text` is not of this form; nullopt with
// `error` set when it is, but malformed.
std::optional<std::string> slo_target_override(const std::string& text, std::string& error);
std::optional<Constraint> parse_constraint(const std::string& text, std::string& error);
// The names of every metric, for help texts and suggestions.
std::vector<std::string> metric_names();

std::optional<double> metric_value(const nlohmann::ordered_json& result, const std::string& metric,
                                   const Pricing& pricing);

struct Verdict {
  bool feasible = false;  // ok and every constraint met
  std::optional<double> objective;
  std::vector<std::string> violations;  // "ttft_p99 = 2412 ms, not <= 2000 ms"
};
Verdict judge(const nlohmann::ordered_json& result, const Objective& objective,
              const std::vector<Constraint>& constraints, const Pricing& pricing);

// True when a is strictly better than b for the objective (missing values are worst).
bool better(const Objective& o, const std::optional<double>& a, const std::optional<double>& b);

// True when the value meets the constraint.
bool holds(const Constraint& c, double value);

// The number at a key path of a JSON object ({"summary", "ttft_ms", "mean"}), or nothing.
std::optional<double> number_at(const nlohmann::ordered_json& j, std::initializer_list<const char*> path);

// Indices of the results on the Pareto front of two objectives (none dominated by another in
// both), among those whose both values exist; ordered by the first objective, best first.
std::vector<std::size_t> pareto_front(const std::vector<std::optional<double>>& first,
                                      const std::vector<std::optional<double>>& second, const Objective& a,
                                      const Objective& b);

}  // namespace servesim::studies
