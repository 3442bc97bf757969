#include "calibrate/operator_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>

#include "calibrate/curve.h"
#include "calibrate/fit.h"
#include "calibrate/moe_routing.h"
#include "models/cost_model.h"
#include "models/model_spec.h"
#include "models/parallel_plan.h"
#include "models/vision.h"

namespace servesim::calibrate {

std::optional<models::Format> simulator_format(Format f) {
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
    // MXFP4 weights with MXFP8 activations: the MXFP4 experts as Blackwell's TensorRT-LLM runs
    // them (a chip with the FP4 rate costs models::Format::kMxfp4 at that rate, and a fit of these
    // rows takes the same peak). Only MoE tables hold it; the same experts' W4A16 rows map here
    // too, so the MoE family keeps the two apart (fit_moe_family).
    case Format::w4a8_mxfp4_mxfp8: return models::Format::kMxfp4;
    // No simulator format: int4 weight-only kernels are measured but not costed.
    case Format::int4_wo:
    case Format::kCount: break;
  }
  return std::nullopt;
}

namespace {

using models::OpKind;

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
  if (window > 0) s.window = {static_cast<int>(window), "", 0, 0};
  const auto kv = simulator_format(m.kv_format == Format::unspecified ? m.format : m.kv_format);
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
  const auto kv = simulator_format(m.kv_format == Format::unspecified ? m.format : m.kv_format);
  s.formats.kv_cache = kv && models::is_kv_format(*kv) ? *kv : models::Format::kBf16;
  return s;
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
    case OperatorFamily::sparse_attention: return "sparse_attention";
    case OperatorFamily::mhc: return "mhc";
    case OperatorFamily::indexer: return "indexer";
    case OperatorFamily::topk: return "topk";
  }
  return "?";
}

