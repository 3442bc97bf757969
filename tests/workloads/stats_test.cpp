// Workload statistics (`servesim workload stats`) against figures computed independently from the
// shipped traces, and the prefix reuse of synthetic prefixes and sessions derived by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "tests/approx.h"
#include "workloads/stats.h"

using namespace servesim;
using namespace servesim::workloads;

namespace {

const std::string kTraces = SERVESIM_SOURCE_DIR "/workloads/traces/";

WorkloadConfig trace(const std::string& file) {
  TraceReplay t;
  t.path = kTraces + file;
  t.scan = std::make_shared<TraceScan>(scan_trace(t));
  ClassConfig c;
  c.arrivals = t;
  WorkloadConfig w;
  w.classes.push_back(c);
  return w;
}

WorkloadStats stats_of(const WorkloadConfig& w, int windows = 10) {
  StatsOptions o;
  o.windows = windows;
  return compute_stats(w, 0, SimTime::never(), o);
}

}  // namespace

// Expected figures below come from one-off Python over the files (percentiles with numpy's
// "linear" definition, written out: v = sorted(x); r = q (n - 1); v[floor r] + frac(r) x
// (v[floor r + 1] - v[floor r])):
//   rows = list(csv.DictReader(open(f))); p = [int(r['ContextTokens']) for r in rows]
//   len(rows), sum(p) / len(rows), q(p, .5), q(p, .9), q(p, .99)

TEST_CASE("Workload stats: the Azure 2023 conversation trace") {
  // 19366 rows; prompt mean 22361870 / 19366 = 1154.6974078, p50 1020, p90 2734.5, p99 4142,
  // min 2, max 14050; output mean 4088665 / 19366 = 211.1259, p50 129, p99 601; span 3501.721937 s.
  const WorkloadStats s = stats_of(trace("azure_llm_2023_conv.csv"));
  CHECK(s.requests == 19366);
  CHECK(s.prompt_tokens.mean == approx(22361870.0 / 19366).epsilon(1e-12));
  CHECK(s.prompt_tokens.p50 == 1020);
  CHECK(s.prompt_tokens.p90 == approx(2734.5));
  CHECK(s.prompt_tokens.p99 == 4142);
  CHECK(s.prompt_tokens.min == 2);
  CHECK(s.prompt_tokens.max == 14050);
  CHECK(s.output_tokens.mean == approx(4088665.0 / 19366).epsilon(1e-12));
  CHECK(s.output_tokens.p50 == 129);
  CHECK(s.output_tokens.p99 == 601);
  CHECK(s.last_arrival_s == approx(3501.721937).epsilon(1e-12));
  CHECK(s.mean_rate_per_s == approx(19366 / 3501.721937).epsilon(1e-12));
  // Ten windows of 350.17 s that hold every request once.
  REQUIRE(s.windows.size() == 10);
  std::int64_t total = 0;
  for (const auto& w : s.windows) total += w.requests;
  CHECK(total == 19366);
  CHECK(s.windows[9].end_s == approx(3501.721937));
  CHECK(s.reuse_ratio == 0);  // no hash ids, prefixes or sessions
  CHECK(s.requests_with_hash_ids == 0);
  CHECK_FALSE(s.zero_service);
}

TEST_CASE("Workload stats: the Azure 2023 code trace") {
  // 8819 rows; prompt mean 18059974 / 8819 = 2047.8483, p50 1469, p90 5187.6, p99 7436;
  // output p99 251.46.
  const WorkloadStats s = stats_of(trace("azure_llm_2023_code.csv"));
  CHECK(s.requests == 8819);
  CHECK(s.prompt_tokens.mean == approx(18059974.0 / 8819).epsilon(1e-12));
  CHECK(s.prompt_tokens.p50 == 1469);
  CHECK(s.prompt_tokens.p90 == approx(5187.6));
  CHECK(s.prompt_tokens.p99 == 7436);
  CHECK(s.output_tokens.p99 == approx(251.46));
}

TEST_CASE("Workload stats: the Mooncake conversation trace and its prefix reuse") {
  // 12031 rows; input mean 144793823 / 12031 = 12035.0613, p50 6909, p99 85400.4; last
  // timestamp 3536999 ms. Prefix reuse, Python:
  //   seen = set(); reused = total = 0
  //   for r in rows:
  //     total += r['input_length']
  //     for j, h in enumerate(r['hash_ids']):
  //       if h in seen: reused += min(512, r['input_length'] - 512 * j)
  //       seen.add(h)
  //   reused = 54098411, total = 144793823, ratio 0.3736237491
  const WorkloadStats s = stats_of(trace("mooncake_fast25_conversation_trace.jsonl"));
  CHECK(s.requests == 12031);
  CHECK(s.prompt_tokens.mean == approx(144793823.0 / 12031).epsilon(1e-12));
  CHECK(s.prompt_tokens.p50 == 6909);
  CHECK(s.prompt_tokens.p99 == approx(85400.4));
  CHECK(s.last_arrival_s == approx(3536.999).epsilon(1e-12));
  CHECK(s.requests_with_hash_ids == 12031);
  CHECK(s.prompt_tokens_total == 144793823);
  CHECK(s.reused_tokens == 54098411);
  CHECK(s.reuse_ratio == approx(0.3736237491).epsilon(1e-9));
}

