#include "workloads/arrivals.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/check.h"
#include "workloads/lengths.h"

namespace servesim::workloads {
namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Arrivals later than this are never (SimTime holds +-106 days; the loaders cap horizons at 100).
constexpr double kLatestArrivalS = kClockLimit.to_seconds();  // the clock's range (core/time.h)
}  // namespace

// --- RateCurve ---------------------------------------------------------------------------------

RateCurve::RateCurve(const RateCurveConfig& config) {
  struct Build {
    RateCurve& c;
    void operator()(const PiecewiseCurve& p) const {
      for (const CurveStep& s : p.steps) c.segments_.push_back({s.at.to_seconds(), s.factor, 0, 0});
      if (p.period) c.period_ = p.period->to_seconds();
    }
    void operator()(const StepCurve& s) const {
      if (s.at > Duration::zero()) c.segments_.push_back({0, 1, 0, 0});
      c.segments_.push_back({s.at.to_seconds(), s.factor, 0, 0});
    }
    void operator()(const RampCurve& r) const {
      const double t0 = r.start.to_seconds(), d = r.duration.to_seconds();
      if (t0 > 0) c.segments_.push_back({0, r.from, 0, 0});
      c.segments_.push_back({t0, r.from, (r.to - r.from) / d, 0});
      c.segments_.push_back({t0 + d, r.to, 0, 0});
    }
    void operator()(const DiurnalCurve& d) const {
      c.diurnal_ = true;
      c.amplitude_ = d.amplitude;
      c.period_ = d.period.to_seconds();
      c.omega_ = 2 * std::numbers::pi / c.period_;
      c.peak_ = d.peak.to_seconds();
    }
  };
  std::visit(Build{*this}, config);
  if (diurnal_) {
    period_integral_ = period_;  // the sinusoid averages to 1 over a period
    return;
  }
  SERVESIM_CHECK(!segments_.empty() && segments_.front().t0 == 0);
  for (std::size_t i = 1; i < segments_.size(); ++i) {
    const Segment& p = segments_[i - 1];
    const double dt = segments_[i].t0 - p.t0;
    SERVESIM_CHECK(dt > 0);
    segments_[i].l0 = p.l0 + p.a * dt + 0.5 * p.b * dt * dt;
  }
  if (period_ > 0) {
    const Segment& last = segments_.back();
    SERVESIM_CHECK(period_ > last.t0 && last.b == 0);
    period_integral_ = last.l0 + last.a * (period_ - last.t0);
  }
}

double RateCurve::diurnal_integral(double t) const {
  return t + amplitude_ / omega_ * (std::sin(omega_ * (t - peak_)) + std::sin(omega_ * peak_));
}

double RateCurve::factor(double t) const {
  if (diurnal_) return 1 + amplitude_ * std::cos(omega_ * (t - peak_));
  if (period_ > 0) t -= std::floor(t / period_) * period_;
  auto it =
      std::upper_bound(segments_.begin(), segments_.end(), t, [](double x, const Segment& s) { return x < s.t0; });
  const Segment& s = *(it - 1);
  return s.a + s.b * (t - s.t0);
}

double RateCurve::integral(double t) const {
  if (diurnal_) return diurnal_integral(t);
  double base = 0;
  if (period_ > 0) {
    const double k = std::floor(t / period_);
    base = k * period_integral_;
    t -= k * period_;
  }
  auto it =
      std::upper_bound(segments_.begin(), segments_.end(), t, [](double x, const Segment& s) { return x < s.t0; });
  const Segment& s = *(it - 1);
  const double dt = t - s.t0;
  return base + s.l0 + s.a * dt + 0.5 * s.b * dt * dt;
}

