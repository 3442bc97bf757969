// Disaggregated serving (encode / prefill / decode pools, KV transfer over the flow network)
// against values derived by hand on the tiny model and the ideal chip of test_config.h (every
// operator compute-bound at 1e12 FLOP/s: F FLOPs take F ps; see serving_test.cpp for the
// tiny model's FLOPs per operator).
//
// The chips here have one chip per scale-up domain and a 1 GB/s NIC, so every transfer between
// two instances crosses the default fabric's NICs at 1e9 B/s. The tiny model's KV cache is
// 2 (K, V) x 4 kv heads x 16 dims x 2 bytes (bf16) = 256 B per token per layer, 512 B per token.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "models/cost_model.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"

using namespace servesim;

namespace {

models::ChipSpec nic_chip() {
  models::ChipSpec c = test::ideal_chip();
  c.scale_up_domain = 1;
  c.scale_out_bandwidth = Bandwidth{1e9};
  return c;
}

cluster::SimulationConfig prefill_decode(int prefills = 1, int decodes = 1) {
  auto config = test::one_pool(test::tiny_model(), nic_chip(), prefills);
  config.pools[0].name = "prefill";
  config.pools[0].role = "prefill";
  config.pools[0].kind = cluster::PoolRole::kPrefill;
  cluster::PoolConfig d = config.pools[0];
  d.name = "decode";
  d.role = "decode";
  d.kind = cluster::PoolRole::kDecode;
  d.instances = decodes;
  d.router.policy = cluster::RouterPolicy::kFreeKv;
  config.pools.push_back(d);
  return config;
}

struct Run {
  metrics::RunMetrics m;
  cluster::RunResult result;
  metrics::Summary summary;
};

void run(const cluster::SimulationConfig& config, Run& out) {
  cluster::Simulation sim(config, out.m);
  sim.set_paranoid(true);
  out.result = sim.run();
  CHECK(sim.drained());
  out.summary = metrics::summarize(out.m, out.result.end, {});
}

double part(const metrics::Summary& s, const std::string& name) {
  for (const auto& [k, v] : s.ttft_breakdown_ms) if (k == name) return v;
  return 0;
}

}  // namespace

TEST_CASE("EPD: one request's TTFT is prefill + exposed KV transfer + the first decode step") {
  auto config = prefill_decode();
  config.workload = test::fixed_closed_loop(1, 1, 10, 3);
  Run r;
  run(config, r);
  const auto& rec = r.m.requests().at(0);
  // Prefill of 10 tokens: 163,840 x 10 + 2 x 256 x 10 x 10 + 12,800 = 1,702,400 ps.
  // KV: 10 tokens x 512 B = 5,120 B over a 1e9 B/s NIC = 5,120,000 ps, all exposed (after_prefill).
  // First decode step attends to 11 tokens: 163,840 + 2 x 256 x 11 + 12,800 = 182,272 ps.
  CHECK((rec.first_token - rec.arrival).ps() == 1'702'400 + 5'120'000 + 182'272);
  // Then two more steps (12 and 13 tokens): 182,784 + 183,296 ps.
  CHECK((rec.completion - rec.first_token).ps() == 182'784 + 183'296);
  CHECK(r.m.output_tokens() == 3);
  CHECK(part(r.summary, "prefill") == doctest::Approx(1'702'400e-9));
  CHECK(part(r.summary, "kv_transfer_exposed") == doctest::Approx(5'120'000e-9));
  CHECK(part(r.summary, "first_decode") == doctest::Approx(182'272e-9));
  CHECK(part(r.summary, "queueing") == 0);
  REQUIRE(r.summary.pools[0].kv_transfer);
  CHECK(r.summary.pools[0].kv_transfer->transfers == 1);
  CHECK(r.summary.pools[0].kv_transfer->bytes == 5120);
  CHECK(r.summary.pools[0].kv_transfer->mean_ms == doctest::Approx(5.12e-3));
  // 5,120,000 / 7,004,672 of its TTFT.
  CHECK(r.summary.pools[1].kv_transfer->overhead_fraction == doctest::Approx(5'120'000.0 / 7'004'672.0));
}

TEST_CASE("EPD: two transfers on one NIC take twice as long as one") {
  // Two requests prefilled together on the one prefill chip: both KV caches leave its NIC at once
  // and share its 1e9 B/s: 5,120 B each at 0.5e9 B/s = 10,240,000 ps (one alone: 5,120,000 ps).
  auto config = prefill_decode(1, 2);
  config.workload = test::fixed_closed_loop(2, 2, 10, 2);
  Run r;
  run(config, r);
  REQUIRE(r.summary.pools[0].kv_transfer);
  CHECK(r.summary.pools[0].kv_transfer->transfers == 2);
  CHECK(r.summary.pools[0].kv_transfer->mean_ms == doctest::Approx(10.24e-3));
  // One prefill iteration of two 10-token chunks: 3,404,800 ps; each then decodes alone on its
  // own decode instance (free KV placement spreads them): 182,272 ps.
  for (const auto& rec : r.m.requests()) {
    CHECK((rec.first_token - rec.arrival).ps() == 3'404'800 + 10'240'000 + 182'272);
  }
}

TEST_CASE("EPD: layer-streamed KV transfer hides all but the last layer's share behind the prefill") {
  auto config = prefill_decode();
  config.disaggregation.kv_transfer = cluster::KvTransferMode::kLayerStreamed;
  config.workload = test::fixed_closed_loop(1, 1, 10, 3);
  Run r;
  run(config, r);
  const auto& rec = r.m.requests().at(0);
  // The tiny model has 2 layers: the first layer's 2,560 B leave when the prefill starts, alone on
  // the NIC until the prefill ends at 1,702,400 ps (1,702.4 B sent, 857.6 B left); the last
  // layer's 2,560 B start then and share the NIC (0.5e9 B/s each) until the first is done at
  // 1,702,400 + 857.6 / 0.5e9 s = 3,417,600 ps; the last's remaining 1,702.4 B take 1,702,400 ps
  // alone: done at 5,120,000 ps (the NIC moved 5,120 B in 5,120,000 ps, never idle).
  // Exposed: 5,120,000 - 1,702,400 = 3,417,600 ps.
  CHECK((rec.first_token - rec.arrival).ps() == 5'120'000 + 182'272);
  CHECK(part(r.summary, "kv_transfer_exposed") == doctest::Approx(3'417'600e-9));
  CHECK(r.summary.pools[0].kv_transfer->mean_ms == doctest::Approx(5.12e-3));
}

TEST_CASE("EPD: the TTFT breakdown sums to the mean TTFT and the TPOT breakdown to the mean TPOT") {
  for (const bool streamed : {false, true}) {
    auto config = prefill_decode(2, 2);
    if (streamed) config.disaggregation.kv_transfer = cluster::KvTransferMode::kLayerStreamed;
    config.workload = workloads::single_class(
        workloads::PoissonArrivals{Frequency{2e4}},
        workloads::IndependentLengths{workloads::UniformLength{4, 600}, workloads::UniformLength{1, 40}},
        300);
    Run r;
    run(config, r);
    double ttft = 0, tpot = 0;
    for (const auto& [k, v] : r.summary.ttft_breakdown_ms) ttft += v;
    for (const auto& [k, v] : r.summary.tpot_breakdown_ms) tpot += v;
    CHECK(ttft == doctest::Approx(r.summary.ttft_ms.mean).epsilon(1e-9));
    CHECK(tpot == doctest::Approx(r.summary.tpot_ms.mean).epsilon(1e-9));
    CHECK(r.summary.completed == 300);
  }
}