std::optional<SimulatorOperator> simulator_operator(const Measurement& m, std::string_view variant,
                                                    const models::ChipSpec& chip, std::string& why) {
  const Shape& s = m.shape;
  const auto rates = chip.rates();
  const auto fmt = simulator_format(m.format);
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
    case MeasuredOp::sparse_attention_prefill: {
      // The model's own sparse prefill operator (models::layer_batch_ops, Operator::sparse) for
      // `batch` chunks of `tokens` new tokens after `prefix` cached ones, heads as measured: a DSA
      // layer of GLM-5 (top-k 2,048), an HCA layer of DeepSeek-V4-Flash (window and entries).
      const std::int64_t tokens = s.get(Dim::tokens);
      if (tokens <= 1) {
        why = "sparse decode kernels are not fitted (the attention_decode curve costs them)";
        return std::nullopt;
      }
      const std::string name(variant);  // the reader's variant: the model's checkpoint name
      const bool v4 = name.find("DeepSeek-V4") != std::string::npos;
      if (!v4 && name.find("GLM-5") == std::string::npos) {
        why = "sparse attention of model '" + name + "' has no preset here";
        return std::nullopt;
      }
      std::optional<models::ModelSpec> model = models::model_preset(v4 ? "deepseek-v4-flash" : "glm-5");
      if (!model) {
        why = "preset missing";
        return std::nullopt;
      }
      model->heads = static_cast<int>(s.get(Dim::heads));
      const auto kv = simulator_format(m.kv_format);
      if (kv && models::is_kv_format(*kv)) model->formats.kv_cache = *kv;
      models::BatchShape b;
      for (std::int64_t i = 0; i < s.get(Dim::batch, 1); ++i) {
        models::add_chunk(b, *model, s.get(Dim::prefix, 0), tokens, true);
      }
      const models::LayerBatchOps ops = models::layer_batch_ops(*model, models::ParallelPlan{}, b);
      return SimulatorOperator{v4 ? ops.prefill_window : ops.prefill_full, OperatorFamily::sparse_attention};
    }
    case MeasuredOp::dsa_module_prefill: {
      // A DSA layer's whole attention block (DeepSeek-V3.2, GLM-5; DeepSeek-V4's CSA and HCA
      // layers), where no table times the sparse kernel alone (TensorRT-LLM's): `batch` chunks of
      // `tokens` after `prefix` cached, heads as measured, the row's GEMM format. The family's operator is the sparse
      // kernel; the block's other operators (q / kv and indexer projections, the indexer, the absorbed W_UK / W_UV,
      // o_proj) are `module`, costed with the families fitted before. Its norms, rotary and KV
      // writes are not operators of their own here (the layer's elementwise kernels): the fit
      // gives their time to the sparse kernel.
      const std::int64_t tokens = s.get(Dim::tokens);
      if (tokens <= 1) {
        why = "sparse decode kernels are not fitted (the attention_decode curve costs them)";
        return std::nullopt;
      }
      // DeepSeek-V4's CSA and HCA blocks (variant: the table's op_name) name their model by its
      // heads: num_heads per chip x tp_size, 64 for V4-Flash, 128 for V4-Pro.
      const std::string name(variant);
      const bool csa = name == "dsv4_csa_context_module", hca = name == "dsv4_hca_context_module";
      const std::int64_t tp = s.get(Dim::tp, 1);
      const std::int64_t all_heads = s.get(Dim::heads) * tp;
      const char* preset = nullptr;
      if (csa || hca) {
        preset = all_heads == 64 ? "deepseek-v4-flash" : all_heads == 128 ? "deepseek-v4-pro" : nullptr;
      } else if (name.find("DeepSeek-V3.2") != std::string::npos) {
        preset = "deepseek-v3.2";
      } else if (name.find("GLM-5") != std::string::npos) {
        preset = "glm-5";
      }
      if (preset == nullptr) {
        why = "DSA module '" + name + "' of " + std::to_string(all_heads) + " heads has no preset here";
        return std::nullopt;
      }
      std::optional<models::ModelSpec> model = models::model_preset(preset);
      const auto weights = simulator_format(m.weight_format);
      if (!model || !weights) {
        why = !model ? "preset missing" : "GEMM format has no simulator counterpart";
        return std::nullopt;
      }
      models::ParallelPlan plan;
      if (csa || hca) {
        plan.tp = static_cast<int>(tp);  // the model's heads and o_proj groups split tp ways
      } else {
        model->heads = static_cast<int>(s.get(Dim::heads));
      }
      model->formats.weights = *weights;
      const auto kv = simulator_format(m.kv_format);
      if (kv && models::is_kv_format(*kv)) model->formats.kv_cache = *kv;
      models::BatchShape b;
      for (std::int64_t i = 0; i < s.get(Dim::batch, 1); ++i) {
        models::add_chunk(b, *model, s.get(Dim::prefix, 0), tokens, true);
      }
      const models::LayerBatchOps ops = models::layer_batch_ops(*model, plan, b);
      const models::LayerTokenOps t = models::layer_token_ops(*model, plan, models::MoeLoad(), b.tokens, rates);
      if (hca) {
        // An HCA layer: its window and compressed entries (the window operator), no indexer.
        SimulatorOperator out{ops.prefill_window, OperatorFamily::sparse_attention};
        out.module = {t.qkv_without_indexer, t.out, t.dequant_attention_without_indexer, ops.decode_absorb};
        return out;
      }
      SimulatorOperator out{ops.prefill_full, OperatorFamily::sparse_attention};
      out.module = {t.qkv, t.out, t.dequant_attention, ops.indexer_prefill, ops.decode_absorb};
      return out;
    }
    case MeasuredOp::indexer_prefill:
    case MeasuredOp::topk_prefill: {
      // The model's own prefill indexer operator (models::layer_batch_ops, indexer_prefill) for
      // `batch` chunks of `tokens` new tokens after `prefix` cached ones: GLM-5's index heads and
      // dim (32 x 128), whatever the attention heads of the row. The scoring kernel's rows cost it
      // alone; the top-k selection's rows only the selection after it (its rows are the queries,
      // its logits the causal pairs scored; the topk family costs models::selection_seconds).
      const std::string name(variant);
      if (name.find("GLM-5") == std::string::npos) {
        why = "indexer of model '" + name + "' has no preset here";
        return std::nullopt;
      }
      const std::optional<models::ModelSpec> model = models::model_preset("glm-5");
      if (!model) {
        why = "preset missing";
        return std::nullopt;
      }
      models::BatchShape b;
      for (std::int64_t i = 0; i < s.get(Dim::batch, 1); ++i) {
        models::add_chunk(b, *model, s.get(Dim::prefix, 0), s.get(Dim::tokens), true);
      }
      models::Operator op = models::layer_batch_ops(*model, models::ParallelPlan{}, b).indexer_prefill;
      const bool selection = m.op == MeasuredOp::topk_prefill;
      op.selects = selection;
      return SimulatorOperator{op, selection ? OperatorFamily::topk : OperatorFamily::indexer};
    }
    case MeasuredOp::mhc: {
      // One call over every site (AIConfigurator's collectors fold both of a layer's sites into
      // one row), each a pre (two kernels) or a post (one) over the bf16 streams: 2 s h + h
      // elements a token (models::layer_token_ops, LayerTokenOps::mhc).
      const double t = dim(s, Dim::tokens), h = dim(s, Dim::hidden), st = dim(s, Dim::streams);
      const std::int64_t sites = s.get(Dim::sites, 1);
      if (variant != "pre" && variant != "post") {
        why = "mHC kernel '" + std::string(variant) + "' is neither pre nor post";
        return std::nullopt;
      }
      models::Operator op = elementwise(kAct * t * static_cast<double>(sites) * (2 * st * h + h), t);
      op.kernels = static_cast<int>(sites) * (variant == "pre" ? 2 : 1);
      op.mhc = true;
      return SimulatorOperator{op, OperatorFamily::mhc};
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
      // The load the benchmark's own routing puts on the rank it times (moe_routing.h): all the
      // row's tokens enter the module, rank 0's experts compute their pairs.
      const auto rank = aiconfigurator_rank_load(static_cast<int>(s.get(Dim::tokens)), model.moe.experts,
                                                 model.moe.top_k, plan.ep, variant);
      if (!rank) {
        why = "routing distribution '" + std::string(variant) + "' is not modelled";
        return std::nullopt;
      }
      const models::LayerTokenOps o = models::layer_token_ops(model, plan, *rank, dim(s, Dim::tokens), rates);
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
  // The top-k family's rows: only the selection after `op` (models::selection_seconds) is costed.
  bool selection = false;
};
// The roofline's seconds for a call: the operator, or its top-k selection alone.
double call_seconds(const models::RooflineCostModel& cm, const FittedCall& c) {
  return c.selection ? cm.selection_seconds(c.op) : cm.seconds(c.op);
}
using Overhead = Duration models::Efficiency::*;

// The Efficiency fields one family's fit sets.
struct FamilyFields {
  std::vector<std::pair<Curve, const char*>> curves;  // with the key name
  std::vector<bool> curve_on_flops;                   // axis: FLOPs per kernel (else bytes)
  Overhead overhead = nullptr;
  const char* overhead_key = "";
  // A fixed time per unit of the operator (after the overhead): sparse attention's per query
  // token and kernel head, the top-k selection's per wave of rows. Its start and upper bound.
  Overhead per_query = nullptr;
  const char* per_query_key = "";
  double (*per_query_units)(const models::Operator&, int sms) = nullptr;
  double per_query_initial = 5e-10, per_query_upper = 1e-7;
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
      x.curves = {{&E::attention_prefill, "attention_prefill"},
                  {&E::attention_decode, "attention_decode"},
                  {&E::attention_prefill_memory, "attention_prefill_memory"},
                  {&E::attention_latent_prefill, "attention_latent_prefill"}};
      x.curve_on_flops = {true, false, false, true};
      x.overhead = &E::attention_overhead;
      x.overhead_key = "attention_overhead";
      break;
    case OperatorFamily::elementwise:
      x.curves = {{&E::elementwise, "elementwise"}};
      x.curve_on_flops = {false};
      x.overhead = &E::elementwise_overhead;
      x.overhead_key = "elementwise_overhead";
      break;
    case OperatorFamily::sparse_attention:
      // Its memory side is the attention family's decode curve, fitted before it.
      x.curves = {{&E::attention_sparse, "attention_sparse"}};
      x.curve_on_flops = {true};
      x.overhead = &E::attention_sparse_overhead;
      x.overhead_key = "attention_sparse_overhead";
      x.per_query = &E::attention_sparse_query;
      x.per_query_key = "attention_sparse_query";
      x.per_query_units = [](const models::Operator& op, int) { return op.m * models::sparse_kernel_heads(op.n); };
      break;
    case OperatorFamily::mhc:
      x.curves = {{&E::mhc, "mhc"}};
      x.curve_on_flops = {false};
      x.overhead = &E::mhc_overhead;
      x.overhead_key = "mhc_overhead";
      break;
    case OperatorFamily::indexer:
      // Its memory side is the attention family's decode curve, fitted before it.
      x.curves = {{&E::indexer, "indexer"}};
      x.curve_on_flops = {true};
      x.overhead = &E::indexer_overhead;
      x.overhead_key = "indexer_overhead";
      break;
    case OperatorFamily::topk:
      // Over the logit bytes per kernel (models::selection_logit_bytes), of HBM bandwidth.
      x.curves = {{&E::topk, "topk"}};
      x.curve_on_flops = {false};
      x.overhead = &E::topk_overhead;
      x.overhead_key = "topk_overhead";
      x.per_query = &E::topk_wave;
      x.per_query_key = "topk_wave";
      x.per_query_units = [](const models::Operator& op, int sms) { return models::selection_waves(op, sms); };
      x.per_query_initial = 1e-6;
      x.per_query_upper = 1e-4;
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
    // GEMMs: the non-bf16 weight formats present, each fitted after the curves
    // (GemmFormatTarget) with the curves held.
    std::vector<models::Format> formats;
    // Sparse attention: whether the per-query time is a parameter. Not where every row is a
    // DSA block: its kernel runs the fixed index width, so the per-query time and the FLOPs grow
    // together and cannot be told apart (it stays as the chip has it).
    bool per_query = true;
  };

  EfficiencyTarget(const models::ChipSpec& base, const Layout& layout, std::span<const Measurement> rows,
                   const std::vector<FittedCall>& ops)
      : base_(base), layout_(layout), fields_(fields_of(layout.family)), rows_(rows), ops_(ops) {
    if (!layout.per_query) fields_.per_query = nullptr;
    // The layout's curves by name: a family fits only the curves its rows shape.
    for (const CurveBlock& b : layout_.curves) {
      const auto it = std::find_if(fields_.curves.begin(), fields_.curves.end(),
                                   [&](const auto& c) { return b.spec().name == c.second; });
      if (it == fields_.curves.end()) throw std::logic_error("EfficiencyTarget: no field " + b.spec().name);
      curve_fields_.push_back(it->first);
    }
  }

  std::vector<Parameter> parameters() const override {
    std::vector<Parameter> p;
    for (const CurveBlock& c : layout_.curves) c.append_parameters(p);
    p.push_back(Parameter{fields_.overhead_key, 3e-6, 0, 2e-4});
    if (fields_.per_query != nullptr) {
      p.push_back(Parameter{fields_.per_query_key, fields_.per_query_initial, 0, fields_.per_query_upper});
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
    const double per_query =
        fields_.per_query != nullptr ? fields_.per_query_units(c.op, base_.sms) * params[overhead_index() + 1] : 0.0;
    return call_seconds(model(params), c) + c.op.kernels * params[overhead_index()] + per_query + c.fixed_s;
  }

  std::size_t penalty_count() const override {
    std::size_t n = 0;
    for (const CurveBlock& c : layout_.curves) n += c.penalty_count();
    return n;
  }
  void penalties(std::span<const double> params, std::span<double> out) const override {
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
    for (std::size_t k = 0; k < layout_.curves.size(); ++k) {
      const CurveBlock& b = layout_.curves[k];
      models::EfficiencyCurve curve;
      for (std::size_t j = 0; j < b.size(); ++j) curve.knots.push_back({b.spec().knots[j], params[p + j]});
      c.efficiency.*(curve_fields_[k]) = curve;
      p += b.size();
    }
    c.efficiency.*(fields_.overhead) = Duration::seconds(params[p++]);
    if (fields_.per_query != nullptr) c.efficiency.*(fields_.per_query) = Duration::seconds(params[p++]);
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
      c.efficiency.*(fields_.overhead) = Duration::zero();
      if (fields_.per_query != nullptr) c.efficiency.*(fields_.per_query) = Duration::zero();
      cached_ = std::make_unique<models::RooflineCostModel>(c);
    }
    return *cached_;
  }

  const models::ChipSpec& base_;
  const Layout& layout_;
  FamilyFields fields_;
  std::vector<Curve> curve_fields_;  // the field of each of layout_.curves
  std::span<const Measurement> rows_;
  const std::vector<FittedCall>& ops_;
  mutable std::vector<double> cached_params_;
  mutable std::unique_ptr<models::RooflineCostModel> cached_;
};

