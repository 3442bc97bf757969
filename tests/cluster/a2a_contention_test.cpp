// The expert all-to-all and the KV flows on the same NICs (iteration_cost.h, sim/cluster/README.md
// "All-to-all and KV flows on the same NICs"). A tiny MoE model (two layers, both MoE, 4 experts
// top-2) with attention DP 2 x EP 2 on the ideal chip of test_config.h, one chip per scale-up
// domain and a 1 GB/s NIC (test::nic_chip), so the all-to-all's only peer is across the NIC.
//
// All-to-all bytes per chip and MoE layer for a batch of P tokens (models::MoeLoad::set_dispatch,
// DeepEP's normal kernels): each chip dispatches its P / 2 tokens once to the other chip's domain
// when one of its 2 distinct experts (of 4, 2 per chip) is there: 1 - (2 / 4) (1 / 3) = 5 / 6 of
// them: 5 P / 12 copies of h = 64 bf16 values, 320 P / 3 bytes; the combine sends as much back.
// At 1e9 B/s a byte takes 1,000 ps: at P = 12, 640,000 ps per collective, and A = 4 x 640,000 =
// 2,560,000 ps over the two layers' dispatch and combine.
#include <doctest/doctest.h>

#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"

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

Costed cost(cluster::IterationCostModel& model, std::int64_t tokens, double nic_share) {
  models::BatchShape b;
  models::add_chunk(b, tiny_moe(), 0, tokens, true);
  Costed out;
  model.cost(b, 1, &out.stage, out.c, nullptr, nic_share);
  return out;
}

}  // namespace

TEST_CASE("A2A contention: a NIC-bound all-to-all takes twice its NIC time at half the NIC") {
  using models::OpKind;
  cluster::IterationCostModel model(tiny_moe(), test::nic_chip(), dp2_ep2(), models::MoeRouting{}, {}, 4096);
  REQUIRE(model.a2a_on_nics());
  // P = 12: A = 2,560,000 ps (header).
  CHECK(model.a2a_nic_ps(12) == 2'560'000);
  const Costed alone = cost(model, 12, 1.0), shared = cost(model, 12, 0.5);
  CHECK(alone.at(OpKind::kEpDispatch) + alone.at(OpKind::kEpCombine) == 2'560'000);
  // Half the NIC: each all-to-all's NIC part doubles, the iteration grows by A.
  CHECK(shared.stage == alone.stage + 2'560'000);
  CHECK(shared.at(OpKind::kA2aKvContention) == 2'560'000);
  CHECK(alone.at(OpKind::kA2aKvContention) == 0);
  CHECK(shared.sum() == shared.stage);
  CHECK(shared.at(OpKind::kEpDispatch) == alone.at(OpKind::kEpDispatch));
  // 0.99 of it (flows at 1% of the NIC, a2a_nic_share): A / 0.99 - A = 25,859 ps, four
  // collectives' roundings of 6,465 ps each (640,000 / 0.99 = 646,464.6).
  CHECK(cost(model, 12, 0.99).at(OpKind::kA2aKvContention) == 4 * (646'465 - 640'000));
}

