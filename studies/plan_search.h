// The search behind `servesim plan`: for every candidate deployment (a parallel plan and batch
// caps per pool, and a ratio of instance counts between the pools: E:P:D when the deployment has
// encode, prefill and decode pools), the fewest instances that meet the constraints, then the
// candidates ranked by the target (fewest chips, lowest cost).
//
// Per candidate, the instance counts are scale x ratio; the search variable is the integer scale
// s >= 1. It starts at a capacity estimate (plan.cpp: the traffic's tokens per second over what
// one instance could process at best), doubles until the constraints hold and bisects between the
// last scale that failed and the first that held (from 0 when the first probe already holds: the
// estimate saves probes, it never decides the answer). With several pools it then shrinks one
// pool at a time (pool order), bisecting its count with the others held, so the result is not
// bound to multiples of the ratio (coordinate descent: exact when each pool's constraints depend
// on its own count, a local minimum when the pools trade off).
//
// Constraints are of two kinds. Capacity constraints get easier with more instances (latency
// below a limit; SLO attainment, goodput or throughput above one; rejections below one): the
// bisection assumes that once they hold at a scale they hold at every larger one. Budget
// constraints get harder (chips or cost below a limit, per-chip throughput above one, once the
// traffic is served): they are checked at the smallest scale that meets the capacity ones, and a
// candidate that fails them there fails them everywhere. Where monotonicity can fail: routing
// and batching change with the instance count, so a percentile can move a little against the
// trend near the limit (the search then returns a count that meets the constraints, maybe one
// step above the least); closed-loop traffic sends more when served faster; and runs cut at a
// horizon count unfinished requests as in flight, not as misses.
//
// Saturation: when doubling the scale did not move any violated capacity metric by 2%, more
// instances do not help (a TPOT limit below what one instance's iteration time allows): the
// candidate fails with the values at both scales.
//
// Pruning: for the chips target (and cost per hour, which is chips x price), a candidate whose
// least possible chips (one step above the largest scale that failed) exceed the chips of the
// top-K known feasible results is pruned: it cannot enter the top K. With a chip limit, a
// candidate whose capacity estimate (PlanCandidate::start_text: the traffic's tokens per second
// over an upper bound on one instance's) already needs more chips is pruned before any run; this
// takes the bound as a proof that fewer instances cannot serve the traffic (true for a run long
// enough that an unserved backlog shows in the latencies).
//
// Determinism: the search runs in rounds; in each round every active candidate names its next
// probe, the probes run in parallel (OpenMP, any thread count), and the states advance in
// candidate order from the results. The outcome depends on nothing but the inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "studies/objective.h"

namespace servesim::studies {

struct PlanCandidate {
  std::string label;                    // "tp=2 pp=1, batch 128 / 1024 tokens", "E:P:D 1:2:3"
  std::vector<std::string> sets;        // its overrides, without the instance counts
  std::vector<int> ratio;               // instances per pool at scale 1
  std::vector<int> chips_per_instance;  // per pool
  nlohmann::ordered_json plan;          // what it chose, per pool (for the JSON output)
  std::int64_t start_scale = 1;         // the first scale probed (a capacity estimate)
  std::string start_text;               // how the estimate was found ("" when there is none)
};

// One probe: a candidate with explicit instance counts. The evaluator returns a result in
// evaluate.h's shape ({"ok": false, "errors"} when the loader refuses it).
using PlanEvaluator =
    std::function<nlohmann::ordered_json(const PlanCandidate& candidate, const std::vector<int>& instances)>;

struct PlanSearchOptions {
  Objective target;                  // chips, cost, cost_per_hour, ... (metric and direction)
  std::vector<Constraint> capacity;  // get easier with more instances
  std::vector<Constraint> budget;    // get harder with more instances
  Pricing pricing;
  std::optional<std::int64_t> max_chips;  // no probe above it
  std::int64_t max_scale = 1 << 20;
  std::size_t top = 5;  // the best K that pruning keeps
  int threads = 1;
  bool refine = true;  // several pools: shrink one pool at a time (bisection)
  // A budget of runs: no round starts once this many have run; the candidates still searching
  // end unfinished (status kUnfinished, with how far they got). nullopt: no budget.
  std::optional<std::size_t> max_runs;
  // Chips of feasible deployments found before this search (an earlier stage): pruning counts
  // them among the best known.
  std::vector<std::int64_t> known_chips;
  std::function<void(std::size_t runs)> progress;  // after each round (may be empty)
};

struct PlanProbe {
  std::vector<int> instances;
  std::int64_t chips = 0;
  bool valid = false;
  bool meets = false;                   // every capacity constraint holds
  std::vector<std::string> violations;  // capacity constraints that failed, with their values
  nlohmann::ordered_json result;
};

struct PlanOutcome {
  enum class Status { kFeasible, kInvalid, kInfeasible, kOverBudget, kPruned, kUnfinished };
  Status status = Status::kInfeasible;
  std::vector<int> instances;  // the least that meets the capacity constraints
  std::int64_t chips = 0;
  std::optional<double> objective;
  nlohmann::ordered_json result;   // at `instances` (feasible and over budget)
  std::string why;                 // for every status but kFeasible: a sentence
  std::vector<Diagnostic> errors;  // kInvalid: the loader's
  std::vector<PlanProbe> probes;   // in the order they ran
  std::size_t rank = 0;            // 1-based among the feasible, 0 otherwise
};

const char* status_name(PlanOutcome::Status s);

// True when constraint `c` gets easier with capacity (see above); false when harder; nullopt
// when it is neither (the search cannot use it).
std::optional<bool> capacity_monotone(const Constraint& c);

// "ttft_p99 = 2412 ms, not <= 2000 ms (21% over)", or "" when the constraint holds.
std::string violation_text(const Constraint& c, const std::optional<double>& value);

// Searches every candidate. Candidates whose evaluator answers "not ok" at their start scale are
// invalid with the loader's messages. `runs` is set to the runs this search made.
std::vector<PlanOutcome> plan_search(const std::vector<PlanCandidate>& candidates, const PlanEvaluator& evaluate,
                                     const PlanSearchOptions& options, std::size_t& runs);

// Sets `rank` (1-based) on the feasible outcomes: by the target, then chips, then order.
void rank_outcomes(std::vector<PlanOutcome>& outcomes, const Objective& target);

}  // namespace servesim::studies
