// Operator cost models: seconds for one operator on one chip.
//
// A CostModel is a policy (one-level virtual, built by make_cost_model from a variant config).
// The simulator calls it when it fills its memo tables (per token count) and for the few
// attention-like operators of each iteration; everything else is cached (sim/cluster/iteration_cost).
//
// RooflineCostModel (Williams, Waterman & Patterson, "Roofline", CACM 2009, with fitted
// efficiencies):
//   time = kernels x overhead + max( FLOPs / (peak[rate] x eff_c(FLOPs / kernel) x format_compute[rate]),
//                                    bytes / (HBM bandwidth x eff_m(bytes / kernel)) )
// where the efficiency curves, overheads and format factors are the chip's (models/chip_spec.h),
// chosen per operator kind in one switch (cost_model.cpp). A GEMM whose format has an
// Efficiency::gemm_formats entry adds its activation quantisation pass,
//   kernels x overhead[format] + quant_elements x quant_bytes[format] / HBM bandwidth,
// and its compute side takes that entry's factor instead of format_compute[rate]. A rate the chip lacks is costed at
// the bf16 peak (the loader rejects formats the chip lacks unless emulation was asked for).
//
// TableCostModel interpolates measurements and falls back to the roofline outside them:
//   series     GEMM-like operators (every GEMM kind, and the MoE experts): seconds over m for one
//              (kind class, rate, n, k), piecewise linear in m, exact match on the rest;
//   grids      attention-like operators: seconds over (batch, mean context) for one (kind, n
//              heads, k head dim), bilinear, exact match on the rest;
//   log grids  any kind at one rate: seconds over several shape fields (GEMMs: m, n, k;
//              attention: batch, tokens or kv_len, heads, kv_heads under exact conditions),
//              log-multilinear, so that a shape between measured ones interpolates (what a
//              calibration profile ships for dense sweeps).
//              A log grid may instead hold a factor over the roofline (roofline_factor): then
//              it answers roofline(op) x factor(fields), and the roofline alone outside it.
// An operator running several GEMMs (Operator::gemms) is looked up GEMM by GEMM, each with its
// own launch, and the times add; a batched GEMM is looked up as the one GEMM of its groups'
// columns.
// The tables are plain data a calibration profile fills (calibrate/); units are seconds and the
// operator's own shape fields (models/operators.h, Operator).
// Ignored: operator overlap and launch pipelining (each operator's time adds), cache effects
// between operators.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "models/chip_spec.h"
#include "models/operators.h"

