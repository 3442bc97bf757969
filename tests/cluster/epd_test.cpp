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
#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"

using namespace servesim;

namespace {

cluster::SimulationConfig prefill_decode(int prefills = 1, int decodes = 1) {
  return test::prefill_decode(test::tiny_model(), prefills, decodes);
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
  for (const auto& [k, v] : s.ttft_breakdown_ms)
    if (k == name) return v;
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
  CHECK(part(r.summary, "prefill") == approx(1'702'400e-9));
  CHECK(part(r.summary, "kv_transfer_exposed") == approx(5'120'000e-9));
  CHECK(part(r.summary, "first_decode") == approx(182'272e-9));
  CHECK(part(r.summary, "queueing") == 0);
  REQUIRE(r.summary.pools[0].kv_transfer);
  CHECK(r.summary.pools[0].kv_transfer->transfers == 1);
  CHECK(r.summary.pools[0].kv_transfer->bytes == 5120);
  CHECK(r.summary.pools[0].kv_transfer->mean_ms == approx(5.12e-3));
  // 5,120,000 / 7,004,672 of its TTFT.
  CHECK(r.summary.pools[1].kv_transfer->overhead_fraction == approx(5'120'000.0 / 7'004'672.0));
}

TEST_CASE("EPD: the engine's KV hand-off comes before the data moves, and is exposed with it") {
  // The same request as above with a 3 us hand-off (DisaggregationConfig::kv_setup): the KV
  // starts moving 3,000,000 ps after the prefill ends; nothing else changes.
  auto config = prefill_decode();
  config.workload = test::fixed_closed_loop(1, 1, 10, 3);
  config.disaggregation.kv_setup = Duration::microseconds(3);
  Run r;
  run(config, r);
  const auto& rec = r.m.requests().at(0);
  CHECK((rec.first_token - rec.arrival).ps() == 1'702'400 + 3'000'000 + 5'120'000 + 182'272);
  CHECK(part(r.summary, "kv_transfer_exposed") == approx(8'120'000e-9));
  // Layer-streamed: the hand-off starts with the first chunk; the bulk that was to move during
  // the 1,702,400 ps prefill waits for it, and the whole transfer ends 3,000,000 + 5,120,000 ps
  // after the prefill started (the last layer's share joins it).
  config.disaggregation.kv_transfer = cluster::KvTransferMode::kLayerStreamed;
  Run s;
  run(config, s);
  const auto& srec = s.m.requests().at(0);
  CHECK((srec.first_token - srec.arrival).ps() == 3'000'000 + 5'120'000 + 182'272);
}

TEST_CASE("EPD: a held first response answers after the k-th decode step, with its tokens") {
  // The request of the first case (10-token prompt, 3 tokens out) on a decode pool that answers
  // after its second step (SchedulerConfig::first_response_step, TensorRT-LLM's generation
  // server): TTFT gains the second step (12 tokens: 182,784 ps); tokens 1 and 2 arrive together
  // (one gap of 0) and the last step (13 tokens: 183,296 ps) follows. E2E is unchanged.
  auto config = prefill_decode();
  config.workload = test::fixed_closed_loop(1, 1, 10, 3);
  config.pools[1].scheduler.first_response_step = 2;
  Run r;
  run(config, r);
  const auto& rec = r.m.requests().at(0);
  CHECK((rec.first_token - rec.arrival).ps() == 1'702'400 + 5'120'000 + 182'272 + 182'784);
  CHECK((rec.completion - rec.first_token).ps() == 183'296);
  CHECK(part(r.summary, "first_decode") == approx((182'272 + 182'784) * 1e-9));
  CHECK(r.m.output_tokens() == 3);
  // Gaps: 0 (token 2 with token 1) and 183,296 ps (token 3): output - 1 of them.
  CHECK(r.m.inter_token_gaps().count() == 2);
  CHECK(r.m.inter_token_gaps().mean() == approx(183'296e-12 / 2));

  SUBCASE("a request with fewer tokens left answers at its last step") {
    // k = 5 and 3 tokens: the three steps' tokens arrive when the third step ends.
    config.pools[1].scheduler.first_response_step = 5;
    Run s;
    run(config, s);
    const auto& srec = s.m.requests().at(0);
    CHECK((srec.first_token - srec.arrival).ps() == 1'702'400 + 5'120'000 + 182'272 + 182'784 + 183'296);
    CHECK(srec.completion == srec.first_token);
    CHECK(s.m.inter_token_gaps().count() == 2);
    CHECK(s.m.inter_token_gaps().mean() == 0);
  }
}

TEST_CASE("EPD: a decode pool that answers on admission emits the prefill's token before any step") {
  // The request of the first case on a decode pool with first_response_step 0 (SGLang's prebuilt
  // batch): the first token reaches the client when the KV has arrived and the request is
  // admitted, so TTFT is prefill + transfer; the two decode steps (11 and 12 tokens of context:
  // 182,272 and 182,784 ps) produce tokens 2 and 3, one step fewer than with k = 1.
  auto config = prefill_decode();
  config.workload = test::fixed_closed_loop(1, 1, 10, 3);
  config.pools[1].scheduler.first_response_step = 0;
  Run r;
  run(config, r);
  const auto& rec = r.m.requests().at(0);
  CHECK((rec.first_token - rec.arrival).ps() == 1'702'400 + 5'120'000);
  CHECK((rec.completion - rec.first_token).ps() == 182'272 + 182'784);
  CHECK(part(r.summary, "first_decode") == 0);
  CHECK(r.m.output_tokens() == 3);
  CHECK(r.m.inter_token_gaps().count() == 2);

  SUBCASE("a request of one token is done on admission") {
    config.workload = test::fixed_closed_loop(1, 2, 10, 1);
    Run s;
    run(config, s);
    CHECK(s.summary.completed == 2);
    for (const auto& rec1 : s.m.requests()) CHECK(rec1.completion == rec1.first_token);
    CHECK(s.m.output_tokens() == 2);
  }
}

TEST_CASE("EPD: held first responses under load keep every request's tokens and gaps") {
  // Many requests through two decode instances, with decode runs allowed: each request's TTFT
  // holds at least two decode steps after its KV arrived, and every request records output - 1
  // gaps (with k = 1 as well, the same count), so no token is lost or counted twice.
  for (const int k : {0, 1, 2, 3}) {
    CAPTURE(k);
    auto config = prefill_decode(1, 2);
    config.workload = test::fixed_closed_loop(8, 64, 10, 6);
    config.pools[1].scheduler.first_response_step = k;
    config.decode_steps_per_event = 16;
    Run r;
    run(config, r);
    CHECK(r.summary.completed == 64);
    CHECK(r.m.output_tokens() == 64 * 6);
    CHECK(r.m.inter_token_gaps().count() == 64 * 5);
    for (const auto& rec : r.m.requests()) {
      CHECK(rec.first_token <= rec.completion);
      // k decode steps of at least 182,272 ps each after the 5,120,000 ps transfer.
      CHECK((rec.first_token - rec.arrival).ps() >= 1'702'400 + 5'120'000 + k * 182'272);
    }
  }
}

TEST_CASE("EPD: a request preempted before its held first response answers once, when recomputed") {
  // A decode lane of 8 blocks of 4 tokens and two 10-token prompts with 20 tokens out: both join
  // with 3 blocks; at 16 tokens each the lane is full and the next step preempts the later one
  // (recompute) after 6 steps, before its first response (k = 8). Its tokens reach the client
  // when its recompute prefill ends, with that prefill's token, so each request still has one
  // first token and 19 gaps, and the paranoid run's invariants hold.
  auto config = prefill_decode();
  config.workload = test::fixed_closed_loop(2, 2, 10, 20);
  cluster::PoolConfig& d = config.pools[1];
  d.kv_cache.block_tokens = 4;
  d.kv_cache.watermark = 0;
  d.scheduler.max_batch_size = 2;
  d.scheduler.first_response_step = 8;
  test::size_kv_tokens(d, config.model, 33.0);
  REQUIRE(cluster::pool_capacity(config.model, d).blocks_per_lane == 8);
  Run r;
  run(config, r);
  CHECK(r.summary.completed == 2);
  CHECK(r.m.output_tokens() == 40);
  CHECK(r.m.inter_token_gaps().count() == 38);
  const auto& recs = r.m.requests();
  REQUIRE(recs.size() == 2);
  CHECK((recs[0].preemptions + recs[1].preemptions) >= 1);
  for (const auto& rec : recs) CHECK(rec.first_token <= rec.completion);
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
  CHECK(r.summary.pools[0].kv_transfer->mean_ms == approx(10.24e-3));
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
  CHECK(part(r.summary, "kv_transfer_exposed") == approx(3'417'600e-9));
  CHECK(r.summary.pools[0].kv_transfer->mean_ms == approx(5.12e-3));
}

TEST_CASE("EPD: a request no decode lane could hold is rejected, streamed or not, and nothing waits") {
  // The decode pool's KV holds about 64 tokens; each request wants 10 + 100. The prefill pool
  // admits it, and its 10-token prompt would fit a decode lane at the prefill's start (where a
  // layer-streamed transfer is placed), but its output never would: rejected for capacity.
  for (const bool streamed : {false, true}) {
    CAPTURE(streamed);
    auto config = prefill_decode();
    if (streamed) config.disaggregation.kv_transfer = cluster::KvTransferMode::kLayerStreamed;
    for (auto& p : config.pools) p.max_model_len = 4096;
    test::size_kv_tokens(config.pools[1], test::tiny_model(), 64);
    config.workload = test::fixed_closed_loop(1, 2, 10, 100);
    Run r;
    run(config, r);  // drained: nothing left waiting for a placement
    CHECK(r.summary.completed == 0);
    CHECK(r.summary.rejected_by_reason[static_cast<std::size_t>(metrics::RejectReason::kNoCapacity)] == 2);
  }
}

TEST_CASE("EPD: the TTFT breakdown sums to the mean TTFT and the TPOT breakdown to the mean TPOT") {
  for (const bool streamed : {false, true}) {
    auto config = prefill_decode(2, 2);
    if (streamed) config.disaggregation.kv_transfer = cluster::KvTransferMode::kLayerStreamed;
    config.workload = workloads::single_class(
        workloads::PoissonArrivals{Frequency{2e4}},
        workloads::IndependentLengths{workloads::UniformLength{4, 600}, workloads::UniformLength{1, 40}}, 300);
    Run r;
    run(config, r);
    double ttft = 0, tpot = 0;
    for (const auto& [k, v] : r.summary.ttft_breakdown_ms) ttft += v;
    for (const auto& [k, v] : r.summary.tpot_breakdown_ms) tpot += v;
    CHECK(ttft == approx(r.summary.ttft_ms.mean).epsilon(1e-9));
    CHECK(tpot == approx(r.summary.tpot_ms.mean).epsilon(1e-9));
    CHECK(r.summary.completed == 300);
  }
}

TEST_CASE("EPD: an image request's TTFT is encode + embedding transfer + prefill + KV transfer + first decode") {
  auto config = prefill_decode();
  models::VisionSpec v;
  v.depth = 1;
  v.hidden = 32;
  v.heads = 2;
  v.intermediate = 64;
  v.window = 0;
  v.out_hidden = 64;
  config.model.vision = v;
  cluster::PoolConfig e = config.pools[0];
  e.name = "encode";
  e.role = "encode";
  e.kind = cluster::PoolRole::kEncode;
  e.router.policy = cluster::RouterPolicy::kRoundRobin;
  config.pools.insert(config.pools.begin(), e);
  config.workload = test::fixed_closed_loop(1, 1, 10, 2);
  workloads::ImageConfig images;
  images.choices.push_back(workloads::ImageChoice{56, 56, 1});
  config.workload.classes[0].images = images;
  Run r;
  run(config, r);
  const auto& rec = r.m.requests().at(0);
  // A 56 x 56 image is 4 x 4 patches of 14 pixels, merged 2 x 2: 4 prompt tokens (vision.h).
  REQUIRE(v.image_tokens(56, 56) == 4);
  // The encode batch costs what the models module says for this image on this chip.
  const auto cost = models::make_cost_model(config.pools[0].cost_model, config.pools[0].chip);
  const double enc_s = models::encode_seconds(v, {models::ImageSize{56, 56}}, 1, *cost);
  const auto encode_ps = static_cast<std::int64_t>(enc_s * 1e12 + 0.5);
  CHECK(encode_ps > 0);
  // Embeddings: 4 tokens x 64 hidden x 2 B = 512 B at 1e9 B/s = 512,000 ps.
  // Prefill of 10 + 4 = 14 tokens: 163,840 x 14 + 2 x 256 x 14 x 14 + 12,800 = 2,406,912 ps.
  // KV: 14 x 512 B = 7,168 B at 1e9 B/s = 7,168,000 ps.
  // First decode step attends to 15 tokens: 163,840 + 2 x 256 x 15 + 12,800 = 184,320 ps.
  // (Flow completions are rounded up to the picosecond: 512 B / 1e9 B/s in doubles is a hair
  // over 512,000 ps, so each transfer may end 1 ps late.)
  const std::int64_t expected = encode_ps + 512'000 + 2'406'912 + 7'168'000 + 184'320;
  CHECK((rec.first_token - rec.arrival).ps() >= expected);
  CHECK((rec.first_token - rec.arrival).ps() <= expected + 2);
  CHECK(part(r.summary, "encode") == approx(static_cast<double>(encode_ps) * 1e-9));
  CHECK(part(r.summary, "embedding_transfer") == approx(512'000e-9).epsilon(1e-5));
  CHECK(part(r.summary, "prefill") == approx(2'406'912e-9));
  CHECK(part(r.summary, "kv_transfer_exposed") == approx(7'168'000e-9));
  CHECK(part(r.summary, "first_decode") == approx(184'320e-9));
  CHECK(rec.status == metrics::RequestStatus::kCompleted);
}

namespace {

// One prefill and two decode instances on chips 0, 1, 2 of the default cluster; four requests
// arrive at once with 2,000 output tokens each (about 0.4 ms of decoding); decode instance 0's
// chip (chip 1) fails at 60 us, mid-decode.
cluster::SimulationConfig failing(cluster::FailurePolicy policy) {
  auto config = prefill_decode(1, 2);
  config.workload = test::fixed_closed_loop(4, 4, 10, 2000);
  config.cluster = cluster::default_cluster(config.pools);
  topologies::ScheduledFault f;
  f.target = topologies::FaultTarget{topologies::FaultKind::kChip, 1};
  f.at = SimTime::zero() + Duration::microseconds(60);
  config.cluster->faults.scheduled.push_back(f);
  config.failures.policy = policy;
  config.failures.repair = Duration::microseconds(100);
  return config;
}

}  // namespace

TEST_CASE("EPD: a failure loses or re-queues exactly the requests on the failed instance") {
  for (const auto policy : {cluster::FailurePolicy::kLose, cluster::FailurePolicy::kRequeue}) {
    CAPTURE(static_cast<int>(policy));
    const auto config = failing(policy);
    Run r;
    cluster::Simulation sim(config, r.m);
    sim.set_paranoid(true);
    r.result = sim.run();
    r.summary = metrics::summarize(r.m, r.result.end, {});
    // Decode instance 0 is instance 1 overall (after the prefill instance). Free-KV placement
    // alternates between the two decode instances, so two of the four requests were on it; none
    // had finished (each needs ~2,000 x 0.2 us = 0.4 ms of decoding) when it failed at 60 us.
    std::vector<std::uint32_t> on_failed;
    for (std::uint32_t i = 0; i < r.m.requests().size(); ++i) {
      const auto& rec = r.m.requests()[i];
      if (policy == cluster::FailurePolicy::kLose && rec.instance == 1) on_failed.push_back(i);
    }
    std::vector<std::uint32_t> hit;
    for (const RequestId q : sim.failed_requests()) hit.push_back(q.value);
    std::sort(hit.begin(), hit.end());
    CHECK(hit.size() == 2);
    if (policy == cluster::FailurePolicy::kLose) {
      CHECK(hit == on_failed);
      CHECK(r.summary.lost == 2);
      CHECK(r.summary.completed == 2);
      CHECK(r.summary.requeued == 0);
      for (const auto i : hit) {
        CHECK(r.m.requests()[i].reject_reason == metrics::RejectReason::kLostToFailure);
      }
    } else {
      // Re-queued: prefilled again (prompt and the tokens already emitted), sent to the surviving
      // decode instance (the failed one is down for 100 us), and completed.
      CHECK(r.summary.lost == 0);
      CHECK(r.summary.requeued == 2);
      CHECK(r.summary.completed == 4);
      std::int64_t tokens = 0;
      for (const auto& rec : r.m.requests()) tokens += rec.output_tokens;
      CHECK(r.m.output_tokens() == tokens);
      CHECK(sim.drained());
    }
  }
}

TEST_CASE("Routers: down instances are never picked; all down gives kNoInstance") {
  cluster::RouterConfig cfg;
  for (const auto policy : {cluster::RouterPolicy::kRoundRobin, cluster::RouterPolicy::kLeastLoaded,
                            cluster::RouterPolicy::kPowerOfTwo, cluster::RouterPolicy::kFreeKv}) {
    cfg.policy = policy;
    auto router = cluster::make_router(cfg, 1, "test");
    cluster::LoadLedger loads = cluster::make_ledger(cfg, 4);
    const cluster::RouteQuery q{loads};
    loads.set_up(1, false);
    loads.set_up(2, false);
    for (int i = 0; i < 50; ++i) {
      const std::uint32_t p = router->pick(q);
      CHECK((p == 0 || p == 3));
    }
    loads.set_up(0, false);
    loads.set_up(3, false);
    CHECK(router->pick(q) == cluster::kNoInstance);
    loads.set_up(2, true);
    CHECK(router->pick(q) == 2);
  }
}

TEST_CASE("Routers: power of two choices takes the less loaded of its two draws") {
  cluster::RouterConfig cfg;
  cfg.policy = cluster::RouterPolicy::kPowerOfTwo;
  auto router = cluster::make_router(cfg, 7, "test");
  cluster::LoadLedger loads = cluster::make_ledger(cfg, 2);
  loads.routed(0, 10);
  // With two instances, the two draws differ half the time (then instance 1 wins) and are both
  // instance 0 a quarter of the time: instance 1 gets about 3/4 of the picks.
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += router->pick(cluster::RouteQuery{loads}) == 1 ? 1 : 0;
  CHECK(ones > 2800);
  CHECK(ones < 3200);
}
