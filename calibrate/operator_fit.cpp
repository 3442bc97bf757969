#include "calibrate/operator_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>

#include "calibrate/curve.h"
#include "calibrate/fit.h"
#include "models/cost_model.h"
#include "models/model_spec.h"
#include "models/parallel_plan.h"
#include "models/vision.h"

namespace servesim::calibrate {
namespace {

using models::OpKind;

std::optional<models::Format> model_format(Format f) {
  switch (f) {
    case Format::unspecified:
    case Format::bf16:
    case Format::fp16:
    case Format::fp32: return models::Format::kBf16;
    case Format::fp8: return models::Format::kFp8;
    case Format::fp8_block: return models::Format::kFp8Block;
    case Format::int8: return models::Format::kInt8;
    case Format::w4a16_mxfp4: return models::Format::kMxfp4;
    case Format::nvfp4: return models::Format::kNvfp4;
    case Format::kCount: break;
  }
  return std::nullopt;
}

std::array<bool, models::kComputeRates> rates_of(const models::ChipSpec& chip) {
  std::array<bool, models::kComputeRates> r{};
  for (std::size_t i = 0; i < models::kComputeRates; ++i) r[i] = chip.has(static_cast<models::ComputeRate>(i));
  return r;
}

double dim(const Shape& s, Dim d, std::int64_t fallback = 0) { return static_cast<double>(s.get(d, fallback)); }

// A one-layer GQA model with the row's per-chip heads (tp 1), for attention operators.
models::ModelSpec attention_model(const Measurement& m) {
  models::ModelSpec s;
  s.name = "measured";
  s.layers = 1;
  s.heads = static_cast<int>(m.shape.get(Dim::heads));
  s.kv_heads = static_cast<int>(m.shape.get(Dim::kv_heads, m.shape.get(Dim::heads)));
  s.head_dim = static_cast<int>(m.shape.get(Dim::head_dim));
  s.hidden = s.heads * s.head_dim;
  const std::int64_t window = m.shape.get(Dim::window, 0);
  if (window > 0) s.window = {static_cast<int>(window), ""};
  const auto kv = model_format(m.kv_format == Format::unspecified ? m.format : m.kv_format);
  s.formats.kv_cache = kv && models::is_kv_format(*kv) ? *kv : models::Format::kBf16;
  return s;
}

// DeepSeek-V3's MLA dimensions (the AIConfigurator MLA kernels are DeepSeek's), heads per chip.
models::ModelSpec mla_model(const Measurement& m) {
  models::ModelSpec s;
  s.name = "measured-mla";
  s.layers = 1;
  s.attention = models::AttentionKind::kMla;
  s.heads = s.kv_heads = static_cast<int>(m.shape.get(Dim::heads));
  s.head_dim = 192;
  s.hidden = 7168;
  s.mla = {1536, 512, 128, 64, 128};
  const auto kv = model_format(m.kv_format == Format::unspecified ? m.format : m.kv_format);
  s.formats.kv_cache = kv && models::is_kv_format(*kv) ? *kv : models::Format::kBf16;
  return s;
}

// Routing skew from AIConfigurator's `distribution` column (variant): balanced, power_law_<a>.
std::optional<models::MoeRouting> routing_of(const std::string& variant) {
  models::MoeRouting r;
  if (variant.empty() || variant == "balanced" || variant == "uniform") return r;
  constexpr std::string_view kPower = "power_law_";
  if (variant.rfind(kPower, 0) == 0) {
    try {
      r.distribution = models::MoeRouting::Distribution::kPowerLaw;
      r.alpha = std::stod(variant.substr(kPower.size()));
      return r;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

models::Operator elementwise(double bytes, double tokens) {
  models::Operator op;
  op.kind = OpKind::kElementwise;
  op.kernels = 1;
  op.bytes = bytes;
  op.m = tokens;
  return op;
}

}  // namespace

std::string_view family_name(OperatorFamily f) {
  switch (f) {
    case OperatorFamily::gemm: return "gemm";
    case OperatorFamily::moe: return "moe";
    case OperatorFamily::attention: return "attention";
    case OperatorFamily::elementwise: return "elementwise";
  }
  return "?";
}

std::optional<SimulatorOperator> simulator_operator(const Measurement& m, std::string_view variant,
                                                    const models::ChipSpec& chip, std::string& why) {
  const Shape& s = m.shape;
  const auto rates = rates_of(chip);
  const auto fmt = model_format(m.format);
  if (!fmt) {
    why = "format has no simulator counterpart";
    return std::nullopt;
  }
  // Activations the models move in bf16 (2 bytes), as the simulator does.
  constexpr double kAct = 2;
  switch (m.op) {
    case MeasuredOp::gemm: {
      // models::gemm_op: 2 m n k FLOPs; weights, the input and the bf16 output.
      return SimulatorOperator{
          models::gemm_op(OpKind::kGemmQkv, *fmt, dim(s, Dim::m), dim(s, Dim::k), dim(s, Dim::n), rates),
          OperatorFamily::gemm};
    }
    case MeasuredOp::attention_prefill:
    case MeasuredOp::attention_decode: {
      const models::ModelSpec model = attention_model(m);
      const models::ParallelPlan plan;
      models::BatchShape b;
      const std::int64_t batch = s.get(Dim::batch, 1);
      for (std::int64_t i = 0; i < batch; ++i) {
        if (m.op == MeasuredOp::attention_prefill) {
          models::add_chunk(b, model, s.get(Dim::prefix, 0), s.get(Dim::tokens), true);
        } else {
          models::add_decode(b, model, s.get(Dim::kv_len));
        }
      }
      const models::LayerBatchOps ops = models::layer_batch_ops(model, plan, b);
      const bool window = model.window.enabled();
      const models::Operator& op = m.op == MeasuredOp::attention_prefill
                                       ? (window ? ops.prefill_window : ops.prefill_full)
                                       : (window ? ops.decode_window : ops.decode_full);
      return SimulatorOperator{op, OperatorFamily::attention};
    }
    case MeasuredOp::mla_prefill:
    case MeasuredOp::mla_decode: {
      const models::ModelSpec model = mla_model(m);
      models::BatchShape b;
      const std::int64_t batch = s.get(Dim::batch, 1);
      for (std::int64_t i = 0; i < batch; ++i) {
        if (m.op == MeasuredOp::mla_prefill) {
          models::add_chunk(b, model, 0, s.get(Dim::tokens), true);
        } else {
          models::add_decode(b, model, s.get(Dim::kv_len));
        }
      }
      const models::LayerBatchOps ops = models::layer_batch_ops(model, models::ParallelPlan{}, b);
      return SimulatorOperator{m.op == MeasuredOp::mla_prefill ? ops.prefill_full : ops.decode_full,
                               OperatorFamily::attention};
    }
    case MeasuredOp::encoder_attention: {
      // models::vision_encoder_ops's attention over `batch` images of `tokens` patches, one block.
      models::VisionSpec v;
      v.depth = 1;
      v.heads = static_cast<int>(s.get(Dim::heads));
      v.hidden = v.heads * static_cast<int>(s.get(Dim::head_dim));
      v.intermediate = 1;
      v.window = 0;
      v.out_hidden = v.hidden;
      std::vector<std::int64_t> patches(static_cast<std::size_t>(s.get(Dim::batch, 1)), s.get(Dim::tokens));
      std::vector<models::Operator> ops;
      models::vision_encoder_ops(v, patches, 1, ops);
      for (const models::Operator& op : ops) {
        if (op.kind == OpKind::kAttentionPrefill) return SimulatorOperator{op, OperatorFamily::attention};
      }
      why = "no attention operator";
      return std::nullopt;
    }
    case MeasuredOp::moe: {
      if (s.get(Dim::gated, 1) == 0) {
        why = "non-gated MoE layers are not modelled (the models' experts are SwiGLU)";
        return std::nullopt;
      }
      const auto routing = routing_of(std::string(variant));
      if (!routing) {
        why = "routing distribution '" + std::string(variant) + "' is not modelled";
        return std::nullopt;
      }
      // One MoE layer split moe_tp x ep over moe_tp x ep chips (as a plan of tp = moe_tp and
      // attention dp = ep), `tokens` tokens entering the layer; the routed experts' grouped GEMMs
      // on the busiest rank (the router GEMM is not in AIConfigurator's timing).
      models::ModelSpec model;
      model.name = "measured-moe";
      model.layers = 1;
      model.hidden = static_cast<int>(s.get(Dim::hidden));
      model.intermediate = 1;
      model.vocab = 1;
      model.head_dim = 1;
      model.moe.experts = static_cast<int>(s.get(Dim::experts));
      model.moe.top_k = static_cast<int>(s.get(Dim::topk));
      model.moe.expert_intermediate = static_cast<int>(s.get(Dim::inter));
      model.formats.experts = *fmt;
      models::ParallelPlan plan;
      plan.tp = plan.moe_tp = static_cast<int>(s.get(Dim::tp, 1));
      plan.dp = plan.ep = static_cast<int>(s.get(Dim::ep, 1));
      model.heads = model.kv_heads = plan.tp;
      if (model.moe.experts <= 0 || model.moe.top_k <= 0 || model.moe.experts % plan.ep != 0) {
        why = "MoE shape without experts, top-k, or with experts not divisible by ep";
        return std::nullopt;
      }
      const models::MoeLoad load(model, plan, *routing);
      const models::LayerTokenOps o = models::layer_token_ops(model, plan, load, dim(s, Dim::tokens), rates);
      return SimulatorOperator{o.moe_experts, OperatorFamily::moe, o.dequant_moe};
    }
    case MeasuredOp::norm:
    case MeasuredOp::residual_add:
    case MeasuredOp::rotary:
    case MeasuredOp::activation: {
      // The per-token bytes models::layer_token_ops counts for each kernel: a norm reads and
      // writes h, an add reads 2 h and writes h, rotary reads and writes q and k, SiLU x up reads
      // 2 ffn and writes ffn.
      const double t = dim(s, Dim::tokens);
      double per_token = 0;
      if (m.op == MeasuredOp::norm) per_token = 2 * dim(s, Dim::hidden);
      if (m.op == MeasuredOp::residual_add) per_token = 3 * dim(s, Dim::hidden);
      if (m.op == MeasuredOp::rotary) {
        per_token = 2 * (dim(s, Dim::heads) + dim(s, Dim::kv_heads)) * dim(s, Dim::head_dim);
      }
      if (m.op == MeasuredOp::activation) per_token = (s.get(Dim::gated, 1) != 0 ? 3 : 2) * dim(s, Dim::inter);
      return SimulatorOperator{elementwise(kAct * t * per_token, t), OperatorFamily::elementwise};
    }
    default: break;
  }
  why = std::string(op_name(m.op)) + " is not one simulator operator";
  return std::nullopt;
}

}  // namespace servesim::calibrate

namespace servesim::calibrate {
namespace {

using Curve = models::EfficiencyCurve models::Efficiency::*;

// A measured call as the fit sees it: the family's operator, and the seconds the simulator adds
// to it that no fitted field moves (SimulatorOperator::extra, costed once).
struct FittedCall {
  models::Operator op;
  double fixed_s = 0;
};
using Overhead = Duration models::Efficiency::*;

// The Efficiency fields one family's fit sets.
struct FamilyFields {
  std::vector<std::pair<Curve, const char*>> curves;  // with the key name
  std::vector<bool> curve_on_flops;                   // axis: FLOPs per kernel (else bytes)
  Overhead overhead = nullptr;
  const char* overhead_key = "";
};

FamilyFields fields_of(OperatorFamily f) {
  using E = models::Efficiency;
  FamilyFields x;
  switch (f) {
    case OperatorFamily::gemm:
      x.curves = {{&E::gemm_compute, "gemm_compute"}, {&E::gemm_memory, "gemm_memory"}};
      x.curve_on_flops = {true, false};
      x.overhead = &E::gemm_overhead;
      x.overhead_key = "gemm_overhead";
      break;
    case OperatorFamily::moe:
      x.curves = {{&E::moe_compute, "moe_compute"}, {&E::moe_memory, "moe_memory"}};
      x.curve_on_flops = {true, false};
      x.overhead = &E::moe_overhead;
      x.overhead_key = "moe_overhead";
      break;
    case OperatorFamily::attention:
      x.curves = {{&E::attention_prefill, "attention_prefill"}, {&E::attention_decode, "attention_decode"}};
      x.curve_on_flops = {true, false};
      x.overhead = &E::attention_overhead;
      x.overhead_key = "attention_overhead";
      break;
    case OperatorFamily::elementwise:
      x.curves = {{&E::elementwise, "elementwise"}};
      x.curve_on_flops = {false};
      x.overhead = &E::elementwise_overhead;
      x.overhead_key = "elementwise_overhead";
      break;
  }
  return x;
}

// Knots one per decade over [lo, hi] (at least two).
std::vector<double> decade_knots(double lo, double hi) {
  const double a = std::floor(std::log10(std::max(lo, 1.0)));
  const double b = std::max(a + 1, std::ceil(std::log10(std::max(hi, 1.0))));
  std::vector<double> k;
  for (double e = a; e <= b + 1e-9; e += 1) k.push_back(std::round(std::pow(10.0, e)));
  return k;
}

// The family's Efficiency fields as fit parameters: curve knots (per decade of the sizes the
// family's operators span), the per-kernel overhead and, for GEMMs, the format factors of the
// non-bf16 rates present. predict() builds models::RooflineCostModel from them, so what is
// fitted is exactly what the simulator evaluates.
class EfficiencyTarget : public FitTarget {
 public:
  struct Layout {
    OperatorFamily family = OperatorFamily::gemm;
    std::vector<CurveBlock> curves;
    std::vector<std::size_t> format_rates;  // ComputeRate indexes with a fitted factor
    bool factors_only = false;              // fit the format factors alone, curves as given
  };

  EfficiencyTarget(const models::ChipSpec& base, const Layout& layout, std::span<const Measurement> rows,
                   const std::vector<FittedCall>& ops)
      : base_(base), layout_(layout), fields_(fields_of(layout.family)), rows_(rows), ops_(ops) {}

  std::vector<Parameter> parameters() const override {
    std::vector<Parameter> p;
    if (!layout_.factors_only) {
      for (const CurveBlock& c : layout_.curves) c.append_parameters(p);
      p.push_back(Parameter{fields_.overhead_key, 3e-6, 0, 2e-4});
    }
    for (std::size_t r : layout_.format_rates) {
      p.push_back(Parameter{"format_compute." + std::string(models::compute_rate_name(
                                                    static_cast<models::ComputeRate>(r))),
                            0.8, 0.2, 1.0});
    }
    return p;
  }

  double predict(const Measurement& row, std::span<const double> params) const override {
    const auto i = static_cast<std::size_t>(&row - rows_.data());
    if (i >= ops_.size()) throw std::logic_error("EfficiencyTarget: a row it was not built for");
    // The per-kernel overhead is added here in seconds rather than through the model's Duration
    // (picosecond ticks), whose rounding would hide the finite-difference steps of the search
    // from it; the roofline adds kernels x overhead in exactly this way (models/cost_model.cpp).
    const FittedCall& c = ops_[i];
    if (layout_.factors_only) return model(params).seconds(c.op) + c.fixed_s;
    return model(params).seconds(c.op) + c.op.kernels * params[overhead_index()] + c.fixed_s;
  }

  std::size_t penalty_count() const override {
    std::size_t n = 0;
    for (const CurveBlock& c : layout_.curves) n += layout_.factors_only ? 0 : c.penalty_count();
    return n;
  }
  void penalties(std::span<const double> params, std::span<double> out) const override {
    if (layout_.factors_only) return;
    std::size_t p = 0, o = 0;
    for (const CurveBlock& c : layout_.curves) {
      c.penalties(params.subspan(p, c.size()), out.subspan(o, c.penalty_count()));
      p += c.size();
      o += c.penalty_count();
    }
  }

  // The chip with the parameters applied.
  models::ChipSpec chip(std::span<const double> params) const {
    models::ChipSpec c = base_;
    std::size_t p = 0;
    for (std::size_t k = 0; !layout_.factors_only && k < layout_.curves.size(); ++k) {
      const CurveBlock& b = layout_.curves[k];
      models::EfficiencyCurve curve;
      for (std::size_t j = 0; j < b.size(); ++j) curve.knots.push_back({b.spec().knots[j], params[p + j]});
      c.efficiency.*(fields_.curves[k].first) = curve;
      p += b.size();
    }
    if (!layout_.factors_only) c.efficiency.*(fields_.overhead) = Duration::seconds(params[p++]);
    for (std::size_t r : layout_.format_rates) c.efficiency.format_compute[r] = params[p++];
    return c;
  }

 private:
  std::size_t overhead_index() const {
    std::size_t p = 0;
    for (const CurveBlock& c : layout_.curves) p += c.size();
    return p;
  }
  const models::RooflineCostModel& model(std::span<const double> params) const {
    if (!cached_ || !std::equal(params.begin(), params.end(), cached_params_.begin(), cached_params_.end())) {
      cached_params_.assign(params.begin(), params.end());
      models::ChipSpec c = chip(params);
      if (!layout_.factors_only) c.efficiency.*(fields_.overhead) = Duration::zero();
      cached_ = std::make_unique<models::RooflineCostModel>(c);
    }
    return *cached_;
  }

  const models::ChipSpec& base_;
  const Layout& layout_;
  FamilyFields fields_;
  std::span<const Measurement> rows_;
  const std::vector<FittedCall>& ops_;
  mutable std::vector<double> cached_params_;
  mutable std::unique_ptr<models::RooflineCostModel> cached_;
};

// Every `stride`-th row, so that a fit sees at most `max` rows of a large table.
template <class T>
std::vector<T> thinned(std::span<const T> v, std::size_t max) {
  if (v.size() <= max || max == 0) return std::vector<T>(v.begin(), v.end());
  const std::size_t stride = (v.size() + max - 1) / max;
  std::vector<T> out;
  for (std::size_t i = 0; i < v.size(); i += stride) out.push_back(v[i]);
  return out;
}

struct FamilyRows {
  std::vector<Measurement> rows;
  std::vector<FittedCall> ops;
  std::vector<std::string> labels;  // the error table's format label per row
};

// Fits the family on (rows, ops) from `chip`; returns the fitted chip.
models::ChipSpec fit_family(const models::ChipSpec& chip, const EfficiencyTarget::Layout& layout,
                            std::span<const Measurement> rows, std::span<const FittedCall> ops,
                            std::size_t max_rows, bool* converged = nullptr) {
  // Thin rows and operators together (same stride).
  FitOptions fo;
  fo.max_evaluations = 3000;
  fo.tolerance = 1e-8;
  if (layout.format_rates.empty()) {
    std::vector<Measurement> r = thinned(rows, max_rows);
    std::vector<FittedCall> o = thinned(ops, max_rows);
    const EfficiencyTarget target(chip, layout, r, o);
    const FitResult f = fit_target(target, r, fo);
    if (converged) *converged = f.converged;
    return target.chip(f.parameters);
  }
  // GEMMs at several rates: the curves and the overhead from the bf16 rows alone (one set serves
  // every rate in the simulator, and the bf16 rows are the ones it describes without a factor),
  // then each other rate's factor alone with those curves held. Fitting all at once lets the
  // fp8 rows (whose small shapes do not speed up with their halved weights) pull the bf16 curves.
  std::vector<Measurement> base_rows, rate_rows;
  std::vector<FittedCall> base_ops, rate_ops;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const bool base = ops[i].op.rate == models::ComputeRate::kBf16;
    (base ? base_rows : rate_rows).push_back(rows[i]);
    (base ? base_ops : rate_ops).push_back(ops[i]);
  }
  models::ChipSpec out = chip;
  bool ok = true;
  if (!base_rows.empty()) {
    EfficiencyTarget::Layout curves = layout;
    curves.format_rates.clear();
    out = fit_family(chip, curves, base_rows, base_ops, max_rows, &ok);
  }
  if (!rate_rows.empty()) {
    EfficiencyTarget::Layout factors = layout;
    factors.factors_only = true;
    std::vector<Measurement> r = thinned(std::span<const Measurement>(rate_rows), max_rows);
    std::vector<FittedCall> o = thinned(std::span<const FittedCall>(rate_ops), max_rows);
    const EfficiencyTarget target(out, factors, r, o);
    const FitResult f = fit_target(target, r, fo);
    ok = ok && f.converged;
    out = target.chip(f.parameters);
  }
  if (converged) *converged = ok;
  return out;
}

std::vector<double> predict_ops(const models::ChipSpec& chip, std::span<const FittedCall> ops) {
  const models::RooflineCostModel cm(chip);
  std::vector<double> out;
  out.reserve(ops.size());
  for (const FittedCall& c : ops) out.push_back(cm.seconds(c.op) + c.fixed_s);
  return out;
}


}  // namespace

std::string format_label(const Measurement& m, const MeasurementSet& set) {
  std::string label(format_name(m.format));
  if (m.kv_format != Format::unspecified && m.kv_format != m.format) {
    label += " kv " + std::string(format_name(m.kv_format));
  }
  if (m.op == MeasuredOp::moe && m.variant != 0) label += " " + set.label(m.variant);
  if (m.shape.get(Dim::window, 0) > 0) label += " window";
  return label;
}

OperatorFitResult fit_operators(const MeasurementSet& set, const models::ChipSpec& chip,
                                const OperatorFitOptions& options) {
  OperatorFitResult result;
  result.chip = chip;
  std::map<OperatorFamily, FamilyRows> families;
  std::map<std::string, std::size_t> unmodelled;
  for (const Measurement& m : set.rows()) {
    std::string why;
    const auto op = simulator_operator(m, m.variant ? set.label(m.variant) : std::string(), chip, why);
    if (!op) {
      ++unmodelled[std::string(op_name(m.op)) + ": " + why];
      continue;
    }
    if (op->op.kernels <= 0 || !(op->op.flops > 0 || op->op.bytes > 0)) {
      ++unmodelled[std::string(op_name(m.op)) + ": no work"];
      continue;
    }
    FamilyRows& f = families[op->family];
    f.rows.push_back(m);
    f.ops.push_back({op->op, op->extra.kernels > 0 ? models::RooflineCostModel(chip).seconds(op->extra) : 0.0});
    f.labels.push_back(format_label(m, set));
  }
  result.unmodelled.assign(unmodelled.begin(), unmodelled.end());
  result.errors.chip = chip.name;
  result.errors.cost_model =
      "models::RooflineCostModel: kernels x overhead + max(FLOPs / (peak x eff_c(FLOPs/kernel) x format), "
      "bytes / (HBM x eff_m(bytes/kernel))), efficiency curves per family";
  result.errors.held_out = std::to_string(options.folds) +
                           " folds of whole shapes (shape_key_dims per kind), seed " +
                           std::to_string(options.seed);

  for (OperatorFamily family : {OperatorFamily::gemm, OperatorFamily::moe, OperatorFamily::attention,
                                OperatorFamily::elementwise}) {
    auto it = families.find(family);
    if (it == families.end()) continue;
    FamilyRows& f = it->second;
    // The layout: a curve per field over the decades the operators span; GEMMs add a factor per
    // non-bf16 rate present (fp8_block rows run at the fp8 rate too, and are checked with it
    // rather than fitted: the simulator does not tell them apart).
    const FamilyFields fields = fields_of(family);
    EfficiencyTarget::Layout layout;
    layout.family = family;
    double flops_lo = 1e300, flops_hi = 0, bytes_lo = 1e300, bytes_hi = 0;
    std::vector<bool> rate_present(models::kComputeRates, false);
    for (const FittedCall& call : f.ops) {
      const models::Operator& op = call.op;
      const double k = std::max(1, op.kernels);
      if (op.flops > 0) {
        flops_lo = std::min(flops_lo, op.flops / k);
        flops_hi = std::max(flops_hi, op.flops / k);
      }
      bytes_lo = std::min(bytes_lo, op.bytes / k);
      bytes_hi = std::max(bytes_hi, op.bytes / k);
      rate_present[static_cast<std::size_t>(op.rate)] = true;
    }
    for (std::size_t c = 0; c < fields.curves.size(); ++c) {
      CurveSpec spec;
      spec.name = fields.curves[c].second;
      spec.knots = fields.curve_on_flops[c] ? decade_knots(flops_lo, flops_hi) : decade_knots(bytes_lo, bytes_hi);
      spec.lower = 0.002;
      spec.upper = 1.0;
      spec.initial = 0.4;
      spec.monotone = Monotone::increasing;
      spec.smoothness = 0.01;
      layout.curves.emplace_back(spec);
    }
    if (family == OperatorFamily::gemm) {
      for (std::size_t r = 1; r < models::kComputeRates; ++r) {
        if (rate_present[r]) layout.format_rates.push_back(r);
      }
    }
    // Rows that fit: all but fp8_block GEMMs.
    std::vector<Measurement> fit_rows;
    std::vector<FittedCall> fit_ops;
    for (std::size_t i = 0; i < f.rows.size(); ++i) {
      if (family == OperatorFamily::gemm && f.rows[i].format == Format::fp8_block) continue;
      fit_rows.push_back(f.rows[i]);
      fit_ops.push_back(f.ops[i]);
    }
    if (fit_rows.empty()) continue;
    FamilyFit ff;
    ff.family = family;
    ff.rows = f.rows.size();
    const models::ChipSpec fitted =
        fit_family(result.chip, layout, fit_rows, fit_ops, options.max_fit_rows, &ff.converged);
    {
      const std::vector<double> p = predict_ops(fitted, fit_ops);
      std::vector<double> meas;
      for (const Measurement& m : fit_rows) meas.push_back(m.latency_s);
      ff.train_ape_p50 = summarise_errors(p, meas).ape_p50;
    }
    // Held out: whole shapes; each fold fits on the others (fp8_block rows are only predicted).
    std::vector<double> held(f.rows.size(), 0.0);
    bool held_out = false;
    if (options.cross_validate) {
      const FoldPlan plan = plan_folds(f.rows, options.folds, options.seed);
      ff.shapes = plan.groups;
      if (plan.folds >= 2) {
        held_out = true;
        for (std::uint32_t fold = 0; fold < plan.folds; ++fold) {
          std::vector<Measurement> train;
          std::vector<FittedCall> train_ops;
          std::vector<FittedCall> test_ops;
          std::vector<std::size_t> test_index;
          for (std::size_t i = 0; i < f.rows.size(); ++i) {
            if (plan.fold_of_row[i] == fold) {
              test_ops.push_back(f.ops[i]);
              test_index.push_back(i);
            } else if (!(family == OperatorFamily::gemm && f.rows[i].format == Format::fp8_block)) {
              train.push_back(f.rows[i]);
              train_ops.push_back(f.ops[i]);
            }
          }
          if (train.empty()) continue;
          const models::ChipSpec fold_chip = fit_family(result.chip, layout, train, train_ops, options.max_fit_rows);
          const std::vector<double> p = predict_ops(fold_chip, test_ops);
          for (std::size_t j = 0; j < p.size(); ++j) held[test_index[j]] = p[j];
        }
      }
    }
    if (!held_out) held = predict_ops(fitted, f.ops);
    // Cells per (kind, format label).
    std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> cells;
    for (std::size_t i = 0; i < f.rows.size(); ++i) {
      cells[{std::string(op_name(f.rows[i].op)), f.labels[i]}].push_back(i);
    }
    for (const auto& [key, idx] : cells) {
      std::vector<Measurement> rows;
      std::vector<double> pred;
      for (std::size_t i : idx) {
        rows.push_back(f.rows[i]);
        pred.push_back(held[i]);
      }
      add_error_cells(result.errors, key.first, key.second, rows, pred, held_out);
    }
    result.chip = fitted;
    for (const auto& c : fields.curves) result.fitted_keys.push_back(c.second);
    result.fitted_keys.push_back(fields.overhead_key);
    // The tiling is the model's, not fitted: the curves were fitted over the padded FLOPs, so it
    // goes into the profile with them.
    if (family == OperatorFamily::gemm && fitted.efficiency.gemm_tiling.tile > 0) {
      result.fitted_keys.push_back("gemm_tiling");
    }
    for (std::size_t r : layout.format_rates) {
      result.fitted_keys.push_back("format_compute." +
                                   std::string(models::compute_rate_name(static_cast<models::ComputeRate>(r))));
    }
    result.families.push_back(ff);
  }
  return result;
}

}  // namespace servesim::calibrate