double RateCurve::inverse_in_period(double y) {
  if (cursor_ >= segments_.size() || segments_[cursor_].l0 > y) cursor_ = 0;
  // The earliest segment in which L reaches y.
  while (cursor_ + 1 < segments_.size() && segments_[cursor_ + 1].l0 < y) ++cursor_;
  const Segment& s = segments_[cursor_];
  const double r = y - s.l0;
  if (r <= 0) return s.t0;
  // a dt + b dt^2 / 2 = r, dt >= 0, in the form that stays accurate as b -> 0.
  const double disc = std::max(0.0, s.a * s.a + 2 * s.b * r);
  const double denom = s.a + std::sqrt(disc);
  if (!(denom > 0)) return kInfinity;  // a factor of 0 to the end: L never reaches y
  return s.t0 + 2 * r / denom;
}

double RateCurve::inverse(double tau) {
  if (diurnal_) {
    // L(t) - t stays within a P / pi of 0, which brackets the root; Newton steps that leave the
    // bracket (or meet a zero factor at the trough when a = 1) fall back to bisection.
    const double spread = amplitude_ / omega_ * 2;
    double lo = std::max(0.0, tau - spread), hi = tau + spread;
    double t = std::clamp(last_t_ + (tau - diurnal_integral(last_t_)), lo, hi);
    const double tol = 1e-13 + 1e-15 * tau;  // seconds: far below a picosecond
    for (int i = 0; i < 200 && hi - lo > tol; ++i) {
      const double f = diurnal_integral(t) - tau;
      if (std::fabs(f) <= tol) break;
      if (f < 0)
        lo = t;
      else
        hi = t;
      const double m = factor(t);
      const double newton = m > 0 ? t - f / m : lo;
      t = newton > lo && newton < hi ? newton : 0.5 * (lo + hi);
    }
    last_t_ = t;
    return t;
  }
  if (period_ <= 0) return inverse_in_period(tau);
  if (!(period_integral_ > 0)) return tau > 0 ? kInfinity : 0;
  const double k = std::floor(tau / period_integral_);
  const double y = tau - k * period_integral_;
  return k * period_ + inverse_in_period(y);
}

// --- processes ---------------------------------------------------------------------------------

double sample_gamma(Rng& rng, double shape) {
  if (shape < 1) {
    const double u = rng.uniform01_open_low();
    return sample_gamma(rng, shape + 1) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9 * d);
  while (true) {
    const double x = rng.normal();
    double v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = rng.uniform01_open_low();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
  }
}

OpenLoopProcess::OpenLoopProcess(const PoissonArrivals& config, std::uint64_t seed, const std::string& stream)
    : rate_(config.rate.per_s), rng_(seed, stream) {
  if (config.curve) curve_.emplace(*config.curve);
}

OpenLoopProcess::OpenLoopProcess(const GammaArrivals& config, std::uint64_t seed, const std::string& stream)
    : rate_(config.rate.per_s), shape_(1 / (config.cv * config.cv)), gamma_(true), rng_(seed, stream) {
  // Mean shape x scale = 1 / rate; CV 1 / sqrt(shape) = cv.
  scale_ = 1 / (rate_ * shape_);
  if (config.curve) curve_.emplace(*config.curve);
}

double OpenLoopProcess::gap_s() { return gamma_ ? scale_ * sample_gamma(rng_, shape_) : rng_.exponential(rate_); }

SimTime OpenLoopProcess::next() {
  if (last_ == SimTime::never()) return last_;
  const double gap = gap_s();
  if (!curve_) {
    if (last_.to_seconds() + gap > kLatestArrivalS) return last_ = SimTime::never();
    // Duration::seconds(gap), i.e. llround(gap x 1e12), without the libm call.
    last_ += Duration::picoseconds(static_cast<std::int64_t>(round_half_away(gap * 1e12)));
    return last_;
  }
  tau_s_ += gap;
  const double t = curve_->inverse(tau_s_);
  if (!(t <= kLatestArrivalS)) return last_ = SimTime::never();
  // Rounding to the picosecond cannot reorder arrivals: L^-1 is non-decreasing.
  last_ = std::max(last_, SimTime::zero() + Duration::seconds(t));
  return last_;
}

}  // namespace servesim::workloads
