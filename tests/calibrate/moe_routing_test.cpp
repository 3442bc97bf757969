// AIConfigurator's MoE benchmark routing, replicated (moe_routing.h), and the rows it leaves out of
// the MoE fit (operator_fit.h contended_moe_series).
#include <doctest/doctest.h>

#include <numeric>

#include "calibrate/moe_routing.h"
#include "calibrate/operator_fit.h"

using namespace servesim;
using namespace servesim::calibrate;

TEST_CASE("MoE routing: the benchmark's balanced routing, by hand") {
  // 8 experts, top-2: stride s = ceil(8 / 2) = 4. With 8 tokens (T >= s) token t takes experts
  // t and t + 4 (mod 8): every expert twice; rank 0 of ep 2 holds experts 0-3.
  CHECK(aiconfigurator_balanced_counts(8, 8, 2, 2) == std::vector<int>{2, 2, 2, 2});
  // With 2 tokens (T < s) token t takes floor(t x 4 / 2 + 4 j) mod 8: token 0 experts 0 and 4,
  // token 1 experts 2 and 6; rank 0 holds one pair on expert 0 and one on expert 2.
  CHECK(aiconfigurator_balanced_counts(2, 8, 2, 2) == std::vector<int>{1, 0, 1, 0});
  // Its load: 2 pairs on 2 experts, one row each: tiles of 16 rows (models::moe_tile_rows), 32
  // padded rows.
  const auto r = aiconfigurator_rank_load(2, 8, 2, 2, "balanced");
  REQUIRE(r.has_value());
  CHECK(r->tokens == 2);
  CHECK(r->pairs == 2);
  CHECK(r->active == 2);
  CHECK(r->padded_rows == 32);
  // 200 tokens: each expert 50 pairs, tiles of 64: one each, 4 local experts: 200 pairs, 256
  // padded rows.
  const auto b = aiconfigurator_rank_load(200, 8, 2, 2, "balanced");
  CHECK(b->pairs == 200);
  CHECK(b->padded_rows == 256);
}

TEST_CASE("MoE routing: the power-law rank is the busiest, within the benchmark's caps, reproducibly") {
  for (int tokens : {1, 16, 512, 4096}) {
    for (int ep : {1, 4, 32}) {
      const auto r = aiconfigurator_rank_load(tokens, 256, 8, ep, "power_law_1.2");
      REQUIRE(r.has_value());
      const double all = tokens * 8.0;
      // Rank 0 is the busiest of ep ranks: at least its share of T k, at most all of it; every
      // expert takes a token at most once; active experts at most the rank's 256 / ep.
      CHECK(r->pairs >= all / ep - 1e-9);
      CHECK(r->pairs <= all + 1e-9);
      CHECK(r->active <= 256.0 / ep + 1e-9);
      CHECK(r->pairs <= r->active * tokens + 1e-9);
      CHECK(r->padded_rows >= r->pairs);
      // The same configuration draws the same stream.
      CHECK(aiconfigurator_rank_load(tokens, 256, 8, ep, "power_law_1.2")->pairs == r->pairs);
    }
  }
  // Skewed harder than balanced: at 4,096 tokens over 32 ranks the busiest holds more than 1/32.
  CHECK(aiconfigurator_rank_load(4096, 256, 8, 32, "power_law_1.01")->pairs > 4096 * 8 / 32.0 * 1.2);
  CHECK_FALSE(aiconfigurator_rank_load(16, 256, 8, 3, "balanced").has_value());  // 256 % 3 != 0
  CHECK_FALSE(aiconfigurator_rank_load(16, 256, 8, 4, "uniform_random").has_value());
}

TEST_CASE("MoE fit: a series slower than a plan holding a superset of its work is flagged, alone") {
  // One shape and skew at four plans (moe_tp, ep) over three token counts: (1, 1) takes t, (1, 2)
  // t / 2, (2, 2) t / 4, and (1, 4), whose rank holds a quarter of (1, 1)'s work, 8 x t / 4: twice
  // (1, 1)'s time (above 1.5 x a superset's) and 8 x (1, 4)'s fair share.
  MeasurementSet set;
  auto add = [&](std::int64_t tp, std::int64_t ep, double factor) {
    for (std::int64_t tokens : {16, 256, 4096}) {
      Measurement r;
      r.op = MeasuredOp::moe;
      r.format = Format::bf16;
      for (const auto& [d, v] : {std::pair{Dim::tokens, tokens},
                                 {Dim::hidden, 4096},
                                 {Dim::inter, 2048},
                                 {Dim::experts, 64},
                                 {Dim::topk, 8},
                                 {Dim::tp, tp},
                                 {Dim::ep, ep},
                                 {Dim::gated, 1}}) {
        r.shape.set(d, v);
      }
      r.latency_s = 1e-4 * static_cast<double>(tokens) * factor;
      set.add(r);
    }
  };
  add(1, 1, 1.0);
  add(1, 2, 0.5);
  add(2, 2, 0.25);
  add(1, 4, 8 * 0.25);
  const std::vector<bool> flags = contended_moe_series(set.rows());
  REQUIRE(flags.size() == 12);
  for (std::size_t i = 0; i < 12; ++i) CHECK(flags[i] == (i >= 9));
}
