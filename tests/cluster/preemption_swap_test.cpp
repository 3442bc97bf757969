// Swap preemption against values derived by hand on the tiny model and the ideal chip of
// test_config.h: the tiny model's KV is 2 layers x 2 (K, V) x 4 heads x 16 dims x 2 bytes = 512 B
// per token, so over a 1 GB/s host link a token's KV takes 512 ns each way.
#include <doctest/doctest.h>

#include "models/memory.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"

using namespace servesim;

namespace {

// One instance whose lane has exactly 8 blocks of 4 tokens, two requests of 8 prompt and 20
// output tokens arriving together, a batch cap of 2.
cluster::SimulationConfig tight(cluster::PreemptionMode mode) {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  cluster::PoolConfig& p = config.pools[0];
  p.kv_cache.block_tokens = 4;
  p.kv_cache.watermark = 0;
  p.scheduler.max_batch_size = 2;
  p.scheduler.preemption = mode;
  p.chip.host_bandwidth = Bandwidth{1e9};
  test::size_kv_tokens(p, config.model, 33.0);  // 33 tokens of KV: 8 whole blocks
  config.workload = test::fixed_closed_loop(2, 2, 8, 20);
  return config;
}

}  // namespace

TEST_CASE("Swap preemption: the victim's KV goes to the host and back, costed on the host link") {
  for (const auto mode : {cluster::PreemptionMode::kSwap, cluster::PreemptionMode::kRecompute}) {
    const bool swap = mode == cluster::PreemptionMode::kSwap;
    CAPTURE(swap);
    const auto config = tight(mode);
    REQUIRE(cluster::pool_capacity(config.model, config.pools[0]).blocks_per_lane == 8);
    metrics::RunMetrics m;
    cluster::Simulation sim(config, m);
    sim.set_paranoid(true);
    const auto result = sim.run();
    CHECK(sim.drained());
    // Both prefill together (2 blocks each) and join the decode set with 8 tokens of context.
    // Decode step s needs a block per request when (8 + s) mod 4 = 0: steps 0 and 4 fill the
    // 8 blocks; step 8 needs 2 more, so the most recently admitted request (1) is preempted
    // after 8 steps: 9 tokens emitted, 17 tokens of context, of which 16 have KV.
    CHECK(m.requests().at(0).preemptions == 0);
    CHECK(m.requests().at(1).preemptions == 1);
    CHECK(m.output_tokens() == 40);
    // Request 1 needs ceil(17 / 4) = 5 blocks; request 0 holds 5-7 until its last step (18),
    // so request 1 comes back right after request 0 finishes. Swapped: 16 tokens out in the
    // preempting step, 16 back in its re-admission: 32 x 512 B / 1e9 B/s = 16,384,000 ps of
    // `swap`; its re-admission computes one token (the next one) instead of 17.
    const auto& totals = m.pools()[0];
    const auto swap_ps = totals.component_ps[static_cast<std::size_t>(models::OpKind::kSwap)];
    CHECK(swap_ps == (swap ? 16'384'000 : 0));
    const auto s = metrics::summarize(m, result.end, {});
    CHECK(s.completed == 2);
  }
}

TEST_CASE("Swap preemption: the re-admission step is the swap-in plus a one-token chunk") {
  // Request 1's first iteration after request 0 finished: its 16 tokens of KV come back
  // (16 x 512,000 = 8,192,000 ps) and its 17th token is computed attending over 17:
  // 163,840 + 2 x 256 x 17 + 12,800 = 185,344 ps. Under recompute the same iteration prefills
  // all 17: 163,840 x 17 + 2 x 256 x 17 x 17 + 12,800 = 2,785,280 + 147,968 + 12,800
  // = 2,946,048 ps. Its completion comes after that iteration and its 10 remaining decode
  // steps, which are the same in both modes, and request 0 finishes 8,192,000 ps later under swap
  // (the swap-out lengthened its step 8): so request 1's completion moves by
  // 8,192,000 (out) + 8,192,000 + 185,344 - 2,946,048 (re-admission) = 13,623,296 ps.
  metrics::RunMetrics ms, mr;
  cluster::Simulation(tight(cluster::PreemptionMode::kSwap), ms).run();
  cluster::Simulation(tight(cluster::PreemptionMode::kRecompute), mr).run();
  const auto& a = ms.requests().at(0);
  const auto& b = mr.requests().at(0);
  CHECK((a.completion - b.completion).ps() == 8'192'000);
  CHECK((ms.requests().at(1).completion - mr.requests().at(1).completion).ps() == 13'623'296);
}