// One quantised-activation GEMM format (models::Efficiency::GemmFormat) with the GEMM curves and
// overhead held: its compute factor (relative to the bf16 curve), the quantisation pass's fixed
// time per kernel and its HBM bytes per input activation element. predict() costs each row with
// models::RooflineCostModel carrying the entry, so what is fitted is what the simulator applies.
class GemmFormatTarget : public FitTarget {
 public:
  GemmFormatTarget(const models::ChipSpec& base, models::Format format, std::span<const Measurement> rows,
                   std::span<const FittedCall> ops)
      : base_(base), format_(format), rows_(rows), ops_(ops) {}

  std::vector<Parameter> parameters() const override {
    return {Parameter{"compute", 0.8, 0.05, 2.0}, Parameter{"overhead_s", 3e-6, 0, 2e-4},
            Parameter{"quant_bytes", 2, 0, 50}};
  }
  double predict(const Measurement& row, std::span<const double> params) const override {
    const auto i = static_cast<std::size_t>(&row - rows_.data());
    if (i >= ops_.size()) throw std::logic_error("GemmFormatTarget: a row it was not built for");
    const FittedCall& c = ops_[i];
    // The fixed time in seconds, outside the model's picosecond Duration (EfficiencyTarget).
    const double pass = c.op.quant_elements > 0 ? c.op.kernels * params[1] : 0.0;
    return model(params).seconds(c.op) + pass + c.fixed_s;
  }
  models::Efficiency::GemmFormat entry(std::span<const double> params) const {
    return {format_, Duration::seconds(params[1]), params[2], params[0]};
  }

 private:
  const models::RooflineCostModel& model(std::span<const double> params) const {
    if (!cached_ || !std::equal(params.begin(), params.end(), cached_params_.begin(), cached_params_.end())) {
      cached_params_.assign(params.begin(), params.end());
      models::ChipSpec c = base_;
      std::erase_if(c.efficiency.gemm_formats, [&](const auto& g) { return g.format == format_; });
      models::Efficiency::GemmFormat g = entry(params);
      g.overhead = Duration::zero();
      c.efficiency.gemm_formats.push_back(g);
      cached_ = std::make_unique<models::RooflineCostModel>(c);
    }
    return *cached_;
  }
  const models::ChipSpec& base_;
  models::Format format_;
  std::span<const Measurement> rows_;
  std::span<const FittedCall> ops_;
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
  // Per row, the rest of its measured module (SimulatorOperator::module), costed into the row's
  // fixed time when the family's turn comes.
  std::vector<std::vector<models::Operator>> module;
};

// The error cells of f's rows `which` (by kind and format label), predicted as pred[i].
void add_label_cells(ErrorReport& errors, const FamilyRows& f, const std::vector<std::size_t>& which,
                     const std::vector<double>& pred, bool held_out) {
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> cells;
  for (std::size_t i : which) cells[{std::string(op_name(f.rows[i].op)), f.labels[i]}].push_back(i);
  for (const auto& [key, idx] : cells) {
    std::vector<Measurement> rows;
    std::vector<double> predicted;
    for (std::size_t i : idx) {
      rows.push_back(f.rows[i]);
      predicted.push_back(pred[i]);
    }
    add_error_cells(errors, key.first, key.second, rows, predicted, held_out);
  }
}

// Seconds `cm` gives a measured module's other operators (SimulatorOperator::module).
double module_seconds(const std::vector<models::Operator>& module, const models::CostModel& cm) {
  double s = 0;
  for (const models::Operator& op : module) {
    if (op.kernels > 0 && (op.flops > 0 || op.bytes > 0)) s += cm.seconds(op);
  }
  return s;
}

