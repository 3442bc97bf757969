// Prefix caching and KV-cache-aware routing, against values derived by hand on the tiny model and
// the ideal chip of test_config.h (F FLOPs take F ps; see serving_test.cpp): a chunk of c new
// tokens after p cached ones costs 163,840 c (linear layers) + 2 x 256 c (p + c) (attention, two
// layers) + 12,800 (LM head, one sampled sequence).
#include <doctest/doctest.h>

#include <algorithm>

#include "core/rng.h"
#include "models/memory.h"
#include "sim/cluster/prefix_cache.h"
#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"

using namespace servesim;

namespace {

// Closed loop, one client: `requests` requests of `own` new tokens after one shared 1,024-token
// prefix, one output token each (the prefill emits it, so TTFT is the prefill).
cluster::SimulationConfig shared_prefix(int instances, std::int64_t requests, std::int64_t own) {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip(), instances);
  cluster::PoolConfig& p = config.pools[0];
  p.scheduler.max_batched_tokens = 2048;  // every prompt in one chunk
  p.prefix_cache.enabled = true;
  config.workload = test::fixed_closed_loop(1, requests, own, 1);
  workloads::PrefixConfig prefixes;
  prefixes.prompts = 1;
  prefixes.tokens = {1024};
  config.workload.classes[0].prefixes = prefixes;
  return config;
}

workloads::PrefixConfig one_prefix(std::int64_t tokens) {
  workloads::PrefixConfig p;
  p.prompts = 1;
  p.tokens = {tokens};
  return p;
}

const metrics::PrefixCacheCounts& cache_counts(const metrics::Summary& s) {
  REQUIRE(s.pools[0].prefix_cache.has_value());
  return s.pools[0].prefix_cache->counts;
}

}  // namespace

TEST_CASE("Prefix cache: a request whose 1,024-token prefix is cached prefills only its own tokens") {
  auto config = shared_prefix(1, 2, 64);
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  sim.set_paranoid(true);
  const auto result = sim.run();
  CHECK(sim.drained());
  const auto& first = m.requests().at(0);
  const auto& second = m.requests().at(1);
  // First: 1,088 tokens, nothing cached: 163,840 x 1,088 + 512 x 1,088 x 1,088 + 12,800
  //   = 178,257,920 + 606,076,928 + 12,800 = 784,347,648 ps.
  CHECK((first.first_token - first.arrival).ps() == 784'347'648);
  // Second: the prefix's 64 blocks of 16 are cached; 64 new tokens attend over 1,088:
  //   163,840 x 64 + 512 x 64 x 1,088 + 12,800 = 10,485,760 + 35,651,584 + 12,800 = 46,150,144 ps.
  CHECK((second.first_token - second.arrival).ps() == 46'150'144);
  const auto s = metrics::summarize(m, result.end, {});
  const auto& c = cache_counts(s);
  CHECK(c.lookups == 2);
  CHECK(c.hits == 1);
  CHECK(c.hit_tokens == 1024);
  CHECK(c.lookup_tokens == 2 * 1088);
  CHECK(c.inserted_blocks == 64);  // the prefix once; the own tokens have no key
  CHECK(s.pools[0].prefix_cache->hit_token_fraction == approx(1024.0 / 2176.0));
}

TEST_CASE("Prefix cache: without it, the same two requests both prefill everything") {
  auto config = shared_prefix(1, 2, 64);
  config.pools[0].prefix_cache.enabled = false;
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  sim.run();
  const auto& second = m.requests().at(1);
  CHECK((second.first_token - second.arrival).ps() == 784'347'648);
}

TEST_CASE("Prefix cache: a fully cached prompt still prefills its last block's tokens") {
  // Prompt = the 1,024-token prefix and nothing else: the second request may skip at most
  // (1,024 - 1) / 16 = 63 whole blocks, 1,008 tokens, and prefills 16 tokens attending over 1,024:
  // 163,840 x 16 + 512 x 16 x 1,024 + 12,800 = 2,621,440 + 8,388,608 + 12,800 = 11,022,848 ps.
  auto config = shared_prefix(1, 2, 0);
  config.workload = test::fixed_closed_loop(1, 2, 0, 1);
  config.workload.classes[0].prefixes = one_prefix(1024);
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  sim.set_paranoid(true);
  sim.run();
  const auto& second = m.requests().at(1);
  CHECK((second.first_token - second.arrival).ps() == 11'022'848);
}

