// Log-space interpolation tables for the routed experts of a MoE layer (AIConfigurator's
// moe_perf: gated grouped GEMMs, every routing skew), over the fields the simulator's own
// operator carries (models::layer_token_ops' moe_experts under the row's plan and skew, read back
// by models::log_grid_field_value), so that what is fitted is what models::TableCostModel looks
// up:
//   m       token-expert pairs on the busiest expert-parallel rank (expected, fractional)
//   batch   experts with a token on that rank (expected): whose weights it reads
//   n       expert columns per chip (expert intermediate / moe_tp)
//   k       hidden
// One table per weight format (bf16, fp8, fp8_block, w4a16_mxfp4); the skews share a table (the
// busiest rank's pairs and experts are where the skew shows). Knots at the powers of two spanning
// the measured values on every axis (pairs 1 to 2^17, experts 1 to 512, n 16 to 16k, k 2k to 8k:
// about 6,000 cells a table); a point between knots interpolates in ln(1 + x) like any other.
// Domain: pairs extend log-log beyond their ends; experts, n and k do not (the simulator's
// roofline costs an operator outside them, and the held-out error below predicts such rows with
// the fitted roofline too).
// W4A16 (MXFP4 weights, bf16 math): the simulator adds its dequantisation pass
// (SimulatorOperator::extra, costed by the fitted roofline) to the experts; the table is fitted to
// the measured time less that pass (at least half the measured time), so that table + pass is the
// measured layer, and the error is reported on that sum.
// Cross-validation holds out whole model shapes (hidden, inter, experts, top-k; every plan and
// skew of a shape together): each held-out shape is predicted by a table fitted without it.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <vector>

#include "calibrate/cross_validation.h"
#include "calibrate/grid_table.h"
#include "calibrate/measurement.h"
#include "models/chip_spec.h"

namespace servesim::calibrate {

struct MoeTable {
  Format format = Format::bf16;
  LogGridTable table;  // seconds, or (roofline_factor) factors over the experts' roofline
  std::size_t rows = 0;
  bool roofline_factor = false;
};

// The table point of a measured MoE call (m, batch, n, k as above) and the seconds the simulator
// adds outside the table (the dequantisation pass; 0 unless emulated), on `chip` (its fitted
// efficiencies cost the pass); nullopt for rows that get no table (non-gated, unknown skew).
struct MoeTablePoint {
  std::array<double, 4> point{};
  double extra_s = 0;     // dequantisation pass, fitted roofline
  double experts_s = 0;   // the routed experts by the fitted roofline (what a factor table scales)
  double roofline_s = 0;  // the whole call by the fitted roofline (experts + pass)
};
std::optional<MoeTablePoint> moe_table_point(const Measurement& m, const MeasurementSet& set,
                                             const models::ChipSpec& chip);
std::vector<Dim> moe_table_axes();  // m, batch, n, k
// Powers of two from at or below the smallest positive value to at or above the largest.
std::vector<double> power_two_knots(double lo, double hi);
// Whether a point lies on the table's non-extrapolating axes (experts, n, k).
bool moe_table_covers(const LogGridTable& t, std::span<const double> point);

struct MoeTableOptions {
  std::size_t folds = 5;
  std::uint64_t seed = 1;
  double smoothness = 0.5;
  bool cross_validate = true;
  std::vector<Dim> axes = moe_table_axes();  // a subset of m, batch, n, k
  // false: the table holds seconds (table + pass is the layer). true: it holds the factor
  // measured / roofline of the experts (the target as below over experts_s), so that the layer is
  // experts_s x factor + pass, with `prior` (GridFitOptions::prior) pulling the factor toward 1
  // where measurements are thin: a shape between measured ones degrades to the roofline x a
  // smooth correction rather than to an unconstrained interpolation of absolute times.
  bool roofline_factor = false;
  double prior = 0;
};

// Fits one table per weight format on all its rows; with cross_validate, adds the held-out error
// cells (kind moe, "<format> <skew> table", or "... factor table" with roofline_factor, size
// ranges) to `errors`. `chip` carries the fitted
// efficiencies (the pass and the roofline outside the domain).
std::vector<MoeTable> fit_moe_tables(const MeasurementSet& set, const models::ChipSpec& chip,
                                     const MoeTableOptions& options, ErrorReport& errors);

}  // namespace servesim::calibrate
