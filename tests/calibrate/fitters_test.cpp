// The fitters recover known parameters from noisy synthetic measurements: a linear model, the
// simple roofline (Levenberg-Marquardt), an efficiency curve in log(size), and a log-space table.
// Noise is multiplicative, uniform in [1 - 2%, 1 + 2%] (sd s = 0.02 / sqrt(3) = 1.155%), drawn
// from the project's RNG. Tolerances are standard errors from the linearised model: the fits
// minimise relative residuals, so to first order the relative errors of the parameters are an
// ordinary least-squares fit of the noise on the Jacobian J of relative predictions, with
// covariance s^2 (J^T J)^-1. Each check allows 5 standard errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

#include "calibrate/curve.h"
#include "calibrate/fit.h"
#include "calibrate/grid_table.h"
#include "calibrate/roofline_fit.h"
#include "core/rng.h"
#include "test_files.h"
#include "tests/approx.h"

using namespace servesim::calibrate;
using calibrate_test::gemm_measurement;

namespace {

constexpr double kNoise = 0.02;
const double kNoiseSd = kNoise / std::sqrt(3.0);

double noisy(servesim::Rng& rng, double t) { return t * (1 + kNoise * (2 * rng.uniform01() - 1)); }

// Standard errors s x sqrt(diag((J^T J)^-1)) for a row-major J (rows x cols), by Gauss-Jordan.
std::vector<double> standard_errors(const std::vector<double>& j, std::size_t cols, double s) {
  const std::size_t rows = j.size() / cols;
  std::vector<double> a(cols * 2 * cols, 0.0);  // [J^T J | I]
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t p = 0; p < cols; ++p) {
      for (std::size_t q = 0; q < cols; ++q) a[p * 2 * cols + q] += j[r * cols + p] * j[r * cols + q];
    }
  }
  for (std::size_t p = 0; p < cols; ++p) a[p * 2 * cols + cols + p] = 1;
  for (std::size_t p = 0; p < cols; ++p) {
    std::size_t pivot = p;
    for (std::size_t r = p + 1; r < cols; ++r) {
      if (std::fabs(a[r * 2 * cols + p]) > std::fabs(a[pivot * 2 * cols + p])) pivot = r;
    }
    for (std::size_t c = 0; c < 2 * cols; ++c) std::swap(a[p * 2 * cols + c], a[pivot * 2 * cols + c]);
    const double d = a[p * 2 * cols + p];
    for (std::size_t c = 0; c < 2 * cols; ++c) a[p * 2 * cols + c] /= d;
    for (std::size_t r = 0; r < cols; ++r) {
      if (r == p) continue;
      const double f = a[r * 2 * cols + p];
      for (std::size_t c = 0; c < 2 * cols; ++c) a[r * 2 * cols + c] -= f * a[p * 2 * cols + c];
    }
  }
  std::vector<double> se(cols);
  for (std::size_t p = 0; p < cols; ++p) se[p] = s * std::sqrt(a[p * 2 * cols + cols + p]);
  return se;
}

// Weight shapes of a few models (QKV, O, gate|up, down of Llama-3-8B/70B-like layers) with
// m = 1, 2, 4, ..., 16384 tokens: decode-sized rows are weight-bound, prefill-sized ones
// compute-bound, so every roofline parameter is pinned.
std::vector<Measurement> gemm_grid() {
  const std::int64_t nk[][2] = {{6144, 4096},  {4096, 4096}, {28672, 4096}, {4096, 14336},
                                {10240, 8192}, {8192, 8192}, {57344, 8192}, {8192, 28672}};
  std::vector<Measurement> rows;
  for (const auto& w : nk) {
    for (std::int64_t m = 1; m <= 16384; m *= 2) rows.push_back(gemm_measurement(m, w[0], w[1]));
  }
  return rows;
}

}  // namespace

