// The engine admission options of the Sarathi scheduler (sim/cluster/config.h, SchedulerConfig):
// chunked_prefill = false (TensorRT-LLM without chunked prefill) and form_ahead (overlap
// schedulers), against values derived by hand on the tiny model and the ideal chip of
// test_config.h (every operator compute-bound at 1e12 FLOP/s, so F FLOPs take F picoseconds).
// Costs (see serving_test.cpp): linear layers 163,840 ps per token; attention of a c-token chunk
// over p earlier tokens 2 layers x 256 c (p + c); a decode step attending to kv tokens
// 2 x 256 kv; the LM head 12,800 ps per sampled sequence.
#include <doctest/doctest.h>

#include <vector>

#include "sim/cluster/simulation.h"
#include "test_config.h"

using namespace servesim;

namespace {

void run(const cluster::SimulationConfig& config, metrics::RunMetrics& m) {
  cluster::Simulation sim(config, m);
  sim.set_paranoid(true);
  sim.run();
  CHECK(sim.drained());
}

workloads::ClassConfig one_client(std::string name, std::int64_t requests, std::int64_t prompt, std::int64_t output) {
  workloads::ClassConfig c;
  c.name = std::move(name);
  c.requests = requests;
  c.arrivals = workloads::ClosedLoopArrivals{1, Duration::zero()};
  c.lengths = workloads::IndependentLengths{workloads::FixedLength{prompt}, workloads::FixedLength{output}};
  return c;
}

std::vector<std::int64_t> ttfts_ps(const metrics::RunMetrics& m) {
  std::vector<std::int64_t> t;
  for (const auto& r : m.requests()) t.push_back((r.first_token - r.arrival).ps());
  return t;
}

}  // namespace

TEST_CASE("Engine admission: without chunking a prompt that does not fit waits for the next iteration whole") {
  // Two 40-token prompts arrive together; the budget is 64 tokens.
  // A lone 40-token prefill: 163,840 x 40 + 2 x 256 x 40 x 40 + 12,800 = 7,385,600 ps.
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].scheduler.max_batched_tokens = 64;
  config.workload = test::fixed_closed_loop(2, 2, 40, 1);
  SUBCASE("chunked (default): the second prompt's first 24 tokens share the first iteration") {
    metrics::RunMetrics m;
    run(config, m);
    // Iteration 1: 40 + 24 tokens, 163,840 x 64 + 2 x 256 x (40 x 40 + 24 x 24) + 12,800
    // = 10,485,760 + 1,114,112 + 12,800 = 11,612,672 ps (only the first prompt samples);
    // iteration 2: the last 16 over 24 earlier, 163,840 x 16 + 2 x 256 x 16 x 40 + 12,800
    // = 2,621,440 + 327,680 + 12,800 = 2,961,920 ps.
    CHECK(ttfts_ps(m) == std::vector<std::int64_t>{11'612'672, 11'612'672 + 2'961'920});
  }
  SUBCASE("whole prompts only: one prompt per iteration") {
    config.pools[0].scheduler.chunked_prefill = false;
    metrics::RunMetrics m;
    run(config, m);
    CHECK(ttfts_ps(m) == std::vector<std::int64_t>{7'385'600, 2 * 7'385'600});
  }
}

TEST_CASE("Engine admission: a prompt longer than the whole budget is still chunked without chunking") {
  // One 100-token prompt, budget 64: as the chunked test of serving_test.cpp, 64 then 36 tokens,
  // 12,582,912 + 7,754,240 ps.
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.pools[0].scheduler.max_batched_tokens = 64;
  config.pools[0].scheduler.chunked_prefill = false;
  config.workload = test::fixed_closed_loop(1, 1, 100, 1);
  metrics::RunMetrics m;
  run(config, m);
  CHECK(ttfts_ps(m) == std::vector<std::int64_t>{12'582'912 + 7'754'240});
}

TEST_CASE("Engine admission: with form_ahead a request arriving during an iteration skips the next one") {
  // Client a: one request, 10-token prompt, 4 output tokens. Client b: two requests, 10-token
  // prompts, 1 output token, no think time, so b's second request arrives when the first
  // iteration ends, while a still decodes. It arrives after that instant's formation (an engine
  // forms the next iteration as soon as one ends; a client's next request takes at least a round
  // trip), so without form_ahead it joins iteration 3, with it iteration 4.
  // Iteration 1 (both prompts): 163,840 x 20 + 2 x (2 x 256 x 10 x 10) + 2 x 12,800 = 3,404,800.
  // Iteration 2, a's decode over 11 tokens: 163,840 + 2 x 256 x 11 + 12,800 = 182,272.
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.workload.classes = {one_client("a", 1, 10, 4), one_client("b", 2, 10, 1)};
  config.workload.requests = 3;
  const auto second_of_b = [](const metrics::RunMetrics& m) {
    std::vector<std::int64_t> t = ttfts_ps(m);
    REQUIRE(t.size() == 3);
    CHECK(t[0] == 3'404'800);
    CHECK(t[1] == 3'404'800);
    return t[2];
  };
  SUBCASE("default: it joins the next iteration formed after it arrives") {
    metrics::RunMetrics m;
    run(config, m);
    // Iteration 3, a's decode over 12 and b's prompt: 163,840 x 11 + 2 x 256 x 12
    // + 2 x 256 x 10 x 10 + 2 x 12,800 = 1,802,240 + 6,144 + 51,200 + 25,600 = 1,885,184.
    CHECK(second_of_b(m) == 182'272 + 1'885'184);
  }
  SUBCASE("form_ahead: iteration 3 was formed while iteration 2 ran, so it joins iteration 4") {
    config.pools[0].scheduler.form_ahead = true;
    metrics::RunMetrics m;
    run(config, m);
    // Iteration 3, a's decode alone over 12 tokens: 163,840 + 6,144 + 12,800 = 182,784;
    // iteration 4, a's decode over 13 and b's prompt: 1,802,240 + 6,656 + 51,200 + 25,600
    // = 1,885,696.
    CHECK(second_of_b(m) == 182'272 + 182'784 + 1'885'696);
  }
  SUBCASE("form_ahead on an idle engine: the arrival is taken at once") {
    config.pools[0].scheduler.form_ahead = true;
    config.workload.classes = {one_client("b", 2, 10, 1)};
    config.workload.requests = 2;
    metrics::RunMetrics m;
    run(config, m);
    // Each request alone: 163,840 x 10 + 2 x 256 x 10 x 10 + 12,800 = 1,702,400 ps.
    CHECK(ttfts_ps(m) == std::vector<std::int64_t>{1'702'400, 1'702'400});
  }
}
