// Open-loop arrival processes: gap moments of Poisson and Gamma renewal processes against their
// exact moments, rate curves by counts in windows, and the time-rescaling inverse itself.
//
// Tolerances: a sample mean of n i.i.d. values is within 4 standard errors sqrt(Var / n) of its
// expectation except with probability 6e-5; a count of a Poisson process over a window is within
// 4 sqrt(expected count) likewise. The seeds are fixed, so the tests are deterministic; the bounds
// say how far a correct sampler may stray, not where this seed happens to land.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "workloads/arrivals.h"

using namespace servesim;
using namespace servesim::workloads;

namespace {

// E[X^m] of Gamma(shape k, scale theta): theta^m Gamma(k + m) / Gamma(k).
double gamma_moment(double k, double theta, int m) {
  double r = 1;
  for (int i = 0; i < m; ++i) r *= theta * (k + i);
  return r;
}

struct GapCheck {
  double mean, cv, mean_lo, mean_hi, cv_lo, cv_hi;
};

// Draws n gaps and checks the first two moments within 4 standard errors of E[X] and E[X^2] of a
// Gamma(k, theta) (the exponential is k = 1); the CV bounds follow from those moment bounds:
// cv^2 = E[X^2] / E[X]^2 - 1 is monotone in each.
GapCheck check_gaps(OpenLoopProcess& p, int n, double k, double theta) {
  double m1 = 0, m2 = 0;
  SimTime prev = SimTime::zero();
  for (int i = 0; i < n; ++i) {
    const SimTime t = p.next();
    const double g = (t - prev).to_seconds();
    prev = t;
    m1 += g;
    m2 += g * g;
  }
  m1 /= n;
  m2 /= n;
  const double e1 = gamma_moment(k, theta, 1), e2 = gamma_moment(k, theta, 2);
  const double e4 = gamma_moment(k, theta, 4);
  const double se1 = std::sqrt((e2 - e1 * e1) / n), se2 = std::sqrt((e4 - e2 * e2) / n);
  GapCheck c;
  c.mean = m1;
  c.cv = std::sqrt(m2 / (m1 * m1) - 1);
  c.mean_lo = e1 - 4 * se1;
  c.mean_hi = e1 + 4 * se1;
  c.cv_lo = std::sqrt(std::max(0.0, (e2 - 4 * se2) / std::pow(e1 + 4 * se1, 2) - 1));
  c.cv_hi = std::sqrt((e2 + 4 * se2) / std::pow(e1 - 4 * se1, 2) - 1);
  CHECK(m2 > e2 - 4 * se2);
  CHECK(m2 < e2 + 4 * se2);
  return c;
}

// Arrivals of `p` in [0, end), counted per window of `width`.
std::vector<std::int64_t> counts(OpenLoopProcess& p, double end_s, double width_s) {
  std::vector<std::int64_t> c(static_cast<std::size_t>(std::llround(end_s / width_s)), 0);
  while (true) {
    const double t = p.next().to_seconds();
    if (t >= end_s) break;
    ++c[static_cast<std::size_t>(t / width_s)];
  }
  return c;
}

void check_count(std::int64_t got, double expected) {
  CAPTURE(expected);
  CHECK(std::fabs(static_cast<double>(got) - expected) < 4 * std::sqrt(expected));
}

}  // namespace

