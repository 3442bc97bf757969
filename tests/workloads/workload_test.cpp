// Length distributions: sample means against the exact means, clipping, separate streams, the
// proportional cap, and trace rows (Vidur-style length-only replay) with their bad-file errors.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "tests/approx.h"
#include "tests/scratch.h"
#include "workloads/lengths.h"

using namespace servesim;
using namespace servesim::workloads;

namespace {

std::string write_temp(const std::string& name, const std::string& text) { return testing::scratch_file(name, text); }

Diagnostic first_error(const LengthConfig& config) {
  try {
    make_length_sampler(config, 1);
  } catch (const InputError& e) {
    return e.diagnostics().front();
  }
  FAIL("expected an InputError");
  return {};
}

}  // namespace

TEST_CASE("Lengths: sample means match the distributions within five standard errors") {
  Rng rng(3, "lengths");
  const int n = 100'000;
  SUBCASE("uniform [1, 100]") {
    // Mean 50.5, variance (100^2 - 1) / 12 = 833.25: standard error sqrt(833.25 / 1e5) = 0.091.
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(sample_length(UniformLength{1, 100}, rng));
    CHECK(std::fabs(sum / n - 50.5) < 5 * 0.0913);
    CHECK(expected_length(UniformLength{1, 100}) == 50.5);
  }
  SUBCASE("lognormal, median 1000, sigma 0.5, clipped to [1, 100000]") {
    // Unclipped mean exp(ln 1000 + 0.5^2 / 2) = 1133.1; sd = mean x sqrt(exp(0.25) - 1) = 604.0;
    // standard error 604.0 / sqrt(1e5) = 1.91. expected_length adds rounding and clipping exactly.
    const LognormalLength d{1000, 0.5, 1, 100000};
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(sample_length(d, rng));
    CHECK(expected_length(d) == approx(1133.1).epsilon(1e-3));
    CHECK(std::fabs(sum / n - expected_length(d)) < 5 * 1.91);
  }
  SUBCASE("lognormal clipping keeps every value in range") {
    const LognormalLength d{100, 2.0, 10, 200};
    for (int i = 0; i < 10'000; ++i) {
      const auto v = sample_length(d, rng);
      CHECK(v >= 10);
      CHECK(v <= 200);
    }
  }
}

TEST_CASE("Lengths: prompt and output draw from separate streams") {
  // Changing the output distribution must not change the prompts.
  auto a = make_length_sampler(IndependentLengths{UniformLength{1, 1000}, FixedLength{5}}, 9);
  auto b = make_length_sampler(IndependentLengths{UniformLength{1, 1000}, UniformLength{1, 9}}, 9);
  for (int i = 0; i < 100; ++i) CHECK(a->next().prompt_tokens == b->next().prompt_tokens);
}

TEST_CASE("Trace lengths: rows over the cap shrink in proportion, as Vidur does") {
  const std::string path = write_temp("cap.csv",
                                      "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                                      "0.0,3000,2000\n"
                                      "0.1,100,50\n"
                                      "0.2,4096,0\n");
  TraceLengths t;
  t.path = path;
  t.max_total_tokens = 4096;
  t.shuffle = false;
  auto s = make_length_sampler(t, 1);
  // 5000 tokens, 904 over: the prompt gives ceil(904 x 0.6) = 543, the output ceil(904 x 0.4)
  // = 362, leaving 2457 + 1638 = 4095.
  auto r = s->next();
  CHECK(r.prompt_tokens == 2457);
  CHECK(r.output_tokens == 1638);
  r = s->next();
  CHECK(r.prompt_tokens == 100);
  CHECK(r.output_tokens == 50);
  // A zero output becomes 1 (every request generates at least one token).
  r = s->next();
  CHECK(r.prompt_tokens == 4096);
  CHECK(r.output_tokens == 1);
  // The trace is reused from the start when the run needs more requests.
  CHECK(s->next().prompt_tokens == 2457);
}

TEST_CASE("Trace lengths: a shuffle visits every row once per pass, the same way for a seed") {
  std::string text = "num_prefill_tokens,num_decode_tokens\n";
  for (int i = 1; i <= 50; ++i) text += std::to_string(i) + "," + std::to_string(i) + "\n";
  TraceLengths t;
  t.path = write_temp("shuffle.csv", text);
  auto a = make_length_sampler(t, 5);
  auto b = make_length_sampler(t, 5);
  std::set<std::int64_t> seen;
  bool moved = false;
  for (int i = 0; i < 50; ++i) {
    const auto r = a->next();
    CHECK(r.prompt_tokens == b->next().prompt_tokens);
    seen.insert(r.prompt_tokens);
    moved = moved || r.prompt_tokens != i + 1;
  }
  CHECK(seen.size() == 50);
  CHECK(moved);
}