// Fits the family on (rows, ops) from `chip`; returns the fitted chip.
models::ChipSpec fit_family(const models::ChipSpec& chip, const EfficiencyTarget::Layout& layout,
                            std::span<const Measurement> rows, std::span<const FittedCall> ops, std::size_t max_rows,
                            bool* converged = nullptr) {
  // Thin rows and operators together (same stride).
  FitOptions fo;
  // The attention family fits up to four curves and the overhead (49 parameters on H200's tables):
  // a central-difference Jacobian takes ~100 evaluations, so 3,000 would stop its search after ~30
  // steps. At 12,000 the TensorRT-LLM profiles' searches (GQA and MLA rows: four curves) still
  // stopped before converging, H100's with MLA prefill's curve at its start (held out 28.4%); with
  // 40,000 they converge (H100 MLA prefill 18.4%, B200 21.0 -> 19.9%) and the SGLang and vLLM
  // profiles, which converged before, come out byte-identical
  // (docs/notes/2026-12-07-refitted-profiles.md).
  fo.max_evaluations = layout.family == OperatorFamily::attention ? 40000 : 3000;
  fo.tolerance = 1e-8;
  // Central differences (FitOptions::central_differences) for the families whose monotone curves
  // start flat and whose search stalled there with forward ones: the indexer, its top-k selection
  // and the mHC kernels (with forward differences their fits stopped before converging on H200
  // TensorRT-LLM, B200 vLLM and GB200 SGLang alike, mhc held out 15.4 / 15.0 / 12.6%; with central
  // ones they converge, 9.6 / 11.0 / 6.9%). The other families keep forward differences: central
  // ones measured on the same three profiles moved GEMM and attention by -1.5 to +1 point and the
  // TensorRT-LLM DSA blocks (sparse_attention) from 6.2 / 6.4% to 8.3 / 7.6% on H200
  // (docs/notes/2026-12-06-central-differences.md). Attention too since its prefill memory and MLA
  // prefill compute curves of their own: with forward ones its search stalled at the start on
  // noiseless GQA + MLA rows (tests/calibrate/operator_fit_test.cpp), and on H200 TensorRT-LLM it
  // left MLA prefill at 31.9% held out against 17.7% with central ones
  // (docs/notes/2026-12-07-prefill-attention-curves.md).
  fo.central_differences = layout.family == OperatorFamily::indexer || layout.family == OperatorFamily::topk ||
                           layout.family == OperatorFamily::mhc || layout.family == OperatorFamily::attention;
  if (layout.formats.empty()) {
    std::vector<Measurement> r = thinned(rows, max_rows);
    std::vector<FittedCall> o = thinned(ops, max_rows);
    const EfficiencyTarget target(chip, layout, r, o);
    const FitResult f = fit_target(target, r, fo);
    if (converged) *converged = f.converged;
    return target.chip(f.parameters);
  }
  // GEMMs of several formats: the curves and the overhead from the bf16 rows alone (one set
  // serves every format in the simulator, and the bf16 rows are the ones it describes without a
  // format entry), then each quantised format's entry alone with those held. Fitting all at once
  // lets the fp8 rows (whose small shapes pay the activation quantisation pass) pull the bf16
  // curves.
  std::vector<Measurement> base_rows;
  std::vector<FittedCall> base_ops;
  std::map<models::Format, std::pair<std::vector<Measurement>, std::vector<FittedCall>>> by_format;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (ops[i].op.format == models::Format::kBf16 && ops[i].op.rate == models::ComputeRate::kBf16) {
      base_rows.push_back(rows[i]);
      base_ops.push_back(ops[i]);
    } else {
      by_format[ops[i].op.format].first.push_back(rows[i]);
      by_format[ops[i].op.format].second.push_back(ops[i]);
    }
  }
  models::ChipSpec out = chip;
  bool ok = true;
  if (!base_rows.empty()) {
    EfficiencyTarget::Layout curves = layout;
    curves.formats.clear();
    out = fit_family(chip, curves, base_rows, base_ops, max_rows, &ok);
  }
  out.efficiency.gemm_formats.clear();
  std::array<bool, models::kComputeRates> rate_set{};
  for (const auto& [format, part] : by_format) {
    std::vector<Measurement> r = thinned(std::span<const Measurement>(part.first), max_rows);
    std::vector<FittedCall> o = thinned(std::span<const FittedCall>(part.second), max_rows);
    const GemmFormatTarget target(out, format, r, o);
    const FitResult f = fit_target(target, r, fo);
    ok = ok && f.converged;
    const models::Efficiency::GemmFormat g = target.entry(f.parameters);
    out.efficiency.gemm_formats.push_back(g);
    // format_compute (what the rate's other operators apply: an MoE without a grouped model,
    // the DSA indexer) takes the factor of the rate's first format (fp8 before block fp8).
    const auto rate = static_cast<std::size_t>(models::compute_rate(format));
    if (!rate_set[rate]) out.efficiency.format_compute[rate] = std::min(1.0, g.compute);
    rate_set[rate] = true;
  }
  if (converged) *converged = ok;
  return out;
}

// The routed experts of one weight format as the simulator costs them with a grouped-GEMM model
// (models::moe_experts_seconds): the parameters are the compute curve's knots (over padded FLOPs
// per active expert), the memory curve's (over weight bytes per active expert), the fixed time
// per call and the bytes per hidden element of each token and each pair through the module.
class MoeExpertsTarget : public FitTarget {
 public:
  // Where the search starts (kMoeFitStarts).
  struct Start {
    double compute = 0.4, memory = 0.4;
    bool overhead_from_rows = false;
  };
  MoeExpertsTarget(const models::ChipSpec& chip, models::Format format, const CurveBlock& compute,
                   const CurveBlock& memory, std::span<const Measurement> rows, std::span<const FittedCall> ops,
                   Start start)
      : chip_(chip), format_(format), compute_(compute), memory_(memory), rows_(rows), ops_(ops), start_(start) {}