TEST_CASE("Poisson arrivals: gaps have mean 1 / rate and CV 1") {
  // Rate 50 /s: exponential gaps, Gamma(1, 20 ms). n = 200,000.
  OpenLoopProcess p(PoissonArrivals{Frequency{50}, std::nullopt}, 11, "arrivals");
  const GapCheck c = check_gaps(p, 200'000, 1, 1.0 / 50);
  CHECK(c.mean > c.mean_lo);
  CHECK(c.mean < c.mean_hi);
  CHECK(c.cv > c.cv_lo);
  CHECK(c.cv < c.cv_hi);
  CHECK(c.cv_lo > 0.95);  // the bounds are tight enough to mean something
  CHECK(c.cv_hi < 1.05);
}

TEST_CASE("Poisson arrivals: without a curve, times are sums of gaps rounded to the picosecond") {
  // The foundation's Poisson process drew exponential(rate) on the stream "arrivals" and added
  // Duration::seconds(gap); the runs it pinned (golden tests, benchmarks) depend on exactly that.
  OpenLoopProcess p(PoissonArrivals{Frequency{32}, std::nullopt}, 0, "arrivals");
  Rng rng(0, "arrivals");
  SimTime t = SimTime::zero();
  for (int i = 0; i < 1000; ++i) {
    t += Duration::seconds(rng.exponential(32));
    REQUIRE(p.next() == t);
  }
}

TEST_CASE("Gamma arrivals: the gaps' CV is the configured burstiness, the mean 1 / rate") {
  // Gamma(k = 1 / cv^2, theta = cv^2 / rate): mean 1 / rate, CV cv.
  for (const double cv : {0.5, 2.0, 4.0}) {
    CAPTURE(cv);
    const double rate = 20, k = 1 / (cv * cv), theta = cv * cv / rate;
    OpenLoopProcess p(GammaArrivals{Frequency{rate}, cv, std::nullopt}, 12, "arrivals");
    const GapCheck c = check_gaps(p, 200'000, k, theta);
    CHECK(c.mean > c.mean_lo);
    CHECK(c.mean < c.mean_hi);
    CHECK(c.cv > c.cv_lo);
    CHECK(c.cv < c.cv_hi);
  }
}

TEST_CASE("Rate curves: a step multiplies the rate from its time on") {
  // 100 /s, x3 from 10 s: 1,000 expected in [0, 10), 3,000 in each later 10 s window.
  OpenLoopProcess p(PoissonArrivals{Frequency{100}, StepCurve{Duration::seconds(10), 3}}, 1, "a");
  const auto c = counts(p, 40, 10);
  check_count(c[0], 1000);
  check_count(c[1], 3000);
  check_count(c[3], 3000);
}

TEST_CASE("Rate curves: a ramp's counts follow the integral of its factor") {
  // 20 /s; factor 1 until 10 s, then linear to 5 at 30 s, then 5. In [10, 30) the factor averages
  // 3: 20 x 20 s x 3 = 1,200 expected; [0, 10): 200; [30, 40): 1,000.
  OpenLoopProcess p(PoissonArrivals{Frequency{20}, RampCurve{1, 5, Duration::seconds(10), Duration::seconds(20)}}, 2,
                    "a");
  const auto c = counts(p, 40, 10);
  check_count(c[0], 200);
  check_count(c[1] + c[2], 1200);
  // Within the ramp: [10, 20) averages factor 2 (400 expected), [20, 30) factor 4 (800).
  check_count(c[1], 400);
  check_count(c[2], 800);
  check_count(c[3], 1000);
}

TEST_CASE("Rate curves: a diurnal sinusoid sends more near its peak and averages to the base rate") {
  // 50 /s, amplitude 0.8, period 100 s, peak at 25 s. The half period around the peak, [0, 50),
  // gets 50 x (50 + 0.8 x 100 / pi) = 3,773.2 expected; the other half 1,226.8; over 10 periods
  // 37,732 and 12,268; the whole 50,000 (the sinusoid averages to 1).
  OpenLoopProcess p(PoissonArrivals{Frequency{50}, DiurnalCurve{0.8, Duration::seconds(100), Duration::seconds(25)}}, 3,
                    "a");
  const auto c = counts(p, 1000, 50);
  std::int64_t high = 0, low = 0;
  for (std::size_t i = 0; i < c.size(); ++i) (i % 2 == 0 ? high : low) += c[i];
  const double half = 50 * (50 + 0.8 * 100 / std::numbers::pi);
  check_count(high, 10 * half);
  check_count(low, 10 * (2500 - (half - 2500)));
  check_count(high + low, 50'000);
}

TEST_CASE("Rate curves: a periodic piecewise curve sends nothing while its factor is 0") {
  // 10 /s x (1 on [0, 5), 0 on [5, 8), 2 on [8, 10)), repeating every 10 s: 90 expected per
  // period, and exactly none in any [5, 8) window.
  PiecewiseCurve pc;
  pc.steps = {{Duration::zero(), 1}, {Duration::seconds(5), 0}, {Duration::seconds(8), 2}};
  pc.period = Duration::seconds(10);
  OpenLoopProcess p(PoissonArrivals{Frequency{10}, pc}, 4, "a");
  std::int64_t total = 0;
  while (true) {
    const double t = p.next().to_seconds();
    if (t >= 1000) break;
    ++total;
    const double phase = std::fmod(t, 10.0);
    REQUIRE_FALSE((phase > 5.0 && phase < 8.0));
  }
  check_count(total, 100 * 90);
}

TEST_CASE("Rate curves: a curve that stays at 0 ends the process") {
  PiecewiseCurve pc;
  pc.steps = {{Duration::zero(), 1}, {Duration::seconds(2), 0}};
  OpenLoopProcess p(PoissonArrivals{Frequency{100}, pc}, 5, "a");
  int n = 0;
  for (SimTime t = p.next(); t != SimTime::never(); t = p.next()) {
    CHECK(t.to_seconds() <= 2.0);
    ++n;
  }
  check_count(n, 200);
}

TEST_CASE("Rate curves: the inverse of L(t) solves L(t) = tau, monotonically, for every shape") {
  PiecewiseCurve pc;
  pc.steps = {{Duration::zero(), 0.5}, {Duration::seconds(3), 0}, {Duration::seconds(4), 7}};
  pc.period = Duration::seconds(6);
  const std::vector<RateCurveConfig> curves = {pc, StepCurve{Duration::seconds(2), 0.25},
                                               RampCurve{3, 0.5, Duration::seconds(1), Duration::seconds(9)},
                                               DiurnalCurve{1.0, Duration::seconds(60), Duration::seconds(7)},
                                               DiurnalCurve{0.3, Duration::seconds(86400), Duration::zero()}};
  for (std::size_t i = 0; i < curves.size(); ++i) {
    CAPTURE(i);
    RateCurve c(curves[i]);
    double prev = 0;
    Rng rng(8, "tau");
    double tau = 0;
    for (int k = 0; k < 5000; ++k) {
      tau += rng.exponential(1.0);
      const double t = c.inverse(tau);
      REQUIRE(t >= prev);
      // Below a picosecond-equivalent of operational time, relative to tau.
      CHECK(std::fabs(c.integral(t) - tau) <= 1e-12 + 1e-12 * tau);
      prev = t;
    }
  }
}

TEST_CASE("Rate curves: Gamma arrivals keep their CV in operational time under a curve") {
  // Mapping each arrival back through L gives the base process: Gamma gaps with mean 1 / rate and
  // CV 2, whatever the curve did to real time.
  const DiurnalCurve d{0.9, Duration::seconds(200), Duration::seconds(50)};
  OpenLoopProcess p(GammaArrivals{Frequency{40}, 2.0, d}, 6, "a");
  RateCurve l(d);
  const int n = 100'000;
  double prev = 0, m1 = 0, m2 = 0;
  for (int i = 0; i < n; ++i) {
    const double tau = l.integral(p.next().to_seconds());
    const double g = tau - prev;
    prev = tau;
    m1 += g;
    m2 += g * g;
  }
  m1 /= n;
  m2 /= n;
  // As in check_gaps, with k = 1/4 and theta = 4 / 40 (the picosecond rounding of each arrival
  // adds at most 1e-12 s x 0.9 of operational time per gap).
  const double k = 0.25, theta = 0.1;
  const double e1 = gamma_moment(k, theta, 1), e2 = gamma_moment(k, theta, 2);
  const double e4 = gamma_moment(k, theta, 4);
  CHECK(std::fabs(m1 - e1) < 4 * std::sqrt((e2 - e1 * e1) / n));
  CHECK(std::fabs(m2 - e2) < 4 * std::sqrt((e4 - e2 * e2) / n));
}