TEST_CASE("Trace lengths: bad files are reported with file, line and column") {
  TraceLengths t;
  SUBCASE("a missing file") {
    t.path = "/nonexistent/trace.csv";
    const auto d = first_error(t);
    CHECK(d.file == "/nonexistent/trace.csv");
    CHECK(d.message == "cannot open the trace file: No such file or directory");
  }
  SUBCASE("a missing column") {
    t.path = write_temp("cols.csv", "a,b\n1,2\n");
    const auto d = first_error(t);
    CHECK(d.line == 1);
    CHECK(d.message == "no column 'num_prefill_tokens' in the header (columns: a, b)");
  }
  SUBCASE("a field that is not a number") {
    t.path = write_temp("nan.csv", "num_prefill_tokens,num_decode_tokens\n10,20\n30,abc\n");
    const auto d = first_error(t);
    CHECK(d.line == 3);
    CHECK(d.column == 4);
    CHECK(d.path == "workload.lengths.trace (column num_decode_tokens)");
    CHECK(d.message == "'abc' is not a number");
  }
  SUBCASE("a fractional token count") {
    t.path = write_temp("frac.csv", "num_prefill_tokens,num_decode_tokens\n10.5,20\n");
    CHECK(first_error(t).message == "'10.5' is not a whole number of tokens");
  }
  SUBCASE("a negative token count") {
    t.path = write_temp("neg.csv", "num_prefill_tokens,num_decode_tokens\n-3,20\n");
    const auto d = first_error(t);
    CHECK(d.line == 2);
    CHECK(d.column == 1);
    CHECK(d.message == "token counts cannot be negative");
  }
  SUBCASE("a row with too few fields") {
    t.path = write_temp("short.csv", "num_prefill_tokens,num_decode_tokens\n10,20\n7\n");
    const auto d = first_error(t);
    CHECK(d.line == 3);
    CHECK(d.message == "expected 2 comma-separated fields as in the header, found 1");
  }
}

namespace {

// Sample mean and variance of n draws.
struct Moments {
  double mean = 0, var = 0;
};
template <class Draw>
Moments moments(int n, Draw draw) {
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const auto v = static_cast<double>(draw());
    sum += v;
    sq += v * v;
  }
  const double m = sum / n;
  return {m, sq / n - m * m};
}

// The exact mean and variance of P(k) ~ k^-s on [lo, hi].
Moments zipf_moments(double s, std::int64_t lo, std::int64_t hi) {
  double w = 0, m1 = 0, m2 = 0;
  for (std::int64_t k = lo; k <= hi; ++k) {
    const double p = std::pow(static_cast<double>(k), -s), kd = static_cast<double>(k);
    w += p;
    m1 += kd * p;
    m2 += kd * kd * p;
  }
  return {m1 / w, m2 / w - (m1 / w) * (m1 / w)};
}

}  // namespace

TEST_CASE("Lengths: a clipped normal's sample mean matches its exact mean within four standard errors") {
  Rng rng(5, "normal");
  const int n = 200'000;
  SUBCASE("mean 500, stddev 200 on [1, 2000]: almost no clipping") {
    // expected_length sums k P(round(X) = k) with the tails folded onto 1 and 2000; P(X < 0.5)
    // = Phi(-2.5) = 0.6%, so the mean is a little above 500. SE <= 200 / sqrt(2e5) = 0.447.
    const NormalLength d{500, 200, 1, 2000};
    const double exact = expected_length(d);
    CHECK(exact > 500);
    CHECK(exact < 502);
    const Moments m = moments(n, [&] { return sample_length(d, rng); });
    CHECK(std::fabs(m.mean - exact) < 4 * 200 / std::sqrt(n));
  }
  SUBCASE("mean 100, stddev 100 on [50, 150]: heavy clipping at both ends") {
    // round(X) <= 50 when X < 50.5: Phi(-0.495) = 31.0% folds onto 50, as much onto 150; by
    // symmetry about 100 the exact mean is 100. The clipped sd is at most 50: SE <= 0.112.
    const NormalLength d{100, 100, 50, 150};
    CHECK(expected_length(d) == approx(100.0).epsilon(1e-9));
    int at_ends = 0;
    const Moments m = moments(n, [&] {
      const auto v = sample_length(d, rng);
      CHECK(v >= 50);
      CHECK(v <= 150);
      at_ends += v == 50 || v == 150;
      return v;
    });
    CHECK(std::fabs(m.mean - 100) < 4 * 50 / std::sqrt(n));
    // 2 x Phi(-0.495) = 0.6206 of the draws on the ends; binomial SE sqrt(p q / n) = 0.00109.
    CHECK(std::fabs(static_cast<double>(at_ends) / n - 0.6206) < 4 * 0.00109);
  }
}

