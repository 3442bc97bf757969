// Log-space interpolation tables for attention kernels (context and generation attention with
// GQA / MHA heads, sliding windows and fp8 KV; MLA's context and generation kernels), over the
// fields the simulator's own attention operator carries (models::layer_batch_ops, read back by
// models::log_grid_field_value), so that what is fitted is exactly what models::TableCostModel
// looks up:
//   prefill  axes batch, tokens (new tokens per sequence), heads, kv_heads (GQA only)
//   decode   axes batch, kv_len (keys read per sequence), heads, kv_heads (GQA only)
//   encoder  axes batch (images, or windows), tokens (patches per sequence), heads: the vision
//            encoder's bidirectional attention (models::vision_encoder_ops), which keeps no KV
//            cache; the simulator tells it from a causal prefill by its kv_bytes 0
// One table per (kind, format, KV format, head dim, window); MLA tables are per (kind, KV format).
// A row enters through its simulator operator (simulator_operator). The measured windowed
// kernels run the window, not the full mask: TensorRT-LLM's windowed generation kernel takes the
// same time from 1k to 16k cached tokens at batch 16 (0.032 ms, against 0.040-0.149 ms full),
// and its windowed context kernel grows linearly with the sequence (0.66 ms at 16k against 4.9 ms
// full); yet at batch 1 the generation kernel still grows with the whole context (0.011 ms at 1k,
// 0.019 ms at 32k). The windowed tables are therefore keyed by the whole context (the windowed
// operator's `context`; its FLOPs and bytes count the window), per window size.
// Knots: batch and the length axis through every measured value; heads and kv_heads at the powers
// of two spanning the measured range (keeps a table near 10^4 cells; a head count between two
// knots interpolates in log space like any other point). Every axis extrapolates log-log beyond
// its ends. Cross-validation holds out whole shapes (heads, kv_heads, head dim, window; MLA:
// heads): each held-out shape is predicted by a table fitted without any of its rows.
// Ignored: prefixes (AIConfigurator measured prefix 0; the simulator applies prefill tables only
// to chunks without cached keys, the roofline otherwise), DSA's sparse kernels.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/cross_validation.h"
#include "calibrate/grid_table.h"
#include "calibrate/measurement.h"
#include "models/chip_spec.h"

namespace servesim::calibrate {

struct AttentionTableKey {
  MeasuredOp op = MeasuredOp::attention_decode;
  Format format = Format::bf16;
  Format kv_format = Format::bf16;
  std::int64_t head_dim = 0;  // the operator's k: GQA head dim; MLA 576 (decode) / 192 (prefill)
  std::int64_t window = 0;
  auto operator<=>(const AttentionTableKey&) const = default;  // NOLINT(modernize-use-nullptr)
};

struct AttentionTable {
  AttentionTableKey key;
  LogGridTable table;
  std::size_t rows = 0;
};

// The table view of a measured attention call: a copy whose shape holds its simulator
// operator's table fields (batch, tokens or kv_len, heads, kv_heads, head_dim, window); nullopt
// for rows that get no table.
std::optional<Measurement> attention_table_view(const Measurement& m, const models::ChipSpec& chip);
// The table's axes for a kind (attention_prefill / _decode, mla_prefill / _decode).
std::vector<Dim> attention_table_axes(MeasuredOp op);
AttentionTableKey attention_table_key(const Measurement& view);

struct AttentionTableOptions {
  std::size_t folds = 5;
  std::uint64_t seed = 1;
  double smoothness = 0.05;
  bool cross_validate = true;
};

// Fits one table per key on all of its rows; with cross_validate, adds the held-out error cells
// (kind, "<format label> table", size ranges) to `errors`.
std::vector<AttentionTable> fit_attention_tables(const MeasurementSet& set, const models::ChipSpec& chip,
                                                 const AttentionTableOptions& options, ErrorReport& errors);

}  // namespace servesim::calibrate
