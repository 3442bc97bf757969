#include "calibrate/roofline_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace servesim::calibrate {
namespace {

double d(const Shape& s, Dim dim, std::int64_t fallback = 0) { return static_cast<double>(s.get(dim, fallback)); }

// Keys attended by the queries at positions a, a+1, ..., a+n-1 (1-based counts of keys each),
// each capped at the window w (0 = no window): sum of min(x, w).
double capped_sum(double a, double n, double w) {
  const double e = a + n - 1;
  const auto sum = [](double lo, double hi) { return (lo + hi) * (hi - lo + 1) / 2; };
  if (w <= 0 || e <= w) return sum(a, e);
  if (a >= w) return n * w;
  return sum(a, w) + (e - w) * w;
}

// 2-byte activations where a format leaves them unspecified (Vidur's fp16 tables say fp16).
double act_bytes(Format f) { return f == Format::unspecified ? 2.0 : format_bytes(f); }

}  // namespace

std::optional<Work> work_of(const Measurement& m) {
  const Shape& s = m.shape;
  const double fb = act_bytes(m.format);
  const double kvb = m.kv_format == Format::unspecified ? fb : format_bytes(m.kv_format);
  switch (m.op) {
    case MeasuredOp::gemm: {
      const double mm = d(s, Dim::m), n = d(s, Dim::n), k = d(s, Dim::k);
      return Work{2 * mm * n * k, (mm * k + k * n + mm * n) * fb};
    }
    case MeasuredOp::attention_prefill: {
      // Causal: query i of the chunk attends prefix + i + 1 keys (capped by the window).
      const double b = d(s, Dim::batch, 1), t = d(s, Dim::tokens), p = d(s, Dim::prefix);
      const double hq = d(s, Dim::heads), hkv = d(s, Dim::kv_heads), hd = d(s, Dim::head_dim);
      const double w = d(s, Dim::window);
      const double pairs = capped_sum(p + 1, t, w);
      const double keys = w > 0 ? std::min(p + t, w) : p + t;
      return Work{4 * b * hq * hd * pairs, b * (2 * t * hq * hd * fb + 2 * keys * hkv * hd * kvb)};
    }
    case MeasuredOp::attention_decode: {
      const double b = d(s, Dim::batch, 1), hq = d(s, Dim::heads), hkv = d(s, Dim::kv_heads);
      const double hd = d(s, Dim::head_dim), w = d(s, Dim::window);
      const double keys = w > 0 ? std::min(d(s, Dim::kv_len), w) : d(s, Dim::kv_len);
      return Work{4 * b * hq * hd * keys, b * (2 * keys * hkv * hd * kvb + 2 * hq * hd * fb)};
    }
    case MeasuredOp::encoder_attention: {
      const double b = d(s, Dim::batch, 1), t = d(s, Dim::tokens), h = d(s, Dim::heads);
      const double hd = d(s, Dim::head_dim);
      return Work{4 * b * h * hd * t * t, 4 * b * t * h * hd * fb};
    }
    case MeasuredOp::moe: {
      // Per GPU: tokens x topk / ep expert assignments, each a gated FFN of inter / tp (three
      // matrices; two for the non-gated kernel), and the weights of the local experts hit (the
      // expected number of distinct experts under balanced routing).
      const double t = d(s, Dim::tokens), h = d(s, Dim::hidden), inter = d(s, Dim::inter);
      const double topk = d(s, Dim::topk), experts = d(s, Dim::experts);
      const double tp = d(s, Dim::tp, 1), ep = d(s, Dim::ep, 1);
      const double mats = s.get(Dim::gated, 1) != 0 ? 3 : 2;
      const double assigned = t * topk / ep;
      const double hit = experts / ep * (1 - std::pow(1 - 1 / experts, t * topk));
      const double wb = m.format == Format::w4a16_mxfp4 ? 0.5 : fb;
      const double ab = m.format == Format::w4a16_mxfp4 ? 2.0 : fb;
      return Work{2 * assigned * mats * h * inter / tp,
                  hit * mats * h * inter / tp * wb + 2 * t * h * ab + assigned * inter / tp * ab};
    }
    case MeasuredOp::norm: return Work{0, (2 * d(s, Dim::tokens) + 1) * d(s, Dim::hidden) * fb};
    case MeasuredOp::residual_add: return Work{0, 3 * d(s, Dim::tokens) * d(s, Dim::hidden) * fb};
    case MeasuredOp::rotary:
      return Work{0, (2 * d(s, Dim::tokens) * (d(s, Dim::heads) + d(s, Dim::kv_heads)) + d(s, Dim::tokens)) *
                         d(s, Dim::head_dim) * fb};
    case MeasuredOp::activation:  // gated: reads gate and up, writes one; plain: reads one
      return Work{0, (s.get(Dim::gated, 1) != 0 ? 3 : 2) * d(s, Dim::tokens) * d(s, Dim::inter) * fb};
    case MeasuredOp::embedding: return Work{0, 2 * d(s, Dim::tokens) * d(s, Dim::hidden) * fb};
    case MeasuredOp::hbm_copy: return Work{0, 2 * d(s, Dim::bytes)};
    default: return std::nullopt;
  }
}

