#include "calibrate/fit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>

namespace servesim::calibrate {

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
  std::nth_element(rel.begin(), rel.begin() + static_cast<std::ptrdiff_t>(rel.size() / 2), rel.end());
  fit.median_abs_rel_error = rel[rel.size() / 2];
  return fit;
}

}  // namespace servesim::calibrate
