// The token-to-expert routing AIConfigurator's MoE benchmark feeds the layer it times, replicated,
// and the load it puts on the rank it times: models::MoeRankLoad for a measured MoE row.
//
// The benchmark (ai-dynamo/aiconfigurator collector/trtllm/collect_moe.py, helper.py) runs one
// MoE layer of moe_tp x ep on one GPU as EP rank 0: all `tokens` tokens enter the module, which
// computes the pairs routed to rank 0's experts [0, E / ep) and writes every token's output.
//   balanced (balanced_logits): token t takes experts (t + j s) mod E, j < k, s = ceil(E / k)
//     when T >= s, else floor(t s / T + j s) mod E: deterministic.
//   power_law_<alpha> (power_law_logits_v3, _generate_power_law_distribution): per-expert counts
//     drawn i.i.d. from a power law with exponent alpha on [1, 0.8 T] (on [0.01, 2] when
//     T k <= E), scaled to T k and rounded half to even, capped at T (the overflow and the
//     rounding's remainder spread round-robin over the ranks, one pick per rank, to the least
//     loaded valid expert), then the rank with the most pairs swapped into rank 0. The benchmark
//     times 5 such draws and reports their mean.
// For a power law the load here is the mean over kDraws draws from a fixed stream per
// configuration (Rng, stream "calibrate.moe_routing/..."), so it does not depend on row order.
// Ignored: the draws' own spread (the benchmark averages 5 draws' times; the rank load's features
// are averaged instead).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "models/operators.h"

namespace servesim::calibrate {

// Token counts of rank 0's experts (E / ep of them) under the benchmark's routing for one draw.
std::vector<int> aiconfigurator_balanced_counts(int tokens, int experts, int top_k, int ep);

// The rank-0 load of a measured row: `distribution` is the row's column (`balanced`,
// `power_law_<alpha>`); nullopt for anything else or a shape the benchmark cannot run (experts
// not divisible by ep, top-k above the experts).
std::optional<models::MoeRankLoad> aiconfigurator_rank_load(int tokens, int experts, int top_k, int ep,
                                                            std::string_view distribution);

// The load of one rank's expert counts (tiles of models::moe_tile_rows(pairs / active) rows).
models::MoeRankLoad rank_load_of(const std::vector<int>& counts, double tokens);

inline constexpr int kMoeRoutingDraws = 16;

}  // namespace servesim::calibrate
