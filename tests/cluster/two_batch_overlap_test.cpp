// Two-batch overlap of the MoE all-to-all with compute (IterationCostModel, iteration_cost.h).
// A tiny MoE model (two layers, both MoE, 4 experts top-2, EP 2 inside one node) on the ideal chip
// of test_config.h with a finite scale-up link, so that dispatch / combine take time. The overlap
// rule is checked against the same model without it: per MoE layer the compute C and the
// all-to-all A are read off the non-overlapped iteration's components (both layers are MoE and
// alike, and with tp = 1 there is no embedding all-reduce, so C = (T - A_total - LM head) / 2 and
// A = A_total / 2), and the overlapped iteration must take T - (2 min(C, A) - min(C, A) / 2).
#include <doctest/doctest.h>

#include "sim/cluster/iteration_cost.h"
#include "test_config.h"

using namespace servesim;

namespace {

using test::tiny_moe;

struct Costed {
  std::int64_t stage = 0;
  cluster::ComponentTimes c{};
  std::int64_t at(models::OpKind k) const { return c[static_cast<std::size_t>(k)]; }
};

Costed cost(bool tbo, double link_bytes_per_s, double tokens) {
  models::ChipSpec chip = test::ideal_chip();
  chip.scale_up_bandwidth = Bandwidth{link_bytes_per_s};
  models::ParallelPlan plan;
  plan.dp = 2;
  plan.ep = 2;
  plan.moe_tp = 1;
  cluster::IterationCostModel model(tiny_moe(), chip, plan, models::MoeRouting{}, {}, 4096);
  model.set_two_batch_overlap(tbo);
  models::BatchShape b;
  models::add_chunk(b, tiny_moe(), 0, static_cast<std::int64_t>(tokens), true);
  Costed out;
  model.cost(b, 1, &out.stage, out.c);
  return out;
}

void check_overlap(double link, double tokens, bool comm_bound) {
  using models::OpKind;
  const Costed off = cost(false, link, tokens), on = cost(true, link, tokens);
  const std::int64_t a_total = off.at(OpKind::kEpDispatch) + off.at(OpKind::kEpCombine);
  REQUIRE(a_total > 0);
  REQUIRE(a_total % 2 == 0);
  const std::int64_t a = a_total / 2;
  const std::int64_t c_total = off.stage - a_total - off.at(OpKind::kLmHead);
  REQUIRE(c_total % 2 == 0);
  const std::int64_t c = c_total / 2;
  CHECK((a > c) == comm_bound);
  const std::int64_t overlap = std::min(c, a);
  const std::int64_t hidden = 2 * overlap - overlap / 2;
  CHECK(on.stage == off.stage - hidden);
  // The breakdown keeps adding up to the iteration, and only the all-to-all shrinks: what is
  // left of it is the exposed part.
  std::int64_t sum_on = 0;
  for (const auto v : on.c) sum_on += v;
  CHECK(sum_on == on.stage);
  CHECK(on.at(OpKind::kEpDispatch) + on.at(OpKind::kEpCombine) == a_total - hidden);
  CHECK(on.at(OpKind::kMoeExperts) == off.at(OpKind::kMoeExperts));
  CHECK(on.at(OpKind::kAttentionPrefill) == off.at(OpKind::kAttentionPrefill));
  // With compute the longer one, all of the all-to-all but the unhidden half-layer disappears:
  // exposed = A / 2; communication-bound, exposed = 2 (A - C) + C / 2.
  CHECK(on.at(OpKind::kEpDispatch) + on.at(OpKind::kEpCombine) == (comm_bound ? 2 * (a - c) + c / 2 : a / 2));
}

}  // namespace

TEST_CASE("Two-batch overlap: compute-bound MoE layers hide their all-to-all") {
  // 1e12 B/s links: a 512-token chunk's all-to-all is short next to its compute.
  check_overlap(1e12, 512, false);
}

TEST_CASE("Two-batch overlap: communication-bound MoE layers hide their compute") {
  // A slow 0.1 GB/s link: the all-to-all dominates.
  check_overlap(1e8, 512, true);
}

TEST_CASE("Two-batch overlap: a one-token batch does not split") {
  const Costed off = cost(false, 1e9, 1), on = cost(true, 1e9, 1);
  CHECK(on.stage == off.stage);
}
