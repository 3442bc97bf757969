#include "calibrate/attention_table.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "calibrate/operator_fit.h"

namespace servesim::calibrate {
namespace {

bool gets_table(MeasuredOp op) {
  return op == MeasuredOp::attention_prefill || op == MeasuredOp::attention_decode || op == MeasuredOp::mla_prefill ||
         op == MeasuredOp::mla_decode || op == MeasuredOp::encoder_attention;
}

bool is_prefill(MeasuredOp op) {
  return op == MeasuredOp::attention_prefill || op == MeasuredOp::mla_prefill || op == MeasuredOp::encoder_attention;
}

// Powers of two from below the smallest to above the largest value of `dim` (one knot when all
// rows share a value).
GridAxis power_two_axis(Dim dim, std::span<const Measurement> rows) {
  std::int64_t lo = 0, hi = 0;
  bool first = true;
  for (const Measurement& m : rows) {
    const std::int64_t v = m.shape.get(dim, 0);
    lo = first ? v : std::min(lo, v);
    hi = first ? v : std::max(hi, v);
    first = false;
  }
  GridAxis a;
  a.dim = dim;
  if (lo == hi) {
    a.knots = {static_cast<double>(lo)};
    return a;
  }
  double k = std::exp2(std::floor(std::log2(static_cast<double>(std::max<std::int64_t>(1, lo)))));
  for (; k < static_cast<double>(hi); k *= 2) a.knots.push_back(k);
  a.knots.push_back(k);
  return a;
}

std::vector<GridAxis> axes_for(MeasuredOp op, std::span<const Measurement> train) {
  std::vector<GridAxis> axes;
  for (Dim d : attention_table_axes(op)) {
    axes.push_back(d == Dim::heads || d == Dim::kv_heads ? power_two_axis(d, train) : axis_through(d, train));
  }
  return axes;
}

}  // namespace

std::vector<Dim> attention_table_axes(MeasuredOp op) {
  const Dim length = is_prefill(op) ? Dim::tokens : Dim::kv_len;
  // MLA has no KV-heads axis; neither has encoder attention (MHA: as many KV heads as heads).
  if (op == MeasuredOp::mla_prefill || op == MeasuredOp::mla_decode || op == MeasuredOp::encoder_attention) {
    return {Dim::batch, length, Dim::heads};
  }
  return {Dim::batch, length, Dim::heads, Dim::kv_heads};
}

std::optional<Measurement> attention_table_view(const Measurement& m, const models::ChipSpec& chip) {
  if (!gets_table(m.op) || m.shape.get(Dim::prefix, 0) != 0) return std::nullopt;
  std::string why;
  const auto so = simulator_operator(m, "", chip, why);
  // Causal kernels write a KV cache (kv_bytes > 0); the encoder's keeps none (kv_bytes 0).
  const bool encoder = m.op == MeasuredOp::encoder_attention;
  if (!so || so->op.batch <= 0 || (so->op.kv_bytes > 0) == encoder) return std::nullopt;
  const models::Operator& op = so->op;
  Measurement v = m;
  v.shape = Shape();
  auto count = [](double x) { return static_cast<std::int64_t>(std::llround(x)); };
  v.shape.set(Dim::batch, count(op.batch));
  if (is_prefill(m.op)) {
    v.shape.set(Dim::tokens, count(op.m / op.batch));
  } else {
    v.shape.set(Dim::kv_len, count(op.context / op.batch));
  }
  v.shape.set(Dim::heads, count(op.n));
  if (!op.latent && !encoder) v.shape.set(Dim::kv_heads, count(op.kv_heads));
  v.shape.set(Dim::head_dim, count(op.k));
  v.shape.set(Dim::window, count(op.window));
  return v;
}

AttentionTableKey attention_table_key(const Measurement& view) {
  return {view.op, view.format, view.kv_format == Format::unspecified ? view.format : view.kv_format,
          view.shape.get(Dim::head_dim, 0), view.shape.get(Dim::window, 0)};
}

std::vector<AttentionTable> fit_attention_tables(const MeasurementSet& set, const models::ChipSpec& chip,
                                                 const AttentionTableOptions& options, ErrorReport& errors) {
  struct Group {
    std::vector<Measurement> rows, views;
    std::vector<std::string> labels;
  };
  std::map<AttentionTableKey, Group> groups;
  for (const Measurement& m : set.rows()) {
    auto v = attention_table_view(m, chip);
    if (!v) continue;
    Group& g = groups[attention_table_key(*v)];
    g.rows.push_back(m);
    g.views.push_back(*v);
    g.labels.push_back(format_label(m, set) + " table");
  }
  const GridFitOptions grid{options.smoothness, Extrapolation::linear};
  auto fit = [&](MeasuredOp op, std::span<const Measurement> train) {
    return fit_log_grid(axes_for(op, train), train, grid);
  };
  // Held-out predictions per (kind, label), over every key that shares them (head dims together).
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<Measurement>, std::vector<double>>> cells;
  std::map<std::pair<std::string, std::string>, bool> held_out;
  std::vector<AttentionTable> out;
  for (const auto& group : groups) {
    // Named, not structured bindings: the lambda below captures `key` (clang before 16 refuses
    // captured bindings, and the fuzz build uses clang).
    const auto& key = group.first;
    const auto& g = group.second;
    out.push_back({key, fit(key.op, g.views), g.rows.size()});
    if (!options.cross_validate) continue;
    bool was_held = false;
    const std::vector<double> held = held_out_table_seconds(
        g.views, options.folds, options.seed, [&](std::span<const Measurement> train) { return fit(key.op, train); },
        out.back().table, was_held);
    for (std::size_t i = 0; i < g.rows.size(); ++i) {
      auto& c = cells[{std::string(op_name(key.op)), g.labels[i]}];
      c.first.push_back(g.rows[i]);
      c.second.push_back(held[i]);
      auto [it, fresh] = held_out.try_emplace({std::string(op_name(key.op)), g.labels[i]}, was_held);
      if (!fresh) it->second = it->second && was_held;
    }
  }
  for (const auto& [kl, c] : cells) add_error_cells(errors, kl.first, kl.second, c.first, c.second, held_out[kl]);
  return out;
}

}  // namespace servesim::calibrate
