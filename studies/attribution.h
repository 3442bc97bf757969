// Why one run differs from another: the metric deltas of two results and the attribution of the
// deltas of mean TTFT, mean TPOT and output throughput to components, largest first, in words and
// JSON (what `servesim diff` prints). Pure functions of two report-shaped results (evaluate.h's
// {"summary", "pools", "simulation"}, or a whole report) and their resolved scenarios.
//
// Bases, best first (the report keys agreed with the serving model, listed in studies/README.md):
//   TTFT  summary.ttft_breakdown_ms in both runs: its parts sum to the mean, so the delta splits
//         into the parts' deltas exactly. Otherwise (fallback) the mean TTFT split in the
//         proportions of the busy-time components of the pool that prefills (prefill, else
//         combined): an approximation that cannot separate queueing from work (said in the text).
//   TPOT  summary.tpot_breakdown_ms in both runs, else the mean TPOT split in the proportions of
//         the busy-time components of the pool that decodes (decode, else combined). A running
//         decode takes part in every iteration of its lane, so the busy mix is the mix of the time
//         it waits per token; the split is exact in sum, approximate in its parts.
//   Throughput  summary.throughput_breakdown ({component: tokens/s}) in both runs, else an
//         index decomposition of output tokens/s T of the token-producing pools (decode, else
//         combined) as T = k x u x S / t, with k = output tokens per iteration, u = utilization,
//         S = instances x pipeline stages (the stage slots), t = busy stage-time per iteration
//         (the sum of its components t_c). The log-mean Divisia index (LMDI, Ang 2004) makes it
//         additive and exact: dT = L(T_b, T_a) x [ln(k_b/k_a) + ln(u_b/u_a) + ln(S_b/S_a) -
//         sum_c (t_c,b - t_c,a) / L(t_b, t_a)], L(x, y) = (x - y) / (ln x - ln y), L(x, x) = x.
//         Each iteration component gets its own term, so "gemm_mlp got 2 ms faster per iteration"
//         reads as tokens/s.
// Every attribution lists all components (JSON) and says which share of the delta the listed
// ones explain (the parts sum to the delta; a residual beyond rounding is listed as
// "unattributed").
//
// The words name what changed: the keys that differ between the two resolved scenarios (a
// structural diff) that bear on the component, and facts about the instance's communication
// groups: pools[].groups when the report has them ({tp, dp, ep, cp, pp: {ranks, leaves_domain,
// tier, domain_chips}}), else derived from the resolved plan and the chip's scale-up domain
// (models::ParallelPlan::group). Deliberately ignored: per-class attribution (the summary's
// classes carry no breakdowns) and significance (one run each; use replications in a sweep).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::studies {

// One side of a comparison: a result (or report) and its resolved scenario (may be null).
struct RunView {
  const nlohmann::ordered_json* result = nullptr;    // has "summary", "pools", "simulation"
  const nlohmann::ordered_json* scenario = nullptr;  // resolved scenario, or null
};

// The leaves that differ between two JSON trees, in --set key syntax, in document order:
// [{"key": "deployment.pools[0].parallel.tp", "a": 1, "b": 2}, ...]; a key only one side has
// has null on the other.
nlohmann::ordered_json scenario_changes(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

struct DiffOptions {
  std::size_t words_components = 4;  // components named in each sentence
};

// The comparison as JSON (schema servesim.diff/1; layout in studies/README.md): "changes",
// "metrics", "pools", "groups", "attribution" {ttft_mean, tpot_mean, throughput}, "sentences".
nlohmann::ordered_json diff_results(const RunView& a, const RunView& b, const DiffOptions& options = {});

// The comparison for a terminal: changes, the metric table, the sentences.
std::string diff_text(const nlohmann::ordered_json& diff);

}  // namespace servesim::studies
