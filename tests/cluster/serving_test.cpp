// The serving model against values derived by hand on the tiny model and the ideal chip of
// test_config.h (every operator compute-bound at 1e12 FLOP/s, so F FLOPs take F picoseconds).
//
// FLOPs of the tiny model (h = 64, hq = hkv = 4, hd = 16, ffn = 128, vocab 100, 2 layers), per layer
// for T new tokens (models/operators.cpp):
//   QKV  2 T h (hq + 2 hkv) hd = 2 T 64 192 = 24,576 T
//   O    2 T (hq hd) h        = 2 T 64 64  =  8,192 T
//   MLP  2 T h 2ffn + 2 T ffn h = 32,768 T + 16,384 T = 49,152 T
//   linear total 81,920 T per layer, 163,840 T for both layers
//   attention prefill 4 hd hq c (p + c) = 256 c (p + c); decode 4 hd hq kv = 256 kv (kv includes
//   the new token)
//   LM head 2 L h vocab = 12,800 L for L sampled sequences
#include <doctest/doctest.h>

#include <vector>

#include "sim/cluster/batch_scheduler.h"
#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"

using namespace servesim;

namespace {

struct Recorded {
  metrics::RunMetrics metrics;
  cluster::RunResult result;
};

cluster::RunResult run(const cluster::SimulationConfig& config, metrics::RunMetrics& m) {
  cluster::Simulation sim(config, m);
  sim.set_paranoid(true);
  auto r = sim.run();
  CHECK(sim.drained());
  return r;
}

}  // namespace

TEST_CASE("Serving: one request's TTFT is one prefill iteration and each later token one decode step") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.workload = test::fixed_closed_loop(1, 1, 10, 3);
  metrics::RunMetrics m;
  run(config, m);
  const auto& r = m.requests().at(0);
  // Prefill of 10 tokens: 163,840 x 10 + 2 x 256 x 10 x (0 + 10) + 12,800 = 1,702,400 ps.
  CHECK((r.first_token - r.arrival).ps() == 1'702'400);
  // Decode step 1 attends to 11 tokens: 163,840 + 2 x 256 x 11 + 12,800 = 182,272 ps;
  // step 2 to 12 tokens: 163,840 + 2 x 256 x 12 + 12,800 = 182,784 ps.
  CHECK((r.completion - r.first_token).ps() == 182'272 + 182'784);
  CHECK(r.status == metrics::RequestStatus::kCompleted);
  const auto s = metrics::summarize(m, r.completion, {});
  // TPOT = (182,272 + 182,784) / 2 ps = 182.528 ns.
  CHECK(s.tpot_ms.mean == approx(182'528e-9).epsilon(1e-12));
  CHECK(s.completed == 1);
  // Three tokens were emitted: the prefill's and two decode steps'.
  CHECK(m.output_tokens() == 3);
}

TEST_CASE("Serving: requests that arrive together are prefilled in one batch") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.workload = test::fixed_closed_loop(2, 2, 10, 1);
  metrics::RunMetrics m;
  run(config, m);
  // One iteration with two 10-token chunks: 163,840 x 20 + 2 x 256 x (100 + 100) + 2 x 12,800
  // = 3,404,800 ps; both get their (only) token at its end.
  for (const auto& r : m.requests()) {
    CHECK((r.first_token - r.arrival).ps() == 3'404'800);
    CHECK(r.completion == r.first_token);
  }
}

TEST_CASE("Serving: a prompt longer than the token budget is prefilled in chunks") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].scheduler.max_batched_tokens = 64;
  config.workload = test::fixed_closed_loop(1, 1, 100, 1);
  metrics::RunMetrics m;
  run(config, m);
  // Chunks of 64 then 36 tokens: 163,840 x 64 + 2 x 256 x 64 x 64 = 12,582,912 ps, then
  // 163,840 x 36 + 2 x 256 x 36 x 100 + 12,800 (the last chunk samples) = 7,754,240 ps.
  const auto& r = m.requests().at(0);
  CHECK((r.first_token - r.arrival).ps() == 12'582'912 + 7'754'240);
}

TEST_CASE("Serving: the whole-prompt policy stalls decodes while it prefills") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].scheduler.policy = cluster::SchedulerPolicy::kWholePrompt;
  config.pools[0].scheduler.max_batched_tokens = 4096;
  config.workload = test::fixed_closed_loop(1, 1, 10, 2);
  metrics::RunMetrics m;
  run(config, m);
  // Same single request as the first test, one decode step: prefill 1,702,400 ps, decode 182,272.
  const auto& r = m.requests().at(0);
  CHECK((r.completion - r.arrival).ps() == 1'702'400 + 182'272);
}

