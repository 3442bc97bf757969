// Fitting cost-model parameters to measurements (Eigen). Never linked into the simulator: the
// simulator reads the figures a fit produces (preset constants today, profiles in phase 2).
//
// Three tools, all weighted by relative error (a fit by absolute error would let the largest
// kernels decide everything):
// - fit_overhead_and_rate: the straight line time = overhead + work / rate (column-pivoting
//   Householder QR on rows weighted by 1 / time, accurate when work spans many decades).
// - fit_linear: time = sum_j x_ij b_j for any design matrix, the same weighting and solver.
// - fit_target: nonlinear least squares of any FitTarget (a parametric cost model that predicts
//   one measurement's seconds from a parameter vector) by Levenberg-Marquardt (MINPACK's lmdif
//   from Eigen's unsupported NonLinearOptimization module, forward-difference Jacobian).
//   Residuals are predicted / measured - 1, plus the target's own penalty residuals
//   (smoothness, priors). Bounds are kept by fitting transformed parameters: x = lo + e^u for a
//   lower bound only, lo + (hi - lo) / (1 + e^-u) for both, x = u for none.
// Piecewise-linear curves and interpolation tables build on these (curve.h, grid_table.h).
// Ignored: parameter uncertainty (no covariance is reported), robust losses (outliers count
// fully; the measured tables hold medians of repeated calls already).
#pragma once

#include <limits>
#include <span>
#include <string>
#include <vector>

#include "calibrate/measurement.h"

namespace servesim::calibrate {

struct LineFit {
  double intercept = 0;
  double slope = 0;
  double r_squared = 0;             // of the time predictions, unweighted
  double median_abs_rel_error = 0;  // |predicted - measured| / measured: the median over the
                                    // points (the upper middle one for an even count)
  std::size_t points = 0;
};

// Fits time = intercept + slope x work. Needs at least two distinct work values and positive
// times; throws std::invalid_argument otherwise.
LineFit fit_overhead_and_rate(const std::vector<double>& work, const std::vector<double>& time);

struct LinearFit {
  std::vector<double> coefficients;
  double median_abs_rel_error = 0;
  std::size_t points = 0;
};

// Fits time_i = sum_j design[i * columns + j] x b_j minimising sum ((pred_i - time_i) / time_i)^2.
// `design` is row-major, time.size() rows. Throws std::invalid_argument on non-positive times,
// fewer rows than columns, or columns that are linearly dependent on these rows.
LinearFit fit_linear(const std::vector<double>& design, std::size_t columns, const std::vector<double>& time);

// One parameter of a FitTarget: its name, where the search starts, and its bounds.
struct Parameter {
  std::string name;
  double initial = 0;
  double lower = -std::numeric_limits<double>::infinity();
  double upper = std::numeric_limits<double>::infinity();
};

// A parametric cost model to fit. predict() must be a pure function of the row and parameters.
class FitTarget {
 public:
  virtual ~FitTarget() = default;
  virtual std::vector<Parameter> parameters() const = 0;
  // Seconds the model predicts for `row` under `params` (params.size() == parameters().size()).
  virtual double predict(const Measurement& row, std::span<const double> params) const = 0;
  // Extra residuals appended to the data's (e.g. weight x second differences of a curve's knot
  // values). Their scale is the target's to choose against relative errors of the data.
  virtual std::size_t penalty_count() const { return 0; }
  virtual void penalties(std::span<const double> /*params*/, std::span<double> /*out*/) const {}
};

struct FitOptions {
  int max_evaluations = 4000;  // of the residual vector (each Jacobian costs parameters() more)
  double tolerance = 1e-10;    // MINPACK's ftol and xtol
  // The Jacobian by central differences (twice the evaluations) rather than forward ones. A
  // monotone CurveBlock started flat sits on its hinge penalties' kinks, where a forward step
  // sees moving a knot up cost CurveBlock::kMonotoneWeight and moving it down nothing: the
  // search stalls near the start (the DSA indexer's fit on H100's table stayed at the start
  // values, 0.40 and 3 us, against 0.46 and 4.1 us with central differences). Central
  // differences see the kink's two sides cancel when neighbours move together.
  bool central_differences = false;
};

struct FitResult {
  std::vector<double> parameters;
  bool converged = false;
  int evaluations = 0;
  std::string status;               // MINPACK's stop reason, in words
  double median_abs_rel_error = 0;  // over the training rows
  double rms_rel_error = 0;
};

// Fits `target` to `rows`. Throws std::invalid_argument when there are fewer rows (plus
// penalties) than parameters, an initial value lies outside its bounds, or a latency is not
// positive.
FitResult fit_target(const FitTarget& target, std::span<const Measurement> rows, const FitOptions& options = {});

// Predictions of a fitted target for each row.
std::vector<double> predict_all(const FitTarget& target, std::span<const Measurement> rows,
                                std::span<const double> params);

}  // namespace servesim::calibrate
