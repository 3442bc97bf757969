// Deterministic random numbers with the project's own distributions.
//
// The generator is xoshiro256** (Blackman & Vigna, 2018), seeded through splitmix64. Each consumer
// (arrivals, prompt lengths, output lengths, ...) draws from its own stream, derived from the
// scenario seed and a stream name, so adding a consumer never shifts another's numbers.
// Distributions are written here rather than taken from <random>, whose algorithms differ between
// standard libraries: the same seed gives the same numbers with any compiler. They use only
// IEEE-754 arithmetic plus std::log/std::exp/std::sqrt.
#pragma once

#include <cstdint>
#include <string_view>

namespace servesim {

class Rng {
 public:
  // A stream for `stream_name` under `seed`.
  Rng(std::uint64_t seed, std::string_view stream_name);
  explicit Rng(std::uint64_t seed);

  std::uint64_t next_u64();
  // Uniform in [0, 1), 53 random bits.
  double uniform01();
  // Uniform in (0, 1]: safe to take the logarithm of.
  double uniform01_open_low();
  // Uniform integer in [lo, hi] (inclusive), unbiased (Lemire's method with rejection).
  std::uint64_t uniform_int(std::uint64_t lo, std::uint64_t hi);
  // Exponential with the given rate (mean 1/rate). rate > 0.
  double exponential(double rate);
  // Standard normal by the Marsaglia polar method.
  double normal();
  // exp(mu + sigma * N(0,1)): median exp(mu).
  double lognormal(double mu, double sigma);

 private:
  std::uint64_t s_[4];
  double spare_normal_ = 0;
  bool has_spare_ = false;
};

// splitmix64 step, also used to hash seeds.
std::uint64_t splitmix64(std::uint64_t& state);

}  // namespace servesim