TEST_CASE("fit_linear: recovers three coefficients from noisy data within 5 standard errors") {
  // time = 2 us + 1 ns x a + 0.5 ps x b over a 12 x 12 grid of (a, b) spanning three decades each.
  const double truth[3] = {2e-6, 1e-9, 5e-13};
  servesim::Rng rng(7, "test.fit.linear");
  std::vector<double> design, time, jac;
  for (int i = 0; i < 12; ++i) {
    for (int j = 0; j < 12; ++j) {
      const double a = std::pow(10.0, 1 + 3.0 * i / 11), b = std::pow(10.0, 4 + 3.0 * j / 11);
      const double t = truth[0] + truth[1] * a + truth[2] * b;
      design.insert(design.end(), {1.0, a, b});
      time.push_back(noisy(rng, t));
      // Relative sensitivity of the prediction to a relative change of each coefficient.
      jac.insert(jac.end(), {truth[0] / t, truth[1] * a / t, truth[2] * b / t});
    }
  }
  const LinearFit fit = fit_linear(design, 3, time);
  const auto se = standard_errors(jac, 3, kNoiseSd);
  for (int p = 0; p < 3; ++p) {
    INFO("coefficient ", p, " relative SE ", se[static_cast<std::size_t>(p)]);
    CHECK(se[static_cast<std::size_t>(p)] < 0.01);  // the design pins each coefficient to < 1%
    CHECK(std::fabs(fit.coefficients[static_cast<std::size_t>(p)] / truth[p] - 1) <
          5 * se[static_cast<std::size_t>(p)]);
  }
  // The noise itself: |e| uniform on [0, 2%], median 1%.
  CHECK(fit.median_abs_rel_error == approx(0.01).epsilon(0.25));
}

TEST_CASE("fit_linear: rejects dependent columns and bad times") {
  CHECK_THROWS_AS(fit_linear({1, 2, 2, 4, 3, 6}, 2, {1, 2, 3}), std::invalid_argument);
  CHECK_THROWS_AS(fit_linear({1, 2, 1, 3}, 2, {1, 0}), std::invalid_argument);
  CHECK_THROWS_AS(fit_linear({1, 2}, 2, {1}), std::invalid_argument);  // fewer rows than columns
}

TEST_CASE("fit_target: Levenberg-Marquardt recovers the roofline's overhead and efficiencies") {
  // H200 bf16: 989.5 TFLOP/s, 4.8 TB/s. Truth: 4 us overhead, compute efficiency 0.7, memory 0.8.
  const Peaks peaks{989.5e12, 4.8e12};
  const double truth[3] = {4e-6, 0.7, 0.8};
  const SimpleRoofline target(peaks);
  std::vector<Measurement> rows = gemm_grid();
  servesim::Rng rng(11, "test.fit.roofline");
  std::vector<double> jac;
  for (Measurement& r : rows) {
    const double t = target.predict(r, truth);
    r.latency_s = noisy(rng, t);
    // d ln t / d ln p: the overhead's share; -(the bound term's share) for the efficiency
    // that binds (the other has no effect).
    const Work w = *work_of(r);
    const double tc = w.flops / (peaks.flops_per_s * truth[1]);
    const double tm = w.bytes / (peaks.bytes_per_s * truth[2]);
    jac.insert(jac.end(), {truth[0] / t, tc >= tm ? -tc / t : 0.0, tc >= tm ? 0.0 : -tm / t});
  }
  const FitResult fit = fit_target(target, rows);
  CHECK(fit.converged);
  const auto se = standard_errors(jac, 3, kNoiseSd);
  for (std::size_t p = 0; p < 3; ++p) {
    INFO("parameter ", p, " fitted ", fit.parameters[p], " relative SE ", se[p]);
    CHECK(se[p] < 0.02);
    CHECK(std::fabs(fit.parameters[p] / truth[p] - 1) < 5 * se[p]);
  }
  CHECK(fit.median_abs_rel_error < 0.0125);  // the noise's 1% median, and no model error
}

