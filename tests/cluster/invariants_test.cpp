// Properties that must hold for every scenario, checked over many small random ones with the
// simulation's paranoid mode on (every lane's aggregates recomputed from its requests after every
// event; time monotonicity and KV capacity are CHECKed on every event in any mode).
#include <doctest/doctest.h>

#include <algorithm>

#include "core/rng.h"
#include "models/memory.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"

using namespace servesim;

namespace {

// A deployment whose KV cache holds about `kv_tokens` tokens per lane, so that random traffic
// runs it out of blocks and exercises preemption.
cluster::SimulationConfig random_config(Rng& rng) {
  models::ModelSpec model = test::tiny_model();
  model.layers = static_cast<int>(rng.uniform_int(1, 6));
  auto config = test::one_pool(model, test::ideal_chip(), static_cast<int>(rng.uniform_int(1, 4)));
  cluster::PoolConfig& p = config.pools[0];
  p.plan.tp = rng.uniform_int(0, 1) ? 2 : 1;
  p.plan.pp = static_cast<int>(rng.uniform_int(1, std::min<std::uint64_t>(3, model.layers)));
  p.kv_cache.block_tokens = static_cast<std::int64_t>(rng.uniform_int(1, 3) * 4);
  p.kv_cache.watermark = rng.uniform_int(0, 1) ? 0.0 : 0.05;
  p.scheduler.policy =
      rng.uniform_int(0, 1) ? cluster::SchedulerPolicy::kSarathi : cluster::SchedulerPolicy::kWholePrompt;
  p.scheduler.max_batch_size = static_cast<std::int64_t>(rng.uniform_int(1, 16));
  p.scheduler.max_batched_tokens = p.scheduler.max_batch_size + static_cast<std::int64_t>(rng.uniform_int(0, 128));
  p.router.policy = rng.uniform_int(0, 1) ? cluster::RouterPolicy::kLeastLoaded : cluster::RouterPolicy::kRoundRobin;
  p.router.load =
      rng.uniform_int(0, 1) ? cluster::LoadMetric::kOutstandingTokens : cluster::LoadMetric::kOutstandingRequests;
  p.scheduler.pipeline_queue =
      p.plan.pp > 1 && rng.uniform_int(0, 1) ? cluster::PipelineQueue::kShared : cluster::PipelineQueue::kPerLane;

  // Size the chip so that each lane gets roughly 150-600 tokens of KV cache.
  test::size_kv_tokens(p, model, static_cast<double>(rng.uniform_int(150, 600)) * p.plan.pp);

  // Longest request: what a lane admits, and for whole-prompt scheduling what a batch holds.
  std::int64_t longest = cluster::pool_capacity(model, p).admissible_tokens;
  if (p.scheduler.policy == cluster::SchedulerPolicy::kWholePrompt) {
    longest = std::min(longest, p.scheduler.max_batched_tokens);
  }
  p.max_model_len = std::max<std::int64_t>(2, longest);

  workloads::WorkloadConfig& w = config.workload;
  w.requests = static_cast<std::int64_t>(rng.uniform_int(1, 120));
  workloads::ClassConfig& c = w.classes.emplace_back();
  if (rng.uniform_int(0, 1)) {
    c.arrivals = workloads::PoissonArrivals{Frequency{static_cast<double>(rng.uniform_int(1, 50)) * 1e4}};
  } else {
    c.arrivals =
        workloads::ClosedLoopArrivals{static_cast<int>(rng.uniform_int(1, 20)),
                                      Duration::picoseconds(static_cast<std::int64_t>(rng.uniform_int(0, 100000)))};
  }
  // Some requests exceed max_model_len on purpose (they must be rejected, not lost).
  const std::int64_t max_len = p.max_model_len + 20;
  c.lengths = workloads::IndependentLengths{workloads::UniformLength{1, std::max<std::int64_t>(1, max_len / 2)},
                                            workloads::UniformLength{1, std::max<std::int64_t>(1, max_len / 2)}};
  if (rng.uniform_int(0, 3) == 0) {
    config.horizon = Duration::picoseconds(static_cast<std::int64_t>(rng.uniform_int(1, 50)) * 1'000'000);
  }
  config.seed = rng.next_u64();
  return config;
}

// Output tokens of the completed requests: what a drained run emitted, when nothing was lost.
std::int64_t completed_output_tokens(const metrics::RunMetrics& m) {
  std::int64_t n = 0;
  for (const auto& r : m.requests()) {
    if (r.status == metrics::RequestStatus::kCompleted) n += r.output_tokens;
  }
  return n;
}

// The same deployment with speculative decoding (k = 1..3 drafts, random acceptance) on its
// decoding pool, and per-rank attention-DP batches (dp = 2) when `ranks` (the plan's chips then
// double, so only where no cluster was placed). Draws from its own stream.
cluster::SimulationConfig with_speculation(cluster::SimulationConfig config, int trial, bool ranks) {
  Rng rng(static_cast<std::uint64_t>(trial), "speculative-variant");
  cluster::PoolConfig& p = config.pools.back();
  const auto kv_tokens = static_cast<double>(cluster::pool_capacity(config.model, p).memory.kv_tokens_per_group);
  cluster::SpeculativeConfig& spec = p.speculative;
  spec.method = cluster::SpeculativeMethod::kMtp;
  spec.draft_tokens = static_cast<int>(rng.uniform_int(1, 3));
  spec.acceptance.clear();
  for (int i = 0; i < spec.draft_tokens; ++i) spec.acceptance.push_back(rng.uniform01());
  config.model.mtp_layers = 1;
  p.scheduler.max_batched_tokens =
      std::max(p.scheduler.max_batched_tokens, (spec.draft_tokens + 1) * p.scheduler.max_batch_size);
  if (ranks) {
    p.plan.dp = 2;
    p.attention_dp =
        rng.uniform_int(0, 1) ? cluster::AttentionDpBalance::kLeastKv : cluster::AttentionDpBalance::kRoundRobin;
  }
  // The same KV tokens per dp group as before (the MTP layer and the larger budget take memory).
  // size_kv_tokens sizes by the first stage; with pp > 1 the last one also holds the MTP layer,
  // so the memory grows until that stage holds them too.
  test::size_kv_tokens(p, config.model, kv_tokens);
  for (int i = 0; i < 8; ++i) {
    const models::MemoryPlan got = cluster::pool_capacity(config.model, p).memory;
    if (static_cast<double>(got.kv_tokens_per_group) >= kv_tokens) break;
    p.chip.memory = Bytes{p.chip.memory.value + (kv_tokens + 16) * got.kv_bytes_per_token + 65536.0};
  }
  return config;
}

std::int64_t component(const metrics::RunMetrics& m, models::OpKind k) {
  std::int64_t ps = 0;
  for (const auto& pool : m.pools()) ps += pool.component_ps[static_cast<std::size_t>(k)];
  return ps;
}

}  // namespace