namespace servesim::models {

// The tile- (and wave-) padded FLOPs of a GEMM-like operator, the work its compute time follows:
// a kernel computes ceil(m / Tm) x ceil(n / Tn) output tiles of Tm x Tn (Tm = t.small_m_tile when
// set and m <= it, else t.tile; Tn = t.tile), each 2 Tm Tn k FLOPs, so
//   padded = flops x ceil(m / Tm) Tm ceil(n / Tn) Tn / (m n),
// and with t.waves the tiles run in ceil(tiles / sms) whole waves over the SMs:
//   padded x ceil(tiles / sms) sms / tiles.
// flops (not 2 m n k) is scaled, so a fused operator keeps its own FLOPs count. An operator that
// lists several GEMMs (Operator::gemms) pads each at its own n (a batched one per group, its
// groups' tiles sharing the waves), its FLOPs split over them in proportion to their groups x n x
// k. Returns op.flops when t.tile is 0 or the operator has no (m, n, k).
double padded_gemm_flops(const Operator& op, const Efficiency::GemmTiling& t, int sms);

// An Operator::query_blocks kernel's FLOPs over its useful ones: its ceil(m n / 128) blocks run
// in ceil(blocks / sms) whole waves over the chip's SMs, ceil(blocks / sms) sms / blocks (1
// where the SMs are unknown, sms 0, or the operator scores no queries).
double query_wave_factor(const Operator& op, int sms);

// The top-k selection after a DSA indexer operator (Operator::selects), as SGLang's
// fast_topk_transform_fused runs it: one block per query row with 128 KiB of shared memory, so
// one row per SM at a time, m rows in ceil(m / sms) waves. A wave costs `wave_s` (the radix
// passes and writing top_k indices) and its rows' logit scan, each SM at its share of HBM
// bandwidth x the efficiency at the kernel's logit bytes:
//   kernels x overhead + waves x wave_s + L x waves x sms / m / (HBM x efficiency(L / kernels))
// with L = 4 bytes x flops / (2 n k) logits; where the SMs are unknown (sms 0), no waves: L /
// (HBM x efficiency). 0 for an operator without rows or logits.
struct SelectionModel {
  EfficiencyCurve efficiency;
  double overhead_s = 0, wave_s = 0, bandwidth = 0;
  int sms = 0;
};
double selection_seconds(const Operator& op, const SelectionModel& s);
// Its parts: the logit bytes it reads, 4 x flops / (2 n k) (0 without n and k), and its waves of
// rows, ceil(m / sms) (0 where the SMs are unknown).
double selection_logit_bytes(const Operator& op);
double selection_waves(const Operator& op, int sms);
// The selection model of a chip: Efficiency::topk, topk_overhead, topk_wave where fitted, else
// the elementwise curve and overhead and no time per wave.
SelectionModel selection_model(const ChipSpec& chip);

// Seconds of a routed-experts operator (kind kMoeExperts with kv_bytes, tokens and padded_m set,
// models::layer_token_ops) under one format's grouped-GEMM model e:
//   overhead + max(F / (peak[rate] x e.compute(F / A)), W / (HBM x e.memory(W / A)))
//            + (e.token_bytes x tokens + e.pair_bytes x m) x k / HBM
// with A = batch (experts with a token), F = op.flops x padded_m / m (the FLOPs of each expert's
// rows padded to whole tiles), W = A x 3 n k x kv_bytes (the active experts' gate, up and down
// weights; 2 n k for plain experts, Operator::gated). The last term is the module's routing, permutation and finalize
// traffic: every token and every pair moves a row of k (hidden) elements. Derivation and the fit: models/README.md,
// calibrate/README.md.
double moe_experts_seconds(const Operator& op, const Efficiency::MoeExperts& e, double peak_flops,
                           double hbm_bytes_per_s);
// Its work: A, F and W above, and the curves' axes F / A and W / A (what a fit spans its knots
// over).
struct MoeExpertsWork {
  double active = 1, flops = 0, weights = 0;
  double flops_per_expert() const { return flops / active; }
  double weights_per_expert() const { return weights / active; }
};
MoeExpertsWork moe_experts_work(const Operator& op);

// The corner cells and weights of a point on a log grid (log_grid_corners, below).
struct LogGridCorners {
  std::array<std::size_t, 16> cells{};
  std::array<double, 16> weights{};
  int count = 0;
};

// What a cost model reads once for a run of operators that differ only in their context sum and
// what follows it (flops, bytes, quant_elements): a decode run's attention, each step one more KV
// token per sequence (IterationCostModel::decode_run). CostModel::bind_context() fills it from
// the run's first operator; bound_seconds(op, binding) then gives seconds(op), bit for bit, for
// every operator of the run. TableCostModel keeps the log grid that answers and where the axes
// that do not read the context fall (their corners folded in, in log_grid_corners's order), so a
// step only brackets its context axes; unbound (grid < 0), bound_seconds() is seconds().
struct ContextBinding {
  struct Axis {
    bool varies = false;  // reads the context (kContext, kKvLen, kPrefix): bracketed per operator
    std::size_t lo = 0;   // its bracket and weight (varying: the last operator's)
    double f = 0;
  };
  int grid = -1;      // the answering log grid; -1: unbound
  int next_axis = 0;  // the axes from next_axis up are folded into `corners`
  std::size_t stride = 1;
  std::array<Axis, 4> axes{};  // MeasuredLogGrid::kMaxAxes (declared below)
  LogGridCorners corners;
  // The last operator's corner cells depend only on the varying axes' segments: while those stay,
  // a step recomputes only the weights. `log_seconds` holds the grid's log seconds at those cells, in
  // corner order; `count` of them, 0 until the first step.
  int count = 0;
  std::array<double, 16> log_seconds{};
};

class CostModel {
 public:
  // kernels x overhead_s + max(FLOPs x s_per_flop, bytes x s_per_byte).
  struct LinearForm {
    double overhead_s = 0, s_per_flop = 0, s_per_byte = 0;
  };
  virtual ~CostModel() = default;
  virtual double seconds(const Operator& op) const = 0;
  virtual std::string_view name() const = 0;
  // When this model costs every operator of `kind` at `rate` exactly by a LinearForm, whatever its
  // size and shape, returns it (callers on a hot path may then evaluate it themselves); nullopt
  // otherwise.
  virtual std::optional<LinearForm> linear_form(OpKind kind, ComputeRate rate) const {
    (void)kind;
    (void)rate;
    return std::nullopt;
  }
  // ContextBinding (above): bind to `op`, then cost operators that differ from it only in
  // context, flops, bytes and quant_elements. The defaults bind nothing and call seconds().
  virtual void bind_context(const Operator& op, ContextBinding& out) const {
    (void)op;
    out = ContextBinding{};
  }
  // (The binding keeps where the last context fell, as a guess for the next: non-const.)
  virtual double bound_seconds(const Operator& op, ContextBinding& binding) const {
    (void)binding;
    return seconds(op);
  }
};

class RooflineCostModel final : public CostModel {
 public:
  explicit RooflineCostModel(const ChipSpec& chip);
  double seconds(const Operator& op) const override;
  std::string_view name() const override { return "roofline"; }
  std::optional<LinearForm> linear_form(OpKind kind, ComputeRate rate) const override;
  // The two sides of the roofline without the kernel overhead (tables, tests).
  double compute_seconds(const Operator& op) const;
  double memory_seconds(const Operator& op) const;
  // The top-k selection an Operator::selects operator adds (models::selection_seconds); seconds()
  // includes it.
  double selection_seconds(const Operator& op) const { return models::selection_seconds(op, selection_); }