TEST_CASE("fit_target: rejects too few rows and initial values outside the bounds") {
  const SimpleRoofline target(Peaks{1e15, 1e12});
  std::vector<Measurement> rows = {gemm_measurement(1, 1024, 1024), gemm_measurement(2, 1024, 1024)};
  for (Measurement& r : rows) r.latency_s = 1e-5;
  CHECK_THROWS_WITH_AS(fit_target(target, rows), doctest::Contains("fewer measurements than parameters"),
                       std::invalid_argument);
}

namespace {

// time = overhead + FLOPs / (peak x e(m)) with e a curve over m: compute-only GEMMs whose
// efficiency grows with the token count (tile quantisation at small m).
class CurveTarget : public FitTarget {
 public:
  CurveTarget(double peak, CurveSpec spec) : peak_(peak), curve_(std::move(spec)) {}
  std::vector<Parameter> parameters() const override {
    std::vector<Parameter> p = {{"overhead_s", 5e-6, 0, 1e-3}};
    curve_.append_parameters(p);
    return p;
  }
  double predict(const Measurement& row, std::span<const double> p) const override {
    const double m = static_cast<double>(row.shape.get(Dim::m));
    return p[0] + work_of(row)->flops / (peak_ * curve_.at(p.subspan(1), m));
  }
  std::size_t penalty_count() const override { return curve_.penalty_count(); }
  void penalties(std::span<const double> p, std::span<double> out) const override {
    curve_.penalties(p.subspan(1), out);
  }
  const CurveBlock& curve() const { return curve_; }

 private:
  double peak_;
  CurveBlock curve_;
};

const std::vector<double> kKnots = {1, 16, 256, 4096, 16384};
const std::vector<double> kTrueEff = {0.05, 0.3, 0.62, 0.78, 0.8};

std::vector<Measurement> curve_rows(const CurveTarget& target, std::span<const double> truth, servesim::Rng& rng,
                                    std::vector<double>* jac) {
  std::vector<Measurement> rows;
  const LogLinearCurve e(kKnots, kTrueEff);
  for (const auto& base : gemm_grid()) {
    Measurement r = base;
    const double t = target.predict(r, truth);
    r.latency_s = noisy(rng, t);
    rows.push_back(r);
    if (jac == nullptr) continue;
    // d ln t / d ln overhead, and d ln t / d ln v_j = -(compute share) x (v_j's weight in e(m))
    // x v_j / e(m): the curve is linear in its knot values between knots.
    const double m = static_cast<double>(r.shape.get(Dim::m));
    const double tc = work_of(r)->flops / (989.5e12 * e(m));
    jac->push_back(truth[0] / t);
    for (std::size_t j = 0; j < kKnots.size(); ++j) {
      std::vector<double> unit(kKnots.size(), 0.0);
      unit[j] = 1;
      const double weight = LogLinearCurve(kKnots, unit)(m);
      jac->push_back(-tc / t * weight * kTrueEff[j] / e(m));
    }
  }
  return rows;
}

// The truth in the target's parameters: the overhead, then the knot values.
std::vector<double> curve_truth(double overhead) {
  std::vector<double> p = {overhead};
  p.insert(p.end(), kTrueEff.begin(), kTrueEff.end());
  return p;
}

}  // namespace