TEST_CASE("Invariants: over random small scenarios every request is accounted for and KV is conserved") {
  Rng rng(20261130, "invariants");
  int with_preemptions = 0, with_rejections = 0, with_horizon = 0, drafted = 0, uneven = 0, shared = 0,
      shared_preempted = 0;
  for (int trial = 0; trial < 300; ++trial) {
    CAPTURE(trial);
    const auto base = random_config(rng);
    // Every third trial also runs with speculative decoding and per-rank attention-DP batches.
    for (int variant = 0; variant < (trial % 3 == 0 ? 2 : 1); ++variant) {
      CAPTURE(variant);
      const auto config = variant == 0 ? base : with_speculation(base, trial, true);
      metrics::RunMetrics m;
      cluster::Simulation sim(config, m);
      sim.set_paranoid(true);
      const auto result = sim.run();
      const auto s = metrics::summarize(m, result.end, {});
      // Requests are conserved: every arrival ended completed, rejected or in flight.
      CHECK(s.arrived == s.completed + s.rejected + s.in_flight);
      if (config.horizon) {
        // Arrivals stop at the horizon, so fewer may come than asked for.
        ++with_horizon;
        CHECK(s.arrived <= config.workload.requests);
      } else {
        // Without a horizon the run ends only when nothing is left: all requests came and went,
        // every KV block was freed and every router load went back to zero.
        CHECK(s.arrived == config.workload.requests);
        CHECK(s.in_flight == 0);
        CHECK(sim.drained());
        for (int i = 0; i < config.pools[0].instances; ++i)
          CHECK(sim.instance_load(static_cast<std::uint32_t>(i)) == 0);
        // Tokens are conserved: each completed request emitted exactly its output tokens.
        const std::int64_t expected_tokens = completed_output_tokens(m);
        CHECK(m.output_tokens() == expected_tokens);
      }
      for (const auto& r : m.requests()) {
        if (r.status == metrics::RequestStatus::kCompleted) {
          CHECK(r.arrival <= r.first_token);
          CHECK(r.first_token <= r.completion);
        }
      }
      CHECK(s.pools[0].kv_cache_peak_fraction <= 1.0);
      CHECK(s.pools[0].utilization <= 1.0 + 1e-9);
      if (s.pools[0].preemptions > 0) ++with_preemptions;
      if (config.pools[0].scheduler.pipeline_queue == cluster::PipelineQueue::kShared) {
        ++shared;
        if (s.pools[0].preemptions > 0) ++shared_preempted;
      }
      if (s.rejected > 0) ++with_rejections;
      if (component(m, models::OpKind::kMtpDraft) > 0) ++drafted;
      if (component(m, models::OpKind::kImbalance) > 0) ++uneven;
    }
  }
  // The generator must actually reach the interesting regimes.
  CHECK(drafted > 50);
  CHECK(uneven > 20);
  CHECK(with_preemptions > 20);
  CHECK(with_rejections > 20);
  CHECK(with_horizon > 20);
  CHECK(shared > 40);
  CHECK(shared_preempted > 5);
  MESSAGE("shared queues: " << shared << " runs, " << shared_preempted << " with preemptions");
}