  std::vector<Parameter> parameters() const override {
    std::vector<Parameter> p;
    compute_.append_parameters(p);
    memory_.append_parameters(p);
    for (std::size_t j = 0; j < compute_.size(); ++j) p[j].initial = start_.compute;
    for (std::size_t j = 0; j < memory_.size(); ++j) p[compute_.size() + j].initial = start_.memory;
    // The fixed time starts at 10 us or at half the fastest row's time (start_.overhead_from_rows).
    double fastest = 1e300;
    for (const Measurement& r : rows_) fastest = std::min(fastest, r.latency_s);
    const double overhead = start_.overhead_from_rows ? std::clamp(0.5 * fastest, 1e-6, 4e-4) : 1e-5;
    p.push_back(Parameter{"overhead_s", overhead, 0, 5e-4});
    // Lower bounds only: fitted as ln(x), so that a term far below the others can still grow back.
    p.push_back(Parameter{"token_bytes", 2, 0, std::numeric_limits<double>::infinity()});
    p.push_back(Parameter{"pair_bytes", 2, 0, std::numeric_limits<double>::infinity()});
    return p;
  }
  double predict(const Measurement& row, std::span<const double> params) const override {
    const auto i = static_cast<std::size_t>(&row - rows_.data());
    if (i >= ops_.size()) throw std::logic_error("MoeExpertsTarget: a row it was not built for");
    const FittedCall& c = ops_[i];
    const double s = models::moe_experts_seconds(c.op, experts(params), chip_.peak_flops(c.op.rate),
                                                 chip_.hbm_bandwidth.bytes_per_s) +
                     c.fixed_s;
    // Returned so that fit_target's residual, predicted / measured - 1, is ln(s / measured):
    // symmetric in over- and under-prediction. (With relative residuals the fit settled 9-18%
    // low on average on H200's rows, whose spread is wide, and held out worse: bf16 13.9-16.0%
    // median against 10.4-11.4% with log residuals; calibrate/README.md.)
    return row.latency_s * (1 + std::log(std::max(s, 1e-30) / row.latency_s));
  }
  std::size_t penalty_count() const override { return compute_.penalty_count() + memory_.penalty_count(); }
  void penalties(std::span<const double> params, std::span<double> out) const override {
    compute_.penalties(params.subspan(0, compute_.size()), out.subspan(0, compute_.penalty_count()));
    memory_.penalties(params.subspan(compute_.size(), memory_.size()),
                      out.subspan(compute_.penalty_count(), memory_.penalty_count()));
  }
  // The fitted model (cached for the last parameters: predict runs per row).
  const models::Efficiency::MoeExperts& experts(std::span<const double> params) const {
    if (cached_.size() == params.size() && std::equal(params.begin(), params.end(), cached_.begin())) return e_;
    cached_.assign(params.begin(), params.end());
    e_ = models::Efficiency::MoeExperts{};
    e_.format = format_;
    std::size_t p = 0;
    for (std::size_t j = 0; j < compute_.size(); ++j)
      e_.compute.knots.push_back({compute_.spec().knots[j], params[p++]});
    for (std::size_t j = 0; j < memory_.size(); ++j) e_.memory.knots.push_back({memory_.spec().knots[j], params[p++]});
    e_.overhead = Duration::seconds(params[p++]);
    e_.token_bytes = params[p++];
    e_.pair_bytes = params[p++];
    return e_;
  }

 private:
  const models::ChipSpec& chip_;
  models::Format format_;
  const CurveBlock& compute_;
  const CurveBlock& memory_;
  std::span<const Measurement> rows_;
  std::span<const FittedCall> ops_;
  Start start_;
  mutable std::vector<double> cached_;
  mutable models::Efficiency::MoeExperts e_;
};

// Where the search starts (compute and memory efficiency, the fixed time): the time is overhead +
// the larger of compute and weight reads + the module's traffic, and a search that starts with
// one side far slower than the other can settle where that side never binds (its curve then has
// no gradient), or carry a large fixed time with a tiny compute efficiency at small sizes. On
// synthetic rows from (0.55, 0.85) a start at (0.4, 0.4) settled at memory 0.98 and no pair bytes
// (3.8% median error against 2% noise); on H200's W4A16 rows a start at 10 us settled at an
// in-sample median of 35% (8.5% from half the fastest row's 72 us), while for fp8_block the 10 us
// start fitted better (10.2-10.8% held out against 11.8-14.4%). All four are searched; the one
// with the least squared ln error is kept.
constexpr MoeExpertsTarget::Start kMoeFitStarts[] = {
    {0.4, 0.4, false}, {0.5, 0.9, false}, {0.4, 0.4, true}, {0.5, 0.9, true}};

// Not monotone: over padded FLOPs the efficiency of the smallest experts (one or two rows in a
// 128-row tile) is high because the kernels tile small problems more finely than the padding
// assumes; an increasing curve cannot follow that (H200 W4A16 in-sample median 35% with it).
CurveSpec moe_curve_spec(const char* name, double lo, double hi) {
  CurveSpec spec;
  spec.name = name;
  spec.knots = decade_knots(lo, hi);
  spec.lower = 0.002;
  spec.upper = 1.0;
  spec.initial = 0.4;
  spec.monotone = Monotone::none;
  spec.smoothness = 0.01;
  return spec;
}

// Fits one format's grouped-GEMM model to (rows, ops), every row (not thinned: a format holds at
// most ~13,000 rows here, and the stride of 2 that --max-fit-rows 12000 would take drops every
// other token count of each series, rows being ordered by token count: H200 fp8_block held out at
// 10.2-10.8% thinned, 7.5-8.3% not).
models::Efficiency::MoeExperts fit_moe_experts(const models::ChipSpec& chip, models::Format format,
                                               const CurveBlock& compute, const CurveBlock& memory,
                                               std::span<const Measurement> rows, std::span<const FittedCall> ops,
                                               bool* converged = nullptr) {
  FitOptions fo;
  fo.max_evaluations = 3000;
  fo.tolerance = 1e-8;
  std::optional<models::Efficiency::MoeExperts> best;
  double best_rms = 0;
  for (const auto& start : kMoeFitStarts) {
    const MoeExpertsTarget target(chip, format, compute, memory, rows, ops, start);
    const FitResult f = fit_target(target, rows, fo);
    if (!best || f.rms_rel_error < best_rms) {
      best = target.experts(f.parameters);
      best_rms = f.rms_rel_error;
      if (converged) *converged = f.converged;
    }
  }
  return *best;
}

std::vector<double> predict_ops(const models::ChipSpec& chip, std::span<const FittedCall> ops) {
  const models::RooflineCostModel cm(chip);
  std::vector<double> out;
  out.reserve(ops.size());
  for (const FittedCall& c : ops) out.push_back(call_seconds(cm, c) + c.fixed_s);
  return out;
}

