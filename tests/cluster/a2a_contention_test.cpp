// The expert all-to-all and the KV flows on the same NICs (iteration_cost.h, sim/cluster/README.md
// "All-to-all and KV flows on the same NICs"). A tiny MoE model (two layers, both MoE, 4 experts
// top-2) with attention DP 2 x EP 2 on the ideal chip of test_config.h, one chip per scale-up
// domain and a 1 GB/s NIC (test::nic_chip), so the all-to-all's only peer is across the NIC.
//
// All-to-all bytes per chip and MoE layer for a batch of P tokens (models/operators.cpp): each
// chip dispatches its P / 2 tokens' top-2 copies, half of them to the other chip: P / 2 copies of
// h = 64 bf16 values, 64 P bytes; the combine sends as much back. At 1e9 B/s a byte takes 1,000 ps,
// so the NIC part of one layer's dispatch + combine is 128,000 P ps, and A = 256,000 P ps over the
// two layers.
#include <doctest/doctest.h>

#include "tests/approx.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"

using namespace servesim;

namespace {

using test::tiny_moe;

models::ParallelPlan dp2_ep2() {
  models::ParallelPlan plan;
  plan.dp = 2;
  plan.ep = 2;
  plan.moe_tp = 1;
  return plan;
}

struct Costed {
  std::int64_t stage = 0;
  cluster::ComponentTimes c{};
  std::int64_t at(models::OpKind k) const { return c[static_cast<std::size_t>(k)]; }
  std::int64_t sum() const {
    std::int64_t s = 0;
    for (const auto v : c) s += v;
    return s;
  }
};

Costed cost(cluster::IterationCostModel& model, std::int64_t tokens, bool shared) {
  models::BatchShape b;
  models::add_chunk(b, tiny_moe(), 0, tokens, true);
  Costed out;
  model.cost(b, 1, &out.stage, out.c, nullptr, shared);
  return out;
}

}  // namespace

TEST_CASE("A2A contention: a NIC-bound all-to-all takes twice its NIC time while KV flows share the NICs") {
  using models::OpKind;
  cluster::IterationCostModel model(tiny_moe(), test::nic_chip(), dp2_ep2(), models::MoeRouting{}, {}, 4096);
  REQUIRE(model.a2a_on_nics());
  // P = 10: A = 2,560,000 ps (header).
  CHECK(model.a2a_nic_ps(10) == 2'560'000);
  const Costed alone = cost(model, 10, false), shared = cost(model, 10, true);
  CHECK(alone.at(OpKind::kEpDispatch) + alone.at(OpKind::kEpCombine) == 2'560'000);
  // Half the NIC: each all-to-all's NIC part doubles, the iteration grows by A.
  CHECK(shared.stage == alone.stage + 2'560'000);
  CHECK(shared.at(OpKind::kA2aKvContention) == 2'560'000);
  CHECK(alone.at(OpKind::kA2aKvContention) == 0);
  CHECK(shared.sum() == shared.stage);
  CHECK(shared.at(OpKind::kEpDispatch) == alone.at(OpKind::kEpDispatch));
}

