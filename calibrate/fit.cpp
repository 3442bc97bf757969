#include "calibrate/fit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <Eigen/Dense>
#include <unsupported/Eigen/NonLinearOptimization>
#include <unsupported/Eigen/NumericalDiff>

namespace servesim::calibrate {
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Parameter <-> unconstrained search variable.
double to_search(const Parameter& p, double x) {
  const bool lo = std::isfinite(p.lower), hi = std::isfinite(p.upper);
  if (lo && hi) {
    const double f = (x - p.lower) / (p.upper - p.lower);
    return std::log(f / (1 - f));
  }
  if (lo) return std::log(x - p.lower);
  if (hi) return -std::log(p.upper - x);
  return x;
}

double from_search(const Parameter& p, double u) {
  const bool lo = std::isfinite(p.lower), hi = std::isfinite(p.upper);
  if (lo && hi) return p.lower + (p.upper - p.lower) / (1 + std::exp(-u));
  if (lo) return p.lower + std::exp(u);
  if (hi) return p.upper - std::exp(-u);
  return u;
}

const char* status_text(Eigen::LevenbergMarquardtSpace::Status s) {
  using namespace Eigen::LevenbergMarquardtSpace;
  switch (s) {
    case RelativeReductionTooSmall: return "converged: relative reduction of the error below tolerance";
    case RelativeErrorTooSmall: return "converged: relative change of the parameters below tolerance";
    case RelativeErrorAndReductionTooSmall: return "converged: error and parameters both settled";
    case CosinusTooSmall: return "converged: residuals orthogonal to the Jacobian";
    case TooManyFunctionEvaluation: return "stopped: too many evaluations";
    case FtolTooSmall: return "stopped: error tolerance too small to improve further";
    case XtolTooSmall: return "stopped: parameter tolerance too small to improve further";
    case GtolTooSmall: return "stopped: gradient tolerance too small to improve further";
    case ImproperInputParameters: return "failed: improper input parameters";
    default: return "stopped";
  }
}

// The residual vector in search variables, as Eigen's NumericalDiff expects a functor.
struct Residuals {
  using Scalar = double;
  using InputType = Eigen::VectorXd;
  using ValueType = Eigen::VectorXd;
  using JacobianType = Eigen::MatrixXd;
  enum { InputsAtCompileTime = Eigen::Dynamic, ValuesAtCompileTime = Eigen::Dynamic };

  const FitTarget* target;
  std::span<const Measurement> rows;
  std::vector<Parameter> params;
  mutable std::vector<double> x;  // parameters in model space, reused between calls

  int inputs() const { return static_cast<int>(params.size()); }
  int values() const { return static_cast<int>(rows.size() + target->penalty_count()); }

  void to_model(const Eigen::VectorXd& u) const {
    for (std::size_t j = 0; j < params.size(); ++j) {
      x[j] = from_search(params[j], u(static_cast<Eigen::Index>(j)));
    }
  }

  int operator()(const Eigen::VectorXd& u, Eigen::VectorXd& f) const {
    to_model(u);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      f(static_cast<Eigen::Index>(i)) = target->predict(rows[i], x) / rows[i].latency_s - 1;
    }
    const std::size_t np = target->penalty_count();
    if (np > 0) target->penalties(x, std::span<double>(f.data() + rows.size(), np));
    return 0;
  }
};

}  // namespace

LineFit fit_overhead_and_rate(const std::vector<double>& work, const std::vector<double>& time) {
  if (work.size() != time.size() || work.size() < 2) {
    throw std::invalid_argument("a line fit needs at least two (work, time) points");
  }
  const auto n = static_cast<Eigen::Index>(work.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double t = time[static_cast<std::size_t>(i)];
    if (!(t > 0)) throw std::invalid_argument("measured times must be positive");
    const double w = 1.0 / t;  // relative-error weighting
    a(i, 0) = w;
    a(i, 1) = w * work[static_cast<std::size_t>(i)];
    b(i) = w * t;
  }
  const auto qr = a.colPivHouseholderQr();
  if (qr.rank() < 2) throw std::invalid_argument("the work values do not vary: no slope to fit");
  const Eigen::Vector2d x = qr.solve(b);

  LineFit fit;
  fit.intercept = x(0);
  fit.slope = x(1);
  fit.points = work.size();
  double mean = 0;
  for (double t : time) mean += t;
  mean /= static_cast<double>(time.size());
  double total = 0, unexplained = 0;
  std::vector<double> rel(work.size());
  for (std::size_t i = 0; i < work.size(); ++i) {
    const double predicted = fit.intercept + fit.slope * work[i];
    total += (time[i] - mean) * (time[i] - mean);
    unexplained += (predicted - time[i]) * (predicted - time[i]);
    rel[i] = std::fabs(predicted - time[i]) / time[i];
  }
  fit.r_squared = total > 0 ? 1.0 - unexplained / total : 1.0;
  fit.median_abs_rel_error = median_of(std::move(rel));
  return fit;
}