// The MoE family: one grouped-GEMM model per expert weight format (models::Efficiency::
// moe_experts), each fitted to its format's rows but those of contended series (`contended`,
// contended_moe_series of f's rows), held out by whole model shapes (every plan and skew of a
// shape in one fold; the folds are dealt over all the family's rows, as for the other families).
// A format whose shapes that deal puts all in one fold (B300's SGLang table: w4a16_mxfp4 has two
// of the family's 26 shapes, both in one fold) would leave a fold nothing to fit on: its folds
// are then dealt over its own shapes. A format with one shape is fitted and reported in-sample; one without enough
// uncontended rows to fit its parameters is reported as not fitted.
void fit_moe_family(OperatorFitResult& result, const FamilyRows& f, const std::vector<bool>& contended,
                    const OperatorFitOptions& options) {
  const auto n_contended = static_cast<std::size_t>(std::count(contended.begin(), contended.end(), true));
  // Keyed by the table's format, not the simulator's: W4A16 MXFP4 (Hopper's Triton kernels) and
  // MXFP4 x MXFP8 (Blackwell's) are two kernels of one simulator format, each fitted on its own
  // rows; --moe-models picks the one that goes into the profile.
  std::map<Format, std::vector<std::size_t>> formats;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    if (simulator_format(f.rows[i].format)) formats[f.rows[i].format].push_back(i);
  }
  FoldPlan plan;
  if (options.cross_validate) plan = plan_folds(f.rows, options.folds, options.seed);
  std::vector<double> held(f.rows.size(), 0.0);
  FamilyFit ff;
  ff.family = OperatorFamily::moe;
  ff.rows = f.rows.size();
  ff.shapes = plan.groups;
  ff.converged = true;
  std::vector<double> train_pred, train_meas;
  std::vector<models::Efficiency::MoeExperts> fitted;
  std::vector<std::size_t> formats_rows;  // a row of each fitted format
  std::vector<std::size_t> reported_held, reported_in_sample;
  const models::ChipSpec chip = result.chip;
  auto predict = [&](const models::Efficiency::MoeExperts& e, const FittedCall& c) {
    return models::moe_experts_seconds(c.op, e, chip.peak_flops(c.op.rate), chip.hbm_bandwidth.bytes_per_s) + c.fixed_s;
  };
  for (const auto& entry : formats) {
    // Named, not structured bindings: the lambda below captures them (clang before 16 refuses
    // captured bindings, and the fuzz build uses clang).
    const models::Format format = *simulator_format(entry.first);
    const auto& idx = entry.second;
    double f_lo = 1e300, f_hi = 0, w_lo = 1e300, w_hi = 0;
    for (std::size_t i : idx) {
      const models::MoeExpertsWork w = models::moe_experts_work(f.ops[i].op);
      const double x = w.flops_per_expert(), y = w.weights_per_expert();
      if (x > 0) f_lo = std::min(f_lo, x), f_hi = std::max(f_hi, x);
      if (y > 0) w_lo = std::min(w_lo, y), w_hi = std::max(w_hi, y);
    }
    const CurveBlock compute(moe_curve_spec("moe_compute", f_lo, f_hi));
    const CurveBlock memory(moe_curve_spec("moe_memory", w_lo, w_hi));
    // The fewest rows a fit of these parameters takes (MoeExpertsTarget: both curves' knots, the
    // fixed time, token and pair bytes; the curves' penalties count as rows).
    const std::size_t params = compute.size() + memory.size() + 3;
    const std::size_t penalties = compute.penalty_count() + memory.penalty_count();
    const std::size_t min_rows = params > penalties ? params - penalties : 0;
    // How many uncontended rows of `idx` have a position k that passes `keep`.
    auto count_rows = [&](auto keep) {
      std::size_t n = 0;
      for (std::size_t k = 0; k < idx.size(); ++k) n += !contended[idx[k]] && keep(k) ? 1 : 0;
      return n;
    };
    if (count_rows([](std::size_t) { return true; }) < std::max<std::size_t>(min_rows, 1)) {
      result.not_fitted.emplace_back("moe " + std::string(format_name(f.rows[idx.front()].format)) +
                                         ": fewer uncontended rows than the grouped-GEMM model has parameters (" +
                                         std::to_string(params) + ")",
                                     idx.size());
      continue;
    }
    // This format's fold of each of its rows (idx order): the family's deal if every fold leaves
    // rows to fit on, else a deal over its own shapes; none (in-sample) if that fails too.
    std::vector<std::uint32_t> fold_of(idx.size(), 0);
    std::size_t folds = 0;
    auto deal_fits = [&]() {
      if (folds < 2) return false;
      for (std::uint32_t fold = 0; fold < folds; ++fold) {
        if (count_rows([&](std::size_t k) { return fold_of[k] != fold; }) < std::max<std::size_t>(min_rows, 1)) {
          return false;
        }
      }
      return true;
    };
    if (options.cross_validate) {
      for (std::size_t k = 0; k < idx.size(); ++k) fold_of[k] = plan.fold_of_row[idx[k]];
      folds = plan.folds;
      if (!deal_fits()) {
        std::vector<Measurement> own_rows;
        own_rows.reserve(idx.size());
        for (std::size_t i : idx) own_rows.push_back(f.rows[i]);
        const FoldPlan own = plan_folds(own_rows, options.folds, options.seed);
        fold_of = own.fold_of_row;
        folds = own.folds;
        if (!deal_fits()) {
          folds = 0;
        } else {
          result.notes.push_back("moe " + std::string(format_name(f.rows[idx.front()].format)) + ": its " +
                                 std::to_string(own.groups) +
                                 " model shapes leave a fold of the family's without rows to fit on; held out "
                                 "over " +
                                 std::to_string(folds) + " folds of its own shapes");
        }
      }
    }
    // The rows of `idx` whose position k passes `keep` (and are not contended).
    auto fit_on = [&](auto keep, bool* converged) {
      std::vector<Measurement> rows;
      std::vector<FittedCall> ops;
      for (std::size_t k = 0; k < idx.size(); ++k) {
        const std::size_t i = idx[k];
        if (contended[i] || !keep(k)) continue;
        rows.push_back(f.rows[i]);
        ops.push_back(f.ops[i]);
      }
      return fit_moe_experts(chip, format, compute, memory, rows, ops, converged);
    };
    bool ok = true;
    const models::Efficiency::MoeExperts e = fit_on([](std::size_t) { return true; }, &ok);
    ff.converged = ff.converged && ok;
    fitted.push_back(e);
    formats_rows.push_back(idx.front());
    for (std::size_t i : idx) {
      if (contended[i]) continue;
      train_pred.push_back(predict(e, f.ops[i]));
      train_meas.push_back(f.rows[i].latency_s);
    }
    if (folds >= 2) {
      for (std::uint32_t fold = 0; fold < folds; ++fold) {
        const models::Efficiency::MoeExperts fe = fit_on([&](std::size_t k) { return fold_of[k] != fold; }, nullptr);
        for (std::size_t k = 0; k < idx.size(); ++k) {
          if (fold_of[k] == fold) held[idx[k]] = predict(fe, f.ops[idx[k]]);
        }
      }
      reported_held.insert(reported_held.end(), idx.begin(), idx.end());
    } else {
      for (std::size_t i : idx) held[i] = predict(e, f.ops[i]);
      reported_in_sample.insert(reported_in_sample.end(), idx.begin(), idx.end());
      if (options.cross_validate) {
        result.notes.push_back("moe " + std::string(format_name(f.rows[idx.front()].format)) +
                               ": one model shape (or too few rows outside each fold), nothing to hold out; its "
                               "error cells are in-sample");
      }
    }
  }
  ff.train_ape_p50 = train_pred.empty() ? 0.0 : summarise_errors(train_pred, train_meas).ape_p50;
  add_label_cells(result.errors, f, reported_held, held, true);
  add_label_cells(result.errors, f, reported_in_sample, held, false);
  result.chip.efficiency.moe_experts.clear();
  for (std::size_t k = 0; k < fitted.size(); ++k) {
    const Format fmt = f.rows[formats_rows[k]].format;
    const bool keep = !options.moe_models || std::find(options.moe_models->begin(), options.moe_models->end(), fmt) !=
                                                 options.moe_models->end();
    // One model per simulator format: without --moe-models, the first of two kernels of one
    // format (W4A16 before MXFP4 x MXFP8) goes in.
    const auto& kept = result.chip.efficiency.moe_experts;
    const bool taken = std::any_of(kept.begin(), kept.end(), [&](const models::Efficiency::MoeExperts& m) {
      return m.format == fitted[k].format;
    });
    if (keep && taken) {
      result.notes.push_back("moe " + std::string(format_name(fmt)) + ": not in the profile, another kernel of " +
                             std::string(models::format_name(fitted[k].format)) +
                             " experts is (--moe-models picks one)");
    } else if (keep) {
      result.chip.efficiency.moe_experts.push_back(fitted[k]);
    } else {
      result.notes.push_back("moe " + std::string(format_name(fmt)) +
                             ": the error cells are its grouped-GEMM model's, fitted and held out but not in the "
                             "profile (--moe-models); the MoE curves (moe_compute, moe_memory, moe_overhead) apply");
    }
  }
  if (!result.chip.efficiency.moe_experts.empty()) result.fitted_keys.emplace_back("moe_experts");
  if (n_contended > 0) {
    result.not_fitted.emplace_back(
        "moe: series slower than a plan holding a superset of their work, or faster "
        "than their share of a subset's allows (contended benchmark runs; "
        "contended_moe_series)",
        n_contended);
  }
  result.families.push_back(ff);
}

}  // namespace

