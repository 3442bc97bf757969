// Log-space interpolation tables for Gated DeltaNet's recurrent kernels (Qwen3-Next, Qwen3.5:
// the linear-attention layers' core), over the fields the simulator's recurrent operators carry
// (models::layer_batch_ops: linear_prefill, linear_decode; read back by
// models::log_grid_field_value), so that what is fitted is what models::TableCostModel looks up:
//   prefill  axes batch (sequences), tokens (new tokens per sequence), heads (value heads per
//            chip), kv_heads (key heads per chip): causal_conv1d_fn + chunk_gated_delta_rule
//   decode   axes batch, heads, kv_heads: causal_conv1d_update + the fused recurrent step
// AIConfigurator times the convolution and the recurrent core as two rows of one shape (its
// `gdn` table, kernel_source naming each); a table point is their sum, the two kernels the
// simulator's operator counts (kernels = 2). Shapes with only one of the two are left out.
// One table per (phase, key head dim, value head dim); the simulator's operator carries the key
// head dim (its k), matched exactly; every measured and preset GDN has value heads of 128 as well.
// Knots through every measured value on each axis; every axis extrapolates log-log beyond its
// ends. Cross-validation holds out whole shapes (key and value heads per chip: the kernel's
// shape, whichever models share it), each predicted by a table fitted without any of its rows.
// Ignored: the state's initial load when a chunk continues a sequence (AIConfigurator measured
// fresh sequences only), Mamba-2's kernels (a `mamba2` table the simulator has no operator for).
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

#include "calibrate/cross_validation.h"
#include "calibrate/grid_table.h"
#include "calibrate/measurement.h"

namespace servesim::calibrate {

struct LinearTableKey {
  bool prefill = true;
  std::int64_t key_dim = 0, value_dim = 0;
  auto operator<=>(const LinearTableKey&) const = default;  // NOLINT(modernize-use-nullptr)
};

struct LinearTable {
  LinearTableKey key;
  LogGridTable table;
  std::size_t rows = 0;  // shapes (kernel pairs) fitted
};

// The table axes of a phase.
std::vector<Dim> linear_table_axes(bool prefill);

// The table views of a set's `gdn` rows: one row per shape that has both kernels, its latency
// their sum and its shape the table fields (batch, tokens when prefill, heads, kv_heads,
// head_dim) plus k_heads and v_heads (the held-out shape). `keys` receives each view's key.
std::vector<Measurement> linear_table_views(const MeasurementSet& set, std::vector<LinearTableKey>& keys);

struct LinearTableOptions {
  std::size_t folds = 5;
  std::uint64_t seed = 1;
  double smoothness = 0.05;
  bool cross_validate = true;
};

// Fits one table per key on all of its shapes; with cross_validate, adds the held-out error
// cells (kind gdn, "prefill table" / "decode table", size ranges) to `errors`.
std::vector<LinearTable> fit_linear_tables(const MeasurementSet& set, const LinearTableOptions& options,
                                           ErrorReport& errors);

}  // namespace servesim::calibrate