TEST_CASE("A2A contention: an all-to-all bound by its scale-up part grows only by what the NIC part exceeds") {
  using models::OpKind;
  // EP 4 over domains of 2 chips, one expert per chip: a token reaches a given chip with
  // 1 - (3 / 4) (2 / 3) = 1 / 2 and the other domain with 5 / 6. Each chip sends it to its domain
  // peer (1 / 2 copy), once across the NIC to its relay there (5 / 6), and that relay forwards it
  // to its own domain peer (1 / 2): 1 copy over the scale-up links, 5 / 6 over the NIC. Scale-up
  // 0.8e9 B/s, NIC 1e9 B/s.
  models::ChipSpec chip = test::nic_chip();
  chip.scale_up_domain = 2;
  chip.scale_up_bandwidth = Bandwidth{0.8e9};
  models::ParallelPlan plan;
  plan.dp = 4;
  plan.ep = 4;
  plan.moe_tp = 1;
  cluster::IterationCostModel model(tiny_moe(), chip, plan, models::MoeRouting{}, {}, 4096);
  REQUIRE(model.a2a_on_nics());
  // P = 12: 3 tokens per chip x 128 B: 384 B over the scale-up links and 320 B over the NIC per
  // dispatch (and per combine). NIC part 320,000 ps per collective, 4 collectives: A = 1,280,000 ps.
  CHECK(model.a2a_nic_ps(12) == 1'280'000);
  const Costed alone = cost(model, 12, 1.0), shared = cost(model, 12, 0.5);
  // Inside part 384 B at 0.8e9 B/s = 480,000 ps binds; at half the NIC the NIC part is 640,000
  // ps: +160,000 ps per collective, 640,000 ps over the four, less than A.
  CHECK(alone.at(OpKind::kEpDispatch) + alone.at(OpKind::kEpCombine) == 4 * 480'000);
  CHECK(shared.at(OpKind::kA2aKvContention) == 640'000);
  CHECK(shared.stage == alone.stage + 640'000);
}

TEST_CASE("A2A contention: the all-to-all's NIC share follows the rate and the lifetime of the flows there") {
  topologies::FlowNetwork::ResourceTraffic t;
  t.capacity = 100e9;
  // Flows this NIC binds, through the whole 10 ms iteration: half of it, the all-to-all twice as
  // long (q = C / 2: 1 / (1 + 1)).
  t.rate = 70e9;
  t.remaining = 7e9;
  t.saturated = true;
  CHECK(cluster::a2a_nic_share(t, 0.01) == approx(0.5));
  // The same flows with 0.1 GB left, 1 ms at the whole NIC: f = 0.1, 1 / (1 + 0.1).
  t.remaining = 0.1e9;
  CHECK(cluster::a2a_nic_share(t, 0.01) == approx(1 / 1.1));
  // A flow at 1% of the NIC, held there by its own bottleneck, all iteration: q = 1e9,
  // 1 / (1 + 1e9 / 99e9) = 0.99.
  t.rate = 1e9;
  t.remaining = 1e9;
  t.saturated = false;
  CHECK(cluster::a2a_nic_share(t, 0.01) == approx(0.99));
  // Held elsewhere at 80% of the NIC: the all-to-all still gets half.
  t.rate = 80e9;
  t.remaining = 80e9;
  CHECK(cluster::a2a_nic_share(t, 0.01) == approx(0.5));
  // Nothing moving: all of it.
  t.rate = 0;
  CHECK(cluster::a2a_nic_share(t, 0.01) == 1.0);
}

TEST_CASE("A2A contention: two-batch overlap hides the stretched all-to-all like the rest of it") {
  using models::OpKind;
  cluster::IterationCostModel model(tiny_moe(), test::nic_chip(), dp2_ep2(), models::MoeRouting{}, {}, 4096);
  model.set_two_batch_overlap(true);
  const Costed shared = cost(model, 12, 0.5);
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

TEST_CASE("A2A contention: a streamed KV transfer stretches its prefill's all-to-all for as long as it flows") {
  // The first layer's KV (R = 2,560 B) flows from the prefill's chip 0 while the prefill runs; the
  // last layer's 2,560 B when it ends. Without contention the prefill takes T (P = 10 tokens, the
  // iteration costed below) and the flow, alone on its 1e9 B/s NIC, needs R / C = 2,560,000 ps of
  // it: f = 2,560,000 / T of the iteration's work (comm_cost.h, a2a_nic_share). With contention the
  // all-to-all gets 1 / (1 + f) of the NIC while the flow is there: its NIC part A stretches by
  // f A, and the flow still has its bytes through before the prefill ends (it moves C T > R in
  // the fluid limit). After the prefill both cases move the last layer's bytes on idle NICs, so
  // the first token comes exactly f A later with the same exposed transfer.
  cluster::IterationCostModel prefill(tiny_moe(), test::nic_chip(), dp2_ep2(), models::MoeRouting{}, {}, 4096);
  const Costed alone = cost(prefill, 10, 1.0);
  const double f = 2'560'000.0 / static_cast<double>(alone.stage);
  REQUIRE(f < 1);
  const std::int64_t stretch = cost(prefill, 10, 1.0 / (1.0 + f)).stage - alone.stage;
  // f A, A = 4 x 533,333 ps (P = 10: 5 tokens x 5 / 6 copies x 128 B per collective), to the
  // rounding of the four collectives' picoseconds.
  CHECK(static_cast<double>(stretch) == approx(f * 4 * 533'333.3).epsilon(1e-5));
  const Served off = serve_one(false), on = serve_one(true);
  CHECK(on.ttft_ps == off.ttft_ps + stretch);
  CHECK(on.exposed_ms == approx(off.exposed_ms).epsilon(1e-9));
  CHECK(off.exposed_ms > 0);
  CHECK(off.contention_share == 0);
  CHECK(on.contention_share > 0);
}