std::vector<bool> contended_moe_series(std::span<const Measurement> rows) {
  // Series key: format, hidden, inter, experts, top-k, skew; then (moe_tp, ep) -> token count ->
  // seconds.
  using Group = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::uint32_t>;
  using Plan = std::pair<std::int64_t, std::int64_t>;
  std::map<Group, std::map<Plan, std::map<std::int64_t, double>>> series;
  auto group_of = [](const Measurement& m) {
    return Group{static_cast<int>(m.format), m.shape.get(Dim::hidden), m.shape.get(Dim::inter),
                 m.shape.get(Dim::experts),  m.shape.get(Dim::topk),   m.variant};
  };
  auto plan_of = [](const Measurement& m) { return Plan{m.shape.get(Dim::tp, 1), m.shape.get(Dim::ep, 1)}; };
  for (const Measurement& m : rows) {
    if (m.op == MeasuredOp::moe) series[group_of(m)][plan_of(m)][m.shape.get(Dim::tokens)] = m.latency_s;
  }
  std::set<std::pair<Group, Plan>> flagged;
  for (const auto& [group, plans] : series) {
    for (const auto& [a, ta] : plans) {
      for (const auto& [b, tb] : plans) {
        if (a == b) continue;
        const bool superset = b.first <= a.first && b.second <= a.second;
        const bool subset = b.first >= a.first && b.second >= a.second;
        if (!superset && !subset) continue;
        std::vector<double> ratio;
        for (const auto& [tokens, s] : ta) {
          if (auto it = tb.find(tokens); it != tb.end()) ratio.push_back(s / it->second);
        }
        if (ratio.empty()) continue;
        std::sort(ratio.begin(), ratio.end());
        const std::size_t n = ratio.size();
        const double median = n % 2 ? ratio[n / 2] : 0.5 * (ratio[n / 2 - 1] + ratio[n / 2]);
        const double bound = superset ? kContentionMargin
                                      : kContentionMargin * static_cast<double>(b.first * b.second) /
                                            static_cast<double>(a.first * a.second);
        if (median > bound) flagged.insert({group, a});
      }
    }
  }
  std::vector<bool> out(rows.size(), false);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out[i] = rows[i].op == MeasuredOp::moe && flagged.count({group_of(rows[i]), plan_of(rows[i])}) > 0;
  }
  return out;
}

std::string format_label(const Measurement& m, const MeasurementSet& set) {
  std::string label(format_name(m.format));
  if (m.kv_format != Format::unspecified && m.kv_format != m.format) {
    label += " kv " + std::string(format_name(m.kv_format));
  }
  if (m.op == MeasuredOp::moe && m.variant != 0) label += " " + set.label(m.variant);
  if (m.op == MeasuredOp::dsa_module_prefill && m.weight_format != Format::unspecified) {
    label += " gemm " + std::string(format_name(m.weight_format));
  }
  if (m.shape.get(Dim::window, 0) > 0) label += " window";
  return label;
}

