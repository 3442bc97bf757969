// Interpolation tables for dense measurements: latency on a grid over shape fields, multilinear
// in log space (u = ln(1 + x) on every axis, ln seconds as the value), so power laws such as
// time ~ m interpolate exactly and zero-valued fields (window = 0, prefix = 0) are allowed.
//
// fit_log_grid builds a table from scattered measurements by least squares rather than by
// copying cells: every measurement is the multilinear blend of its 2^d surrounding cells, every
// row contributes the residual ln(predicted / measured) (about the relative error), and a
// smoothness penalty (weight x the change of slope at each interior knot along each axis,
// scaled by the harmonic spacing; grid_table.cpp) ties neighbouring cells together. Duplicates
// average, noise is smoothed, and cells with no measurement are filled from their neighbours
// instead of failing. Solved as sparse normal equations with a 1e-9 ridge that keeps the system
// definite: factorised (SimplicialLDLT) up to 4096 cells, by preconditioned conjugate gradients
// above (a 74 x 22 x 22 GEMM table fills in too much for the direct solver).
// Outside the grid a table extends the end segments linearly in log-log (or clamps).
// Invariants: each axis has at least one knot, strictly increasing, >= 0; values.size() is the
// product of the axis sizes, last axis fastest.
#pragma once

#include <span>
#include <vector>

#include "calibrate/measurement.h"

namespace servesim::calibrate {

struct GridAxis {
  Dim dim = Dim::m;
  std::vector<double> knots;
  bool extrapolate = true;  // beyond the ends: extend (linear tables) or clamp on this axis
};

enum class Extrapolation { linear, clamp };

class LogGridTable {
 public:
  // Throws std::invalid_argument when the axes or the value count are inconsistent.
  LogGridTable(std::vector<GridAxis> axes, std::vector<double> log_seconds,
               Extrapolation extrapolation = Extrapolation::linear);
  // Seconds at a point given in the axes' order.
  double seconds(std::span<const double> point) const;
  // Seconds for a shape (a field the shape lacks counts as 0).
  double seconds(const Shape& shape) const;
  const std::vector<GridAxis>& axes() const { return axes_; }
  const std::vector<double>& log_seconds() const { return log_seconds_; }
  Extrapolation extrapolation() const { return extrapolation_; }

  // For a point: the flat indices of its 2^d corner cells and their weights (sum 1 inside the
  // grid; extrapolating weights may be negative). Used by the fitter.
  void corners(std::span<const double> point, std::vector<std::size_t>& cells, std::vector<double>& weights) const;

 private:
  std::vector<GridAxis> axes_;
  std::vector<std::vector<double>> log_knots_;  // ln(1 + knot)
  std::vector<std::size_t> strides_;
  std::vector<double> log_seconds_;
  Extrapolation extrapolation_;
};

struct GridFitOptions {
  double smoothness = 0.05;  // weight of the slope-change penalty (per unit of ln(1 + x))
  Extrapolation extrapolation = Extrapolation::linear;
  // Weight of a penalty pulling every cell's value toward ln 1 = 0 (one row per cell, against
  // the data's one row per measurement): for tables of a factor over a model (a residual), where
  // a cell far from every measurement should fall back to the model. 0 for tables of seconds.
  double prior = 0;
};

// The sorted distinct values of `dim` over `rows`: a grid axis through every measured value.
GridAxis axis_through(Dim dim, std::span<const Measurement> rows);

// Fits a table over `axes` to `rows`. Throws std::invalid_argument when there are no rows, a row
// lacks positive latency, or (smoothness 0) a cell has no measurement to determine it.
LogGridTable fit_log_grid(std::vector<GridAxis> axes, std::span<const Measurement> rows,
                          const GridFitOptions& options = {});
// The same from points given directly (row-major, axes.size() values per point, in the axes'
// order; fractional values allowed) and their seconds: for tables keyed by derived quantities
// that a Shape's integer fields cannot hold (MoE tables: expected token-expert pairs).
LogGridTable fit_log_grid_points(std::vector<GridAxis> axes, std::span<const double> points,
                                 std::span<const double> seconds, const GridFitOptions& options = {});

}  // namespace servesim::calibrate
