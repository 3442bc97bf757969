// How requests enter the serving model: closed loops keep exactly N requests in the system, a
// staggered start lets clients go one first token at a time, session turns follow the answers,
// replayed traces arrive exactly when recorded, classes get their own figures, and random mixes of
// every workload feature keep requests, tokens and KV blocks conserved.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/rng.h"
#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"
#include "tests/scratch.h"

using namespace servesim;
namespace wl = servesim::workloads;

namespace {

// RunMetrics plus a count of requests in the system. Within an instant the count dips (a batch
// that finishes several requests frees them before their clients' next requests arrive, at the
// same instant); at the end of every instant it must be exactly N until the request budget is
// spent (budget 0: never checked). Every callback with a time closes the instants before it.
// With `sim` set, it also keeps each request's arrival stream and, when the table keeps them, its
// input, read as the request arrives (the request table releases a request when it finishes).
class CountingRecorder final : public metrics::Recorder {
 public:
  CountingRecorder(std::int64_t clients, std::int64_t budget) : clients_(clients), budget_(budget) {}
  PoolId add_pool(metrics::PoolInfo info) override { return m.add_pool(std::move(info)); }
  void add_class(metrics::ClassInfo info) override { m.add_class(std::move(info)); }
  void expect_requests(std::int64_t n) override { m.expect_requests(n); }
  void request_arrived(RequestId id, SimTime t, std::int64_t p, std::int64_t o, std::uint16_t c) override {
    at(t);
    m.request_arrived(id, t, p, o, c);
    if (sim != nullptr) {
      streams.push_back(sim->requests()[id].stream);
      if (sim->requests().keeps_inputs()) inputs.push_back(sim->requests().input(id));
    }
    ++outstanding;
    ++arrived;
    max_outstanding = std::max(max_outstanding, outstanding);
  }
  void request_routed(RequestId id, PoolId p, InstanceId i) override { m.request_routed(id, p, i); }
  void request_rejected(RequestId id, SimTime t, metrics::RejectReason r) override {
    at(t);
    m.request_rejected(id, t, r);
    --outstanding;
  }
  void first_token(RequestId id, SimTime t) override {
    at(t);
    m.first_token(id, t);
  }
  void request_completed(RequestId id, SimTime t) override {
    at(t);
    m.request_completed(id, t);
    --outstanding;
  }
  void request_preempted(RequestId id, PoolId p) override { m.request_preempted(id, p); }
  void inter_token_gap(Duration g, std::int64_t n) override { m.inter_token_gap(g, n); }
  void iteration(PoolId p, const std::int64_t* c) override { m.iteration(p, c); }
  void iterations(PoolId p, const std::int64_t* c, std::int64_t n) override { m.iterations(p, c, n); }
  void kv_usage_peak(PoolId p, double f) override { m.kv_usage_peak(p, f); }

  metrics::RunMetrics m;
  std::int64_t outstanding = 0, max_outstanding = 0, arrived = 0, instants_checked = 0;
  const cluster::Simulation* sim = nullptr;
  std::vector<std::uint32_t> streams;  // per request id, with `sim`
  std::vector<wl::Request> inputs;     // per request id, with `sim` and a table that keeps inputs

 private:
  void at(SimTime t) {
    if (t == now_) return;
    // The instant `now_` is over.
    if (arrived < budget_) {
      CHECK(outstanding == clients_);
      ++instants_checked;
    }
    now_ = t;
  }
  std::int64_t clients_, budget_;
  SimTime now_ = SimTime::zero();
};

}  // namespace

TEST_CASE("Workload serving: a closed loop keeps exactly N requests in the system") {
  // Some requests exceed max_model_len and are rejected at once: their clients send the next
  // request the same instant, so the count stays N through rejections too.
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip(), 2);
  config.pools[0].max_model_len = 700;
  config.workload =
      wl::single_class(wl::ClosedLoopArrivals{12, Duration::zero()},
                       wl::IndependentLengths{wl::UniformLength{10, 600}, wl::UniformLength{1, 200}}, 2000);
  CountingRecorder rec(12, 2000);
  cluster::Simulation sim(config, rec);
  sim.set_paranoid(true);
  sim.run();
  CHECK(rec.max_outstanding == 12);
  CHECK(rec.instants_checked > 500);
  const auto s = metrics::summarize(rec.m, SimTime::zero() + Duration::seconds(1), {});
  CHECK(s.rejected > 0);
  CHECK(s.arrived == 2000);
  CHECK(sim.drained());
}