ErrorReport predict_measurements(const MeasurementSet& set, const models::ChipSpec& chip,
                                 const models::CostModel& cost_model) {
  ErrorReport report;
  report.chip = chip.name;
  report.cost_model = std::string(cost_model.name()) + " cost model of the profile as the simulator applies it";
  report.held_out = "nothing fitted to these rows";
  FamilyRows all;
  std::vector<double> predicted;
  for (const Measurement& m : set.rows()) {
    std::string why;
    const auto op = simulator_operator(m, m.variant ? set.label(m.variant) : std::string(), chip, why);
    if (!op || op->op.kernels <= 0 || !(op->op.flops > 0 || op->op.bytes > 0)) continue;
    all.rows.push_back(m);
    all.labels.push_back(format_label(m, set));
    predicted.push_back(cost_model.seconds(op->op) + (op->extra.kernels > 0 ? cost_model.seconds(op->extra) : 0.0) +
                        module_seconds(op->module, cost_model));
  }
  std::vector<std::size_t> every(all.rows.size());
  std::iota(every.begin(), every.end(), std::size_t{0});
  add_label_cells(report, all, every, predicted, true);
  return report;
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
    f.ops.push_back({op->op, op->extra.kernels > 0 ? models::RooflineCostModel(chip).seconds(op->extra) : 0.0,
                     op->family == OperatorFamily::topk});
    f.labels.push_back(format_label(m, set));
    f.module.push_back(op->module);
  }
  result.unmodelled.assign(unmodelled.begin(), unmodelled.end());
  result.errors.chip = chip.name;
  result.errors.cost_model =
      "models::RooflineCostModel: kernels x overhead + max(FLOPs / (peak x eff_c(FLOPs/kernel) x format), "
      "bytes / (HBM x eff_m(bytes/kernel))), efficiency curves per family";
  result.errors.held_out = std::to_string(options.folds) + " folds of whole shapes (shape_key_dims per kind), seed " +
                           std::to_string(options.seed);

  // The indexer and its top-k selection before sparse attention: DSA blocks cost them with their
  // fits.
  for (OperatorFamily family :
       {OperatorFamily::gemm, OperatorFamily::moe, OperatorFamily::attention, OperatorFamily::indexer,
        OperatorFamily::topk, OperatorFamily::sparse_attention, OperatorFamily::mhc, OperatorFamily::elementwise}) {
    auto it = families.find(family);
    if (it == families.end()) continue;
    FamilyRows& f = it->second;
    // Modules: their other operators as the families fitted so far cost them (roofline).
    const models::RooflineCostModel fitted_so_far(result.chip);
    for (std::size_t i = 0; i < f.ops.size(); ++i) f.ops[i].fixed_s += module_seconds(f.module[i], fitted_so_far);
    // The layout: a curve per field over the decades the operators span; GEMMs add an entry per
    // quantised weight format present (models::Efficiency::GemmFormat: fp8 and block fp8 run at
    // one rate through different kernels and quantisation passes).
    FamilyFields fields = fields_of(family);
    if (family == OperatorFamily::attention) {
      // Prefill's memory side apart from decode's where both GQA prefill and decode rows shape
      // them; MLA prefill's compute side apart from GQA prefill's where both kinds of rows do.
      const auto has = [&](models::OpKind kind, bool latent) {
        return std::any_of(f.ops.begin(), f.ops.end(), [&](const FittedCall& c) {
          return c.op.kind == kind && !c.op.sparse && c.op.latent == latent;
        });
      };
      const bool gqa = has(models::OpKind::kAttentionPrefill, false);
      const bool mla = has(models::OpKind::kAttentionPrefill, true);
      const bool decode = has(models::OpKind::kAttentionDecode, false) || has(models::OpKind::kAttentionDecode, true);
      const FamilyFields all = fields;
      fields.curves.clear();
      fields.curve_on_flops.clear();
      for (std::size_t c = 0; c < all.curves.size(); ++c) {
        const std::string_view name = all.curves[c].second;
        if ((name == "attention_prefill_memory" && !(gqa && decode)) ||
            (name == "attention_latent_prefill" && !(gqa && mla))) {
          continue;
        }
        fields.curves.push_back(all.curves[c]);
        fields.curve_on_flops.push_back(all.curve_on_flops[c]);
      }
    }
    EfficiencyTarget::Layout layout;
    layout.family = family;
    layout.per_query = !std::all_of(f.rows.begin(), f.rows.end(), [&](const Measurement& m) {
      return m.op == MeasuredOp::dsa_module_prefill && set.label(m.variant).rfind("dsv4_", 0) != 0;
    });
    double flops_lo = 1e300, flops_hi = 0, bytes_lo = 1e300, bytes_hi = 0;
    for (const FittedCall& call : f.ops) {
      const models::Operator& op = call.op;
      const double k = std::max(1, op.kernels);
      if (op.flops > 0) {
        flops_lo = std::min(flops_lo, op.flops / k);
        flops_hi = std::max(flops_hi, op.flops / k);
      }
      // The top-k selection's curve is over the logits it reads.
      const double bytes = call.selection ? models::selection_logit_bytes(op) : op.bytes;
      bytes_lo = std::min(bytes_lo, bytes / k);
      bytes_hi = std::max(bytes_hi, bytes / k);
    }
    for (std::size_t c = 0; c < fields.curves.size(); ++c) {
      CurveSpec spec;
      spec.name = fields.curves[c].second;
      spec.knots = fields.curve_on_flops[c] ? decade_knots(flops_lo, flops_hi) : decade_knots(bytes_lo, bytes_hi);
      spec.lower = 0.002;
      spec.upper = 1.0;
      spec.initial = 0.4;
      // Larger kernels run closer to the peaks, but for the top-k selection: its logits come from
      // L2 while they fit there (the indexer has just written them), from HBM beyond.
      spec.monotone = family == OperatorFamily::topk ? Monotone::decreasing : Monotone::increasing;
      spec.smoothness = 0.01;
      layout.curves.emplace_back(spec);
    }
    if (family == OperatorFamily::gemm) {
      std::set<models::Format> formats;
      for (const FittedCall& call : f.ops) {
        if (call.op.format != models::Format::kBf16 || call.op.rate != models::ComputeRate::kBf16) {
          formats.insert(call.op.format);
        }
      }
      layout.formats.assign(formats.begin(), formats.end());
    }
    const std::vector<Measurement>& fit_rows = f.rows;
    const std::vector<FittedCall>& fit_ops = f.ops;
    if (fit_rows.empty()) continue;
    if (family == OperatorFamily::moe) {
      // The MoE roofline curves, in-sample (what formats without a grouped model apply), then the
      // grouped-GEMM models, held out.
      // (Every MoE row fits: fit_rows are f's rows.)
      std::vector<Measurement> clean_rows;
      std::vector<FittedCall> clean_ops;
      const std::vector<bool> contended = contended_moe_series(f.rows);
      for (std::size_t i = 0; i < f.rows.size(); ++i) {
        if (contended[i]) continue;
        clean_rows.push_back(f.rows[i]);
        clean_ops.push_back(f.ops[i]);
      }
      result.chip = fit_family(result.chip, layout, clean_rows, clean_ops, options.max_fit_rows);
      for (const auto& c : fields.curves) result.fitted_keys.emplace_back(c.second);
      result.fitted_keys.emplace_back(fields.overhead_key);
      fit_moe_family(result, f, contended, options);
      continue;
    }
    FamilyFit ff;
    ff.family = family;
    ff.rows = f.rows.size();
    const models::ChipSpec fitted =
        fit_family(result.chip, layout, fit_rows, fit_ops, options.max_fit_rows, &ff.converged);
    {
      const std::vector<double> p = predict_ops(fitted, fit_ops);
      std::vector<double> meas;
      meas.reserve(fit_rows.size());
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
            } else {
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
    std::vector<std::size_t> all(f.rows.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    add_label_cells(result.errors, f, all, held, held_out);
    result.chip = fitted;
    for (const auto& c : fields.curves) result.fitted_keys.emplace_back(c.second);
    result.fitted_keys.emplace_back(fields.overhead_key);
    if (fields.per_query != nullptr) result.fitted_keys.emplace_back(fields.per_query_key);
    // The tiling is the model's, not fitted: the curves were fitted over the padded FLOPs, so it
    // goes into the profile with them.
    if (family == OperatorFamily::gemm && fitted.efficiency.gemm_tiling.tile > 0) {
      result.fitted_keys.emplace_back("gemm_tiling");
    }
    std::set<models::ComputeRate> rates;
    for (models::Format fmt : layout.formats) rates.insert(models::compute_rate(fmt));
    for (models::ComputeRate r : rates) {
      result.fitted_keys.push_back("format_compute." + std::string(models::compute_rate_name(r)));
    }
    // The GEMM family fits them; later families start from its chip and carry them unfitted.
    if (family == OperatorFamily::gemm && !fitted.efficiency.gemm_formats.empty()) {
      result.fitted_keys.emplace_back("gemm_formats");
    }
    result.families.push_back(ff);
  }
  return result;
}

}  // namespace servesim::calibrate