std::optional<Peaks> chip_peaks(std::string_view chip, Format format) {
  // Dense tensor-core peaks and HBM bandwidth from the vendors' datasheets (the same figures
  // AIConfigurator's systems/*.yaml and scripts/derive_efficiency.py use).
  struct Row {
    std::string_view chip;
    double half, fp8, hbm;
  };
  static constexpr Row kChips[] = {
      {"h200-sxm", 989.5e12, 1979e12, 4.8e12},   // NVIDIA H200 datasheet
      {"h100-sxm", 989.5e12, 1979e12, 3.35e12},  // NVIDIA H100 SXM5 datasheet
      {"a100-80g", 312e12, 0, 2.039e12},         // NVIDIA A100 80GB SXM4 datasheet
      {"a40", 149.7e12, 0, 696e9},               // NVIDIA A40 datasheet
  };
  for (const Row& r : kChips) {
    if (r.chip != chip) continue;
    switch (format) {
      case Format::bf16:
      case Format::fp16:
      case Format::unspecified: return Peaks{r.half, r.hbm};
      case Format::fp8:
      case Format::fp8_block:
        if (r.fp8 > 0) return Peaks{r.fp8, r.hbm};
        return std::nullopt;
      case Format::w4a16_mxfp4: return Peaks{r.half, r.hbm};  // dequantised to 16-bit math
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<Parameter> SimpleRoofline::parameters() const {
  return {{"overhead_s", 5e-6, 0, 1e-2}, {"e_compute", 0.6, 0, 1.5}, {"e_memory", 0.7, 0, 1.5}};
}

double SimpleRoofline::predict(const Measurement& row, std::span<const double> p) const {
  const auto w = work_of(row);
  if (!w) return p[0];
  return p[0] + std::max(w->flops / (peaks_.flops_per_s * p[1]), w->bytes / (peaks_.bytes_per_s * p[2]));
}

RooflineLook roofline_look(const MeasurementSet& set, const RooflineLookOptions& options) {
  RooflineLook look;
  // (chip, op, format) -> rows, in a deterministic order.
  std::map<std::tuple<std::string, int, int>, std::vector<Measurement>> groups;
  for (const Measurement& m : set.rows()) {
    if (!work_of(m)) {
      ++look.rows_without_formula;
      continue;
    }
    groups[{set.label(m.chip), static_cast<int>(m.op), static_cast<int>(m.format)}].push_back(m);
  }
  std::map<std::string, ErrorReport> reports;
  for (auto& [key, rows] : groups) {
    const auto& [chip, op_i, format_i] = key;
    const auto op = static_cast<MeasuredOp>(op_i);
    const auto format = static_cast<Format>(format_i);
    const auto peaks = chip_peaks(chip, format);
    if (!peaks) {
      look.rows_without_formula += rows.size();
      continue;
    }
    const SimpleRoofline target(*peaks);
    RooflineGroupFit g;
    g.chip = chip;
    g.op = op;
    g.format = format;
    g.rows = rows.size();
    const FitResult all = fit_target(target, rows, {});
    g.overhead_s = all.parameters[0];
    g.e_compute = all.parameters[1];
    g.e_memory = all.parameters[2];
    g.has_compute = std::any_of(rows.begin(), rows.end(), [](const Measurement& m) { return work_of(m)->flops > 0; });
    std::vector<double> measured;
    for (const Measurement& m : rows) measured.push_back(m.latency_s);
    g.training = summarise_errors(predict_all(target, rows, all.parameters), measured);

    const FoldPlan plan = plan_folds(rows, options.folds, options.seed);
    g.shapes = plan.groups;
    const std::vector<double> held =
        cross_validate(rows, plan, [&](std::span<const Measurement> train, std::span<const Measurement> test) {
          const FitResult f = fit_target(target, train, {});
          return predict_all(target, test, f.parameters);
        });
    ErrorReport& report = reports[chip];
    report.chip = chip;
    report.cost_model =
        "overhead + max(FLOPs / (peak x e_compute), bytes / (HBM x e_memory)), "
        "one (overhead, e_compute, e_memory) per kind and format";
    report.held_out = std::to_string(options.folds) + " folds of whole shapes (shape_key_dims per kind), seed " +
                      std::to_string(options.seed);
    if (!held.empty()) {
      g.held_out = summarise_errors(held, measured);
      add_error_cells(report, op_name(op), format_name(format), rows, held);
    } else {
      // One shape only: nothing can be held out; report the fit's own error, marked so.
      add_error_cells(report, op_name(op), format_name(format), rows, predict_all(target, rows, all.parameters), false);
    }
    look.groups.push_back(g);
  }
  for (auto& [chip, r] : reports) look.reports.push_back(std::move(r));
  return look;
}

}  // namespace servesim::calibrate
