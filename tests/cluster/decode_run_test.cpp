// Decode runs (sim/cluster/simulation.h): a decode instance running several decode steps in one
// event keeps the per-step schedule. With one decode instance the placement has no choice, so
// every request's arrival, first token and completion must be the same picosecond as with one
// event per step, and every metric the same number; only the event count drops. The time series
// and the trace, fed each step of a run as it is applied, are the same as from per-step events.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "sim/cluster/simulation.h"
#include "test_config.h"

using namespace servesim;

namespace {

// Four prefill instances feeding one decode instance, under Poisson traffic with lognormal
// lengths: the decode batch changes every few steps (joins and finishes), so runs are cut and
// re-planned all the time.
cluster::SimulationConfig epd(const models::ModelSpec& model, int decode_instances = 1) {
  auto config = test::prefill_decode(model, 4, decode_instances);
  config.workload = workloads::single_class(workloads::PoissonArrivals{Frequency{4e4}},
                                            workloads::IndependentLengths{workloads::LognormalLength{100, 0.6, 8, 400},
                                                                          workloads::LognormalLength{150, 0.8, 1, 600}},
                                            400);
  config.seed = 7;
  return config;
}

struct Outcome {
  metrics::RunMetrics m;
  cluster::RunResult result;
  metrics::Summary summary;
};

void run(cluster::SimulationConfig config, int steps_per_event, Outcome& out) {
  config.decode_steps_per_event = steps_per_event;
  out.m.enable_time_series();
  out.m.enable_trace(metrics::TraceOptions{});
  cluster::Simulation sim(config, out.m);
  sim.set_paranoid(true);
  out.result = sim.run();
  CHECK(sim.drained());
  out.summary = metrics::summarize(out.m, out.result.end, {});
}

metrics::Summary same_schedule(const cluster::SimulationConfig& config) {
  Outcome step, merged;
  run(config, 1, step);
  run(config, 64, merged);
  REQUIRE(step.m.requests().size() == merged.m.requests().size());
  for (std::size_t i = 0; i < step.m.requests().size(); ++i) {
    CAPTURE(i);
    const auto& a = step.m.requests()[i];
    const auto& b = merged.m.requests()[i];
    CHECK(a.arrival == b.arrival);
    CHECK(a.first_token == b.first_token);
    CHECK(a.completion == b.completion);
    CHECK(a.output_tokens == b.output_tokens);
  }
  CHECK(step.result.end == merged.result.end);
  CHECK(step.m.output_tokens() == merged.m.output_tokens());
  CHECK(step.summary.ttft_ms.mean == merged.summary.ttft_ms.mean);
  CHECK(step.summary.tpot_ms.mean == merged.summary.tpot_ms.mean);
  CHECK(step.summary.itl_ms.mean == merged.summary.itl_ms.mean);
  REQUIRE(step.summary.tpot_breakdown_ms.size() == merged.summary.tpot_breakdown_ms.size());
  for (std::size_t k = 0; k < step.summary.tpot_breakdown_ms.size(); ++k) {
    CHECK(step.summary.tpot_breakdown_ms[k] == merged.summary.tpot_breakdown_ms[k]);
  }
  for (std::size_t p = 0; p < step.summary.pools.size(); ++p) {
    CHECK(step.summary.pools[p].iterations == merged.summary.pools[p].iterations);
    CHECK(step.summary.pools[p].utilization == merged.summary.pools[p].utilization);
  }
  // What the time series and the trace recorded: every bucket and every span the same.
  const metrics::TimeSeries& sa = *step.m.time_series();
  const metrics::TimeSeries& sb = *merged.m.time_series();
  CHECK(sa.width_ps() == sb.width_ps());
  CHECK(sa.buckets() == sb.buckets());
  CHECK(sa.arrivals() == sb.arrivals());
  REQUIRE(sa.pools().size() == sb.pools().size());
  for (std::size_t p = 0; p < sa.pools().size(); ++p) {
    CAPTURE(p);
    CHECK(sa.pools()[p].counters == sb.pools()[p].counters);
    CHECK(sa.pools()[p].integrals == sb.pools()[p].integrals);
    CHECK(sa.pools()[p].value == sb.pools()[p].value);
  }
  const auto& ta = step.m.trace_log()->spans();
  const auto& tb = merged.m.trace_log()->spans();
  REQUIRE(ta.size() == tb.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < ta.size(); ++i) {
    const bool same = ta[i].start_ps == tb[i].start_ps && ta[i].end_ps == tb[i].end_ps && ta[i].pool == tb[i].pool &&
                      ta[i].instance == tb[i].instance && ta[i].kind == tb[i].kind &&
                      std::equal(std::begin(ta[i].args), std::end(ta[i].args), std::begin(tb[i].args));
    differ += same ? 0 : 1;
  }
  CHECK(differ == 0);
  // Every decode step is a span (a run's steps included); the step in flight when the instance
  // failed (one fault at most here) has one too, but never ends as an iteration.
  std::int64_t decode_spans = 0;
  for (const auto& span : tb) {
    decode_spans += span.pool == 1 && span.kind == metrics::TraceKind::kIteration ? 1 : 0;
  }
  CHECK(decode_spans >= merged.summary.pools[1].iterations);
  CHECK(decode_spans <= merged.summary.pools[1].iterations + 1);
  // The runs happened: the decode pool's steps outnumber its events by far.
  MESSAGE("events per step: " << step.result.events << ", runs: " << merged.result.events);
  CHECK(merged.result.events < step.result.events * 3 / 4);
  // Their steps were costed a chunk at a time: provisional ends came up and moved on.
  CHECK(merged.result.refiled > 0);
  CHECK(step.result.refiled == 0);
  return step.summary;
}

}  // namespace

TEST_CASE("Decode runs: several decode steps per event give the per-step schedule") {
  same_schedule(epd(test::tiny_model()));
}

TEST_CASE("Decode runs: capped context sums (sliding window) are looked ahead exactly") {
  // Half the layers attend to a 32-token window: contexts reach the cap during runs, so the
  // lookahead's capped sums must advance as the lane's own do.
  models::ModelSpec m = test::tiny_model();
  m.window.window = 32;
  m.window.pattern = "SF";
  same_schedule(epd(m));
}

TEST_CASE("Decode runs: a failure mid-run settles the steps before it") {
  for (const auto policy : {cluster::FailurePolicy::kLose, cluster::FailurePolicy::kRequeue}) {
    CAPTURE(static_cast<int>(policy));
    auto config = epd(test::tiny_model());
    config.cluster = cluster::default_cluster(config.pools);
    topologies::ScheduledFault f;
    f.target = topologies::FaultTarget{topologies::FaultKind::kChip, 4};  // the decode instance
    f.at = SimTime::zero() + Duration::microseconds(3000);
    config.cluster->faults.scheduled.push_back(f);
    config.failures.policy = policy;
    config.failures.repair = Duration::microseconds(500);
    const metrics::Summary s = same_schedule(config);
    CHECK(s.lost + s.requeued > 0);  // the failure hit requests on the decode instance
  }
}
