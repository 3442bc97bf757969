// Context parallelism only for long prompts (PoolConfig::cp_min_tokens, iteration_cost.h cost's
// cp_part): the tiny model of test_config.h with cp = 2 on the ideal chip, whose scale-up link is
// 1e9 B/s here so that the CP ring exchange takes time (a byte takes 1,000 ps).
//
// Prefill CP exchange per layer (models/operators.cpp, layer_batch_ops): pass-KV moves
// (cp - 1) x KV tokens / (dp x cp) x 256 B (2 x 4 kv heads x 16 dims x 2 B per token and layer);
// pass-Q (cp - 1) x tokens / (dp x cp) x 4 heads x (2 x 16 + 1) x 2 B = 132 B per token over
// the ranks; the smaller is taken. A fresh 10-token chunk: pass-KV 5 x 256 = 1,280 B, pass-Q
// 5 x 264 = 1,320 B: 1,280 B, 1,280,000 ps per layer, 2,560,000 ps over the two layers.
#include <doctest/doctest.h>

#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"

using namespace servesim;

namespace {

models::ChipSpec cp_chip() {
  models::ChipSpec chip = test::ideal_chip();
  chip.scale_up_bandwidth = Bandwidth{1e9};
  return chip;
}

models::ParallelPlan cp2() {
  models::ParallelPlan plan;
  plan.cp = 2;
  return plan;
}

std::int64_t cp_exchange(cluster::IterationCostModel& model, const models::BatchShape& b,
                         const models::BatchShape* cp_part) {
  std::int64_t stage = 0;
  cluster::ComponentTimes c{};
  model.cost(b, 1, &stage, c, nullptr, 1.0, cp_part);
  return c[static_cast<std::size_t>(models::OpKind::kCpExchange)];
}

}  // namespace

TEST_CASE("CP for long prompts: only the chunks the CP ranks split move over the ring") {
  cluster::IterationCostModel model(test::tiny_model(), cp_chip(), cp2(), models::MoeRouting{}, {}, 4096);
  models::BatchShape one;
  models::add_chunk(one, test::tiny_model(), 0, 10, true);
  models::BatchShape none, long_part;
  long_part.prefill_tokens = 10;
  long_part.prefill_kv_tokens = 10;
  CHECK(cp_exchange(model, one, nullptr) == 2'560'000);     // every chunk split (header)
  CHECK(cp_exchange(model, one, &long_part) == 2'560'000);  // the chunk is a long prompt's
  CHECK(cp_exchange(model, one, &none) == 0);               // a short prompt's: on one rank
  // A long prompt's 10-token chunk with a short one's 6: split, both would move 16 / 2 x 256 =
  // 2,048 B per layer (pass-Q 8 x 264 = 2,112 B), 4,096,000 ps; only the long one's: 2,560,000 ps.
  models::BatchShape two;
  models::add_chunk(two, test::tiny_model(), 0, 10, true);
  models::add_chunk(two, test::tiny_model(), 0, 6, true);
  CHECK(cp_exchange(model, two, nullptr) == 4'096'000);
  CHECK(cp_exchange(model, two, &long_part) == 2'560'000);
}

namespace {

std::int64_t ttft_ps(std::int64_t cp_min_tokens, std::int64_t prompt) {
  auto config = test::one_pool(test::tiny_model(), cp_chip());
  config.pools[0].plan = cp2();
  config.pools[0].cp_min_tokens = cp_min_tokens;
  config.workload = test::fixed_closed_loop(1, 1, prompt, 2);
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  sim.set_paranoid(true);
  sim.run();
  const auto& rec = m.requests().at(0);
  return (rec.first_token - rec.arrival).ps();
}

}  // namespace

TEST_CASE("CP for long prompts: a prompt below cp_min_tokens skips the ring exchange, one at it keeps it") {
  // One 10-token prompt prefilled in one iteration: its TTFT is that iteration, which loses the
  // 2,560,000 ps of ring exchange when the prompt is shorter than cp_min_tokens.
  const std::int64_t split = ttft_ps(0, 10);
  CHECK(ttft_ps(11, 10) == split - 2'560'000);
  CHECK(ttft_ps(10, 10) == split);  // at the threshold: split
}