LinearFit fit_linear(const std::vector<double>& design, std::size_t columns, const std::vector<double>& time) {
  const std::size_t rows = time.size();
  if (columns == 0 || design.size() != rows * columns) {
    throw std::invalid_argument("the design matrix must have time.size() x columns entries");
  }
  if (rows < columns) throw std::invalid_argument("a linear fit needs at least as many rows as columns");
  Eigen::MatrixXd a(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(columns));
  Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(rows));
  for (std::size_t i = 0; i < rows; ++i) {
    if (!(time[i] > 0)) throw std::invalid_argument("measured times must be positive");
    for (std::size_t j = 0; j < columns; ++j) {
      a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = design[i * columns + j] / time[i];
    }
  }
  const auto qr = a.colPivHouseholderQr();
  if (qr.rank() < static_cast<Eigen::Index>(columns)) {
    throw std::invalid_argument("the design columns are linearly dependent on these rows");
  }
  const Eigen::VectorXd x = qr.solve(b);
  LinearFit fit;
  fit.coefficients.assign(x.data(), x.data() + x.size());
  fit.points = rows;
  const Eigen::VectorXd rel = (a * x - b).cwiseAbs();
  fit.median_abs_rel_error = median_of(std::vector<double>(rel.data(), rel.data() + rel.size()));
  return fit;
}

FitResult fit_target(const FitTarget& target, std::span<const Measurement> rows, const FitOptions& options) {
  Residuals r{&target, rows, target.parameters(), {}};
  const std::size_t np = r.params.size();
  if (np == 0) throw std::invalid_argument("the target has no parameters to fit");
  if (rows.size() + target.penalty_count() < np) {
    throw std::invalid_argument("fewer measurements than parameters: " + std::to_string(rows.size()) + " rows for " +
                                std::to_string(np) + " parameters");
  }
  for (const Measurement& m : rows) {
    if (!(m.latency_s > 0)) throw std::invalid_argument("measured times must be positive");
  }
  Eigen::VectorXd u(static_cast<Eigen::Index>(np));
  for (std::size_t j = 0; j < np; ++j) {
    const Parameter& p = r.params[j];
    if (!(p.initial > p.lower && p.initial < p.upper)) {
      throw std::invalid_argument("the initial value of '" + p.name + "' is not strictly inside its bounds");
    }
    u(static_cast<Eigen::Index>(j)) = to_search(p, p.initial);
  }
  r.x.resize(np);

  auto minimize = [&](auto& diff) {
    Eigen::LevenbergMarquardt<std::remove_reference_t<decltype(diff)>, double> lm(diff);
    lm.parameters.maxfev = options.max_evaluations;
    lm.parameters.ftol = options.tolerance;
    lm.parameters.xtol = options.tolerance;
    const auto s = lm.minimize(u);
    return std::pair{s, static_cast<int>(lm.nfev)};
  };
  Eigen::NumericalDiff<Residuals> forward(r);
  Eigen::NumericalDiff<Residuals, Eigen::Central> central(r);
  const auto [status, evaluations] = options.central_differences ? minimize(central) : minimize(forward);

  FitResult result;
  r.to_model(u);
  result.parameters = r.x;
  using namespace Eigen::LevenbergMarquardtSpace;
  result.converged = status == RelativeReductionTooSmall || status == RelativeErrorTooSmall ||
                     status == RelativeErrorAndReductionTooSmall || status == CosinusTooSmall ||
                     status == FtolTooSmall || status == XtolTooSmall || status == GtolTooSmall;
  result.status = status_text(status);
  result.evaluations = evaluations;
  std::vector<double> rel(rows.size());
  double sum_sq = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double e = target.predict(rows[i], result.parameters) / rows[i].latency_s - 1;
    rel[i] = std::fabs(e);
    sum_sq += e * e;
  }
  result.rms_rel_error = rows.empty() ? 0 : std::sqrt(sum_sq / static_cast<double>(rows.size()));
  result.median_abs_rel_error = median_of(std::move(rel));
  return result;
}

std::vector<double> predict_all(const FitTarget& target, std::span<const Measurement> rows,
                                std::span<const double> params) {
  std::vector<double> out(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) out[i] = target.predict(rows[i], params);
  return out;
}

}  // namespace servesim::calibrate
