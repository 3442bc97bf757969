#include "calibrate/moe_table.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "calibrate/operator_fit.h"
#include "models/cost_model.h"

namespace servesim::calibrate {
namespace {

constexpr std::size_t kAxes = 4;

// The point's component of a table axis (m, batch, n, k).
std::size_t component(Dim d) {
  const std::vector<Dim> dims = moe_table_axes();
  return static_cast<std::size_t>(std::find(dims.begin(), dims.end(), d) - dims.begin());
}

std::vector<double> project(const std::vector<GridAxis>& axes, const MoeTablePoint& p) {
  std::vector<double> v;
  v.reserve(axes.size());
  for (const GridAxis& a : axes) v.push_back(p.point[component(a.dim)]);
  return v;
}

std::vector<GridAxis> axes_for(std::span<const MoeTablePoint> train, const std::vector<Dim>& use) {
  std::vector<GridAxis> axes;
  const std::vector<Dim> dims = moe_table_axes();
  for (std::size_t a = 0; a < kAxes; ++a) {
    if (std::find(use.begin(), use.end(), dims[a]) == use.end()) continue;
    double lo = 0, hi = 0;
    bool first = true;
    for (const MoeTablePoint& p : train) {
      lo = first ? p.point[a] : std::min(lo, p.point[a]);
      hi = first ? p.point[a] : std::max(hi, p.point[a]);
      first = false;
    }
    GridAxis g;
    g.dim = dims[a];
    g.knots = power_two_knots(lo, hi);
    g.extrapolate = a == 0;  // pairs only
    axes.push_back(std::move(g));
  }
  return axes;
}

// What the table is fitted to: the measured time less the pass the simulator adds (at least half).
double table_target(const Measurement& m, const MoeTablePoint& p) {
  return std::max(0.5 * m.latency_s, m.latency_s - p.extra_s);
}

LogGridTable fit(std::span<const Measurement> rows, std::span<const MoeTablePoint> points,
                 const MoeTableOptions& options) {
  std::vector<GridAxis> axes = axes_for(points, options.axes);
  std::vector<double> flat, seconds;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::vector<double> v = project(axes, points[i]);
    flat.insert(flat.end(), v.begin(), v.end());
    const double target = table_target(rows[i], points[i]);
    seconds.push_back(options.roofline_factor ? target / points[i].experts_s : target);
  }
  GridFitOptions go;
  go.smoothness = options.smoothness;
  go.prior = options.roofline_factor ? options.prior : 0.0;
  go.extrapolation = Extrapolation::linear;
  return fit_log_grid_points(std::move(axes), flat, seconds, go);
}

// What the simulator applies for a row: table + pass (or roofline x factor + pass) inside the
// domain, the roofline outside.
double predict(const LogGridTable& t, const MoeTablePoint& p, bool roofline_factor) {
  const std::vector<double> v = project(t.axes(), p);
  if (!moe_table_covers(t, v)) return p.roofline_s;
  return (roofline_factor ? p.experts_s * t.seconds(v) : t.seconds(v)) + p.extra_s;
}

}  // namespace

std::vector<Dim> moe_table_axes() { return {Dim::m, Dim::batch, Dim::n, Dim::k}; }

std::vector<double> power_two_knots(double lo, double hi) {
  lo = std::max(lo, 1e-3);
  hi = std::max(hi, lo);
  std::vector<double> k;
  double v = std::exp2(std::floor(std::log2(lo)));
  for (; v < hi * (1 - 1e-12); v *= 2) k.push_back(v);
  k.push_back(v);
  return k;
}

bool moe_table_covers(const LogGridTable& t, std::span<const double> point) {
  for (std::size_t a = 0; a < t.axes().size(); ++a) {
    const GridAxis& g = t.axes()[a];
    if (g.extrapolate || g.knots.size() < 2) continue;
    const double x = std::log1p(std::max(0.0, point[a]));
    const double lo = std::log1p(g.knots.front()), hi = std::log1p(g.knots.back());
    const double slack = 1e-9 * (1 + std::fabs(hi));  // as models::log_grid_corners
    if (x < lo - slack || x > hi + slack) return false;
  }
  return true;
}

std::optional<MoeTablePoint> moe_table_point(const Measurement& m, const MeasurementSet& set,
                                             const models::ChipSpec& chip) {
  if (m.op != MeasuredOp::moe || !(m.latency_s > 0)) return std::nullopt;
  std::string why;
  const auto so = simulator_operator(m, m.variant != 0 ? set.label(m.variant) : "", chip, why);
  if (!so || so->op.kernels == 0 || !(so->op.m > 0) || !(so->op.batch > 0)) return std::nullopt;
  const models::RooflineCostModel roofline(chip);
  MoeTablePoint p;
  p.point = {so->op.m, so->op.batch, so->op.n, so->op.k};
  p.extra_s = roofline.seconds(so->extra);
  p.experts_s = roofline.seconds(so->op);
  if (!(p.experts_s > 0)) return std::nullopt;
  p.roofline_s = p.experts_s + p.extra_s;
  return p;
}

std::vector<MoeTable> fit_moe_tables(const MeasurementSet& set, const models::ChipSpec& chip,
                                     const MoeTableOptions& options, ErrorReport& errors) {
  struct Group {
    std::vector<Measurement> rows;
    std::vector<MoeTablePoint> points;
    std::vector<std::string> labels;
  };
  std::map<Format, Group> groups;
  for (const Measurement& m : set.rows()) {
    auto p = moe_table_point(m, set, chip);
    if (!p) continue;
    Group& g = groups[m.format];
    g.rows.push_back(m);
    g.points.push_back(*p);
    g.labels.push_back(format_label(m, set) + (options.roofline_factor ? " factor table" : " table"));
  }
  std::vector<MoeTable> out;
  for (const auto& [format, g] : groups) {
    out.push_back({format, fit(g.rows, g.points, options), g.rows.size(), options.roofline_factor});
    if (!options.cross_validate) continue;
    const FoldPlan plan = plan_folds(g.rows, options.folds, options.seed);
    std::vector<double> held(g.rows.size(), 0.0);
    const bool was_held = plan.folds >= 2;
    if (was_held) {
      for (std::uint32_t f = 0; f < plan.folds; ++f) {
        std::vector<Measurement> train;
        std::vector<MoeTablePoint> tp;
        for (std::size_t i = 0; i < g.rows.size(); ++i) {
          if (plan.fold_of_row[i] != f) {
            train.push_back(g.rows[i]);
            tp.push_back(g.points[i]);
          }
        }
        if (train.empty()) continue;
        const LogGridTable t = fit(train, tp, options);
        for (std::size_t i = 0; i < g.rows.size(); ++i) {
          if (plan.fold_of_row[i] == f) held[i] = predict(t, g.points[i], options.roofline_factor);
        }
      }
    } else {
      for (std::size_t i = 0; i < g.rows.size(); ++i)
        held[i] = predict(out.back().table, g.points[i], options.roofline_factor);
    }
    std::map<std::string, std::pair<std::vector<Measurement>, std::vector<double>>> cells;
    for (std::size_t i = 0; i < g.rows.size(); ++i) {
      auto& c = cells[g.labels[i]];
      c.first.push_back(g.rows[i]);
      c.second.push_back(held[i]);
    }
    for (const auto& [label, c] : cells) add_error_cells(errors, "moe", label, c.first, c.second, was_held);
  }
  return out;
}

}  // namespace servesim::calibrate