TEST_CASE("Workload serving: a staggered start sends each client's first request at the previous one's first token") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  wl::ClosedLoopArrivals cl{5, Duration::zero()};
  cl.start = wl::StartMode::kStaggered;
  config.workload = wl::single_class(cl, wl::IndependentLengths{wl::FixedLength{100}, wl::FixedLength{20}}, 40);
  CountingRecorder rec(5, 0);  // clients start one by one: no count to check
  cluster::Simulation sim(config, rec);
  rec.sim = &sim;
  sim.run();
  const metrics::RunMetrics& m = rec.m;
  // The first request of each client, in arrival order: client i + 1's arrives when client i's
  // first token comes.
  std::map<std::uint32_t, std::uint32_t> first_of_client;  // stream -> request
  REQUIRE(rec.streams.size() == m.requests().size());
  for (std::uint32_t r = 0; r < m.requests().size(); ++r) first_of_client.emplace(rec.streams[r], r);
  CHECK_FALSE(sim.requests().keeps_inputs());  // fixed lengths, one class: nothing beyond RequestState
  REQUIRE(first_of_client.size() == 5);
  for (std::uint32_t c = 1; c < 5; ++c) {
    const auto& prev = m.requests()[first_of_client[c - 1]];
    const auto& next = m.requests()[first_of_client[c]];
    CHECK(next.arrival == prev.first_token);
  }
  CHECK(m.requests()[first_of_client[0]].arrival == SimTime::zero());
}

TEST_CASE("Workload serving: session turns follow their answers and extend their context") {
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  wl::ClassConfig c;
  c.arrivals = wl::PoissonArrivals{Frequency{2000}};
  c.lengths = wl::IndependentLengths{wl::FixedLength{50}, wl::FixedLength{10}};
  wl::SessionConfig sc;
  sc.turns = wl::FixedLength{3};
  sc.think_time = Duration::microseconds(30);
  sc.followup = wl::FixedLength{5};
  c.sessions = sc;
  config.workload.classes = {c};
  config.workload.requests = 90;
  CountingRecorder rec(1, 0);  // open-loop sessions: no count to check
  cluster::Simulation sim(config, rec);
  rec.sim = &sim;
  sim.set_paranoid(true);
  sim.run();
  CHECK(sim.drained());
  const metrics::RunMetrics& m = rec.m;
  REQUIRE(rec.inputs.size() == m.requests().size());
  std::map<std::uint64_t, std::vector<std::uint32_t>> sessions;
  for (std::uint32_t r = 0; r < m.requests().size(); ++r) sessions[rec.inputs[r].session].push_back(r);
  int complete = 0;
  for (const auto& [id, turns] : sessions) {
    for (std::size_t k = 1; k < turns.size(); ++k) {
      const auto& prev = m.requests()[turns[k - 1]];
      const auto& next = m.requests()[turns[k]];
      // Sent 30 us after the previous answer; the prompt is that turn's prompt and answer + 5.
      CHECK(next.arrival == prev.completion + Duration::microseconds(30));
      CHECK(rec.inputs[turns[k]].history_tokens == prev.prompt_tokens + prev.output_tokens);
      CHECK(next.prompt_tokens == prev.prompt_tokens + prev.output_tokens + 5);
      CHECK(rec.inputs[turns[k]].turn == k + 1);
    }
    complete += turns.size() == 3;
  }
  CHECK(complete >= 25);
}

TEST_CASE("Workload serving: a replayed trace arrives exactly when recorded, with its lengths") {
  const auto path = testing::scratch_path("replay_serving.csv");
  std::ofstream(path) << "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                         "0.000000001,30,4\n0.000002,12,2\n0.0000025,200,9\n0.001,7,1\n";
  wl::TraceReplay t;
  t.path = path.string();
  t.scan = std::make_shared<wl::TraceScan>(wl::scan_trace(t));
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  config.workload.classes.emplace_back().arrivals = t;
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  sim.run();
  REQUIRE(m.requests().size() == 4);
  // Relative to the first row: 0, 1.999 us, 2.499 us, 999.999 us.
  const std::int64_t want_ps[] = {0, 1'999'000, 2'499'000, 999'999'000};
  const std::uint32_t prompts[] = {30, 12, 200, 7};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(m.requests()[i].arrival.ps() == want_ps[i]);
    CHECK(m.requests()[i].prompt_tokens == prompts[i]);
  }
}

