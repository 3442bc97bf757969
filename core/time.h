// Simulated time. Time is an integer count of picoseconds since the start of the run, so sums of
// many small costs never drift and two runs of the same scenario agree to the last digit.
//
// Two types: SimTime is a point on the simulated clock, Duration a span. Point - point = span,
// point + span = point; adding two points does not compile.
//
// Range: int64 picoseconds reach 2^63 ps, about 106.75 days. A run stops at kClockLimit (100
// days; the loaders bound every duration they accept by it, and a run that reaches it without a
// horizon of its own ends with an error, not a result), which leaves 6.75 days of headroom for
// the delay scheduled last. The arithmetic saturates instead of overflowing: seconds() of a value
// beyond the range (or NaN) is Duration::max(), a sum past the end is SimTime::never(), so even a
// delay nobody bounded (a transfer over a link of 1 b/s) lands at "never" rather than wrapping
// into the past (signed overflow is undefined behaviour).
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace servesim {

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration picoseconds(std::int64_t ps) { return Duration(ps); }
  static constexpr Duration nanoseconds(std::int64_t ns) { return Duration(ns * 1000); }
  static constexpr Duration microseconds(std::int64_t us) { return Duration(us * 1000'000); }
  static constexpr Duration milliseconds(std::int64_t ms) { return Duration(ms * 1000'000'000); }
  // Rounds to the nearest picosecond; saturates at +-max() (NaN gives max()).
  static Duration seconds(double s) {
    const double ps = s * 1e12;
    if (!(ps < kLimit)) return max();
    if (ps <= -kLimit) return Duration(-std::numeric_limits<std::int64_t>::max());
    return Duration(std::llround(ps));
  }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ps() const { return ps_; }
  constexpr double to_seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double to_ms() const { return static_cast<double>(ps_) * 1e-9; }

  constexpr Duration operator+(Duration o) const { return Duration(saturate_add(ps_, o.ps_)); }
  constexpr Duration operator-(Duration o) const { return Duration(ps_ - o.ps_); }
  constexpr Duration operator*(std::int64_t k) const {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(ps_, k, &r)) return (ps_ < 0) != (k < 0) ? Duration(-max().ps_) : max();
    return Duration(r);
  }
  constexpr Duration& operator+=(Duration o) { return *this = *this + o; }
  constexpr Duration& operator-=(Duration o) {
    ps_ -= o.ps_;
    return *this;
  }

  // a + b, clamped to +-(2^63 - 1).
  static constexpr std::int64_t saturate_add(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r))
      return b > 0 ? std::numeric_limits<std::int64_t>::max() : -std::numeric_limits<std::int64_t>::max();
    return r;
  }
  constexpr auto operator<=>(const Duration&) const = default;  // NOLINT(modernize-use-nullptr)

 private:
  static constexpr double kLimit = 9.2e18;  // below 2^63 ~ 9.223e18, exactly representable
  constexpr explicit Duration(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime zero() { return SimTime(0); }
  static constexpr SimTime from_ps(std::int64_t ps) { return SimTime(ps); }
  static constexpr SimTime never() { return SimTime(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ps() const { return ps_; }
  constexpr double to_seconds() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr SimTime operator+(Duration d) const { return SimTime(Duration::saturate_add(ps_, d.ps())); }
  constexpr SimTime& operator+=(Duration d) { return *this = *this + d; }
  constexpr Duration operator-(SimTime o) const { return Duration::picoseconds(ps_ - o.ps_); }
  constexpr auto operator<=>(const SimTime&) const = default;  // NOLINT(modernize-use-nullptr)

 private:
  constexpr explicit SimTime(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

// Where every run's clock stops (see the file comment); the loaders' longest duration.
inline constexpr Duration kClockLimit = Duration::milliseconds(100LL * 86'400'000);

}  // namespace servesim