TEST_CASE("Workload stats: the Mooncake synthetic trace's prefix reuse") {
  // The same Python: 3993 rows, reused 39852661 of 61194628 prompt tokens (0.6512444360).
  const WorkloadStats s = stats_of(trace("mooncake_fast25_synthetic_trace.jsonl"));
  CHECK(s.requests == 3993);
  CHECK(s.reused_tokens == 39852661);
  CHECK(s.reuse_ratio == approx(0.6512444360).epsilon(1e-9));
}

TEST_CASE("Workload stats: shared prefixes and session histories count as reuse in whole blocks") {
  // One shared prompt of 1000 tokens in front of every request, 100 own tokens, 10 out; blocks of
  // 16 tokens. Request 1 has nothing seen before; every later one reuses floor(1000 / 16) x 16 =
  // 992 of its 1100 prompt tokens: over n requests, 992 (n - 1) / (1100 n).
  ClassConfig c;
  c.arrivals = PoissonArrivals{Frequency{10}, std::nullopt};
  c.lengths = IndependentLengths{FixedLength{100}, FixedLength{10}};
  PrefixConfig p;
  p.prompts = 1;
  p.tokens = {1000};
  c.prefixes = p;
  WorkloadConfig w;
  w.classes.push_back(c);
  w.requests = 50;
  WorkloadStats s = stats_of(w);
  CHECK(s.requests_with_prefix == 50);
  CHECK(s.distinct_prefixes == 1);
  CHECK(s.reused_tokens == 992 * 49);
  CHECK(s.reuse_ratio == approx(992.0 * 49 / (1100.0 * 50)));

  // Sessions of 2 turns (no prefix): turn 2 reuses its history, 100 + 10 = 110 tokens -> 96 in
  // whole blocks; its prompt is 110 + 100 = 210. With no think time (and no serving model) a
  // second turn arrives with its first, so every session that starts before the end has both:
  // n sessions reuse n x 96 of n x (100 + 210) prompt tokens.
  c.prefixes.reset();
  SessionConfig sc;
  sc.turns = FixedLength{2};
  c.sessions = sc;
  w.classes[0] = c;
  w.requests = 0;
  s = compute_stats(w, 0, SimTime::zero() + Duration::seconds(10), StatsOptions{});
  const std::int64_t n = s.sessions;
  CHECK(n > 50);  // 10 /s for 10 s: about 100
  CHECK(s.requests == 2 * n);
  CHECK(s.turns_mean == 2);
  CHECK(s.turns_max == 2);
  CHECK(s.zero_service);
  CHECK(s.reused_tokens == n * 96);
  CHECK(s.prompt_tokens_total == n * 310);
}

TEST_CASE("Workload stats: images and, given the model's encoder, the tokens they become") {
  // Every request has 2 images, 1024x768 or 512x512 by equal weight; a made-up encoder gives
  // w x h / 1024 tokens: 768 or 256 per image, so a request's images become 1536, 1024 or 512
  // tokens (both large, one of each, both small).
  ClassConfig c;
  c.arrivals = PoissonArrivals{Frequency{10}, std::nullopt};
  c.lengths = IndependentLengths{FixedLength{100}, FixedLength{10}};
  ImageConfig ic;
  ic.count = FixedLength{2};
  ic.choices = {{1024, 768, 1}, {512, 512, 1}};
  c.images = ic;
  WorkloadConfig w;
  w.classes.push_back(c);
  w.requests = 400;
  StatsOptions o;
  WorkloadStats s = compute_stats(w, 0, SimTime::never(), o);
  CHECK(s.requests_with_images == 400);
  CHECK(s.images == 800);
  CHECK(s.images_per_request.mean == 2);
  CHECK_FALSE(s.has_image_tokens);
  REQUIRE(s.top_resolutions.size() == 2);
  CHECK(s.top_resolutions[0].images + s.top_resolutions[1].images == 800);
  o.image_tokens = [](std::uint32_t width, std::uint32_t height) {
    return static_cast<std::int64_t>(width) * height / 1024;
  };
  s = compute_stats(w, 0, SimTime::never(), o);
  CHECK(s.has_image_tokens);
  CHECK(s.image_tokens.min >= 512);
  CHECK(s.image_tokens.max <= 1536);
  // The mean is 2 x (768 + 256) / 2 = 1024 per request; each request's sum has sd
  // sqrt(2) x 256 = 362, so over 400 requests the SE is 18.1.
  CHECK(std::fabs(s.image_tokens.mean - 1024) < 4 * 18.1);
}
