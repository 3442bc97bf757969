#include "models/cost_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

namespace servesim::models {
namespace {

bool is_gemm(OpKind k) {
  return k == OpKind::kGemmQkv || k == OpKind::kGemmOut || k == OpKind::kGemmMlp || k == OpKind::kLmHead;
}

bool same_class(OpKind table, OpKind op) { return table == op || (is_gemm(table) && is_gemm(op)); }

// Index of the last axis value <= x, or -1 when x lies outside [front, back].
int bracket(const std::vector<double>& axis, double x) {
  if (axis.empty() || x < axis.front() || x > axis.back()) return -1;
  const auto it = std::upper_bound(axis.begin(), axis.end(), x);
  const int i = static_cast<int>(it - axis.begin()) - 1;
  return std::min(i, static_cast<int>(axis.size()) - 1);
}

double lerp_weight(const std::vector<double>& axis, int i, double x) {
  if (i + 1 >= static_cast<int>(axis.size())) return 0.0;
  const double a = axis[static_cast<std::size_t>(i)], b = axis[static_cast<std::size_t>(i) + 1];
  return b > a ? (x - a) / (b - a) : 0.0;
}

constexpr double kVectorFraction = 16.0;  // bf16 tensor peak / vector rate (assumed)

}  // namespace

namespace {

// padded_gemm_flops' factor for one GEMM of m x n outputs (`groups` of them in one batched
// kernel: each pads its own n, and their tiles share the waves).
double padding_factor(double m, double n, double groups, const Efficiency::GemmTiling& t, int sms) {
  const double tm = t.small_m_tile > 0 && m <= t.small_m_tile ? t.small_m_tile : t.tile;
  const double rows = std::ceil(m / tm), cols = std::ceil(n / t.tile);
  double factor = rows * tm * cols * t.tile / (m * n);
  if (t.waves && sms > 0) {
    const double tiles = rows * cols * groups;
    factor *= std::ceil(tiles / sms) * sms / tiles;
  }
  return factor;
}

}  // namespace

double padded_gemm_flops(const Operator& op, const Efficiency::GemmTiling& t, int sms) {
  if (!(t.tile > 0) || !(op.m > 0) || !(op.n > 0) || !(op.k > 0)) return op.flops;
  if (op.gemm_count <= 1 && op.gemms[0].groups == 1) {
    return op.flops * padding_factor(op.m, op.n, 1, t, sms);
  }
  // Each GEMM pads its own shape; the operator's FLOPs split over them as their m n k do.
  double work = 0, padded = 0;
  for (int i = 0; i < op.gemm_count; ++i) {
    const Operator::Gemm& g = op.gemms[static_cast<std::size_t>(i)];
    const double w = g.groups * g.n * g.k;
    work += w;
    padded += w * padding_factor(op.m, g.n, g.groups, t, sms);
  }
  return work > 0 ? op.flops * padded / work : op.flops;
}

double query_wave_factor(const Operator& op, int sms) {
  // DeepGEMM's fp8_mqa_logits (csrc/jit_kernels/impls/smxx_fp8_mqa_logits.hpp): block_qh = 128
  // query-heads a block, a grid of get_num_sms() blocks.
  constexpr double kQueryHeadsPerBlock = 128;
  if (!op.query_blocks || sms <= 0 || !(op.m > 0) || !(op.n > 0)) return 1.0;
  const double blocks = std::ceil(op.m * op.n / kQueryHeadsPerBlock);
  return std::ceil(blocks / sms) * sms / blocks;
}

double selection_logit_bytes(const Operator& op) {
  constexpr double kLogitBytes = 4;  // fp32 logits
  if (!(op.flops > 0) || !(op.n > 0) || !(op.k > 0)) return 0.0;
  return kLogitBytes * op.flops / (2.0 * op.n * op.k);
}

double selection_waves(const Operator& op, int sms) { return sms > 0 && op.m > 0 ? std::ceil(op.m / sms) : 0.0; }

double selection_seconds(const Operator& op, const SelectionModel& s) {
  const double logits = selection_logit_bytes(op);
  if (!(op.m > 0) || !(logits > 0) || op.kernels <= 0) return 0.0;
  const double eff = s.efficiency.at(logits / op.kernels);
  if (!(eff > 0) || !(s.bandwidth > 0)) return 0.0;
  const double waves = selection_waves(op, s.sms);
  const double factor = waves > 0 ? waves * s.sms / op.m : 1.0;
  return op.kernels * s.overhead_s + waves * s.wave_s + logits * factor / (s.bandwidth * eff);
}

SelectionModel selection_model(const ChipSpec& chip) {
  const Efficiency& e = chip.efficiency;
  SelectionModel s;
  s.bandwidth = chip.hbm_bandwidth.bytes_per_s;
  s.sms = chip.sms;
  if (!e.topk.knots.empty()) {
    s.efficiency = e.topk;
    s.overhead_s = e.topk_overhead.to_seconds();
    s.wave_s = e.topk_wave.to_seconds();
  } else {
    s.efficiency = e.elementwise;
    s.overhead_s = e.elementwise_overhead.to_seconds();
  }
  return s;
}

MoeExpertsWork moe_experts_work(const Operator& op) {
  MoeExpertsWork w;
  w.active = std::max(op.batch, 1.0);
  w.flops = op.m > 0 ? op.flops * std::max(op.padded_m, op.m) / op.m : 0.0;
  w.weights = op.batch * (op.gated ? 3.0 : 2.0) * op.n * op.k * op.kv_bytes;
  return w;
}

double moe_experts_seconds(const Operator& op, const Efficiency::MoeExperts& e, double peak_flops,
                           double hbm_bytes_per_s) {
  const MoeExpertsWork w = moe_experts_work(op);
  const double compute = w.flops > 0 ? w.flops / (peak_flops * e.compute.at(w.flops_per_expert())) : 0.0;
  const double memory = w.weights > 0 ? w.weights / (hbm_bytes_per_s * e.memory.at(w.weights_per_expert())) : 0.0;
  return e.overhead.to_seconds() + std::max(compute, memory) +
         (e.token_bytes * op.tokens + e.pair_bytes * op.m) * op.k / hbm_bytes_per_s;
}

RooflineCostModel::RooflineCostModel(const ChipSpec& chip) {
  const Efficiency& e = chip.efficiency;
  const std::array<bool, kComputeRates> chip_rates = chip.rates();
  for (const Efficiency::MoeExperts& m : e.moe_experts) {
    const ComputeRate rate = gemm_rate(m.format, chip_rates);
    moe_.push_back({m, rate, bytes_per_element(m.format), chip.peak_flops(rate)});
  }
  format_compute_ = e.format_compute;
  for (const Efficiency::GemmFormat& g : e.gemm_formats) {
    QuantisedGemm& q = gemm_formats_[static_cast<std::size_t>(g.format)];
    q.present = true;
    q.overhead_s = g.overhead.to_seconds();
    q.s_per_element = g.quant_bytes / chip.hbm_bandwidth.bytes_per_s;
    q.compute = g.compute;
  }
  for (std::size_t k = 0; k < kOpKinds; ++k) {
    const EfficiencyCurve* compute = &e.gemm_compute;
    const EfficiencyCurve* memory = &e.gemm_memory;
    Duration overhead = e.gemm_overhead;
    bool chip_operator = true;
    bool format_scaled = true;  // the format factors apply to GEMMs
    switch (static_cast<OpKind>(k)) {
      case OpKind::kGemmQkv:
      case OpKind::kGemmOut:
      case OpKind::kGemmMlp:
      case OpKind::kLmHead: break;
      case OpKind::kMoeExperts:
        if (!e.moe_compute.knots.empty() && !e.moe_memory.knots.empty()) {
          compute = &e.moe_compute;
          memory = &e.moe_memory;
          overhead = e.moe_overhead;
        }
        break;
      case OpKind::kAttentionPrefill:
        compute = &e.attention_prefill;
        memory = e.attention_prefill_memory.knots.empty() ? &e.attention_decode : &e.attention_prefill_memory;
        overhead = e.attention_overhead;
        format_scaled = false;
        break;
      case OpKind::kIndexer:
        // Its own fitted curve of the fp8 peak where the chip has one, else prefill attention's
        // at the fp8 format factor.
        memory = &e.attention_decode;
        if (!e.indexer.knots.empty()) {
          compute = &e.indexer;
          overhead = e.indexer_overhead;
          format_scaled = false;
        } else {
          compute = &e.attention_prefill;
          overhead = e.attention_overhead;
        }
        break;
      case OpKind::kAttentionDecode:
        memory = &e.attention_decode;
        overhead = e.attention_overhead;
        format_scaled = false;
        break;
      case OpKind::kElementwise:
        memory = &e.elementwise;
        overhead = e.elementwise_overhead;
        break;
      case OpKind::kDequantize:
        overhead = Duration::zero();  // fused into the GEMM it feeds
        format_scaled = false;
        break;
      case OpKind::kTpAllReduce:
      case OpKind::kEpDispatch:
      case OpKind::kEpCombine:
      case OpKind::kCpExchange:
      case OpKind::kPpSend:
      case OpKind::kScheduling:
      case OpKind::kSwap:
      case OpKind::kMtpDraft:
      case OpKind::kImbalance:
      case OpKind::kA2aKvContention:
      case OpKind::kCount:
        chip_operator = false;  // not chip operators: costed by the communication model / the host
        break;
    }
    Rates& r = rates_[k];
    r.chip_operator = chip_operator;
    r.compute = *compute;
    r.memory = *memory;
    r.compute_constant = compute->is_constant();
    r.memory_constant = memory->is_constant();
    const double bf16 = chip.bf16_flops.flop_per_s;
    for (std::size_t rate = 0; rate < kComputeRates; ++rate) {
      const double peak = chip.peak_flops(static_cast<ComputeRate>(rate));
      // A rate the chip lacks runs at bf16 (emulation), at bf16's efficiency.
      const double scale = peak > 0 && format_scaled ? e.format_compute[rate] : 1.0;
      const double p = peak > 0 ? peak : bf16;
      r.peak_flops[rate] = p * scale;
      r.s_per_flop[rate] = 1.0 / (p * (compute->first() * scale));
    }
    if (static_cast<OpKind>(k) == OpKind::kDequantize) {
      // Vector (non-tensor) work, assumed at 1/16 of the bf16 tensor peak: H100 has 67 TFLOP/s of
      // FP32 against 989.5 TFLOP/s of BF16 tensor math (1/14.8), A100 19.5 against 312 (1/16).
      for (std::size_t rate = 0; rate < kComputeRates; ++rate) {
        r.peak_flops[rate] = bf16 / kVectorFraction;
        r.s_per_flop[rate] = kVectorFraction / bf16;
      }
      r.compute_constant = true;
    }
    if (is_gemm(static_cast<OpKind>(k)) && e.gemm_tiling.tile > 0) {
      r.padded = true;
      r.tiling = e.gemm_tiling;
      r.sms = chip.sms;
    }
    if (static_cast<OpKind>(k) == OpKind::kIndexer && chip.sms > 0) {
      r.waves = true;
      r.sms = chip.sms;
    }
    r.bandwidth = chip.hbm_bandwidth.bytes_per_s;
    r.s_per_byte = 1.0 / (chip.hbm_bandwidth.bytes_per_s * memory->first());
    r.overhead_s = overhead.to_seconds();
    r.grouped = static_cast<OpKind>(k) == OpKind::kMoeExperts && !moe_.empty();
  }
  if (!e.attention_sparse.knots.empty()) {
    // As prefill attention, with the sparse kernels' own curve and overhead (bf16 math: the
    // format factors do not apply, as for kAttentionPrefill).
    sparse_ = true;
    sparse_rates_ = rates_[static_cast<std::size_t>(OpKind::kAttentionPrefill)];
    Rates& r = sparse_rates_;
    // Their memory side stays attention_decode where prefill has a memory curve of its own (that
    // curve is GQA prefill's; the sparse fit's per-query time was fitted over decode's).
    r.set_memory(e.attention_decode);
    r.set_compute(e.attention_sparse);
    r.overhead_s = e.attention_sparse_overhead.to_seconds();
    sparse_query_s_ = e.attention_sparse_query.to_seconds();
  }
  selection_ = selection_model(chip);
  if (!e.attention_prefill_memory.knots.empty() || !e.attention_latent_prefill.knots.empty()) {
    latent_prefill_ = true;
    latent_prefill_rates_ = rates_[static_cast<std::size_t>(OpKind::kAttentionPrefill)];
    Rates& r = latent_prefill_rates_;
    r.set_memory(e.attention_decode);
    if (!e.attention_latent_prefill.knots.empty()) r.set_compute(e.attention_latent_prefill);
  }
  if (!e.mhc.knots.empty()) {
    // As elementwise kernels, with the mHC kernels' own memory curve and overhead.
    mhc_ = true;
    mhc_rates_ = rates_[static_cast<std::size_t>(OpKind::kElementwise)];
    Rates& r = mhc_rates_;
    r.set_memory(e.mhc);
    r.overhead_s = e.mhc_overhead.to_seconds();
  }
}

const RooflineCostModel::Rates& RooflineCostModel::rates_of(const Operator& op) const {
  // The MoE router is a dense GEMM reported under the MoE component: the GEMM curves and overhead
  // cost it, not the MoE ones (fitted to the fused expert module, whose fixed cost it is not).
  if (op.kind == OpKind::kMoeExperts && op.gemm_count > 0) return rates_[static_cast<std::size_t>(OpKind::kGemmMlp)];
  if (op.sparse && sparse_) return sparse_rates_;
  if (op.mhc && mhc_) return mhc_rates_;
  if (op.latent && latent_prefill_ && op.kind == OpKind::kAttentionPrefill) return latent_prefill_rates_;
  return rates_[static_cast<std::size_t>(op.kind)];
}

double RooflineCostModel::compute_seconds(const Operator& op) const {
  const Rates& r = rates_of(op);
  const auto rate = static_cast<std::size_t>(op.rate);
  const double flops = r.padded  ? padded_gemm_flops(op, r.tiling, r.sms)
                       : r.waves ? op.flops * query_wave_factor(op, r.sms)
                                 : op.flops;
  // A quantised-activation GEMM format with its own factor: relative to the bf16 curve at the
  // rate's raw peak (peak_flops and s_per_flop carry format_compute[rate]).
  double scale = 1;
  if (is_gemm(op.kind) && op.quant_elements > 0) {
    const QuantisedGemm& q = gemm_formats_[static_cast<std::size_t>(op.format)];
    const double base = format_compute_[rate];
    if (q.present && base > 0) scale = q.compute / base;
  }
  if (r.compute_constant || op.kernels <= 0) return flops * r.s_per_flop[rate] / scale;
  return flops / (r.peak_flops[rate] * scale * r.compute.at(flops / op.kernels));
}

double RooflineCostModel::quantisation_seconds(const Operator& op) const {
  if (op.quant_elements <= 0 || !is_gemm(op.kind)) return 0.0;
  const QuantisedGemm& q = gemm_formats_[static_cast<std::size_t>(op.format)];
  if (!q.present) return 0.0;
  return op.kernels * q.overhead_s + op.quant_elements * q.s_per_element;
}

double RooflineCostModel::memory_seconds(const Operator& op) const {
  const Rates& r = rates_of(op);
  if (r.memory_constant || op.kernels <= 0) return op.bytes * r.s_per_byte;
  return op.bytes / (r.bandwidth * r.memory.at(op.bytes / op.kernels));
}

double RooflineCostModel::seconds(const Operator& op) const {
  const Rates& r = rates_of(op);
  if (op.kernels == 0 || !r.chip_operator) return 0.0;
  if (op.sparse && sparse_) {
    return op.kernels * r.overhead_s + std::max(compute_seconds(op), memory_seconds(op)) +
           op.m * sparse_kernel_heads(op.n) * sparse_query_s_;
  }
  if (r.grouped && op.kv_bytes > 0) {
    for (const MoeFormat& f : moe_) {
      if (f.rate == op.rate && std::abs(f.weight_bytes - op.kv_bytes) < 1e-9) {
        return moe_experts_seconds(op, f.model, f.peak, r.bandwidth);
      }
    }
  }
  if (r.compute_constant && r.memory_constant && !r.padded && !r.waves && !r.grouped && !(op.quant_elements > 0) &&
      !op.selects) {
    // the common case, kept short: it runs per iteration
    return op.kernels * r.overhead_s +
           std::max(op.flops * r.s_per_flop[static_cast<std::size_t>(op.rate)], op.bytes * r.s_per_byte);
  }
  // A DSA indexer operator adds its top-k selection after the scoring kernel.
  return op.kernels * r.overhead_s + std::max(compute_seconds(op), memory_seconds(op)) + quantisation_seconds(op) +
         (op.selects ? selection_seconds(op) : 0.0);
}

std::optional<CostModel::LinearForm> RooflineCostModel::linear_form(OpKind kind, ComputeRate rate) const {
  const Rates& r = rates_[static_cast<std::size_t>(kind)];
  if (!r.chip_operator) return LinearForm{};  // costs nothing here
  if (!r.compute_constant || !r.memory_constant || r.padded || r.waves || r.grouped) return std::nullopt;
  // The indexer's operators add their top-k selection (Operator::selects), not linear.
  if (kind == OpKind::kIndexer) return std::nullopt;
  // Sparse prefill kernels and mHC kernels of these kinds take other rates (and a time per query).
  // MLA's prefill kernels take other rates than GQA's where either has a curve of its own.
  if ((kind == OpKind::kAttentionPrefill && (sparse_ || latent_prefill_)) || (kind == OpKind::kElementwise && mhc_)) {
    return std::nullopt;
  }
  // Quantised GEMM formats add a pass the (kind, rate) form cannot tell apart.
  if (is_gemm(kind) &&
      std::any_of(gemm_formats_.begin(), gemm_formats_.end(), [](const QuantisedGemm& q) { return q.present; })) {
    return std::nullopt;
  }
  return LinearForm{r.overhead_s, r.s_per_flop[static_cast<std::size_t>(rate)], r.s_per_byte};
}

std::string_view log_grid_field_name(MeasuredLogGrid::Field f) {
  switch (f) {
    case MeasuredLogGrid::Field::kM: return "m";
    case MeasuredLogGrid::Field::kN: return "n";
    case MeasuredLogGrid::Field::kK: return "k";
    case MeasuredLogGrid::Field::kBatch: return "batch";
    case MeasuredLogGrid::Field::kContext: return "context";
    case MeasuredLogGrid::Field::kTokens: return "tokens";
    case MeasuredLogGrid::Field::kKvLen: return "kv_len";
    case MeasuredLogGrid::Field::kHeads: return "heads";
    case MeasuredLogGrid::Field::kKvHeads: return "kv_heads";
    case MeasuredLogGrid::Field::kHeadDim: return "head_dim";
    case MeasuredLogGrid::Field::kWindow: return "window";
    case MeasuredLogGrid::Field::kPrefix: return "prefix";
    case MeasuredLogGrid::Field::kKvBytes: return "kv_bytes";
  }
  return "?";
}

namespace {
// log_grid_field_value(), inline where a lookup runs per decode step (TableCostModel::bound_seconds).
[[gnu::always_inline]] inline double field_value(MeasuredLogGrid::Field f, const Operator& op) {
  using F = MeasuredLogGrid::Field;
  const double per_seq = op.batch > 0 ? 1.0 / op.batch : 0.0;
  switch (f) {
    case F::kM: return op.m;
    case F::kN: return op.n;
    case F::kK: return op.k;
    case F::kBatch: return op.batch;
    case F::kContext:
    case F::kKvLen: return op.context * per_seq;
    case F::kTokens: return op.m * per_seq;
    case F::kHeads: return op.n;
    case F::kKvHeads: return op.kv_heads;
    case F::kHeadDim: return op.k;
    case F::kWindow: return op.window;
    case F::kPrefix: return std::max(0.0, op.context - op.m) * per_seq;
    case F::kKvBytes: return op.kv_bytes;
  }
  return 0;
}
}  // namespace

double log_grid_field_value(MeasuredLogGrid::Field f, const Operator& op) { return field_value(f, op); }

std::optional<MeasuredLogGrid::Field> parse_log_grid_field(std::string_view name) {
  using F = MeasuredLogGrid::Field;
  for (auto f : {F::kM, F::kN, F::kK, F::kBatch, F::kContext, F::kTokens, F::kKvLen, F::kHeads, F::kKvHeads,
                 F::kHeadDim, F::kWindow, F::kPrefix, F::kKvBytes}) {
    if (log_grid_field_name(f) == name) return f;
  }
  return std::nullopt;
}

namespace {
// Where u (= ln(1 + x)) falls on an axis of more than one knot with these ln(1 + knot) values:
// the segment [lo, lo + 1] and the fraction f along it (beyond an end: the end segment, f outside
// [0, 1]); false when u lies beyond the ends (with a little slack for rounding) of an axis that
// does not extrapolate. On entry `lo` is a guess (a segment, < u.size() - 1: a nearby point's),
// taken when x lies in it; the answer does not depend on it.
bool log_axis_bracket(const std::vector<double>& u, bool extrapolate, double x, std::size_t& lo, double& f) {
  const double slack = 1e-9 * (1 + std::fabs(u.back()));
  if ((x < u.front() - slack || x > u.back() + slack) && !extrapolate) return false;
  if (x >= u.back()) {
    lo = u.size() - 2;
  } else if (x <= u.front()) {
    lo = 0;
  } else if (!(u[lo] <= x && x < u[lo + 1])) {
    // The last knot at or below x (knots ascend: upper_bound's first knot above x, less one).
    lo = static_cast<std::size_t>(std::upper_bound(u.begin(), u.end(), x) - u.begin()) - 1;
  }
  f = (x - u[lo]) / (u[lo + 1] - u[lo]);
  return true;
}

// Splits each corner of `out` along an axis of this stride at (lo, f).
void log_axis_split(LogGridCorners& out, std::size_t lo, double f, std::size_t stride) {
  const int n = out.count;
  for (int i = 0; i < n; ++i) {
    // k = n + i added in size_t: 0 <= i < n and n + i < 16 (the cells), so the same value.
    const auto j = static_cast<std::size_t>(i), k = static_cast<std::size_t>(n) + j;
    out.cells[k] = out.cells[j] + (lo + 1) * stride;
    out.weights[k] = out.weights[j] * f;
    out.cells[j] += lo * stride;
    out.weights[j] *= 1 - f;
  }
  out.count = 2 * n;
}

// log_grid_corners() of a point given as u = ln(1 + max(0, x)) on each axis with more than one
// knot (the others are not read): the corners and weights, the same arithmetic in the same order.
bool log_grid_corners_at(std::span<const std::vector<double>> log_knots, std::span<const char> extrapolate,
                         const double* u_point, LogGridCorners& out) {
  out.count = 1;
  out.cells[0] = 0;
  out.weights[0] = 1.0;
  std::size_t stride = 1;
  for (std::size_t a = log_knots.size(); a-- > 0;) {
    const std::vector<double>& u = log_knots[a];
    if (u.size() > 1) {
      std::size_t lo = 0;
      double f = 0;
      if (!log_axis_bracket(u, extrapolate[a] != 0, u_point[a], lo, f)) return false;
      log_axis_split(out, lo, f, stride);
    }
    stride *= std::max<std::size_t>(1, u.size());
  }
  return true;
}

double log_axis_value(double x) { return std::log1p(std::max(0.0, x)); }
}  // namespace

bool log_grid_corners(std::span<const std::vector<double>> log_knots, std::span<const char> extrapolate,
                      std::span<const double> point, LogGridCorners& out) {
  std::array<double, MeasuredLogGrid::kMaxAxes> u{};
  for (std::size_t a = 0; a < log_knots.size() && a < u.size(); ++a) {
    if (log_knots[a].size() > 1) u[a] = log_axis_value(point[a]);
  }
  return log_grid_corners_at(log_knots, extrapolate, u.data(), out);
}

PreparedTables::PreparedTables(MeasuredTables tables) : tables_(std::move(tables)) {
  for (std::size_t i = 0; i < tables_.log_grids.size(); ++i) {
    const MeasuredLogGrid& g = tables_.log_grids[i];
    std::vector<std::vector<double>> u;
    std::vector<char> x;
    for (const auto& axis : g.axes) {
      std::vector<double> v;
      for (double k : axis.knots) v.push_back(std::log1p(k));
      u.push_back(std::move(v));
      x.push_back(axis.extrapolate ? 1 : 0);
    }
    log_knots_.push_back(std::move(u));
    extrapolate_.push_back(std::move(x));
    for (std::size_t k = 0; k < kOpKinds; ++k) {
      if (!same_class(g.kind, static_cast<OpKind>(k))) continue;
      const std::size_t slot = k * kComputeRates + static_cast<std::size_t>(g.rate);
      candidates_[slot].push_back(static_cast<std::uint32_t>(i));
      for (const auto& [field, value] : g.match)
        match_fields_[slot] |= static_cast<std::uint16_t>(1u << static_cast<unsigned>(field));
    }
  }
}

std::shared_ptr<const PreparedTables> prepare_tables(MeasuredTables tables) {
  return std::make_shared<const PreparedTables>(std::move(tables));
}

TableCostModel::TableCostModel(const ChipSpec& chip, std::shared_ptr<const PreparedTables> tables)
    : roofline_(chip), prepared_(std::move(tables)) {
  grids_.resize(prepared_->tables().log_grids.size());
}

TableCostModel::TableCostModel(const ChipSpec& chip, MeasuredTables tables)
    : TableCostModel(chip, prepare_tables(std::move(tables))) {}

namespace {
// Whether a grid field reads the operator's context sum (log_grid_field_value).
bool reads_context(MeasuredLogGrid::Field f) {
  using F = MeasuredLogGrid::Field;
  return f == F::kContext || f == F::kKvLen || f == F::kPrefix;
}
}  // namespace

int TableCostModel::answering_grid(const Operator& op, bool* context_decides) const {
  // The grids of the operator's kind class and rate, in table order: the first that applies
  // answers, as a scan over all of them would find it.
  const auto kind = static_cast<std::size_t>(op.kind), rate = static_cast<std::size_t>(op.rate);
  if (kind >= kOpKinds || rate >= kComputeRates) return -1;
  // The scan reads the operator's flags, kv_bytes and its conditions' fields: read as the last
  // operator of this kind and rate (equal doubles: a condition reads only |value - match|), the
  // same grid answers, and the same conditions read the context.
  GridChoice& last = choices_[kind * kComputeRates + rate];
  const unsigned fields = prepared_->match_fields(kind, rate);
  std::array<double, MeasuredLogGrid::kFields> values{};
  bool same = last.valid && last.format == op.format && last.kv_bytes == op.kv_bytes && last.latent == op.latent &&
              last.gated == op.gated && last.recurrent == op.recurrent;
  for (unsigned m = fields; m != 0; m &= m - 1) {
    const auto f = static_cast<std::size_t>(std::countr_zero(m));
    values[f] = field_value(static_cast<MeasuredLogGrid::Field>(f), op);
    same = same && values[f] == last.values[f];
  }
  if (same) {
    if (context_decides != nullptr && last.context_decides) *context_decides = true;
    return last.grid;
  }
  last = GridChoice{true, op.format, op.latent, op.gated, op.recurrent, op.kv_bytes, values, -1, false};
  for (const std::uint32_t i : prepared_->candidates(kind, rate)) {
    const MeasuredLogGrid& g = tables().log_grids[i];
    if (is_gemm(g.kind) && g.format != op.format) continue;
    if (g.kv_bytes > 0 && op.kv_bytes != g.kv_bytes) continue;
    // MoE grids (kind kMoeExperts, calibrate/moe_table.h) key on the routed experts' fields: m =
    // token-expert pairs on the busiest rank, batch = experts with a token there, n = expert
    // columns per chip, k = hidden, and kv_bytes = bytes per stored weight element (bf16 2, fp8 1,
    // fp8_block 1.0002, MXFP4 0.53; models::layer_token_ops sets them). The router GEMM, kind
    // kMoeExperts too, has kv_bytes 0: no MoE grid (kv_bytes > 0, the check above) answers it.
    if (!is_gemm(g.kind) && g.kind != OpKind::kMoeExperts && (g.latent != op.latent || g.recurrent != op.recurrent)) {
      continue;
    }
    if (g.kind == OpKind::kMoeExperts && !op.gated) continue;  // the tables time SwiGLU experts
    bool applies = true;
    for (const auto& [field, value] : g.match) {
      last.context_decides = last.context_decides || reads_context(field);
      // Shape fields are whole numbers (within rounding); bytes per KV element match exactly.
      const double tolerance = field == MeasuredLogGrid::Field::kKvBytes ? 0.0 : 0.5;
      applies = applies && std::fabs(values[static_cast<std::size_t>(field)] - value) <= tolerance;
    }
    if (applies) {
      last.grid = static_cast<int>(i);
      break;
    }
  }
  if (context_decides != nullptr && last.context_decides) *context_decides = true;
  return last.grid;
}

[[gnu::always_inline]] inline const TableCostModel::AxisPoint& TableCostModel::axis_point(std::size_t i, std::size_t a,
                                                                                          double x,
                                                                                          GridState& state) const {
  AxisPoint& p = state.axes[a][(std::bit_cast<std::uint64_t>(x) * 0x9e3779b97f4a7c15u) >> (64 - kAxisPointBits)];
  if (!(x == p.x)) {
    // The slot's last segment is the guess (log_axis_bracket's answer does not depend on it).
    p.x = x;
    p.inside =
        log_axis_bracket(prepared_->log_knots(i)[a], prepared_->extrapolate(i)[a] != 0, log_axis_value(x), p.lo, p.f);
  }
  return p;
}

bool TableCostModel::grid_value(std::size_t i, const std::array<double, MeasuredLogGrid::kMaxAxes>& x, GridState& state,
                                double& value) const {
  // log_grid_corners_at() with each axis's bracket from axis_point(), its splits on locals: the
  // same cells and the same products in the same order.
  const MeasuredLogGrid& g = tables().log_grids[i];
  const std::span<const std::vector<double>> knots = prepared_->log_knots(i);
  std::array<double, 16> w;
  std::array<std::size_t, 16> cells;
  w[0] = 1.0;
  cells[0] = 0;
  std::size_t n = 1, stride = 1;
  for (std::size_t a = knots.size(); a-- > 0;) {
    const std::size_t size = knots[a].size();
    if (size > 1) {
      const AxisPoint& p = axis_point(i, a, x[a], state);
      if (!p.inside) return false;
      const double f = p.f, below = 1 - f;
      const std::size_t lo = p.lo * stride, hi = (p.lo + 1) * stride;
      for (std::size_t j = 0; j < n; ++j) {
        cells[n + j] = cells[j] + hi;
        w[n + j] = w[j] * f;
        cells[j] += lo;
        w[j] *= below;
      }
      n *= 2;
    }
    stride *= std::max<std::size_t>(1, size);
  }
  double v = 0;
  for (std::size_t k = 0; k < n; ++k) v += w[k] * g.log_seconds[cells[k]];
  value = std::exp(v);
  return true;
}

bool TableCostModel::log_grid_lookup(const Operator& op, double& out) const {
  const int found = answering_grid(op, nullptr);
  if (found < 0) return false;
  const auto i = static_cast<std::size_t>(found);
  const MeasuredLogGrid& g = tables().log_grids[i];
  const std::span<const std::vector<double>> knots = prepared_->log_knots(i);
  // The field values the axes read, and their memo slot (Fibonacci hashing of their bits).
  std::array<double, MeasuredLogGrid::kMaxAxes> x{};
  std::array<std::uint64_t, MeasuredLogGrid::kMaxAxes> bits{};
  std::uint64_t h = 0;
  for (std::size_t a = 0; a < g.axes.size(); ++a) {
    if (knots[a].size() <= 1) continue;
    x[a] = field_value(g.axes[a].field, op);
    bits[a] = std::bit_cast<std::uint64_t>(x[a]);
    h = (h ^ bits[a]) * 0x9e3779b97f4a7c15u;
  }
  GridState& state = grids_[i];
  if (state.answers.empty()) state.answers.resize(std::size_t{1} << kAnswerBits);
  Answer& memo = state.answers[h >> (64 - kAnswerBits)];
  if (memo.state == 0 || memo.x[0] != bits[0] || memo.x[1] != bits[1] || memo.x[2] != bits[2] || memo.x[3] != bits[3]) {
    memo.x = bits;
    memo.state = grid_value(i, x, state, memo.value) ? 2 : 1;
  }
  if (memo.state != 2) return false;
  out = g.roofline_factor ? roofline_.seconds(op) * memo.value : memo.value;
  return true;
}

void TableCostModel::bind_context(const Operator& op, ContextBinding& out) const {
  // Bound only where seconds(op) is a log grid's answer for every context: an operator that
  // lookup() sends to lookup_one() (not a recurrent one, no GEMM list), a grid chosen by
  // conditions that do not read the context, and the axes that do not read it inside their ends.
  out = ContextBinding{};
  if (op.kernels == 0 || op.recurrent != Recurrence::kNone || op.gemm_count != 0) return;
  bool context_decides = false;
  const int found = answering_grid(op, &context_decides);
  if (found < 0 || context_decides) return;
  const auto i = static_cast<std::size_t>(found);
  const MeasuredLogGrid& g = tables().log_grids[i];
  const std::span<const std::vector<double>> knots = prepared_->log_knots(i);
  GridState& state = grids_[i];
  for (std::size_t a = 0; a < g.axes.size(); ++a) {
    if (knots[a].size() <= 1) continue;
    ContextBinding::Axis& axis = out.axes[a];
    axis.varies = reads_context(g.axes[a].field);
    if (axis.varies) continue;
    const AxisPoint& p = axis_point(i, a, field_value(g.axes[a].field, op), state);
    if (!p.inside) {
      out = ContextBinding{};
      return;
    }
    axis.lo = p.lo;
    axis.f = p.f;
  }
  // Fold in the axes log_grid_corners_at splits before the first that varies (it goes from the
  // last axis to the first).
  out.corners.count = 1;
  out.corners.weights[0] = 1.0;
  std::size_t a = g.axes.size();
  for (; a > 0 && !out.axes[a - 1].varies; --a) {
    const std::size_t size = knots[a - 1].size();
    if (size > 1) log_axis_split(out.corners, out.axes[a - 1].lo, out.axes[a - 1].f, out.stride);
    out.stride *= std::max<std::size_t>(1, size);
  }
  out.next_axis = static_cast<int>(a);
  out.grid = found;
}

double TableCostModel::bound_seconds(const Operator& op, ContextBinding& b) const {
  if (b.grid < 0) return seconds(op);
  // log_grid_lookup() from the folded corners on: the same splits in the same order. The varying
  // axes are bracketed first (the segment of the last step is the guess: contexts move by a token
  // per step); the corner cells, and the log seconds there, are recomputed only when a segment
  // moved. The weights are split as log_grid_corners_at() splits them, the same products.
  const auto i = static_cast<std::size_t>(b.grid);
  const MeasuredLogGrid& g = tables().log_grids[i];
  const std::span<const std::vector<double>> knots = prepared_->log_knots(i);
  const auto next = static_cast<std::size_t>(b.next_axis);
  bool moved = b.count == 0;
  for (std::size_t a = next; a-- > 0;) {
    ContextBinding::Axis& axis = b.axes[a];
    if (!axis.varies || knots[a].size() <= 1) continue;
    const std::size_t was = axis.lo;
    const double x = log_axis_value(field_value(g.axes[a].field, op));
    // Mostly in the last step's segment, inside the axis's ends: what log_axis_bracket() answers
    // there (the same lo and f), without the call.
    const std::vector<double>& u = knots[a];
    if (u.front() < x && u[was] <= x && x < u[was + 1]) {
      axis.f = (x - u[was]) / (u[was + 1] - u[was]);
      continue;
    }
    // Beyond a fixed end the grid misses: seconds() takes the tables' other ways.
    if (!log_axis_bracket(u, prepared_->extrapolate(i)[a] != 0, x, axis.lo, axis.f)) return seconds(op);
    moved = moved || axis.lo != was;
  }
  if (moved) {
    LogGridCorners c;
    c.count = b.corners.count;
    for (std::size_t k = 0; k < static_cast<std::size_t>(c.count); ++k) c.cells[k] = b.corners.cells[k];
    std::size_t stride = b.stride;
    for (std::size_t a = next; a-- > 0;) {
      const std::size_t size = knots[a].size();
      if (size > 1) log_axis_split(c, b.axes[a].lo, 0.0, stride);
      stride *= std::max<std::size_t>(1, size);
    }
    b.count = c.count;
    for (std::size_t k = 0; k < static_cast<std::size_t>(c.count); ++k) b.log_seconds[k] = g.log_seconds[c.cells[k]];
  }
  std::array<double, 16> w;
  auto n = static_cast<std::size_t>(b.corners.count);
  for (std::size_t k = 0; k < n; ++k) w[k] = b.corners.weights[k];
  for (std::size_t a = next; a-- > 0;) {
    if (knots[a].size() <= 1) continue;
    const double f = b.axes[a].f;
    for (std::size_t j = 0; j < n; ++j) {
      w[n + j] = w[j] * f;
      w[j] *= 1 - f;
    }
    n *= 2;
  }
  double v = 0;
  for (std::size_t k = 0; k < n; ++k) v += w[k] * b.log_seconds[k];
  ++hits_;
  return g.roofline_factor ? roofline_.seconds(op) * std::exp(v) : std::exp(v);
}

bool TableCostModel::lookup(const Operator& op, double& out) const {
  // Gated DeltaNet's recurrent kernels: only a log grid of their own (MeasuredLogGrid::recurrent)
  // answers; an attention series or grid of the same kind, heads and head size would answer for a
  // kernel it never ran.
  if (op.recurrent != Recurrence::kNone) return !tables().log_grids.empty() && log_grid_lookup(op, out);
  // Sparse MLA prefill kernels: no dense attention table describes them (the roofline's
  // attention_sparse curve does, where a profile fitted one).
  if (op.sparse) return false;
  if (op.gemm_count == 0) return lookup_one(op, out);
  // An operator that lists its GEMMs (operators.h, Operator::gemms) costs the sum of their
  // measured times, each at its own shape with its own launch: a table measures one kernel, and
  // scaling one GEMM's time by the FLOPs of several would multiply its fixed cost with them (MLA's
  // absorbed matmuls: by the heads). A batched GEMM of g groups of [m x k] x [k x n] runs the
  // tiles, FLOPs and weight reads of one [m x k] x [k x g n] GEMM in one launch, and is costed as
  // that GEMM (its g m k inputs instead of m k are not counted). Each is looked up as a GEMM (the
  // MoE router, kind kMoeExperts, too), its FLOPs 2 m g n k and its bytes the operator's in
  // proportion; when one misses, the roofline costs the whole operator.
  double work = 0;
  for (int i = 0; i < op.gemm_count; ++i) {
    const Operator::Gemm& g = op.gemms[static_cast<std::size_t>(i)];
    work += g.groups * g.n * g.k;
  }
  double total = 0;
  for (int i = 0; i < op.gemm_count; ++i) {
    const Operator::Gemm& g = op.gemms[static_cast<std::size_t>(i)];
    Operator one = op;
    one.kind = OpKind::kGemmQkv;
    one.kernels = 1;
    one.n = g.groups * g.n;
    one.k = g.k;
    one.flops = 2.0 * op.m * one.n * one.k;
    one.bytes = work > 0 ? op.bytes * g.groups * g.n * g.k / work : op.bytes;
    one.gemm_count = 0;
    double s = 0;
    if (!lookup_one(one, s)) return false;
    total += s;
  }
  out = total;
  return true;
}

bool TableCostModel::lookup_one(const Operator& op, double& out) const {
  if (!tables().log_grids.empty() && log_grid_lookup(op, out)) return true;
  for (const MeasuredSeries& s : tables().series) {
    if (!same_class(s.kind, op.kind) || s.rate != op.rate || s.n != op.n || s.k != op.k) continue;
    const int i = bracket(s.m, op.m);
    if (i < 0) return false;
    const double w = lerp_weight(s.m, i, op.m);
    const auto u = static_cast<std::size_t>(i);
    out = w > 0 ? s.seconds[u] + w * (s.seconds[u + 1] - s.seconds[u]) : s.seconds[u];
    return true;
  }
  for (const MeasuredGrid& g : tables().grids) {
    if (g.kind != op.kind || g.n != op.n || g.k != op.k || op.batch <= 0) continue;
    const double ctx = op.context / op.batch;
    const int i = bracket(g.batch, op.batch), j = bracket(g.context, ctx);
    if (i < 0 || j < 0) return false;
    const double wi = lerp_weight(g.batch, i, op.batch), wj = lerp_weight(g.context, j, ctx);
    const std::size_t cols = g.context.size();
    auto at = [&](int a, int b) { return g.seconds[static_cast<std::size_t>(a) * cols + static_cast<std::size_t>(b)]; };
    const int i1 = wi > 0 ? i + 1 : i, j1 = wj > 0 ? j + 1 : j;
    const double v00 = at(i, j), v01 = at(i, j1), v10 = at(i1, j), v11 = at(i1, j1);
    if (std::isnan(v00) || std::isnan(v01) || std::isnan(v10) || std::isnan(v11)) return false;
    out = (1 - wi) * ((1 - wj) * v00 + wj * v01) + wi * ((1 - wj) * v10 + wj * v11);
    return true;
  }
  return false;
}

double TableCostModel::seconds(const Operator& op) const {
  if (op.kernels == 0) return 0.0;
  double s = 0;
  if (lookup(op, s)) {
    ++hits_;
    return s;
  }
  ++fallbacks_;
  return roofline_.seconds(op);
}

std::unique_ptr<CostModel> make_cost_model(const CostModelConfig& config, const ChipSpec& chip) {
  if (const auto* t = std::get_if<TableConfig>(&config)) {
    return std::make_unique<TableCostModel>(chip, t->tables);
  }
  return std::make_unique<RooflineCostModel>(chip);
}

double encode_seconds(const VisionSpec& v, const std::vector<ImageSize>& images, int tp, const CostModel& cost) {
  std::vector<std::int64_t> patches;
  patches.reserve(images.size());
  for (const ImageSize& i : images) patches.push_back(v.resize(i.width, i.height).patches);
  std::vector<Operator> ops;
  vision_encoder_ops(v, patches, tp, ops);
  double s = 0;
  for (const Operator& op : ops) s += cost.seconds(op);
  return s;
}

std::vector<std::string> validate_tables(const MeasuredTables& t) {
  std::vector<std::string> out;
  auto ascending = [](const std::vector<double>& v) {
    for (std::size_t i = 1; i < v.size(); ++i) {
      if (!(v[i] > v[i - 1])) return false;
    }
    return !v.empty();
  };
  for (std::size_t i = 0; i < t.series.size(); ++i) {
    const MeasuredSeries& s = t.series[i];
    const std::string name = "series " + std::to_string(i + 1) + " (" + std::string(op_kind_name(s.kind)) + ")";
    if (!ascending(s.m)) out.push_back(name + ": m must be strictly ascending");
    if (s.m.size() != s.seconds.size()) out.push_back(name + ": one time per m");
    for (double v : s.seconds) {
      if (!(v >= 0)) {
        out.push_back(name + ": times must be >= 0");
        break;
      }
    }
  }
  for (std::size_t i = 0; i < t.grids.size(); ++i) {
    const MeasuredGrid& g = t.grids[i];
    const std::string name = "grid " + std::to_string(i + 1) + " (" + std::string(op_kind_name(g.kind)) + ")";
    if (!ascending(g.batch) || !ascending(g.context)) {
      out.push_back(name + ": batch and context axes must be strictly ascending");
    }
    if (g.seconds.size() != g.batch.size() * g.context.size()) {
      out.push_back(name + ": needs batch x context times");
    }
  }
  for (std::size_t i = 0; i < t.log_grids.size(); ++i) {
    const MeasuredLogGrid& g = t.log_grids[i];
    const std::string name = "log grid " + std::to_string(i + 1) + " (" + std::string(op_kind_name(g.kind)) + ")";
    if (g.axes.empty() || g.axes.size() > MeasuredLogGrid::kMaxAxes) {
      out.push_back(name + ": needs 1 to 4 axes");
      continue;
    }
    std::size_t cells = 1;
    for (const auto& a : g.axes) {
      if (!ascending(a.knots) || a.knots.front() < 0) {
        out.push_back(name + ": axis " + std::string(log_grid_field_name(a.field)) +
                      " needs non-negative, strictly ascending knots");
      }
      cells *= std::max<std::size_t>(1, a.knots.size());
    }
    if (g.log_seconds.size() != cells) {
      out.push_back(name + ": needs " + std::to_string(cells) + " values (the product of the axis sizes), has " +
                    std::to_string(g.log_seconds.size()));
    }
    for (double v : g.log_seconds) {
      if (!std::isfinite(v)) {
        out.push_back(name + ": values must be finite logarithms of seconds");
        break;
      }
    }
  }
  return out;
}

}  // namespace servesim::models
