#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "calibrate/fit.h"
#include "core/rng.h"
#include "tests/approx.h"

using servesim::calibrate::fit_overhead_and_rate;
using servesim::calibrate::LineFit;

namespace {

// A kernel with a 5 us launch overhead moving data at 2 TB/s: t = 5e-6 + work / 2e12, so
// intercept 5e-6 s and slope 5e-13 s/B. The two terms are equal at work = 5e-6 x 2e12 = 1e7 B.
constexpr double kIntercept = 5e-6;
constexpr double kSlope = 1.0 / 2e12;

// n work values log-spaced over 1 kB .. 100 GB (8 decades), centred on the 1e7 B crossover: half
// the points are overhead-bound, half bandwidth-bound.
std::vector<double> log_spaced_work(int n) {
  std::vector<double> w;
  for (int i = 0; i < n; ++i) w.push_back(1e3 * std::pow(10.0, 8.0 * i / (n - 1)));
  return w;
}

}  // namespace

TEST_CASE("fit_overhead_and_rate: recovers intercept and slope exactly from noiseless data") {
  const std::vector<double> work = log_spaced_work(40);
  std::vector<double> time;
  for (double w : work) time.push_back(kIntercept + kSlope * w);
  const LineFit fit = fit_overhead_and_rate(work, time);
  // Householder QR on this 40 x 2 system: backward stable, well conditioned after the relative
  // weighting; 1e-9 relative is far above rounding and far below any modelling error.
  CHECK(fit.intercept == approx(kIntercept).epsilon(1e-9));
  CHECK(fit.slope == approx(kSlope).epsilon(1e-9));
  CHECK(fit.points == 40);
  CHECK(fit.r_squared == approx(1.0).epsilon(1e-12));
  CHECK(fit.median_abs_rel_error < 1e-12);
}

TEST_CASE("fit_overhead_and_rate: recovers known coefficients from noisy data, within 5 SE") {
  constexpr int kN = 400;
  constexpr double kNoise = 0.01;  // times off by a uniform factor in [0.99, 1.01]
  const std::vector<double> work = log_spaced_work(kN);
  servesim::Rng rng(20240601, "test.fit.line");
  std::vector<double> time;
  for (double w : work) {
    const double e = kNoise * (2.0 * rng.uniform01() - 1.0);
    time.push_back((kIntercept + kSlope * w) * (1.0 + e));
  }
  const LineFit fit = fit_overhead_and_rate(work, time);

  // Expected error. The fit minimises relative residuals; to first order the relative error of
  // the time at point i is (da/a)(1 - x_i) + (db/b) x_i - e_i, with x_i = b w_i / (a + b w_i)
  // the share of the time due to work and e_i the noise (sd s = 0.01 / sqrt(3) = 0.577%). So
  // (da/a, db/b) is an ordinary least-squares fit of e on the columns (1 - x, x), covariance
  // s^2 (X^T X)^-1. With half the points at x ~ 0 and half at x ~ 1 that is about
  // s sqrt(2 / N) = 0.041% each; computed exactly from the design below. Weighting by measured
  // rather than true times adds a bias of order s^2 = 3.3e-5; allow 5 standard errors plus 3 s^2.
  const double s = kNoise / std::sqrt(3.0);
  double s00 = 0, s01 = 0, s11 = 0;
  for (double w : work) {
    const double x = kSlope * w / (kIntercept + kSlope * w);
    s00 += (1 - x) * (1 - x);
    s01 += (1 - x) * x;
    s11 += x * x;
  }
  const double det = s00 * s11 - s01 * s01;
  const double se_intercept = s * std::sqrt(s11 / det);
  const double se_slope = s * std::sqrt(s00 / det);
  const double tol_intercept = 5 * se_intercept + 3 * s * s;
  const double tol_slope = 5 * se_slope + 3 * s * s;
  INFO("relative SE intercept ", se_intercept, ", slope ", se_slope);
  CHECK(tol_slope < 0.003);  // the design really pins both coefficients (about 0.2%)
  CHECK(tol_intercept < 0.003);
  CHECK(std::fabs(fit.intercept / kIntercept - 1) < tol_intercept);
  CHECK(std::fabs(fit.slope / kSlope - 1) < tol_slope);
  // Each point is off by at most 1%; the median absolute relative error of the fitted line is
  // that of the noise itself: |e| is uniform on [0, 1%], median 0.5%. The sample median of 400
  // has standard error 1 / (2 f sqrt(N)) = 0.01 / (2 x 20) = 0.025% (f = 100, the density);
  // allow 5 of them plus 0.05% for the fitted line's own error (tol above): 0.5% +- 0.175%.
  CHECK(fit.median_abs_rel_error < 0.00675);
  CHECK(fit.median_abs_rel_error > 0.00325);
  CHECK(fit.r_squared > 0.999);
  CHECK(fit.points == static_cast<std::size_t>(kN));
}

TEST_CASE("fit_overhead_and_rate: two points determine the line") {
  // (1e6 B, 10 us) and (3e6 B, 20 us): slope 10 us / 2e6 B = 5e-12 s/B, intercept 10 - 5 = 5 us.
  const LineFit fit = fit_overhead_and_rate({1e6, 3e6}, {10e-6, 20e-6});
  CHECK(fit.slope == approx(5e-12).epsilon(1e-12));
  CHECK(fit.intercept == approx(5e-6).epsilon(1e-12));
}

// Each rejection is checked for its own reason (the message), not just the exception type: a
// zero time would otherwise still throw, for the wrong reason, from the rank check downstream.
TEST_CASE("fit_overhead_and_rate: rejects fewer than two points") {
  const auto too_few = doctest::Contains("at least two");
  CHECK_THROWS_WITH_AS(fit_overhead_and_rate({}, {}), too_few, std::invalid_argument);
  CHECK_THROWS_WITH_AS(fit_overhead_and_rate({1e6}, {1e-5}), too_few, std::invalid_argument);
  // Unpaired values.
  CHECK_THROWS_WITH_AS(fit_overhead_and_rate({1e6, 2e6}, {1e-5}), too_few, std::invalid_argument);
}

TEST_CASE("fit_overhead_and_rate: rejects work that does not vary") {
  for (double w : {0.0, 1.0, 1e6, 1e12}) {
    INFO("work = ", w);
    CHECK_THROWS_WITH_AS(fit_overhead_and_rate({w, w, w}, {1e-5, 2e-5, 3e-5}), doctest::Contains("do not vary"),
                         std::invalid_argument);
  }
}

TEST_CASE("fit_overhead_and_rate: rejects non-positive times") {
  const auto not_positive = doctest::Contains("must be positive");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(fit_overhead_and_rate({1e6, 2e6}, {1e-5, 0.0}), not_positive, std::invalid_argument);
  CHECK_THROWS_WITH_AS(fit_overhead_and_rate({1e6, 2e6}, {-1e-5, 2e-5}), not_positive, std::invalid_argument);
  CHECK_THROWS_WITH_AS(fit_overhead_and_rate({1e6, 2e6}, {1e-5, nan}), not_positive, std::invalid_argument);
}