TEST_CASE("A2A contention: an all-to-all bound by its scale-up part grows only by what the NIC part exceeds") {
  using models::OpKind;
  // EP 4 over domains of 2 chips: each chip has one peer inside its domain and two outside, so of
  // the S bytes it sends a third crosses the scale-up link and two thirds the NIC. Scale-up 0.4e9
  // B/s, NIC 1e9 B/s: inside S / 1.2e9 s, NIC 2 S / 3e9 = S / 1.5e9 s, so the scale-up part binds;
  // at half the NIC that becomes S / 0.75e9 s: the all-to-all grows by S (1 / 0.75 - 1 / 1.2) / 1e9
  // = S / 2e9 s, less than its NIC time.
  models::ChipSpec chip = test::nic_chip();
  chip.scale_up_domain = 2;
  chip.scale_up_bandwidth = Bandwidth{0.4e9};
  models::ParallelPlan plan;
  plan.dp = 4;
  plan.ep = 4;
  plan.moe_tp = 1;
  cluster::IterationCostModel model(tiny_moe(), chip, plan, models::MoeRouting{}, {}, 4096);
  REQUIRE(model.a2a_on_nics());
  // P = 12: 3 tokens per chip, top-2 copies of which 3 / 4 leave the chip: 4.5 copies x 128 B =
  // S = 576 B per dispatch (and per combine). NIC part 384 B at 1e9 B/s = 384,000 ps per
  // collective, 4 collectives: A = 1,536,000 ps.
  CHECK(model.a2a_nic_ps(12) == 1'536'000);
  const Costed alone = cost(model, 12, false), shared = cost(model, 12, true);
  // Inside part 192 B at 0.4e9 B/s = 480,000 ps; shared NIC part 768,000 ps: +288,000 ps per
  // collective (= S / 2e9 s), 1,152,000 ps over the four.
  CHECK(alone.at(OpKind::kEpDispatch) + alone.at(OpKind::kEpCombine) == 4 * 480'000);
  CHECK(shared.at(OpKind::kA2aKvContention) == 1'152'000);
  CHECK(shared.stage == alone.stage + 1'152'000);
}

TEST_CASE("A2A contention: two-batch overlap hides the stretched all-to-all like the rest of it") {
  using models::OpKind;
  cluster::IterationCostModel model(tiny_moe(), test::nic_chip(), dp2_ep2(), models::MoeRouting{}, {}, 4096);
  model.set_two_batch_overlap(true);
  const Costed shared = cost(model, 10, true);
  CHECK(shared.sum() == shared.stage);
  CHECK(shared.at(OpKind::kA2aKvContention) > 0);
  CHECK(shared.at(OpKind::kA2aKvContention) < 2'560'000);
}

namespace {

struct Served {
  std::int64_t ttft_ps = 0;
  double exposed_ms = 0, contention_share = 0;
};

// One request of 10 prompt tokens and 2 output tokens through a prefill and a decode instance,
// both DP 2 x EP 2 (two chips each), KV layer-streamed.
Served serve_one(bool contention) {
  auto config = test::prefill_decode(tiny_moe());
  for (auto& p : config.pools) p.plan = dp2_ep2();
  config.disaggregation.kv_transfer = cluster::KvTransferMode::kLayerStreamed;
  config.disaggregation.a2a_contention = contention;
  config.workload = test::fixed_closed_loop(1, 1, 10, 2);
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  sim.set_paranoid(true);
  const cluster::RunResult result = sim.run();
  CHECK(sim.drained());
  const metrics::Summary s = metrics::summarize(m, result.end, {});
  Served out;
  const auto& rec = m.requests().at(0);
  out.ttft_ps = (rec.first_token - rec.arrival).ps();
  for (const auto& [k, v] : s.ttft_breakdown_ms) {
    if (k == "kv_transfer_exposed") out.exposed_ms = v;
  }
  for (const auto& [k, v] : s.pools.at(0).breakdown) {
    if (k == "a2a_kv_contention") out.contention_share = v;
  }
  return out;
}

}  // namespace

TEST_CASE("A2A contention: a streamed KV transfer stretches its prefill's all-to-all by A and gets the same bytes") {
  // The first layer's KV (2,560 B) flows from the prefill's chip 0 while the prefill runs; the last
  // layer's 2,560 B when it ends. Without contention the prefill takes T and the flow has C T
  // bytes through by then. With it the prefill's all-to-all gets half the NIC: T' = T + A, and the
  // flow gets what the all-to-all's duty cycle A / T' leaves: C (1 - A / T') T' = C T bytes by T'.
  // After the prefill both cases move the same bytes on idle NICs (the decode instance is idle:
  // its all-to-all holds nothing), so the first token comes exactly A = 2,560,000 ps later and the
  // exposed transfer is the same.
  const Served off = serve_one(false), on = serve_one(true);
  CHECK(on.ttft_ps == off.ttft_ps + 2'560'000);
  CHECK(on.exposed_ms == approx(off.exposed_ms).epsilon(1e-9));
  CHECK(off.exposed_ms > 0);
  CHECK(off.contention_share == 0);
  CHECK(on.contention_share > 0);
}