TEST_CASE("Serving: requests longer than max_model_len are rejected with a reason") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].max_model_len = 100;
  config.workload = test::fixed_closed_loop(1, 3, 90, 20);
  metrics::RunMetrics m;
  run(config, m);
  const auto s = metrics::summarize(m, SimTime::zero(), {});
  CHECK(s.arrived == 3);
  CHECK(s.rejected == 3);
  CHECK(s.rejected_by_reason[static_cast<std::size_t>(metrics::RejectReason::kExceedsMaxModelLen)] == 3);
}

TEST_CASE("Serving: a full waiting queue rejects the next request") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].scheduler.max_queue = 2;
  // Five clients arrive at once: the first two wait (the instance has not formed a batch yet),
  // the next three find the queue full.
  config.workload = test::fixed_closed_loop(5, 5, 10, 1);
  metrics::RunMetrics m;
  run(config, m);
  const auto s = metrics::summarize(m, SimTime::zero(), {});
  CHECK(s.completed == 2);
  CHECK(s.rejected_by_reason[static_cast<std::size_t>(metrics::RejectReason::kQueueFull)] == 3);
}

TEST_CASE("Serving: a horizon leaves unfinished requests in flight and the counts add up") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.workload = test::fixed_closed_loop(4, 100, 10, 50);
  config.horizon = Duration::picoseconds(20'000'000);
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  const auto r = sim.run();
  CHECK(r.reached_horizon);
  const auto s = metrics::summarize(m, r.end, {});
  CHECK(s.in_flight > 0);
  CHECK(s.arrived == s.completed + s.rejected + s.in_flight);
}

TEST_CASE("Serving: pipeline stages hand batches on, so two lanes overlap") {
  // pp = 2: one layer per stage, a queue per lane. Two requests go to different lanes (fewest
  // unfinished) and their prefills overlap: lane 0 runs stage 0 in [0, a] and stage 1 in
  // [a, a + b]; lane 1 starts stage 0 at a, when it frees, and stage 1 at a + b, when lane 0 is done
  // with it (a < b).
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].plan.pp = 2;
  config.pools[0].scheduler.pipeline_queue = cluster::PipelineQueue::kPerLane;
  config.workload = test::fixed_closed_loop(2, 2, 10, 1);
  metrics::RunMetrics m;
  run(config, m);
  // Stage 0: one layer, 81,920 x 10 + 256 x 10 x 10 = 844,800 ps, plus the p2p send of
  // 10 x 64 x 2 bytes at 1e30 B/s (0 ps). Stage 1: 844,800 + 12,800 (LM head) = 857,600 ps.
  const auto& a = m.requests().at(0);
  const auto& b = m.requests().at(1);
  CHECK((a.first_token - a.arrival).ps() == 844'800 + 857'600);
  CHECK((b.first_token - b.arrival).ps() == 844'800 + 857'600 + 857'600);
}

