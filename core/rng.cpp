#include "core/rng.h"

#include <cmath>

#include "core/hash.h"

namespace servesim {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
__extension__ using Uint128 = unsigned __int128;  // GCC/Clang extension: a 64x64->128 multiply
}  // namespace

Rng::Rng(std::uint64_t seed) : Rng(seed, "") {}

Rng::Rng(std::uint64_t seed, std::string_view stream_name) {
  std::uint64_t state = seed ^ fnv1a64(stream_name);  // a stable 64-bit tag per consumer
  for (auto& w : s_) w = splitmix64(state);
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::uniform01_open_low() { return static_cast<double>((next_u64() >> 11) + 1) * 0x1.0p-53; }

std::uint64_t Rng::uniform_int(std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t range = hi - lo;
  if (range == ~std::uint64_t{0}) return next_u64();
  const std::uint64_t n = range + 1;
  // Lemire, "Fast random integer generation in an interval" (2019), with the rejection step.
  Uint128 m = static_cast<Uint128>(next_u64()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<Uint128>(next_u64()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return lo + static_cast<std::uint64_t>(m >> 64);
}

double Rng::exponential(double rate) { return -std::log(uniform01_open_low()) / rate; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_normal_;
  }
  double u, v, s;
  do {
    u = 2.0 * uniform01() - 1.0;
    v = 2.0 * uniform01() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double f = std::sqrt(-2.0 * std::log(s) / s);
  spare_normal_ = v * f;
  has_spare_ = true;
  return u * f;
}

double Rng::lognormal(double mu, double sigma) { return std::exp(mu + sigma * normal()); }

}  // namespace servesim
