// Request sources: length distributions, trace rows, and bad trace files.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "sim/core/errors.h"
#include "workloads/workload.h"

using namespace servesim;
using namespace servesim::workloads;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("servesim_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}

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
    CHECK(expected_length(d) == doctest::Approx(1133.1).epsilon(1e-3));
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

TEST_CASE("Poisson arrivals: the mean gap is 1 / rate") {
  // Rate 50 /s: mean gap 20 ms, standard deviation 20 ms; over 1e5 gaps the standard error is
  // 20 ms / sqrt(1e5) = 0.063 ms.
  PoissonProcess p(Frequency{50}, 11);
  double sum = 0;
  for (int i = 0; i < 100'000; ++i) sum += p.next_gap().to_seconds();
  CHECK(std::fabs(sum / 1e5 - 0.020) < 5 * 0.063e-3);
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
    CHECK(d.message == "cannot open the trace file");
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