TEST_CASE("Workload serving: each class is summarised against its own SLO") {
  // Class "fast": 10-token prompts, 1 output token, held to a 1 s TTFT: a prefill of 3,000 tokens
  // takes 163,840 x 3000 + 256 x 3000^2 ps = 2.8 ms on the ideal chip (serving_test.cpp has the
  // FLOPs), so even queued behind every "slow" prompt of the run a fast request meets it. Class
  // "slow": 3000-token prompts against a 1 ns TTFT target that nothing meets.
  auto config = test::one_pool(test::tiny_model(), test::ideal_chip());
  wl::ClassConfig fast, slow;
  fast.name = "fast";
  fast.arrivals = wl::PoissonArrivals{Frequency{100}};
  fast.lengths = wl::IndependentLengths{wl::FixedLength{10}, wl::FixedLength{1}};
  slow.name = "slow";
  slow.priority = 3;
  slow.arrivals = wl::PoissonArrivals{Frequency{100}};
  slow.lengths = wl::IndependentLengths{wl::FixedLength{3000}, wl::FixedLength{1}};
  config.workload.classes = {fast, slow};
  config.workload.requests = 400;
  metrics::SloTargets loose, strict;
  loose.ttft = Duration::milliseconds(1000);
  strict.ttft = Duration::nanoseconds(1);
  config.class_slo = {loose, strict};
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  const auto r = sim.run();
  const auto s = metrics::summarize(m, r.end, {});
  REQUIRE(s.classes.size() == 2);
  CHECK(s.classes[0].name == "fast");
  CHECK(s.classes[1].priority == 3);
  CHECK(s.classes[0].arrived + s.classes[1].arrived == 400);
  CHECK(*s.classes[0].slo_attainment == 1.0);
  CHECK(*s.classes[1].slo_attainment == 0.0);
  // Overall: the requests that met their own class's target, over all finished ones.
  CHECK(*s.slo_attainment == approx(static_cast<double>(s.classes[0].completed) / 400));
  CHECK(s.classes[1].ttft_ms.p50 > s.classes[0].ttft_ms.p50);
}

TEST_CASE("Workload serving: random mixes of every workload feature conserve requests and blocks") {
  Rng rng(4242, "workload mixes");
  int with_sessions = 0, closed = 0;
  for (int trial = 0; trial < 60; ++trial) {
    CAPTURE(trial);
    auto config = test::one_pool(test::tiny_model(), test::ideal_chip(), static_cast<int>(rng.uniform_int(1, 3)));
    config.pools[0].max_model_len = 2000;
    config.seed = rng.next_u64();
    const int classes = static_cast<int>(rng.uniform_int(1, 3));
    for (int k = 0; k < classes; ++k) {
      wl::ClassConfig c;
      c.name = "c" + std::to_string(k);
      c.priority = k;
      switch (rng.uniform_int(0, 3)) {
        case 0: c.arrivals = wl::PoissonArrivals{Frequency{static_cast<double>(rng.uniform_int(1, 50)) * 1e3}}; break;
        case 1:
          c.arrivals = wl::GammaArrivals{Frequency{2e4}, 0.2 + rng.uniform01() * 4,
                                         wl::DiurnalCurve{0.9, Duration::milliseconds(5), Duration::zero()}};
          break;
        case 2: c.arrivals = wl::PoissonArrivals{Frequency{3e4}, wl::StepCurve{Duration::milliseconds(1), 0.1}}; break;
        default: {
          wl::ClosedLoopArrivals cl{static_cast<int>(rng.uniform_int(1, 8)),
                                    Duration::picoseconds(static_cast<std::int64_t>(rng.uniform_int(0, 1'000'000)))};
          cl.start = static_cast<wl::StartMode>(rng.uniform_int(0, 3));
          cl.start_over = Duration::microseconds(50);
          cl.exponential_think = rng.uniform_int(0, 1) == 1;
          c.arrivals = cl;
          ++closed;
        }
      }
      c.lengths = wl::IndependentLengths{wl::ZipfLength{1.1, 1, 1500}, wl::UniformLength{1, 300}};
      if (rng.uniform_int(0, 1)) {
        wl::PrefixConfig p;
        p.fraction = 0.5;
        p.prompts = 3;
        p.tokens = {50, 400, 900};
        c.prefixes = p;
      }
      if (rng.uniform_int(0, 1)) {
        wl::ImageConfig ic;
        ic.fraction = 0.4;
        ic.choices = {{640, 480, 1}};
        c.images = ic;
      }
      if (rng.uniform_int(0, 2) == 0) {
        wl::SessionConfig sc;
        sc.turns = wl::UniformLength{1, 4};
        sc.think_time = Duration::microseconds(10);
        c.sessions = sc;
        ++with_sessions;
      }
      config.workload.classes.push_back(c);
    }
    config.workload.requests = static_cast<std::int64_t>(rng.uniform_int(20, 150));
    metrics::RunMetrics m;
    cluster::Simulation sim(config, m);
    sim.set_paranoid(true);
    const auto r = sim.run();
    const auto s = metrics::summarize(m, r.end, {});
    CHECK(s.arrived == config.workload.requests);
    CHECK(s.in_flight == 0);
    CHECK(s.arrived == s.completed + s.rejected);
    CHECK(sim.drained());
    // Every request finished, so every id span went back to the source's ring.
    CHECK(sim.source().ids().live_spans() == 0);
    std::int64_t by_class = 0;
    for (const auto& c : s.classes) by_class += c.arrived;
    CHECK(by_class == s.arrived);
  }
  CHECK(with_sessions > 5);
  CHECK(closed > 5);
}
