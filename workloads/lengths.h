// Token-length distributions and the samplers that draw a request's prompt and output lengths.
//
// Distributions (integers, every one clipped to [min, max] where it has bounds):
//   fixed      the value
//   uniform    uniform on [min, max]
//   normal     round(N(mean, stddev^2)), clipped (not resampled) to [min, max]
//   lognormal  round(exp(N(ln median, sigma^2))), clipped to [min, max]
//   zipf       P(k) proportional to k^-exponent on [min, max] (a discrete power law), drawn by
//              rejection-inversion (Hoermann & Derflinger, "Rejection-inversion to generate
//              variates from monotone discrete distributions", ACM TOMACS 6(3), 1996): O(1)
//              expected time and no table, whatever the range.
// Lengths come either from two independent distributions (prompt and output, each on its own RNG
// stream) or jointly from the rows of a trace (TraceLengths: the empirical joint distribution,
// replayed in a seeded shuffle or in file order). An optional cap on prompt + output shrinks both
// in proportion (Vidur's trace length generator), so a capped request keeps its shape.
// Not here: correlation between prompt and output beyond what a trace's rows carry.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/rng.h"

namespace servesim::workloads {

struct FixedLength {
  std::int64_t value = 0;
  bool operator==(const FixedLength&) const = default;
};
struct UniformLength {
  std::int64_t min = 0, max = 0;  // inclusive
  bool operator==(const UniformLength&) const = default;
};
struct NormalLength {
  double mean = 0;
  double stddev = 0;
  std::int64_t min = 1;
  std::int64_t max = 0;
  bool operator==(const NormalLength&) const = default;
};
// exp(N(ln median, sigma^2)), rounded to the nearest integer and clipped to [min, max].
struct LognormalLength {
  double median = 0;
  double sigma = 0;
  std::int64_t min = 1;
  std::int64_t max = 0;
  bool operator==(const LognormalLength&) const = default;
};
struct ZipfLength {
  double exponent = 1;  // > 0
  std::int64_t min = 1;
  std::int64_t max = 0;
  bool operator==(const ZipfLength&) const = default;
};
using LengthDistribution = std::variant<FixedLength, UniformLength, NormalLength, LognormalLength, ZipfLength>;

struct IndependentLengths {
  LengthDistribution prompt;
  LengthDistribution output;
  std::int64_t max_total_tokens = 0;  // 0: no cap; else prompt + output shrink in proportion
  bool operator==(const IndependentLengths&) const = default;
};

struct RequestLengths {
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  bool operator==(const RequestLengths&) const = default;
};

// Rows of a CSV file with a prompt and an output length column. When a row's total exceeds
// max_total_tokens, the excess is taken from prompt and output in proportion to their sizes
// (rounded up) and both are kept at least 1, as Vidur's trace length generator does, so the
// bench scenarios match that tool's workload exactly.
struct TraceLengths {
  std::string path;  // as resolved by the loader (relative to the scenario file)
  std::string prompt_column = "num_prefill_tokens";
  std::string output_column = "num_decode_tokens";
  std::int64_t max_total_tokens = 0;                // 0: no cap
  bool shuffle = true;                              // a seeded permutation of the rows; otherwise file order
  std::string key_path = "workload.lengths.trace";  // the scenario key, for diagnostics
  // The rows as read (capped, in file order), when the loader has read them already; the sampler
  // reads the file itself otherwise.
  std::shared_ptr<const std::vector<RequestLengths>> rows;
};

using LengthConfig = std::variant<IndependentLengths, TraceLengths>;

// Rejection-inversion for P(k) ~ k^-s on [min, max]: one uniform, one power and usually no
// rejection per draw (acceptance > 0.9 for any s > 0).
class ZipfSampler {
 public:
  explicit ZipfSampler(const ZipfLength& d);
  std::int64_t operator()(Rng& rng) const;

 private:
  double h(double x) const;           // x^-s
  double h_integral(double x) const;  // an antiderivative of h
  double h_integral_inverse(double y) const;
  double s_;
  std::int64_t min_, max_;
  double lo_, hi_;  // the range of H the uniform is mapped onto
};

// One distribution ready to draw from: constants (ln median, the Zipf hat) computed once, the
// same numbers as sample_length.
class LengthDraw {
 public:
  explicit LengthDraw(const LengthDistribution& d);
  std::int64_t operator()(Rng& rng) const;

 private:
  enum class Kind : std::uint8_t { kFixed, kUniform, kNormal, kLognormal, kZipf };
  Kind kind_;
  double a_ = 0, b_ = 0;  // normal: mean, stddev; lognormal: ln median, sigma
  std::int64_t min_ = 0, max_ = 0;
  std::unique_ptr<ZipfSampler> zipf_;
};

// std::round (halves away from zero) without the libm call, for the hot paths: truncation by
// conversion, then the remainder, which is exact below 2^52 (Sterbenz), decides. Beyond 2^52
// every double is an integer already.
inline double round_half_away(double x) {
  if (!(x < 4503599627370496.0 && x > -4503599627370496.0)) return std::round(x);
  const double t = static_cast<double>(static_cast<std::int64_t>(x));
  const double r = x - t;
  return r >= 0.5 ? t + 1 : r <= -0.5 ? t - 1 : t;
}

// The proportional cap (Vidur's trace length generator); both parts are kept >= 1.
RequestLengths cap_lengths(std::int64_t prompt, std::int64_t output, std::int64_t max_total);

// Draws request lengths. Rows of a trace are used in order (or in a seeded shuffle) and reused
// from the start when the run needs more requests than the trace has.
class LengthSampler {
 public:
  virtual ~LengthSampler() = default;
  virtual RequestLengths next() = 0;
};

// Reads a trace's rows and applies the cap; throws InputError (file, line, column) on a bad file.
std::shared_ptr<const std::vector<RequestLengths>> load_trace_rows(const TraceLengths& config);
// Reads the trace unless the config carries its rows already. Streams are named
// `<stream_prefix>prompt_lengths`, `<stream_prefix>output_lengths`, `<stream_prefix>trace_order`.
std::unique_ptr<LengthSampler> make_length_sampler(const LengthConfig& config, std::uint64_t seed,
                                                   std::string_view stream_prefix = "");

// Drawing one value; exposed for the statistical tests.
std::int64_t sample_length(const LengthDistribution& d, Rng& rng);
// The mean of a length distribution after rounding and clipping (computed numerically for the
// normal and lognormal, by summation for the Zipf: O(max - min)), for tests.
double expected_length(const LengthDistribution& d);
// The shortest and longest values a distribution can draw.
std::int64_t shortest_length(const LengthDistribution& d);
std::int64_t longest_length(const LengthDistribution& d);

}  // namespace servesim::workloads