TEST_CASE("CurveBlock: an increasing efficiency curve in log(m) is recovered knot by knot") {
  CurveSpec spec{"e_compute", kKnots, 0.01, 1.0, 0.3, Monotone::increasing, 0};
  const CurveTarget target(989.5e12, spec);
  const auto truth = curve_truth(3e-6);
  servesim::Rng rng(13, "test.fit.curve");
  std::vector<double> jac;
  const auto rows = curve_rows(target, truth, rng, &jac);
  const FitResult fit = fit_target(target, rows);
  CHECK(fit.converged);
  const auto se = standard_errors(jac, 1 + kKnots.size(), kNoiseSd);
  const LogLinearCurve fitted = target.curve().curve(std::span<const double>(fit.parameters).subspan(1));
  CHECK(std::fabs(fit.parameters[0] / 3e-6 - 1) < 5 * se[0]);
  for (std::size_t j = 0; j < kKnots.size(); ++j) {
    INFO("knot ", kKnots[j], ": fitted ", fitted.values()[j], " true ", kTrueEff[j], " relative SE ", se[j + 1]);
    CHECK(se[j + 1] < 0.02);
    CHECK(std::fabs(fitted.values()[j] / kTrueEff[j] - 1) < 5 * se[j + 1]);
  }
  for (std::size_t j = 1; j < kKnots.size(); ++j) CHECK(fitted.values()[j] >= fitted.values()[j - 1]);
}

TEST_CASE("fit_target: central differences move a flat-started monotone curve off its kinks") {
  // A flat truth (every knot 0.2) from a flat start (0.4): the monotone hinges start on their kinks.
  // Central differences see the kinks' two sides cancel when the knots move together, and the
  // search reaches the truth (FitOptions::central_differences).
  CurveSpec spec{"e_compute", kKnots, 0.01, 1.0, 0.4, Monotone::increasing, 0};
  const CurveTarget target(989.5e12, spec);
  std::vector<double> truth = {3e-6};
  truth.insert(truth.end(), kKnots.size(), 0.2);
  servesim::Rng rng(29, "test.fit.central");
  std::vector<Measurement> rows;
  for (const auto& base : gemm_grid()) {
    Measurement r = base;
    r.latency_s = noisy(rng, target.predict(r, truth));
    rows.push_back(r);
  }
  FitOptions central;
  central.central_differences = true;
  const FitResult fit = fit_target(target, rows, central);
  CHECK(fit.converged);
  for (std::size_t j = 0; j < kKnots.size(); ++j) CHECK(fit.parameters[j + 1] == approx(0.2).epsilon(0.03));
  CHECK(fit.parameters[0] == approx(3e-6).epsilon(0.1));
}

TEST_CASE("CurveBlock: monotonicity holds against data that dips, smoothness straightens") {
  // Data from a curve with a dip at m = 256 (0.62 -> 0.25, below the 0.3 at m = 16): an
  // increasing fit must stay non-decreasing there; a free fit follows the dip.
  std::vector<double> dip = kTrueEff;
  dip[2] = 0.25;
  const CurveTarget truth_target(989.5e12, CurveSpec{"e", kKnots, 0.01, 1.0, 0.3, Monotone::none, 0});
  std::vector<double> truth = {3e-6};
  truth.insert(truth.end(), dip.begin(), dip.end());
  std::vector<Measurement> rows = gemm_grid();
  for (Measurement& r : rows) r.latency_s = truth_target.predict(r, truth);

  const CurveTarget free_target(989.5e12, CurveSpec{"e", kKnots, 0.01, 1.0, 0.3, Monotone::none, 0});
  const FitResult free_fit = fit_target(free_target, rows);
  const auto free_curve = free_target.curve().curve(std::span<const double>(free_fit.parameters).subspan(1));
  CHECK(free_curve.values()[2] == approx(0.25).epsilon(1e-4));  // noiseless: exact

  const CurveTarget mono(989.5e12, CurveSpec{"e", kKnots, 0.01, 1.0, 0.3, Monotone::increasing, 0});
  const FitResult mono_fit = fit_target(mono, rows);
  const auto mono_curve = mono.curve().curve(std::span<const double>(mono_fit.parameters).subspan(1));
  // Monotone to within the hinge's slack: the data pull a 0.05 dip against a weight of 1e4, so
  // what is left is of order 1e-4.
  for (std::size_t j = 1; j < kKnots.size(); ++j) {
    CHECK(mono_curve.values()[j] >= mono_curve.values()[j - 1] - 1e-3);
  }
  // It cannot follow the dip: the knots at 16 and 256 meet between 0.25 and 0.3.
  CHECK(mono_curve.values()[2] > 0.26);
  CHECK(mono_curve.values()[1] < 0.29);
  CHECK(mono_curve.values()[2] == approx(mono_curve.values()[1]).epsilon(0.01));

  // A heavy smoothness weight (1e3 per unit slope change, against residuals of order 1)
  // makes the curve nearly straight in log(m): every slope change under 1e-3.
  const CurveTarget smooth(989.5e12, CurveSpec{"e", kKnots, 0.01, 1.0, 0.3, Monotone::none, 1e3});
  const FitResult smooth_fit = fit_target(smooth, rows);
  std::vector<double> penalties(smooth.penalty_count());
  smooth.penalties(smooth_fit.parameters, penalties);
  REQUIRE(penalties.size() == kKnots.size() - 2);
  for (double p : penalties) CHECK(std::fabs(p) / 1e3 < 1e-3);
}

