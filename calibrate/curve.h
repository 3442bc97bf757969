// Piecewise-linear curves in log(size): the shape an efficiency takes as a kernel grows (tile
// quantisation and wave effects make small GEMMs inefficient; the curve flattens at the peak).
//
// LogLinearCurve is the evaluated form (what a profile stores as a knot list): y is linear in
// log(x) between knots and constant beyond the first and last knot, so a curve never
// extrapolates a trend past what was measured.
// CurveBlock is the same curve as a block of fit parameters inside a FitTarget: one parameter
// per knot value, bounded, plus penalty residuals for optional monotonicity (kMonotoneWeight x
// every step against the wanted direction: a hinge, so a fit that agrees with the direction pays
// nothing, and one the data push against it stays monotone to within about 1e-4 of the value
// scale) and optional smoothness (weight x the change of slope at each interior knot, slopes
// per unit of ln x). Penalties rather than a reparameterisation (first value plus positive
// steps): steps saturate their bounds and freeze a Levenberg-Marquardt search.
// Invariants: knots are strictly increasing and positive; a curve has at least one knot.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "calibrate/fit.h"

namespace servesim::calibrate {

class LogLinearCurve {
 public:
  // Throws std::invalid_argument unless knots are positive, strictly increasing and as many as
  // values (at least one).
  LogLinearCurve(std::vector<double> knots, std::vector<double> values);
  double operator()(double x) const;
  const std::vector<double>& knots() const { return knots_; }
  const std::vector<double>& values() const { return values_; }

 private:
  std::vector<double> knots_, log_knots_, values_;
};

// Evaluates the curve with knots `log_knots` (natural log) and `values` at ln x.
double log_linear_at(std::span<const double> log_knots, std::span<const double> values, double log_x);

enum class Monotone { none, increasing, decreasing };

struct CurveSpec {
  std::string name;             // parameter names are name[0], name[1], ...
  std::vector<double> knots;    // positive, strictly increasing
  double lower = 0, upper = 1;  // bounds on every value
  double initial = 0.5;         // start value of every knot
  Monotone monotone = Monotone::none;
  double smoothness = 0;  // weight of the slope-change penalty; 0 = none
};

class CurveBlock {
 public:
  static constexpr double kMonotoneWeight = 1e4;
  explicit CurveBlock(CurveSpec spec);
  std::size_t size() const { return spec_.knots.size(); }
  // Appends this block's parameters (in order) to `out`.
  void append_parameters(std::vector<Parameter>& out) const;
  // The curve at x, from this block's parameters.
  double at(std::span<const double> params, double x) const;
  std::size_t penalty_count() const;
  void penalties(std::span<const double> params, std::span<double> out) const;
  // The fitted curve.
  LogLinearCurve curve(std::span<const double> params) const;
  const CurveSpec& spec() const { return spec_; }

 private:
  CurveSpec spec_;
  std::vector<double> log_knots_;
};

}  // namespace servesim::calibrate
