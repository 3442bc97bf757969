#include "calibrate/linear_table.h"

#include <array>
#include <map>
#include <string>

namespace servesim::calibrate {
namespace {

// A shape of the gdn table: the phase and every column but the kernel and its latency.
struct ShapeKey {
  bool prefill = true;
  std::array<std::int64_t, 8> dims{};
  std::uint16_t model = 0;
  auto operator<=>(const ShapeKey&) const = default;  // NOLINT(modernize-use-nullptr)
};

constexpr std::array<Dim, 8> kShapeDims = {Dim::batch,   Dim::seq_len,    Dim::d_model, Dim::d_conv,
                                           Dim::k_heads, Dim::head_k_dim, Dim::v_heads, Dim::head_v_dim};

}  // namespace

std::vector<Dim> linear_table_axes(bool prefill) {
  if (prefill) return {Dim::batch, Dim::tokens, Dim::heads, Dim::kv_heads};
  return {Dim::batch, Dim::heads, Dim::kv_heads};
}

std::vector<Measurement> linear_table_views(const MeasurementSet& set, std::vector<LinearTableKey>& keys) {
  // Per shape: the convolution's row and the recurrent core's (the first of each, in file order).
  struct Pair {
    const Measurement* conv = nullptr;
    const Measurement* core = nullptr;
  };
  std::map<ShapeKey, Pair> shapes;
  for (const Measurement& m : set.rows()) {
    if (m.op != MeasuredOp::gdn) continue;
    const std::string& phase = set.label(m.variant);
    if (phase != "context" && phase != "generation") continue;
    ShapeKey k;
    k.prefill = phase == "context";
    for (std::size_t i = 0; i < kShapeDims.size(); ++i) k.dims[i] = m.shape.get(kShapeDims[i], 0);
    k.model = m.model;
    Pair& p = shapes[k];
    const bool conv = set.label(m.kernel).find("conv1d") != std::string::npos;
    const Measurement*& slot = conv ? p.conv : p.core;
    if (slot == nullptr) slot = &m;
  }
  std::vector<Measurement> views;
  keys.clear();
  for (const auto& [k, p] : shapes) {
    if (p.conv == nullptr || p.core == nullptr) continue;
    const Shape& s = p.core->shape;
    Measurement v = *p.core;
    v.kernel = 0;
    v.format = Format::bf16;
    v.latency_s = p.conv->latency_s + p.core->latency_s;
    v.shape = Shape();
    v.shape.set(Dim::batch, s.get(Dim::batch, 0));
    if (k.prefill) v.shape.set(Dim::tokens, s.get(Dim::seq_len, 0));
    v.shape.set(Dim::heads, s.get(Dim::v_heads, 0));
    v.shape.set(Dim::kv_heads, s.get(Dim::k_heads, 0));
    v.shape.set(Dim::head_dim, s.get(Dim::head_k_dim, 0));
    v.shape.set(Dim::k_heads, s.get(Dim::k_heads, 0));
    v.shape.set(Dim::v_heads, s.get(Dim::v_heads, 0));
    if (v.shape.get(Dim::batch, 0) <= 0 || v.shape.get(Dim::heads, 0) <= 0 || !(v.latency_s > 0)) continue;
    views.push_back(v);
    keys.push_back({k.prefill, s.get(Dim::head_k_dim, 0), s.get(Dim::head_v_dim, 0)});
  }
  return views;
}

std::vector<LinearTable> fit_linear_tables(const MeasurementSet& set, const LinearTableOptions& options,
                                           ErrorReport& errors) {
  std::vector<LinearTableKey> keys;
  const std::vector<Measurement> views = linear_table_views(set, keys);
  std::map<LinearTableKey, std::vector<Measurement>> groups;
  for (std::size_t i = 0; i < views.size(); ++i) groups[keys[i]].push_back(views[i]);
  const GridFitOptions grid{options.smoothness, Extrapolation::linear};
  auto fit = [&](bool prefill, std::span<const Measurement> train) {
    std::vector<GridAxis> axes;
    for (Dim d : linear_table_axes(prefill)) axes.push_back(axis_through(d, train));
    return fit_log_grid(std::move(axes), train, grid);
  };
  std::vector<LinearTable> out;
  for (const auto& [key, rows] : groups) {
    const bool prefill = key.prefill;
    out.push_back({key, fit(prefill, rows), rows.size()});
    if (!options.cross_validate) continue;
    bool was_held = false;
    const std::vector<double> held = held_out_table_seconds(
        rows, options.folds, options.seed, [&](std::span<const Measurement> train) { return fit(prefill, train); },
        out.back().table, was_held);
    const std::string label = std::string(prefill ? "prefill" : "decode") + " table";
    add_error_cells(errors, op_name(MeasuredOp::gdn), label, rows, held, was_held);
  }
  return out;
}

}  // namespace servesim::calibrate