TEST_CASE("Determinism: the same configuration and seed give the same event stream") {
  Rng rng(7, "determinism");
  for (int trial = 0; trial < 20; ++trial) {
    const auto config = random_config(rng);
    metrics::RunMetrics a, b;
    const auto ra = cluster::Simulation(config, a).run();
    const auto rb = cluster::Simulation(config, b).run();
    CHECK(ra.fingerprint == rb.fingerprint);
    CHECK(ra.events == rb.events);
    CHECK(ra.end == rb.end);
  }
}

TEST_CASE("Invariants: random disaggregated deployments conserve requests, tokens and KV blocks") {
  Rng rng(20261201, "epd-invariants");
  int with_faults = 0, with_preemptions = 0, streamed = 0, drafted = 0, answer_on_admit = 0;
  for (int trial = 0; trial < 150; ++trial) {
    CAPTURE(trial);
    auto config = random_config(rng);
    // Split the random pool into a prefill and a decode pool on NIC-connected chips.
    cluster::PoolConfig& p = config.pools[0];
    // One chip per domain (every transfer on the NICs) when the plan allows it.
    p.chip.scale_up_domain = p.plan.tp == 1 && rng.uniform_int(0, 1) ? 1 : 8;
    p.chip.scale_out_bandwidth = Bandwidth{static_cast<double>(rng.uniform_int(1, 100)) * 1e8};
    p.kind = cluster::PoolRole::kPrefill;
    p.role = "prefill";
    if (rng.uniform_int(0, 2) == 0) p.router.policy = cluster::RouterPolicy::kPowerOfTwo;
    cluster::PoolConfig d = p;
    d.name = "decode";
    d.kind = cluster::PoolRole::kDecode;
    d.role = "decode";
    d.instances = static_cast<int>(rng.uniform_int(1, 4));
    d.router.policy = rng.uniform_int(0, 1) ? cluster::RouterPolicy::kFreeKv : cluster::RouterPolicy::kLeastLoaded;
    // Half the decode pools answer on admission with the prefill's token (SGLang).
    if (rng.uniform_int(0, 1)) {
      d.scheduler.first_response_step = 0;
      ++answer_on_admit;
    }
    config.pools.push_back(d);
    if (rng.uniform_int(0, 1)) {
      config.disaggregation.kv_transfer = cluster::KvTransferMode::kLayerStreamed;
      ++streamed;
    }
    const bool faults = rng.uniform_int(0, 2) == 0;
    if (faults) {
      config.cluster = cluster::default_cluster(config.pools);
      topologies::ScheduledFault f;
      const int chips = static_cast<int>(config.cluster->fabric->chips());
      f.target = topologies::FaultTarget{topologies::FaultKind::kChip, static_cast<std::uint32_t>(rng.uniform_int(
                                                                           0, static_cast<std::uint64_t>(chips - 1)))};
      f.at = SimTime::zero() + Duration::picoseconds(static_cast<std::int64_t>(rng.uniform_int(1, 20)) * 1'000'000);
      config.cluster->faults.scheduled.push_back(f);
      config.failures.policy = rng.uniform_int(0, 1) ? cluster::FailurePolicy::kLose : cluster::FailurePolicy::kRequeue;
      config.failures.repair = Duration::picoseconds(static_cast<std::int64_t>(rng.uniform_int(1, 50)) * 1'000'000);
      ++with_faults;
    }
    // Every other trial decodes speculatively (on the decode pool, fresh requests included).
    if (trial % 2 == 1) config = with_speculation(config, trial, false);
    metrics::RunMetrics m;
    // A third of the runs record the time series too (its gauges CHECK they never go negative).
    if (trial % 3 == 0) m.enable_time_series();
    cluster::Simulation sim(config, m);
    sim.set_paranoid(true);
    const auto result = sim.run();
    const auto s = metrics::summarize(m, result.end, {});
    CHECK(s.arrived == s.completed + s.rejected + s.in_flight);
    if (!config.horizon) {
      CHECK(s.arrived == config.workload.requests);
      CHECK(s.in_flight == 0);
      CHECK(sim.drained());
      const std::int64_t expected_tokens = completed_output_tokens(m);
      // Lost requests may have emitted tokens before their instance failed.
      if (s.lost == 0) CHECK(m.output_tokens() == expected_tokens);
      if (s.lost > 0) CHECK(m.output_tokens() >= expected_tokens);
    }
    double ttft = 0;
    for (const auto& [k, v] : s.ttft_breakdown_ms) ttft += v;
    if (s.ttft_ms.count > 0) CHECK(ttft == approx(s.ttft_ms.mean).epsilon(1e-9));
    for (const auto& r : m.requests()) {
      if (r.status == metrics::RequestStatus::kCompleted) {
        CHECK(r.arrival <= r.first_token);
        CHECK(r.first_token <= r.completion);
      }
    }
    for (const auto& pool : s.pools) {
      CHECK(pool.kv_cache_peak_fraction <= 1.0);
      CHECK(pool.utilization <= 1.0 + 1e-9);
      if (pool.preemptions > 0) ++with_preemptions;
    }
    if (component(m, models::OpKind::kMtpDraft) > 0) ++drafted;
  }
  CHECK(drafted > 30);
  CHECK(with_faults > 20);
  CHECK(with_preemptions > 10);
  CHECK(streamed > 20);
  CHECK(answer_on_admit > 40);
}
