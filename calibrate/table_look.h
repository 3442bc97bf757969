// A first look at interpolation tables for GEMMs: per (chip, format), a log-space grid over
// (m, n, k) fitted to the measurements (grid_table.h), cross-validated by whole weight shapes
// (n, k) like the roofline look, so every held-out shape is predicted from its neighbours on
// the grid. Grid knots run through the training rows' values only.
// Ignored: other kinds (their shape spaces have more axes than one dense sweep covers).
#pragma once

#include "calibrate/cross_validation.h"
#include "calibrate/measurement.h"

namespace servesim::calibrate {

struct TableLookOptions {
  std::size_t folds = 5;
  std::uint64_t seed = 1;
  double smoothness = 0.05;
};

// One report per chip; empty when the set holds no GEMM rows.
std::vector<ErrorReport> gemm_table_look(const MeasurementSet& set, const TableLookOptions& options = {});

}  // namespace servesim::calibrate