TEST_CASE("Lengths: Zipf draws by rejection-inversion follow k^-s exactly") {
  Rng rng(6, "zipf");
  const int n = 200'000;
  for (const auto& [s, lo, hi] :
       {std::tuple{1.1, std::int64_t{1}, std::int64_t{1000}}, std::tuple{1.0, std::int64_t{1}, std::int64_t{100}},
        std::tuple{2.5, std::int64_t{100}, std::int64_t{10000}}, std::tuple{0.5, std::int64_t{10}, std::int64_t{20}}}) {
    CAPTURE(s);
    CAPTURE(lo);
    const ZipfLength d{s, lo, hi};
    const LengthDraw draw(d);
    const Moments exact = zipf_moments(s, lo, hi);
    CHECK(expected_length(d) == approx(exact.mean).epsilon(1e-12));
    std::int64_t at_lo = 0;
    const Moments m = moments(n, [&] {
      const auto v = draw(rng);
      REQUIRE(v >= lo);
      REQUIRE(v <= hi);
      at_lo += v == lo;
      return v;
    });
    // Mean within 4 standard errors sqrt(var / n) of the exact mean; the share of the smallest
    // value within 4 binomial standard errors of lo^-s / sum k^-s.
    CHECK(std::fabs(m.mean - exact.mean) < 4 * std::sqrt(exact.var / n));
    double w = 0;
    for (std::int64_t k = lo; k <= hi; ++k) w += std::pow(static_cast<double>(k), -s);
    const double p = std::pow(static_cast<double>(lo), -s) / w;
    CHECK(std::fabs(static_cast<double>(at_lo) / n - p) < 4 * std::sqrt(p * (1 - p) / n));
  }
}

TEST_CASE("Lengths: a prepared draw gives the same numbers as sample_length") {
  // LengthDraw caches ln(median) and the Zipf constants; the draws must not move.
  const std::vector<LengthDistribution> ds = {FixedLength{7}, UniformLength{3, 900}, NormalLength{300, 90, 1, 1000},
                                              LognormalLength{1024, 0.8, 16, 12288}, ZipfLength{1.2, 1, 5000}};
  for (std::size_t i = 0; i < ds.size(); ++i) {
    CAPTURE(i);
    Rng a(9, "same"), b(9, "same");
    const LengthDraw draw(ds[i]);
    for (int k = 0; k < 1000; ++k) CHECK(draw(a) == sample_length(ds[i], b));
  }
}

TEST_CASE("Lengths: independent lengths under a cap shrink in proportion like trace rows") {
  // Prompt 3000 and output 2000 capped at 4096: the same arithmetic as the trace test above,
  // 2457 + 1638.
  auto s = make_length_sampler(IndependentLengths{FixedLength{3000}, FixedLength{2000}, 4096}, 1);
  const auto r = s->next();
  CHECK(r.prompt_tokens == 2457);
  CHECK(r.output_tokens == 1638);
  CHECK(shortest_length(UniformLength{5, 9}) == 5);
  CHECK(longest_length(ZipfLength{1, 2, 77}) == 77);
}

TEST_CASE("Lengths: round_half_away rounds exactly like std::round") {
  Rng rng(12, "round");
  for (int i = 0; i < 200'000; ++i) {
    // Wide magnitudes, both signs, and exact halves.
    const double mag = std::ldexp(rng.uniform01(), static_cast<int>(rng.uniform_int(0, 70)) - 10);
    const double x = (i % 2 ? -1 : 1) * (i % 3 == 0 ? std::floor(mag) + 0.5 : mag);
    REQUIRE(round_half_away(x) == std::round(x));
  }
  CHECK(round_half_away(0.49999999999999994) == 0.0);  // floor(x + 0.5) would give 1
  CHECK(round_half_away(2.5) == 3.0);
  CHECK(round_half_away(-2.5) == -3.0);
}
