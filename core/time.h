// Simulated time. Time is an integer count of picoseconds since the start of the run, so sums of
// many small costs never drift and two runs of the same scenario agree to the last digit.
// int64 picoseconds cover +-106 days of simulated time, far beyond any serving scenario.
//
// Two types: SimTime is a point on the simulated clock, Duration a span. Point - point = span,
// point + span = point; adding two points does not compile.
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
  // Rounds to the nearest picosecond. The caller keeps |s| below ~9e6 (checked by the loaders).
  static Duration seconds(double s) { return Duration(std::llround(s * 1e12)); }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ps() const { return ps_; }
  constexpr double to_seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double to_ms() const { return static_cast<double>(ps_) * 1e-9; }

  constexpr Duration operator+(Duration o) const { return Duration(ps_ + o.ps_); }
  constexpr Duration operator-(Duration o) const { return Duration(ps_ - o.ps_); }
  constexpr Duration operator*(std::int64_t k) const { return Duration(ps_ * k); }
  constexpr Duration& operator+=(Duration o) { ps_ += o.ps_; return *this; }
  constexpr Duration& operator-=(Duration o) { ps_ -= o.ps_; return *this; }
  constexpr auto operator<=>(const Duration&) const = default;

 private:
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

  constexpr SimTime operator+(Duration d) const { return SimTime(ps_ + d.ps()); }
  constexpr SimTime& operator+=(Duration d) { ps_ += d.ps(); return *this; }
  constexpr Duration operator-(SimTime o) const { return Duration::picoseconds(ps_ - o.ps_); }
  constexpr auto operator<=>(const SimTime&) const = default;

 private:
  constexpr explicit SimTime(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

}  // namespace servesim