TEST_CASE("LogLinearCurve: linear in log(x) between knots, constant beyond them") {
  const LogLinearCurve c({1, 100}, {0.2, 0.6});
  CHECK(c(10) == approx(0.4));  // halfway in log: (0.2 + 0.6) / 2
  CHECK(c(0.5) == 0.2);
  CHECK(c(1e6) == 0.6);
  CHECK_THROWS_AS(LogLinearCurve({1, 1}, {0.1, 0.2}), std::invalid_argument);
  CHECK_THROWS_AS(LogLinearCurve({1, 2}, {0.1}), std::invalid_argument);
}

namespace {

// ln t = a + b u_m + c u_n + d u_m u_n with u = ln(1 + x): bilinear in the table's coordinates,
// so multilinear interpolation reproduces it exactly and its second differences along each axis
// are zero (the smoothness penalty does not bias it).
double bilinear_truth(double m, double n) {
  const double um = std::log1p(m), un = std::log1p(n);
  return std::exp(-12.0 + 0.9 * um + 0.3 * un + 0.02 * um * un);
}

std::vector<Measurement> table_rows(const std::vector<double>& ms, const std::vector<double>& ns, int repeats,
                                    servesim::Rng* rng) {
  std::vector<Measurement> rows;
  for (double m : ms) {
    for (double n : ns) {
      for (int r = 0; r < repeats; ++r) {
        Measurement row = gemm_measurement(static_cast<std::int64_t>(m), static_cast<std::int64_t>(n), 4096);
        const double t = bilinear_truth(m, n);
        row.latency_s = rng ? noisy(*rng, t) : t;
        rows.push_back(row);
      }
    }
  }
  return rows;
}

const std::vector<double> kMs = {1, 4, 16, 64, 256, 1024, 4096};
const std::vector<double> kNs = {1024, 4096, 16384, 65536};

}  // namespace

TEST_CASE("fit_log_grid: exact on a function bilinear in log space, inside and outside the grid") {
  const auto rows = table_rows(kMs, kNs, 1, nullptr);
  const LogGridTable t = fit_log_grid({axis_through(Dim::m, rows), axis_through(Dim::n, rows)}, rows);
  CHECK(t.axes()[0].knots == kMs);
  for (double m : {1.0, 3.0, 100.0, 4096.0, 16384.0}) {     // 16384: beyond the last knot
    for (double n : {1024.0, 3000.0, 65536.0, 131072.0}) {  // 131072: beyond too
      INFO("m ", m, " n ", n);
      const double point[2] = {m, n};
      CHECK(t.seconds(point) == approx(bilinear_truth(m, n)).epsilon(1e-6));
    }
  }
  // Clamped, the table holds the edge value beyond the grid.
  const LogGridTable c = fit_log_grid({axis_through(Dim::m, rows), axis_through(Dim::n, rows)}, rows,
                                      GridFitOptions{0.05, Extrapolation::clamp});
  const double beyond[2] = {16384, 65536};
  CHECK(c.seconds(beyond) == approx(bilinear_truth(4096, 65536)).epsilon(1e-6));
}

