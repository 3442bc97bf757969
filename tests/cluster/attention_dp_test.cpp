// Attention-DP per-rank batches (config.h AttentionDpBalance, Lane::enable_rank_balance,
// IterationCostModel::cost's busiest shape) against values derived by hand on the tiny model and
// the ideal chip of test_config.h (every operator takes its FLOPs in ps), with dp = 2.
//
// Tiny-model decode attention: 4 hd hq = 256 FLOPs per key per layer and chip, with the keys of
// the step's shape divided over the dp x cp = 2 ranks. Two layers.
#include <doctest/doctest.h>

#include "sim/cluster/lane.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"

using namespace servesim;

namespace {

struct Run {
  metrics::RunMetrics m;
  std::int64_t imbalance_ps = 0;
  std::int64_t attention_ps = 0;
};

void run(cluster::AttentionDpBalance balance, int requests, Run& r) {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].plan.dp = 2;
  config.pools[0].attention_dp = balance;
  config.workload = test::fixed_closed_loop(requests, requests, 8, 5);
  cluster::Simulation sim(config, r.m);
  sim.set_paranoid(true);  // per-rank counts and contexts = their recomputation, every event
  sim.run();
  CHECK(sim.drained());
  const auto& c = r.m.pools()[0].component_ps;
  r.imbalance_ps = c[static_cast<std::size_t>(models::OpKind::kImbalance)];
  r.attention_ps = c[static_cast<std::size_t>(models::OpKind::kAttentionDecode)];
}

}  // namespace

TEST_CASE("Attention DP: one request on two ranks, its rank attends over all of its context") {
  // Prompt 8, output 5: 4 decode steps, step j over 9 + j keys (its KV and new token). Even
  // split: each rank 256 x (9 + j) / 2 per layer; per rank, its rank does 256 x (9 + j): the
  // excess is 128 (9 + j) per layer, 256 (9 + j) per step, 256 x (9 + 10 + 11 + 12) = 10,752 ps
  // in all, by which the request finishes later.
  Run even, ranked;
  run(cluster::AttentionDpBalance::kEven, 1, even);
  run(cluster::AttentionDpBalance::kLeastKv, 1, ranked);
  CHECK(even.imbalance_ps == 0);
  CHECK(ranked.imbalance_ps == 10'752);
  CHECK(ranked.attention_ps == even.attention_ps);  // the even share stays attention_decode
  CHECK((ranked.m.requests().at(0).completion - even.m.requests().at(0).completion).ps() == 10'752);
}

TEST_CASE("Attention DP: three requests on two ranks, the rank holding two sets the time") {
  // Three equal requests join together: least_kv puts them on ranks 0, 1, 0 (ties to the lowest;
  // round-robin the same). Step j: rank 0 reads 2 (9 + j) keys, the even split 3 (9 + j) / 2 per
  // rank: the excess is 256 x (9 + j) / 2 per layer, 256 (9 + j) per step, 10,752 ps in all.
  // (Had all three gone to one rank: 256 x 1.5 (9 + j) x 2 = 768 (9 + j) per step.)
  for (const auto balance : {cluster::AttentionDpBalance::kLeastKv, cluster::AttentionDpBalance::kRoundRobin}) {
    Run even, ranked;
    run(cluster::AttentionDpBalance::kEven, 3, even);
    run(balance, 3, ranked);
    CHECK(ranked.imbalance_ps == 10'752);
    CHECK(ranked.m.output_tokens() == even.m.output_tokens());
  }
}

TEST_CASE("Attention DP: least_kv joins the rank with the fewest KV tokens, round_robin the next") {
  // Contexts 100, 10, 10 join in that order. least_kv: 100 -> rank 0, 10 -> rank 1, 10 -> rank 1
  // (10 < 100): rank 0 reads 101 keys, rank 1 22. round_robin: ranks 0, 1, 0: rank 0 reads
  // 100 + 10 + 2 = 112, rank 1 11. The busiest shape is that rank's keys and queries times 2.
  for (const bool least_kv : {true, false}) {
    CAPTURE(least_kv);
    cluster::RequestTable requests;
    const std::uint32_t contexts[3] = {100, 10, 10};
    for (const std::uint32_t context : contexts) {
      cluster::RequestState s;
      s.prompt = s.prefill_target = s.prefilled = context;
      s.output = 50;
      s.generated = 1;
      requests.add(s);
    }
    cluster::Lane lane(&requests, 1000, 16, 0, 8);
    lane.enable_rank_balance(2, least_kv);
    for (std::uint32_t r = 0; r < 3; ++r) lane.join_decode(RequestId(r), SimTime::zero());
    cluster::Batch batch;
    batch.decodes = 3;
    const models::BatchShape b = lane.shape(batch);
    CHECK(b.decode_kv_tokens == 123);  // 120 of KV + 3 new
    models::BatchShape busy;
    REQUIRE(lane.decode_set().busiest_rank_shape(b, batch.decodes, busy));
    CHECK(busy.decode_kv_tokens == (least_kv ? 2 * 101 : 2 * 112));
    CHECK(busy.decode_seqs == (least_kv ? 2 * 1 : 2 * 2));
    CHECK(busy.prefill_tokens == b.prefill_tokens);
  }
}