 private:
  // Per operator kind: the curves, their values when constant, and the fixed cost per kernel
  // (precomputed: the simulator costs attention operators every iteration).
  struct Rates {
    EfficiencyCurve compute, memory;
    bool compute_constant = true, memory_constant = true;
    double s_per_flop[kComputeRates] = {0, 0, 0, 0};  // at the constant efficiency
    double peak_flops[kComputeRates] = {0, 0, 0, 0};  // x format factor, for curves
    double s_per_byte = 0, bandwidth = 0, overhead_s = 0;
    bool chip_operator = false;
    bool padded = false;   // GEMM kinds under tile quantisation (padded_gemm_flops)
    bool waves = false;    // kIndexer on a chip with known SMs (query_wave_factor)
    bool grouped = false;  // kMoeExperts on a chip with Efficiency::moe_experts (moe_ below)
    Efficiency::GemmTiling tiling;
    int sms = 0;
    // Another curve on one side, at the peaks and bandwidth already set.
    void set_compute(const EfficiencyCurve& c) {
      compute = c;
      compute_constant = c.is_constant();
      for (std::size_t rate = 0; rate < kComputeRates; ++rate) s_per_flop[rate] = 1.0 / (peak_flops[rate] * c.first());
    }
    void set_memory(const EfficiencyCurve& c) {
      memory = c;
      memory_constant = c.is_constant();
      s_per_byte = 1.0 / (bandwidth * c.first());
    }
  };
  Rates rates_[kOpKinds];
  // Sparse prefill attention (Operator::sparse) when Efficiency::attention_sparse has knots.
  Rates sparse_rates_;
  bool sparse_ = false;
  double sparse_query_s_ = 0;  // Efficiency::attention_sparse_query
  // mHC kernels (Operator::mhc) when Efficiency::mhc has knots.
  Rates mhc_rates_;
  bool mhc_ = false;
  // MLA's prefill kernels (Operator::latent) when Efficiency::attention_prefill_memory or
  // attention_latent_prefill has knots: prefill attention's rates with the attention_decode memory
  // curve (the GQA prefill rows shape attention_prefill_memory) and attention_latent_prefill's
  // compute curve where it has knots.
  Rates latent_prefill_rates_;
  bool latent_prefill_ = false;
  SelectionModel selection_;  // after Operator::selects operators
  // Efficiency::gemm_formats by Format: GEMM kinds of that format add the quantisation pass and
  // scale their compute side by `compute` (instead of format_compute[rate]).
  struct QuantisedGemm {
    bool present = false;
    double overhead_s = 0, s_per_element = 0, compute = 1;
  };
  std::array<QuantisedGemm, kFormats> gemm_formats_{};
  std::array<double, kComputeRates> format_compute_{};  // Efficiency::format_compute
  // The pass's seconds for a GEMM operator (0 when its format has no entry or it is emulated).
  double quantisation_seconds(const Operator& op) const;
  const Rates& rates_of(const Operator& op) const;
  // Efficiency::moe_experts with the rate and stored weight bytes their format has on this chip
  // (how an operator's rate and kv_bytes select one).
  struct MoeFormat {
    Efficiency::MoeExperts model;
    ComputeRate rate = ComputeRate::kBf16;
    double weight_bytes = 0;
    double peak = 0;
  };
  std::vector<MoeFormat> moe_;
};

struct MeasuredSeries {
  OpKind kind = OpKind::kGemmQkv;  // any GEMM kind matches any GEMM kind; kMoeExperts only itself
  ComputeRate rate = ComputeRate::kBf16;
  double n = 0, k = 0;
  std::vector<double> m;        // ascending
  std::vector<double> seconds;  // one per m
};

struct MeasuredGrid {
  OpKind kind = OpKind::kAttentionDecode;
  double n = 0, k = 0;          // heads per chip, head dim
  std::vector<double> batch;    // ascending
  std::vector<double> context;  // mean context per sequence, ascending
  std::vector<double> seconds;  // batch.size() x context.size(), row-major; NaN = not measured
};

// Seconds on a grid over an operator's shape fields, multilinear in u = ln(1 + x) on every axis
// with ln(seconds) as the value, so that power laws interpolate exactly and zero-valued fields are
// allowed (how calibrate fits its log-space tables, calibrate/grid_table.h). GEMM kinds match each
// other, as for MeasuredSeries; an operator that lists its GEMMs (Operator::gemms: gate|up and
// down, MLA's projections, the MoE router) costs the sum of each GEMM's time at its own shape, a
// batched GEMM of g groups as one of g n columns (TableCostModel::lookup). Beyond an axis's end knots the
// end segment extends (log-log linear) when the axis allows it; otherwise the lookup misses and
// the roofline answers.
// Attention grids (calibrate's attention tables) name the operator's attention fields per
// sequence: tokens = m / batch (new queries), kv_len = context / batch (keys read), heads = n,
// head_dim = k, kv_heads, window, prefix = max(0, context - m) / batch (cached keys before the
// new ones). A grid applies to an operator only when every `match` condition holds (|field -
// value| <= 0.5: the fields count tokens and heads), its kv_bytes equals the operator's (when
// set) and, for attention kinds, its `latent` and `recurrent` flags equal the operator's (MLA
// kernels only match MLA tables, linear attention's recurrent kernels only its tables); the first grid that applies
// answers, or misses when a non-extrapolating axis is exceeded.
struct MeasuredLogGrid {
  enum class Field : std::uint8_t {
    kM,
    kN,
    kK,
    kBatch,
    kContext,  // kContext: mean per sequence
    kTokens,
    kKvLen,
    kHeads,
    kKvHeads,
    kHeadDim,
    kWindow,
    kPrefix,
    kKvBytes  // bytes per KV element; 0 for attention that keeps no KV cache (an encoder's)
  };
  struct Axis {
    Field field = Field::kM;
    std::vector<double> knots;  // ascending, >= 0
    bool extrapolate = false;
  };
  OpKind kind = OpKind::kGemmQkv;
  ComputeRate rate = ComputeRate::kBf16;
  std::vector<Axis> axes;                       // 1 to kMaxAxes
  std::vector<double> log_seconds;              // one per cell, last axis fastest
  std::vector<std::pair<Field, double>> match;  // exact conditions (none for GEMM tables)
  double kv_bytes = 0;                          // 0: any
  bool latent = false;
  // Linear-attention grids (calibrate/linear_table.h) answer only recurrent operators of their
  // kind (Operator::recurrent), and attention grids only the others.
  Recurrence recurrent = Recurrence::kNone;
  Format format = Format::kBf16;  // GEMM grids: the weights' format, matched exactly (Operator::format)
  // false: log_seconds are ln(seconds). true: they are ln(factor) and the grid answers the
  // roofline's seconds for the operator x factor (a table of the roofline's measured residual,
  // calibrate/moe_table.h; no fused-GEMM scaling: the roofline counts the operator's FLOPs).
  bool roofline_factor = false;
  static constexpr std::size_t kMaxAxes = 4;
  static constexpr std::size_t kFields = static_cast<std::size_t>(Field::kKvBytes) + 1;
};
static_assert(std::tuple_size_v<decltype(ContextBinding::axes)> == MeasuredLogGrid::kMaxAxes);
// The value of a grid field for an operator (the definitions above).
double log_grid_field_value(MeasuredLogGrid::Field f, const Operator& op);
std::string_view log_grid_field_name(MeasuredLogGrid::Field f);
std::optional<MeasuredLogGrid::Field> parse_log_grid_field(std::string_view name);

// The 2^d corner cells (flat indices, last axis fastest) and weights of `point` on a grid whose
// axes have knots with these ln(1 + knot) values, and the count of corners. Weights sum to 1 and
// go negative beyond an end knot; returns false when the point lies beyond the ends of an axis
// that does not extrapolate. At most MeasuredLogGrid::kMaxAxes axes; allocation-free.
// (LogGridCorners is declared above, with ContextBinding.)
bool log_grid_corners(std::span<const std::vector<double>> log_knots, std::span<const char> extrapolate,
                      std::span<const double> point, LogGridCorners& out);

struct MeasuredTables {
  std::vector<MeasuredSeries> series;
  std::vector<MeasuredGrid> grids;
  std::vector<MeasuredLogGrid> log_grids;
};

// A table set and what TableCostModel derives from it, built once (prepare_tables) and then
// immutable: every TableCostModel on it (each pool of a run, each hypothesis of a serve session
// that loads the same profile: sim/scenario's profile cache) holds it by shared pointer and keeps
// only its own lookup state.
class PreparedTables {
 public:
  explicit PreparedTables(MeasuredTables tables);
  const MeasuredTables& tables() const { return tables_; }
  // Log grid i's ln(1 + knot) of each axis, and which of its axes extrapolate.
  std::span<const std::vector<double>> log_knots(std::size_t i) const { return log_knots_[i]; }
  std::span<const char> extrapolate(std::size_t i) const { return extrapolate_[i]; }
  // The log grids that may answer an operator of (kind, rate) (GEMM grids answer every GEMM
  // kind), in table order.
  std::span<const std::uint32_t> candidates(std::size_t kind, std::size_t rate) const {
    return candidates_[kind * kComputeRates + rate];
  }
  // The fields those grids' `match` conditions read, as a mask of bits 1 << Field.
  std::uint16_t match_fields(std::size_t kind, std::size_t rate) const {
    return match_fields_[kind * kComputeRates + rate];
  }