TEST_CASE("Serving: with a shared queue the lane that forms first admits what its budget takes") {
  // pp = 2, three 10-token prompts at once, one token out each, a 30-token budget. Per lane, they
  // wait on lanes 0, 1, 0 (fewest unfinished, ties rotating): lane 0 runs requests 0 and 2, lane 1
  // request 1 after it. Shared (Sarathi-Serve, vLLM V1), lane 0 is lent the whole queue (10, 20,
  // 30 tokens: the third reaches the budget) and runs all three as one batch.
  for (const bool shared : {false, true}) {
    CAPTURE(shared);
    auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
    config.pools[0].plan.pp = 2;
    config.pools[0].scheduler.max_batched_tokens = 30;
    config.pools[0].scheduler.pipeline_queue =
        shared ? cluster::PipelineQueue::kShared : cluster::PipelineQueue::kPerLane;
    config.workload = test::fixed_closed_loop(3, 3, 10, 1);
    metrics::RunMetrics m;
    run(config, m);
    const auto ttft = [&](int i) {
      return (m.requests().at(static_cast<std::size_t>(i)).first_token - SimTime::zero()).ps();
    };
    if (shared) {
      // One layer per stage (the test above): stage 0 = 81,920 x 30 + 256 x 3 x 10 x 10 =
      // 2,534,400 ps; stage 1 adds the LM head, 12,800 per sequence: 2,572,800.
      for (int i = 0; i < 3; ++i) CHECK(ttft(i) == 2'534'400 + 2'572'800);
    } else {
      // Lane 0 (two prompts): stage 0 = 81,920 x 20 + 256 x 2 x 10 x 10 = 1,689,600, stage 1
      // 1,715,200. Lane 1 (one): stage 0 from 1,689,600 (844,800), stage 1 from 3,404,800, when
      // lane 0 leaves it (857,600).
      CHECK(ttft(0) == 1'689'600 + 1'715'200);
      CHECK(ttft(2) == 1'689'600 + 1'715'200);
      CHECK(ttft(1) == 1'689'600 + 1'715'200 + 857'600);
    }
  }
}

TEST_CASE("Lane: a decode step short of KV blocks preempts the most recently admitted request") {
  // Blocks of 4 tokens, 4 blocks. Requests 0 and 1 have 4-token prompts (1 block each) and long
  // outputs; admitted in that order. Each decode step appends one token per request.
  cluster::RequestTable reqs;
  for (int i = 0; i < 2; ++i) {
    cluster::RequestState r;
    r.prompt = 4;
    r.output = 100;
    r.prefill_target = 4;
    reqs.add(r);
  }
  cluster::Lane lane(&reqs, /*total_blocks=*/4, /*block_tokens=*/4, /*watermark_blocks=*/0,
                     /*max_running=*/8);
  cluster::SarathiBatchScheduler sched(64);
  std::vector<cluster::Preemption> preempted;
  lane.enqueue_back(RequestId(0));
  lane.enqueue_back(RequestId(1));
  cluster::Batch batch;
  sched.form_batch(lane, batch, preempted);
  REQUIRE(batch.chunks.size() == 2);
  CHECK(lane.used_blocks() == 2);
  for (const auto& c : batch.chunks) {
    REQUIRE(lane.finish_chunk(c));
    reqs[c.request].generated = 1;  // the prefill's token (the simulation does this)
    lane.join_decode(c.request, SimTime::zero());
  }
  // Step 0: both contexts are 4 tokens = full blocks, so each needs a new block: 2 + 2 = 4 used.
  batch.clear();
  sched.form_batch(lane, batch, preempted);
  CHECK(batch.decodes == 2);
  CHECK(preempted.empty());
  CHECK(lane.used_blocks() == 4);
  std::vector<RequestId> finished;
  lane.finish_decode_step(finished);
  lane.check_invariants();
  // Steps 1-3 fill the second blocks (contexts 5..8) without new blocks.
  for (int step = 1; step <= 3; ++step) {
    batch.clear();
    sched.form_batch(lane, batch, preempted);
    lane.finish_decode_step(finished);
  }
  CHECK(preempted.empty());
  CHECK(lane.used_blocks() == 4);
  // Step 4: contexts are 8 = two full blocks each; two more blocks are needed and none is free.
  // Request 1 (admitted last) is preempted, freeing its 2 blocks; request 0 takes one.
  batch.clear();
  sched.form_batch(lane, batch, preempted);
  REQUIRE(preempted.size() == 1);
  CHECK(preempted[0].request == RequestId(1));
  // It had produced 1 + 4 tokens over a 4-token prompt: recompute prefills 4 + 5 = 9 tokens.
  CHECK(preempted[0].lost_tokens == 9);
  CHECK(reqs[RequestId(1)].prefill_target == 9);
  CHECK(batch.decodes == 1);
  CHECK(lane.used_blocks() == 3);
  // The preempted request is back at the head of the queue; 9 tokens need 3 blocks, 1 is free.
  CHECK(lane.waiting() == 1);
  CHECK(batch.chunks.empty());
  lane.finish_decode_step(finished);
  lane.check_invariants();
}

TEST_CASE("Lane: lanes sharing a KV pool take what the other leaves, and preempt their own") {
  // Blocks of 4 tokens; two lanes share 6 blocks (pipeline_queue: shared), where each lane of
  // its own would have 3. Request 0 (16-token prompt, 4 blocks) goes to lane 0, request 1 (7
  // tokens, 2 blocks) to lane 1.
  cluster::RequestTable reqs;
  for (const std::uint32_t prompt : {16U, 7U}) {
    cluster::RequestState r;
    r.prompt = prompt;
    r.output = 100;
    r.prefill_target = prompt;
    reqs.add(r);
  }
  cluster::KvPool pool{6};
  cluster::Lane lane0(&reqs, /*total_blocks=*/3, /*block_tokens=*/4, /*watermark_blocks=*/0, /*max_running=*/8);
  cluster::Lane lane1(&reqs, 3, 4, 0, 8);
  lane0.share_blocks(&pool, 0);
  lane1.share_blocks(&pool, 0);
  cluster::SarathiBatchScheduler sched(64);
  std::vector<cluster::Preemption> preempted;
  std::vector<RequestId> finished;
  cluster::Batch batch0, batch1;
  lane0.enqueue_back(RequestId(0));
  lane1.enqueue_back(RequestId(1));
  // 4 blocks for request 0: more than a lane of its own has, admitted from the pool.
  sched.form_batch(lane0, batch0, preempted);
  REQUIRE(batch0.chunks.size() == 1);
  CHECK(lane0.used_blocks() == 4);
  CHECK(lane1.free_blocks() == 2);  // the pool's, seen from either lane
  sched.form_batch(lane1, batch1, preempted);
  REQUIRE(batch1.chunks.size() == 1);
  CHECK(lane1.used_blocks() == 2);
  CHECK(pool.used == 6);
  CHECK(lane0.free_blocks() == 0);
  CHECK(lane0.peak_used_blocks() == 6);  // the pool's peak
  CHECK(lane0.total_blocks() == 6);
  for (auto [lane, batch] : {std::pair{&lane0, &batch0}, std::pair{&lane1, &batch1}}) {
    REQUIRE(lane->finish_chunk(batch->chunks[0]));
    reqs[batch->chunks[0].request].generated = 1;
    lane->join_decode(batch->chunks[0].request, SimTime::zero());
  }
  // Lane 1's first decode step: context 7 -> 8 stays in its 2 blocks. Its second (context 8, two
  // full blocks) needs a third block, and the pool has none: lane 1 preempts its own request;
  // lane 0's request keeps its 4 blocks.
  batch1.clear();
  sched.form_batch(lane1, batch1, preempted);
  CHECK(batch1.decodes == 1);
  CHECK(preempted.empty());
  lane1.finish_decode_step(finished);
  batch1.clear();
  sched.form_batch(lane1, batch1, preempted);
  REQUIRE(preempted.size() == 1);
  CHECK(preempted[0].request == RequestId(1));
  CHECK(lane1.used_blocks() == 0);
  CHECK(lane0.used_blocks() == 4);
  CHECK(pool.used == 4);
  // Recompute: 7 + 2 tokens = 3 blocks, and the pool has 2 free: it waits.
  CHECK(lane1.waiting() == 1);
  CHECK(batch1.empty());
  lane0.check_invariants();
  lane1.check_invariants();
  // A failure empties lane 0: its part of the pool is freed, lane 1's stays.
  std::vector<RequestId> evicted;
  lane0.evict_all(evicted);
  CHECK(evicted == std::vector<RequestId>{RequestId(0)});
  CHECK(pool.used == 0);
  CHECK(lane1.free_blocks() == 6);
}

TEST_CASE("Router: least-loaded picks the minimum and rotates among ties") {
  cluster::LoadLedger loads(4, cluster::LoadUnit::kTokens, /*ordered=*/true);
  cluster::LeastLoadedRouter r;
  const cluster::RouteQuery q{loads};
  // All idle: ties rotate 0, 1, 2, 3, 0 instead of always 0.
  std::vector<std::uint32_t> picks;
  for (int i = 0; i < 5; ++i) picks.push_back(r.pick(q));
  CHECK(picks == std::vector<std::uint32_t>{0, 1, 2, 3, 0});
  loads.routed(0, 10);
  loads.routed(1, 5);
  loads.routed(2, 5);
  loads.routed(3, 7);
  // Minimum 5 tokens on 1 and 2; the cursor is after 0, so 1 first, then 2.
  CHECK(r.pick(q) == 1);
  CHECK(r.pick(q) == 2);
  loads.worked(2, 5);
  CHECK(r.pick(q) == 2);
}

TEST_CASE("Router: round-robin cycles through the instances") {
  cluster::LoadLedger loads(3, cluster::LoadUnit::kRequests, /*ordered=*/false);
  cluster::RoundRobinRouter r;
  const cluster::RouteQuery q{loads};
  CHECK(r.pick(q) == 0);
  CHECK(r.pick(q) == 1);
  CHECK(r.pick(q) == 2);
  CHECK(r.pick(q) == 0);
}
