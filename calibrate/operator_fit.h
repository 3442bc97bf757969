// Fitting the simulator's own cost model to operator measurements: every measured call becomes
// the models::Operator the simulator would cost for it (built with models/operators.h, so FLOPs,
// bytes and kernel counts mean exactly what the simulator applies), and the chip's efficiencies
// (models::Efficiency: curves over FLOPs or bytes per kernel, per-kernel overheads, format
// factors) are fitted so that models::RooflineCostModel reproduces the measured seconds.
//
// Operator families and the Efficiency fields each fit determines (the others stay as given):
//   gemm         gemm_compute, gemm_memory (curves), gemm_overhead from the bf16 rows; then per
//                quantised weight format measured (fp8, fp8_block, nvfp4) a gemm_formats entry
//                with the curves held: compute factor, the activation quantisation pass's fixed
//                time and bytes per input element; format_compute[rate] takes the rate's first
//                format's factor; rows: dense GEMMs, Vidur's projections
//   moe          moe_compute, moe_memory, moe_overhead (in-sample; formats without a grouped
//                model apply them), and moe_experts: per expert weight format, a grouped-GEMM model (models::
//                moe_experts_seconds: overhead, compute curve over padded FLOPs per active expert,
//                memory curve over weight bytes per active expert, bytes per token and per pair of
//                the module's traffic), fitted with ln residuals; rows: AIConfigurator's MoE layers,
//                each with the load its benchmark's own routing put on the timed rank
//                (moe_routing.h), contended series left out of the fit (contended_moe_series)
//   attention    attention_prefill (compute), attention_decode (memory; prefill reads its keys
//                through it too), attention_overhead; rows: context and generation attention,
//                MLA kernels, bidirectional encoder attention (the GEMM curves are held fixed)
//   elementwise  elementwise (memory), elementwise_overhead; rows: norms, adds, rotary, activation
// Families are fitted in that order (attention uses the fitted GEMM compute curve on its compute
// side). Each fit is Levenberg-Marquardt on relative residuals (fit.h) with curves as CurveBlocks
// (knots per decade of size, increasing, lightly smoothed), on at most `max_fit_rows` rows thinned
// by a fixed stride; errors are cross-validated by holding out whole shapes (cross_validation.h).
// Ignored: rows of kinds the simulator does not cost as one operator (MLA / DSA modules, MLA
// BMMs, linear attention, quantisation kernels, embeddings): counted in `unmodelled`, with the
// reason.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "calibrate/cross_validation.h"
#include "calibrate/measurement.h"
#include "models/chip_spec.h"
#include "models/cost_model.h"
#include "models/operators.h"

namespace servesim::calibrate {

enum class OperatorFamily { gemm, moe, attention, elementwise, sparse_attention, mhc, indexer, topk };
std::string_view family_name(OperatorFamily f);

// An operator of no kernels (models::Operator defaults to one kernel).
inline models::Operator no_work() {
  models::Operator o;
  o.kernels = 0;
  return o;
}

struct SimulatorOperator {
  models::Operator op;
  OperatorFamily family = OperatorFamily::gemm;
  // Work the simulator adds to the call outside the family's fitted fields (kernels 0 when
  // none): the dequantisation pass of an emulated expert format (models::LayerTokenOps::
  // dequant_moe, costed at the chip's vector rate), so that a W4A16 MoE row is predicted as the
  // simulator costs the layer, experts plus dequantisation.
  models::Operator extra = no_work();
  // The rest of a measured module around the family's operator (a DSA attention block's
  // projections, indexer, absorption and o_proj), costed with the chip as the families fitted
  // before this one left it: the fit moves only the family's fields.
  std::vector<models::Operator> module = {};
};

// The simulator's format of a measured table's format (its weights', or a KV cache's), or
// nullopt for one the simulator does not cost (int4 weight-only). Both of MXFP4's kernels,
// W4A16 (Hopper) and MXFP4 x MXFP8 (Blackwell), are the simulator's MXFP4.
std::optional<models::Format> simulator_format(Format f);

// The simulator's operator for a measured call on `chip` (`variant` is the row's variant label:
// the MoE routing skew), or nullopt with the reason in `why`.
std::optional<SimulatorOperator> simulator_operator(const Measurement& m, std::string_view variant,
                                                    const models::ChipSpec& chip, std::string& why);

struct OperatorFitOptions {
  std::size_t folds = 5;
  std::uint64_t seed = 1;
  std::size_t max_fit_rows = 12000;  // per fit; more are thinned by a fixed stride
  bool cross_validate = true;
  // Expert weight formats whose grouped-GEMM model goes into the fitted chip (every format is
  // fitted and reported); nullopt: all. The others keep the MoE roofline curves.
  std::optional<std::vector<Format>> moe_models;
};

struct FamilyFit {
  OperatorFamily family = OperatorFamily::gemm;
  std::size_t rows = 0, shapes = 0;
  bool converged = false;
  double train_ape_p50 = 0;
};

struct OperatorFitResult {
  models::ChipSpec chip;                 // the chip with its fitted efficiencies
  std::vector<FamilyFit> families;       // those that had rows
  std::vector<std::string> fitted_keys;  // the Efficiency keys the fit set (profile `efficiency`)
  ErrorReport errors;                    // cross-validated, per (kind, format) and size range
  std::vector<std::pair<std::string, std::size_t>> unmodelled;  // reason -> rows
  std::vector<std::pair<std::string, std::size_t>> not_fitted;  // predicted, but left out of the fits: reason -> rows
  std::vector<std::string> notes;                               // sentences for the report
};

// MoE rows from contended benchmark runs, to leave out of the fits (they are still predicted and
// reported). A series is one (format, model shape, skew, moe_tp, ep) over its token counts; a
// rank of a plan with moe_tp' <= moe_tp and ep' <= ep holds a superset of a (moe_tp, ep) rank's
// experts, columns and pairs, and one with moe_tp' >= moe_tp and ep' >= ep a subset, at most
// moe_tp' ep' / (moe_tp ep) times less. A series is flagged when, over the token counts both
// measured, its median time exceeds a superset's by more than kContentionMargin, or a subset's
// by more than kContentionMargin x that ratio: neither can happen on an idle GPU. (H200: 177 of
// 1,428 bf16 and 140 of 1,242 fp8 series, about 6-8x slower than their neighbours at every token
// count; no fp8_block or W4A16 series; calibrate/README.md.) One flag per row of `rows`.
inline constexpr double kContentionMargin = 1.5;
std::vector<bool> contended_moe_series(std::span<const Measurement> rows);

// The error table's format label of a row: its format, " kv FORMAT" where the KV format differs,
// the MoE routing skew, " window" for sliding-window attention.
std::string format_label(const Measurement& m, const MeasurementSet& set);

// Every row of `set` the simulator costs as one operator, predicted by `cost_model` for `chip`
// with nothing fitted (a profile checked against measurements it was not fitted to: another
// chip's profile transferred, or a profile against newer tables): error cells per kind, format
// label and size range, marked held out (no row was seen).
ErrorReport predict_measurements(const MeasurementSet& set, const models::ChipSpec& chip,
                                 const models::CostModel& cost_model);

// Fits the families present in `set` (rows of one chip) starting from `chip`'s efficiencies.
OperatorFitResult fit_operators(const MeasurementSet& set, const models::ChipSpec& chip,
                                const OperatorFitOptions& options = {});

}  // namespace servesim::calibrate
