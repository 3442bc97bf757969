// Cross-validation by whole shapes, and the error report it produces.
//
// The question calibration must answer is "how wrong is the model for a model we have not
// measured, on this chip", so rows are never held out one by one: all rows that share a shape
// key (the weight shape (n, k) of a GEMM, the head layout of an attention, the expert layout of
// an MoE; shape_key_dims()) go to the same fold. Groups are dealt to folds in a shuffled order
// (the project's RNG, stream "calibrate.cross_validation"), so fold sizes stay even and the same
// seed gives the same folds. With fewer groups than folds, each group is its own fold
// (leave-one-shape-out).
//
// Errors are absolute percentage errors |predicted / measured - 1| and the signed mean of
// predicted / measured - 1, reported as fractions per (operator kind, format) and size range
// (size_class()), plus one "all" row per kind and format.
// Ignored: error weighting by how often a shape occurs in serving (every measured row counts once).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/grid_table.h"
#include "calibrate/measurement.h"

namespace servesim::calibrate {

// The shape fields that identify "one shape" of `op` for holding out.
std::vector<Dim> shape_key_dims(MeasuredOp op);
// The key of a row: its op followed by the values of shape_key_dims(op).
std::vector<std::int64_t> shape_key(const Measurement& m);

struct FoldPlan {
  std::size_t folds = 0;                   // folds actually used (<= asked, >= 2 when possible)
  std::size_t groups = 0;                  // distinct shape keys
  std::vector<std::uint32_t> fold_of_row;  // one per row
};

// Deals the rows' shape groups to `folds` folds. With a single group there is nothing to hold
// out: folds == 1 and every row is in fold 0 (cross_validate then returns no predictions).
FoldPlan plan_folds(std::span<const Measurement> rows, std::size_t folds, std::uint64_t seed);

// Fits on the training rows and predicts seconds for each test row.
using FitPredict =
    std::function<std::vector<double>(std::span<const Measurement> train, std::span<const Measurement> test)>;

// For each fold: trains on the other folds and predicts it. Returns one prediction per row
// (every row is predicted exactly once, by a fit that never saw its shape); empty when the plan
// has a single fold.
std::vector<double> cross_validate(std::span<const Measurement> rows, const FoldPlan& plan,
                                   const FitPredict& fit_predict);

// The held-out seconds of a log-grid table for each row: `fit` run on the other folds of whole
// shapes (plan_folds with `folds`, `seed`) predicts each fold's rows. Where one shape is all
// there is, `all` (the table fitted on every row) predicts them and `held_out` is false.
std::vector<double> held_out_table_seconds(std::span<const Measurement> rows, std::size_t folds, std::uint64_t seed,
                                           const std::function<LogGridTable(std::span<const Measurement>)>& fit,
                                           const LogGridTable& all, bool& held_out);

struct ErrorSummary {
  std::size_t rows = 0;
  double ape_p50 = 0;  // median absolute percentage error (a fraction)
  double ape_p90 = 0;
  double signed_mean = 0;  // mean of predicted / measured - 1
};

// Percentiles interpolate linearly between order statistics (p in [0, 1]).
double percentile(std::vector<double> values, double p);
ErrorSummary summarise_errors(std::span<const double> predicted, std::span<const double> measured);

// Size ranges, per kind: tokens processed for token-parallel kernels (GEMM m, MoE tokens,
// prefill batch x new tokens), KV tokens read for decode kernels (batch x kv_len), bytes for
// copies.
std::string_view size_class(const Measurement& m);
// The labels size_class() can return for `op`, smallest first.
std::vector<std::string_view> size_classes(MeasuredOp op);

struct ErrorCell {
  std::string kind;    // op_name()
  std::string format;  // format_name(), or a label the caller chose (e.g. "bf16 / fp8 KV")
  std::string size;    // size_class() label, or "all"
  ErrorSummary error;
  bool held_out = true;  // false: errors of the fit on its own rows (nothing could be held out)
};

struct ErrorReport {
  std::string chip;
  std::string cost_model;  // what was fitted, e.g. "roofline: overhead + max(compute, memory)"
  std::string held_out;    // how, e.g. "5 folds of whole shapes (n, k) ..."
  std::vector<ErrorCell> cells;
};

// Adds one cell per size range present (in size order), then an "all" cell, for rows that all
// share `kind` and `format`. `held_out` says whether the predictions came from fits that never
// saw the rows' shapes.
void add_error_cells(ErrorReport& report, std::string_view kind, std::string_view format,
                     std::span<const Measurement> rows, std::span<const double> predicted, bool held_out = true);

// A fixed-width text table, one line per cell, percentages with one decimal; in-sample cells are
// marked "(in-sample)".
std::string format_error_table(const ErrorReport& report);
// JSON, schema "servesim.calibration_errors/1": chip, cost_model, held_out, cells[] with kind,
// format, size, rows, ape_p50, ape_p90, signed_mean (fractions), held_out.
std::string error_report_json(const ErrorReport& report);

}  // namespace servesim::calibrate