TEST_CASE("PrefixCache: LRU evicts the least recently released unreferenced blocks, tail first") {
  // Four one-block segments fit. Request a holds segments {1, 2}, request b {3, 4}.
  cluster::PrefixCache cache(4);
  workloads::IdRing ring;
  const std::uint64_t ids_a[] = {1, 2}, ids_b[] = {3, 4}, ids_c[] = {5}, ids_d[] = {6, 7};
  auto keys = [&ring](const std::uint64_t* ids, std::uint32_t n) {
    cluster::PrefixKeys k;
    k.ring = &ring;
    k.handle = ring.append(ids, n);
    k.segments = n;
    k.segment_tokens = 16;
    return k;
  };
  const auto a = keys(ids_a, 2), b = keys(ids_b, 2), c = keys(ids_c, 1), d = keys(ids_d, 2);
  std::int64_t evicted = 0;
  for (std::uint32_t i = 0; i < 2; ++i) {
    CHECK(cache.insert(a.key(i), 1, &evicted) == cluster::PrefixCache::Insert::kAdded);
  }
  for (std::uint32_t i = 0; i < 2; ++i) {
    CHECK(cache.insert(b.key(i), 1, &evicted) == cluster::PrefixCache::Insert::kAdded);
  }
  // While both hold their segments nothing is evictable: a fifth block does not fit.
  CHECK(cache.evictable() == 0);
  CHECK(cache.insert(c.key(0), 1, &evicted) == cluster::PrefixCache::Insert::kFull);
  cache.unpin(a, 2);  // LRU: 2, 1 (a's tail first)
  cache.unpin(b, 2);  // LRU: 2, 1, 4, 3
  // a comes back (pinned again) and leaves: its blocks are now the most recent: LRU 4, 3, 2, 1.
  CHECK(cache.match(a, 2).segments == 2);
  CHECK(cache.match(a, 2).unreferenced_blocks == 2);
  cache.pin(a, 2);
  cache.unpin(a, 2);
  cache.check_invariants();
  // A new segment evicts b's tail (4) first: b keeps a one-segment prefix, a keeps both.
  CHECK(cache.insert(c.key(0), 1, &evicted) == cluster::PrefixCache::Insert::kAdded);
  CHECK(evicted == 1);
  CHECK(cache.match(b, 2).segments == 1);
  CHECK(cache.match(a, 2).segments == 2);
  // With a pinned, a new segment evicts b's 3; then nothing is evictable (c's 5 and d's 6 are
  // pinned by their inserts): the next one does not fit.
  cache.pin(a, 2);
  CHECK(cache.insert(d.key(0), 1, &evicted) == cluster::PrefixCache::Insert::kAdded);
  CHECK(evicted == 2);
  CHECK(cache.match(b, 2).segments == 0);
  CHECK(cache.insert(d.key(1), 1, &evicted) == cluster::PrefixCache::Insert::kFull);
  // A segment already cached is shared, not added.
  CHECK(cache.insert(a.key(0), 1, &evicted) == cluster::PrefixCache::Insert::kShared);
  CHECK(cache.blocks() == 4);
  CHECK(cache.stats().evicted_blocks == 2);
  cache.check_invariants();
}

TEST_CASE("kv_aware: the second request goes to the instance that holds its prefix") {
  for (const bool kv_aware : {true, false}) {
    CAPTURE(kv_aware);
    auto config = shared_prefix(2, 2, 64);
    config.pools[0].router.policy = kv_aware ? cluster::RouterPolicy::kKvAware : cluster::RouterPolicy::kLeastLoaded;
    metrics::RunMetrics m;
    cluster::Simulation sim(config, m);
    sim.set_paranoid(true);
    sim.run();
    // Both instances are idle when each request arrives. The first goes to instance 0 (tie).
    // kv_aware scores the second: instance 0: 0 + 1,088 - 1,024 = 64, instance 1: 0 + 1,088 - 0
    // = 1,088, so instance 0, a hit (46,150,144 ps as above). least_loaded rotates the tie to
    // instance 1, which prefills everything (784,347,648 ps).
    CHECK(m.requests().at(0).instance == 0);
    const auto& second = m.requests().at(1);
    CHECK(second.instance == (kv_aware ? 0u : 1u));
    CHECK((second.first_token - second.arrival).ps() == (kv_aware ? 46'150'144 : 784'347'648));
  }
}

TEST_CASE("kv_aware: load outweighs a small hit") {
  // KvAwareRouter alone: instance 0 has 5,000 outstanding tokens and 1,024 of the request's
  // 1,088 cached: 5,000 + 64 = 5,064; instance 1 is idle with nothing cached: 1,088. Instance 1.
  cluster::LoadLedger loads(2, cluster::LoadUnit::kTokens, /*ordered=*/true);
  cluster::KvAwareRouter router;
  const std::vector<std::int64_t> cached = {1024, 0};
  loads.routed(0, 5000);
  CHECK(router.pick(cluster::RouteQuery{loads, 1088, cached}) == 1u);
  // With 500 outstanding tokens instead: 564 < 1,088, instance 0.
  loads.worked(0, 4500);
  CHECK(router.pick(cluster::RouteQuery{loads, 1088, cached}) == 0u);
  loads.set_up(0, false);
  CHECK(router.pick(cluster::RouteQuery{loads, 1088, cached}) == 1u);
}