 private:
  MeasuredTables tables_;
  std::vector<std::vector<std::vector<double>>> log_knots_;
  std::vector<std::vector<char>> extrapolate_;
  std::array<std::vector<std::uint32_t>, kOpKinds * kComputeRates> candidates_;  // kind-major
  std::array<std::uint16_t, kOpKinds * kComputeRates> match_fields_{};
};
std::shared_ptr<const PreparedTables> prepare_tables(MeasuredTables tables);

class TableCostModel final : public CostModel {
 public:
  TableCostModel(const ChipSpec& chip, std::shared_ptr<const PreparedTables> tables);
  // Prepares its own copy (tests, one-off models).
  TableCostModel(const ChipSpec& chip, MeasuredTables tables);
  double seconds(const Operator& op) const override;
  std::string_view name() const override { return "measured"; }
  void bind_context(const Operator& op, ContextBinding& out) const override;
  double bound_seconds(const Operator& op, ContextBinding& binding) const override;
  // Operators answered from the tables / by the roofline fallback so far.
  std::int64_t hits() const { return hits_; }
  std::int64_t fallbacks() const { return fallbacks_; }

 private:
  bool lookup(const Operator& op, double& seconds) const;
  bool lookup_one(const Operator& op, double& seconds) const;  // one kernel's shape
  bool log_grid_lookup(const Operator& op, double& seconds) const;
  // The first log grid that applies to `op` (log_grid_lookup), or -1; sets *context_decides
  // when a condition it read on the way reads the context.
  int answering_grid(const Operator& op, bool* context_decides) const;
  const MeasuredTables& tables() const { return prepared_->tables(); }
  RooflineCostModel roofline_;
  std::shared_ptr<const PreparedTables> prepared_;  // never null
  // Per log grid, what its lookups keep (mutable state, as the counters below: a model is used
  // by one thread at a time, each simulation builds its own, sim/cluster/iteration_cost.h):
  // - per axis, the last field values it bracketed, direct-mapped by their bits: where ln(1 + x)
  //   falls on the axis (log_axis_bracket(): segment and fraction; `inside` false beyond a fixed
  //   end), a function of x alone (equal doubles: ln(1 + max(0, x)) is the same);
  // - a direct-mapped memo of answers by the field values of the axes of more than one knot
  //   (their bits, 0 for the other axes): ln(1 + x), the corners and their sum are functions
  //   of those values alone, so a point met before gives the same double. Allocated on the
  //   grid's first lookup.
  struct AxisPoint {
    double x = std::numeric_limits<double>::quiet_NaN(), f = 0;
    std::size_t lo = 0;
    bool inside = false;
  };
  static constexpr int kAxisPointBits = 3;
  struct Answer {
    std::array<std::uint64_t, MeasuredLogGrid::kMaxAxes> x{};
    double value = 0;        // exp of the weighted log values (seconds, or the roofline factor)
    std::uint8_t state = 0;  // 0: empty; 1: the point lies beyond a fixed end; 2: `value`
  };
  static constexpr int kAnswerBits = 10;
  struct GridState {
    std::array<std::array<AxisPoint, std::size_t{1} << kAxisPointBits>, MeasuredLogGrid::kMaxAxes> axes{};
    std::vector<Answer> answers;  // 2^kAnswerBits slots
  };
  // Where field value x falls on grid i's axis a (of more than one knot).
  const AxisPoint& axis_point(std::size_t i, std::size_t a, double x, GridState& state) const;
  // Grid i's value at the axes' field values x (0 on the axes of one knot): the corners of
  // log_grid_corners(), split in its order, and exp of their weighted log values; false beyond a
  // fixed end.
  bool grid_value(std::size_t i, const std::array<double, MeasuredLogGrid::kMaxAxes>& x, GridState& state,
                  double& value) const;
  mutable std::vector<GridState> grids_;
  // answering_grid()'s last answer per (kind, rate), kind-major, with what its scan read of the
  // operator: the flags the candidates test, kv_bytes and the fields of their conditions
  // (PreparedTables::match_fields). The same reads take the same way through the candidates.
  struct GridChoice {
    bool valid = false;
    Format format = Format::kBf16;
    bool latent = false, gated = false;
    Recurrence recurrent = Recurrence::kNone;
    double kv_bytes = 0;
    std::array<double, MeasuredLogGrid::kFields> values{};  // by field; those of match_fields
    int grid = -1;
    bool context_decides = false;
  };
  mutable std::array<GridChoice, kOpKinds * kComputeRates> choices_{};
  mutable std::int64_t hits_ = 0, fallbacks_ = 0;
};

struct RooflineConfig {};
struct TableConfig {
  std::shared_ptr<const PreparedTables> tables;  // never null; shared by the models built from it
  std::string source;                            // where the measurements come from
};
using CostModelConfig = std::variant<RooflineConfig, TableConfig>;

std::unique_ptr<CostModel> make_cost_model(const CostModelConfig& config, const ChipSpec& chip);

// Seconds to encode a batch of images (each given as width x height pixels) with a vision encoder
// split over `tp` chips: the operators of vision_encoder_ops, each costed by `cost`. The encoder
// issue's encode pool calls this; image_tokens() gives the prompt tokens the images become.
struct ImageSize {
  std::int64_t width = 0, height = 0;
};
double encode_seconds(const VisionSpec& v, const std::vector<ImageSize>& images, int tp, const CostModel& cost);
// Problems of a table set (sentences): sizes that do not match, axes not ascending, negative times.
std::vector<std::string> validate_tables(const MeasuredTables& t);

}  // namespace servesim::models
