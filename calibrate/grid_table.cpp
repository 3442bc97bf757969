#include "calibrate/grid_table.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <Eigen/IterativeLinearSolvers>
#include <Eigen/Sparse>

namespace servesim::calibrate {
namespace {
// Up to this many cells the normal equations are factorised directly (SimplicialLDLT).
constexpr Eigen::Index kDirectCells = 4096;
}  // namespace

LogGridTable::LogGridTable(std::vector<GridAxis> axes, std::vector<double> log_seconds, Extrapolation extrapolation)
    : axes_(std::move(axes)), log_seconds_(std::move(log_seconds)), extrapolation_(extrapolation) {
  if (axes_.empty()) throw std::invalid_argument("a table needs at least one axis");
  std::size_t cells = 1;
  strides_.assign(axes_.size(), 0);
  for (std::size_t a = axes_.size(); a-- > 0;) {
    const auto& k = axes_[a].knots;
    if (k.empty()) throw std::invalid_argument("every table axis needs at least one knot");
    for (std::size_t i = 0; i < k.size(); ++i) {
      if (!(k[i] >= 0) || (i > 0 && !(k[i] > k[i - 1]))) {
        throw std::invalid_argument("table knots must be non-negative and strictly increasing");
      }
    }
    strides_[a] = cells;
    cells *= k.size();
  }
  for (const auto& axis : axes_) {
    std::vector<double> u;
    for (double x : axis.knots) u.push_back(std::log1p(x));
    log_knots_.push_back(std::move(u));
  }
  if (log_seconds_.size() != cells) {
    throw std::invalid_argument("a table needs one value per cell: " + std::to_string(cells) + " cells, " +
                                std::to_string(log_seconds_.size()) + " values");
  }
}

void LogGridTable::corners(std::span<const double> point, std::vector<std::size_t>& cells,
                           std::vector<double>& weights) const {
  cells.assign(1, 0);
  weights.assign(1, 1.0);
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    const auto& u = log_knots_[a];
    if (u.size() == 1) continue;  // a single knot: no interpolation along this axis
    const double x = std::log1p(std::max(0.0, point[a]));
    std::size_t lo = 0;
    if (x >= u.back()) {
      lo = u.size() - 2;
    } else if (x > u.front()) {
      lo = static_cast<std::size_t>(std::upper_bound(u.begin(), u.end(), x) - u.begin()) - 1;
    }
    double f = (x - u[lo]) / (u[lo + 1] - u[lo]);
    if (extrapolation_ == Extrapolation::clamp || !axes_[a].extrapolate) f = std::clamp(f, 0.0, 1.0);
    const std::size_t n = cells.size();
    for (std::size_t i = 0; i < n; ++i) {
      cells.push_back(cells[i] + (lo + 1) * strides_[a]);
      weights.push_back(weights[i] * f);
      cells[i] += lo * strides_[a];
      weights[i] *= 1 - f;
    }
  }
}

double LogGridTable::seconds(std::span<const double> point) const {
  std::vector<std::size_t> cells;
  std::vector<double> weights;
  corners(point, cells, weights);
  double v = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) v += weights[i] * log_seconds_[cells[i]];
  return std::exp(v);
}

double LogGridTable::seconds(const Shape& shape) const {
  std::vector<double> point;
  for (const auto& axis : axes_) point.push_back(static_cast<double>(shape.get(axis.dim, 0)));
  return seconds(point);
}

GridAxis axis_through(Dim dim, std::span<const Measurement> rows) {
  std::vector<double> v;
  for (const Measurement& m : rows) v.push_back(static_cast<double>(m.shape.get(dim, 0)));
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return GridAxis{dim, std::move(v)};
}

LogGridTable fit_log_grid(std::vector<GridAxis> axes, std::span<const Measurement> rows,
                          const GridFitOptions& options) {
  if (rows.empty()) throw std::invalid_argument("a table fit needs measurements");
  std::vector<double> points, seconds;
  points.reserve(rows.size() * axes.size());
  seconds.reserve(rows.size());
  for (const Measurement& m : rows) {
    for (const GridAxis& a : axes) points.push_back(static_cast<double>(m.shape.get(a.dim, 0)));
    seconds.push_back(m.latency_s);
  }
  return fit_log_grid_points(std::move(axes), points, seconds, options);
}