TEST_CASE("fit_log_grid: averages noisy repeats and fills a cell nobody measured") {
  // 8 noisy repeats per point: each cell's log value averages 8 draws, SE 1.155% / sqrt(8) =
  // 0.41%; the smoothness penalty only pools neighbours (no bias: the truth has no curvature),
  // so 5 SE = 2.0% bounds every knot.
  servesim::Rng rng(17, "test.fit.table");
  auto rows = table_rows(kMs, kNs, 8, &rng);
  // Drop every measurement at m = 64: that column of cells is left to the smoothness penalty.
  std::erase_if(rows, [](const Measurement& r) { return r.shape.get(Dim::m) == 64; });
  const GridAxis m_axis{Dim::m, kMs};  // still has the knot at 64
  const LogGridTable t = fit_log_grid({m_axis, axis_through(Dim::n, rows)}, rows);
  const double tolerance = 5 * kNoiseSd / std::sqrt(8.0);
  for (double m : kMs) {
    for (double n : kNs) {
      INFO("m ", m, " n ", n);
      const double point[2] = {m, n};
      CHECK(std::fabs(t.seconds(point) / bilinear_truth(m, n) - 1) < tolerance);
    }
  }
  // Without smoothness the empty cells are undetermined: refused.
  CHECK_THROWS_AS(fit_log_grid({m_axis, axis_through(Dim::n, rows)}, rows, GridFitOptions{0, Extrapolation::linear}),
                  std::invalid_argument);
}

TEST_CASE("fit_log_grid: grids above the direct solver's size (conjugate gradients) are exact too") {
  // 100 x 64 = 6,400 cells, above the 4,096 the direct factorisation takes: the iterative path.
  // Knots as measured tables put them, some nearly equal (1000 and 1001). The truth is bilinear
  // in log space, so every cell is determined; CG stops at a 1e-9 relative residual, which
  // leaves the log values within about 1e-7, i.e. seconds within 1e-6 relative.
  std::vector<double> ms, ns;
  for (int i = 0; i < 99; ++i) ms.push_back(std::round(std::pow(10.0, 4.0 * i / 98)));
  ms.push_back(1001);
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
  for (int j = 0; j < 64; ++j) ns.push_back(256.0 * (j + 1));
  const auto rows = table_rows(ms, ns, 1, nullptr);
  const LogGridTable t = fit_log_grid({axis_through(Dim::m, rows), axis_through(Dim::n, rows)}, rows);
  REQUIRE(t.log_seconds().size() > 4096);
  for (double m : {1.0, 1000.0, 1001.0, 5000.0}) {
    for (double n : {256.0, 3000.0, 16384.0}) {
      INFO("m ", m, " n ", n);
      const double point[2] = {m, n};
      CHECK(t.seconds(point) == approx(bilinear_truth(m, n)).epsilon(1e-6));
    }
  }
}

TEST_CASE("LogGridTable: lookups by shape and consistency checks") {
  const LogGridTable t({GridAxis{Dim::m, {1, 3}}}, {std::log(1e-6), std::log(4e-6)});
  Shape s;
  s.set(Dim::m, 1);
  CHECK(t.seconds(s) == approx(1e-6));
  // Halfway in ln(1 + m) between ln 2 and ln 4 is m = sqrt(8) - 1; halfway in ln t is 2 us.
  const double mid[1] = {std::sqrt(8.0) - 1};
  CHECK(t.seconds(mid) == approx(2e-6));
  CHECK_THROWS_AS(LogGridTable({GridAxis{Dim::m, {1, 3}}}, {0.0}), std::invalid_argument);
  CHECK_THROWS_AS(LogGridTable({GridAxis{Dim::m, {3, 1}}}, {0.0, 0.0}), std::invalid_argument);
}
