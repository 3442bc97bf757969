// Speculative decoding with MTP (config.h SpeculativeConfig, Lane::enable_speculative,
// IterationCostModel::set_speculative) against values derived by hand on the tiny model and the
// ideal chip of test_config.h (every operator takes its FLOPs in ps), given one MTP layer.
//
// Tiny-model figures (as in preemption_swap_test.cpp): a token through both layers' GEMMs is
// 2 x 81,920 = 163,840 FLOPs (qkv 24,576 + out 8,192 + MLP 49,152 per layer), the LM head 12,800
// per logit (2 x 64 x 100), decode attention 4 hd hq = 256 FLOPs per context token per layer, a
// prefill chunk 256 per query-key pair per layer.
// One request of 8 prompt tokens on one combined instance: the prefill iteration is
// 163,840 x 8 + 2 x 256 x 8 x 8 + 12,800 = 1,356,288 ps and emits token 1. A decode step over a
// context of c tokens (its new one included) costs, without MTP,
//   163,840 + 12,800 + 512 c = 176,640 + 512 c;
// with k = 1 (w = 2 query tokens) the verification costs 2 x 176,640 + 2 x 512 c and the draft
// step eh_proj 2 x 128 x 64 = 16,384 + one layer 81,920 + LM head 12,800 + one layer's attention
// 256 c = 111,104 + 256 c, so a step takes 464,384 + 1,280 c, 287,744 + 768 c more.
#include <doctest/doctest.h>

#include "sim/cluster/simulation.h"
#include "test_config.h"
#include "tests/approx.h"

using namespace servesim;

namespace {

constexpr std::int64_t kPrefillPs = 1'356'288;

cluster::SimulationConfig one_request(std::int64_t output, double acceptance, bool mtp, std::uint64_t seed = 1,
                                      int requests = 1) {
  models::ModelSpec model = test::tiny_model();
  model.mtp_layers = 1;
  auto config = test::one_pool(model, test::ideal_chip());
  config.seed = seed;
  if (mtp) {
    cluster::SpeculativeConfig& s = config.pools[0].speculative;
    s.method = cluster::SpeculativeMethod::kMtp;
    s.draft_tokens = 1;
    s.acceptance = {acceptance};
  }
  config.workload = test::fixed_closed_loop(requests, requests, 8, output);
  return config;
}

struct Run {
  metrics::RunMetrics m;
  SimTime end;
  std::int64_t iterations = 0;
  std::int64_t draft_ps = 0;
};

void run(const cluster::SimulationConfig& config, Run& r) {
  cluster::Simulation sim(config, r.m);
  sim.set_paranoid(true);  // blocks = the requests' contexts (accepted tokens included), every event
  r.end = sim.run().end;
  CHECK(sim.drained());
  r.iterations = r.m.pools()[0].iterations;
  r.draft_ps = r.m.pools()[0].component_ps[static_cast<std::size_t>(models::OpKind::kMtpDraft)];
}

}  // namespace

TEST_CASE("MTP: acceptance 1 with k = 1 finishes 2m + 1 output tokens in m decode iterations") {
  // Output 11 = 2 x 5 + 1: the prefill emits token 1, each of 5 decode steps two more. Step j
  // attends over c = 9 + 2j tokens (8 + 2j of KV, its new one): sum over j = 0..4 of
  // 464,384 + 1,280 (9 + 2j) = 2,321,920 + 1,280 x 65 = 2,405,120 ps.
  Run r;
  run(one_request(11, 1.0, true), r);
  const auto& q = r.m.requests().at(0);
  CHECK(r.iterations == 1 + 5);
  CHECK(r.m.output_tokens() == 11);
  CHECK(q.first_token.ps() == kPrefillPs);
  CHECK(q.completion.ps() == kPrefillPs + 2'405'120);
  // The draft steps: sum of 111,104 + 256 (9 + 2j) = 555,520 + 256 x 65 = 572,160 ps.
  CHECK(r.draft_ps == 572'160);
  // TPOT = decode time / (output - 1) = 2,405,120 / 10 ps.
  const auto s = metrics::summarize(r.m, r.end, {});
  CHECK(s.tpot_ms.mean == approx(0.2405120e-3).epsilon(1e-9));
}

TEST_CASE("MTP: the last step accepts at most what is left of the output") {
  // Output 10: steps 0..3 emit 2 tokens each (9 in all), step 4 has 1 left, so its draft is not
  // taken: 5 decode iterations, exactly 10 tokens, and its KV holds 8 + 9 = 17 tokens before the
  // last step (c = 9 + 2j for j = 0..4, as above: the same 2,405,120 ps).
  Run r;
  run(one_request(10, 1.0, true), r);
  CHECK(r.iterations == 1 + 5);
  CHECK(r.m.output_tokens() == 10);
  CHECK(r.m.requests().at(0).completion.ps() == kPrefillPs + 2'405'120);
}

TEST_CASE("MTP: acceptance 0 emits what decoding without MTP does, in costlier iterations") {
  // Output 11: 10 decode steps either way, step j over c = 9 + j (sum over j of c = 135).
  // Without MTP: 10 x 176,640 + 512 x 135 = 1,835,520 ps. With: each step 287,744 + 768 c more,
  // 2,877,440 + 103,680 = 2,981,120 ps more; of which drafts 10 x 111,104 + 256 x 135 =
  // 1,145,600 ps.
  Run off, on;
  run(one_request(11, 0.0, false), off);
  run(one_request(11, 0.0, true), on);
  CHECK(off.iterations == 11);
  CHECK(on.iterations == 11);
  CHECK(on.m.output_tokens() == off.m.output_tokens());
  CHECK(off.m.requests().at(0).completion.ps() == kPrefillPs + 1'835'520);
  CHECK(on.m.requests().at(0).completion.ps() == kPrefillPs + 1'835'520 + 2'981'120);
  CHECK(off.draft_ps == 0);
  CHECK(on.draft_ps == 1'145'600);
}

TEST_CASE("MTP: random acceptance is deterministic by seed, per request, around 1 + a tokens per step") {
  // a = 0.7, one request of 2,001 output tokens: 2,000 tokens from N decode steps, each emitting
  // 1 + X with X ~ Bernoulli(0.7) independently (the last one capped). N is about 2,000 / 1.7 =
  // 1,176; the mean of X over N steps has standard deviation sqrt(0.7 x 0.3 / 1,176) = 0.0134, so
  // 2,000 / N lies within 1.7 +- 4 x 0.0134 = 1.7 +- 0.054 (and the one capped step moves it by
  // at most 1 / N < 0.001).
  Run a, b, c;
  run(one_request(2001, 0.7, true, 1), a);
  run(one_request(2001, 0.7, true, 1), b);
  run(one_request(2001, 0.7, true, 2), c);
  const std::int64_t steps = a.iterations - 1;
  CHECK(2000.0 / static_cast<double>(steps) == approx(1.7).epsilon(0.054 / 1.7));
  CHECK(b.iterations == a.iterations);
  CHECK(b.m.requests().at(0).completion == a.m.requests().at(0).completion);
  // Another seed draws other acceptances (the chance that two seeds give the same count is
  // that of two binomial-like counts with sd ~ 16 steps coinciding: ~2%; seeds 1 and 2 differ).
  CHECK(c.iterations != a.iterations);
  CHECK(c.m.output_tokens() == 2001);

  // Two requests in one batch draw independently: their completions differ.
  Run two;
  run(one_request(401, 0.7, true, 1, 2), two);
  CHECK(two.m.output_tokens() == 802);
  CHECK(two.m.requests().at(0).completion != two.m.requests().at(1).completion);
}
