// Request sources: when requests arrive and how long their prompts and outputs are.
//
// Arrivals: open-loop Poisson at a fixed rate, or closed-loop clients (N users, each sending its
// next request a think time after its previous one completed or was rejected; the serving model
// drives those, this module only samples). Lengths: prompt and output drawn independently from
// fixed, uniform or lognormal distributions, or jointly from the rows of a trace file.
// Every sampler draws from its own named RNG stream, so changing the length distribution never
// changes the arrival times.
// Not yet here (the workloads issue): bursty and diurnal processes, tenants, multimodal inputs,
// shared prefixes and sessions, streamed trace replay of arrival times.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "sim/core/units.h"

namespace servesim::workloads {

struct FixedLength {
  std::int64_t value = 0;
};
struct UniformLength {
  std::int64_t min = 0, max = 0;  // inclusive
};
// exp(N(ln median, sigma^2)), rounded to the nearest integer and clipped to [min, max].
struct LognormalLength {
  double median = 0;
  double sigma = 0;
  std::int64_t min = 1;
  std::int64_t max = 0;
};
using LengthDistribution = std::variant<FixedLength, UniformLength, LognormalLength>;

struct IndependentLengths {
  LengthDistribution prompt;
  LengthDistribution output;
};

struct RequestLengths {
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
};

// Rows of a CSV file with a prompt and an output length column. When a row's total exceeds
// max_total_tokens, the excess is taken from prompt and output in proportion to their sizes
// (rounded up) and both are kept at least 1, as Vidur's trace length generator does, so the
// bench scenarios match that tool's workload exactly.
struct TraceLengths {
  std::string path;               // as resolved by the loader (relative to the scenario file)
  std::string prompt_column = "num_prefill_tokens";
  std::string output_column = "num_decode_tokens";
  std::int64_t max_total_tokens = 0;  // 0: no cap
  bool shuffle = true;            // a seeded permutation of the rows; otherwise file order
  // The rows as read (capped, in file order), when the loader has read them already; the sampler
  // reads the file itself otherwise.
  std::shared_ptr<const std::vector<RequestLengths>> rows;
};

using LengthConfig = std::variant<IndependentLengths, TraceLengths>;

struct PoissonArrivals {
  Frequency rate;
};
struct ClosedLoopArrivals {
  int clients = 1;
  Duration think_time;
};
using ArrivalConfig = std::variant<PoissonArrivals, ClosedLoopArrivals>;

struct WorkloadConfig {
  ArrivalConfig arrivals;
  LengthConfig lengths;
  std::int64_t requests = 0;  // how many requests the source generates in all
};


// Draws request lengths. Rows of a trace are used in order (or in a seeded shuffle) and reused
// from the start when the run needs more requests than the trace has.
class LengthSampler {
 public:
  virtual ~LengthSampler() = default;
  virtual RequestLengths next() = 0;
};

// Reads a trace's rows and applies the cap; throws InputError (file, line, column) on a bad file.
std::shared_ptr<const std::vector<RequestLengths>> load_trace_rows(const TraceLengths& config);
// Reads the trace unless the config carries its rows already.
std::unique_ptr<LengthSampler> make_length_sampler(const LengthConfig& config, std::uint64_t seed);

// Inter-arrival gaps of the open-loop process.
class PoissonProcess {
 public:
  PoissonProcess(Frequency rate, std::uint64_t seed) : rate_(rate), rng_(seed, "arrivals") {}
  Duration next_gap() { return Duration::seconds(rng_.exponential(rate_.per_s)); }

 private:
  Frequency rate_;
  Rng rng_;
};

// Drawing one value; exposed for the statistical tests.
std::int64_t sample_length(const LengthDistribution& d, Rng& rng);
// The mean of a length distribution (after rounding and clipping, computed numerically for the
// lognormal), used by tests and by `workload stats` later.
double expected_length(const LengthDistribution& d);

}  // namespace servesim::workloads