TEST_CASE("Prefix cache: random small deployments with shared prefixes and sessions conserve KV") {
  // Small KV caches (150-600 tokens per lane) so that eviction and preemption both happen;
  // paranoid mode recomputes every lane's blocks (own + cached) after every event.
  Rng rng(20261201, "prefix-invariants");
  int with_hits = 0, with_evictions = 0, with_preemptions = 0;
  int shared = 0, shared_hits = 0, shared_evictions = 0;
  for (int trial = 0; trial < 120; ++trial) {
    CAPTURE(trial);
    models::ModelSpec model = test::tiny_model();
    auto config = test::one_pool(model, test::ideal_chip(), static_cast<int>(rng.uniform_int(1, 3)));
    cluster::PoolConfig& p = config.pools[0];
    p.plan.pp = static_cast<int>(rng.uniform_int(1, 2));
    // Every other pipelined trial: one queue, KV pool and prefix cache per instance (the draws
    // stay those of the per-lane trials).
    const bool pooled = p.plan.pp == 2 && trial % 2 == 0;
    p.scheduler.pipeline_queue = pooled ? cluster::PipelineQueue::kShared : cluster::PipelineQueue::kPerLane;
    p.kv_cache.block_tokens = static_cast<std::int64_t>(rng.uniform_int(1, 2) * 8);
    p.scheduler.policy =
        rng.uniform_int(0, 1) ? cluster::SchedulerPolicy::kSarathi : cluster::SchedulerPolicy::kWholePrompt;
    p.scheduler.max_batch_size = static_cast<std::int64_t>(rng.uniform_int(1, 8));
    p.scheduler.max_batched_tokens = p.scheduler.max_batch_size + static_cast<std::int64_t>(rng.uniform_int(16, 128));
    p.router.policy = rng.uniform_int(0, 1) ? cluster::RouterPolicy::kKvAware : cluster::RouterPolicy::kLeastLoaded;
    p.prefix_cache.enabled = true;
    p.prefix_cache.capacity_fraction = rng.uniform_int(0, 1) ? 1.0 : 0.3;
    test::size_kv_tokens(p, model, static_cast<double>(rng.uniform_int(150, 600)) * p.plan.pp);
    std::int64_t longest = cluster::pool_capacity(model, p).admissible_tokens;
    if (p.scheduler.policy == cluster::SchedulerPolicy::kWholePrompt) {
      longest = std::min(longest, p.scheduler.max_batched_tokens);
    }
    p.max_model_len = std::max<std::int64_t>(2, longest);
    config.workload.requests = static_cast<std::int64_t>(rng.uniform_int(5, 80));
    workloads::ClassConfig& c = config.workload.classes.emplace_back();
    c.arrivals = workloads::ClosedLoopArrivals{static_cast<int>(rng.uniform_int(1, 8)), Duration::zero()};
    const std::int64_t half = std::max<std::int64_t>(2, p.max_model_len / 2);
    c.lengths =
        workloads::IndependentLengths{workloads::UniformLength{1, half / 2}, workloads::UniformLength{1, half / 2}};
    workloads::PrefixConfig prefixes;
    prefixes.prompts = static_cast<std::int64_t>(rng.uniform_int(1, 3));
    prefixes.tokens_distribution = workloads::UniformLength{1, half / 2};
    c.prefixes = prefixes;
    if (rng.uniform_int(0, 1)) {
      workloads::SessionConfig sessions;
      sessions.turns = workloads::UniformLength{1, 3};
      c.sessions = sessions;
    }
    config.seed = rng.next_u64();
    metrics::RunMetrics m;
    cluster::Simulation sim(config, m);
    sim.set_paranoid(true);
    const auto result = sim.run();
    const auto s = metrics::summarize(m, result.end, {});
    CHECK(s.in_flight == 0);
    CHECK(s.arrived == s.completed + s.rejected);
    CHECK(sim.drained());
    for (int i = 0; i < p.instances; ++i) CHECK(sim.instance_load(static_cast<std::uint32_t>(i)) == 0);
    std::int64_t expected = 0;
    for (const auto& r : m.requests()) {
      if (r.status == metrics::RequestStatus::kCompleted) expected += r.output_tokens;
    }
    CHECK(m.output_tokens() == expected);
    const auto& counts = cache_counts(s);
    CHECK(counts.hit_tokens <= counts.lookup_tokens);
    if (counts.hits > 0) ++with_hits;
    if (counts.evicted_blocks > 0) ++with_evictions;
    if (pooled) {
      ++shared;
      if (counts.hits > 0) ++shared_hits;
      if (counts.evicted_blocks > 0) ++shared_evictions;
    }
    if (s.pools[0].preemptions > 0) ++with_preemptions;
  }
  MESSAGE("pooled trials: " << shared << ", with hits " << shared_hits << ", with evictions " << shared_evictions);
  CHECK(shared_hits > 10);
  CHECK(shared_evictions > 3);
  CHECK(with_hits > 40);
  CHECK(with_evictions > 10);
  CHECK(with_preemptions > 10);
}