LogGridTable fit_log_grid_points(std::vector<GridAxis> axes, std::span<const double> points,
                                 std::span<const double> seconds, const GridFitOptions& options) {
  if (seconds.empty()) throw std::invalid_argument("a table fit needs measurements");
  if (points.size() != seconds.size() * axes.size()) {
    throw std::invalid_argument("a table fit needs one point (one value per axis) per measured time");
  }
  std::size_t cells_total = 1;
  for (const auto& a : axes) cells_total *= std::max<std::size_t>(1, a.knots.size());
  // The table's geometry (corners) with placeholder values.
  LogGridTable table(axes, std::vector<double>(cells_total, 0.0), options.extrapolation);
  const auto n = static_cast<Eigen::Index>(cells_total);

  using Triplet = Eigen::Triplet<double>;
  std::vector<Triplet> entries;
  std::vector<double> rhs;
  std::vector<std::size_t> cells;
  std::vector<double> weights;
  std::vector<double> point(axes.size());
  Eigen::Index row = 0;
  std::vector<bool> touched(cells_total, false);
  for (std::size_t r = 0; r < seconds.size(); ++r) {
    if (!(seconds[r] > 0)) throw std::invalid_argument("measured times must be positive");
    for (std::size_t a = 0; a < axes.size(); ++a) point[a] = points[r * axes.size() + a];
    table.corners(point, cells, weights);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      entries.emplace_back(row, static_cast<Eigen::Index>(cells[i]), weights[i]);
      if (weights[i] != 0) touched[cells[i]] = true;
    }
    rhs.push_back(std::log(seconds[r]));
    ++row;
  }
  if (!(options.smoothness > 0) && !(options.prior > 0) &&
      std::find(touched.begin(), touched.end(), false) != touched.end()) {
    throw std::invalid_argument(
        "some table cells have no measurement near them and the smoothness"
        " is 0: nothing would determine them");
  }
  // Smoothness: at every interior knot of every line of cells along every axis, weight x the
  // change of slope (per unit of ln(1 + x)) x h0 h1 / (h0 + h1), h0 and h1 the spacings on
  // either side. On an even grid that is half the plain second difference; on knots as close as
  // measured tables put them (m = 4352 and 4353 probe a tile boundary) it stays bounded by the
  // weight instead of growing as 1 / h, which keeps the normal equations well conditioned.
  if (options.smoothness > 0) {
    std::vector<std::size_t> strides(axes.size());
    std::size_t s = 1;
    for (std::size_t a = axes.size(); a-- > 0;) {
      strides[a] = s;
      s *= axes[a].knots.size();
    }
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const auto& k = axes[a].knots;
      if (k.size() < 3) continue;
      for (std::size_t c = 0; c < cells_total; ++c) {
        const std::size_t j = (c / strides[a]) % k.size();
        if (j == 0 || j + 1 == k.size()) continue;
        const double h0 = std::log1p(k[j]) - std::log1p(k[j - 1]);
        const double h1 = std::log1p(k[j + 1]) - std::log1p(k[j]);
        const double w = options.smoothness * h0 * h1 / (h0 + h1);
        entries.emplace_back(row, static_cast<Eigen::Index>(c - strides[a]), w / h0);
        entries.emplace_back(row, static_cast<Eigen::Index>(c), -w / h0 - w / h1);
        entries.emplace_back(row, static_cast<Eigen::Index>(c + strides[a]), w / h1);
        rhs.push_back(0);
        ++row;
      }
    }
  }
  // Prior: prior x (the cell's value - 0) per cell.
  if (options.prior > 0) {
    for (std::size_t c = 0; c < cells_total; ++c) {
      entries.emplace_back(row, static_cast<Eigen::Index>(c), options.prior);
      rhs.push_back(0);
      ++row;
    }
  }
  Eigen::SparseMatrix<double> a(row, n);
  a.setFromTriplets(entries.begin(), entries.end());
  const Eigen::Map<const Eigen::VectorXd> b(rhs.data(), static_cast<Eigen::Index>(rhs.size()));
  Eigen::SparseMatrix<double> normal = a.transpose() * a;
  Eigen::SparseMatrix<double> ridge(n, n);
  ridge.setIdentity();
  normal += 1e-9 * ridge;
  const Eigen::VectorXd rhs_n = a.transpose() * b;
  Eigen::VectorXd x;
  if (n <= kDirectCells) {
    Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> solver(normal);
    if (solver.info() != Eigen::Success) {
      throw std::invalid_argument("the table's normal equations could not be factorised");
    }
    x = solver.solve(rhs_n);
  } else {
    // Large grids (3-D GEMM tables: tens of thousands of cells) fill in badly under a direct
    // factorisation; conjugate gradients with an incomplete-Cholesky preconditioner solve them
    // in a fraction of the time.
    Eigen::ConjugateGradient<Eigen::SparseMatrix<double>, Eigen::Lower | Eigen::Upper,
                             Eigen::IncompleteCholesky<double>>
        cg;
    cg.setTolerance(1e-9);
    cg.setMaxIterations(20000);
    cg.compute(normal);
    x = cg.solve(rhs_n);
    if (cg.info() != Eigen::Success) {
      throw std::invalid_argument("the table's normal equations did not converge");
    }
  }
  return LogGridTable(std::move(axes), std::vector<double>(x.data(), x.data() + x.size()), options.extrapolation);
}

}  // namespace servesim::calibrate
