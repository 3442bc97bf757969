// The simplest per-kind roofline, fitted and cross-validated on measured operator tables: a
// first look at how far one overhead and two efficiencies per (chip, operator kind, format) get,
// before phase 2 plugs in the models' cost model through the same FitTarget interface.
//
//   seconds = overhead + max(FLOPs / (peak FLOP/s x e_compute), bytes / (HBM B/s x e_memory))
//
// (Williams, Waterman & Patterson, "Roofline", CACM 2009; the additive overhead is how Vidur's
// kernel profiles fit best, scripts/derive_efficiency.md.) FLOPs and bytes come from each row's
// shape (work_of; formulas and units in calibrate/README.md, "Work of a measured operator").
// Peaks are the vendors' dense figures (chip_peaks, sources there).
// Ignored: size-dependent efficiency (the curves phase 2 fits), L2 reuse, kernel choice.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/cross_validation.h"
#include "calibrate/fit.h"
#include "calibrate/measurement.h"

namespace servesim::calibrate {

struct Work {
  double flops = 0;  // floating-point operations (2 per multiply-add)
  double bytes = 0;  // minimal HBM traffic
};

// The work of a measured call from its shape, or nullopt for kinds without a formula here
// (MLA, DSA, linear attention, quantisation).
std::optional<Work> work_of(const Measurement& m);

struct Peaks {
  double flops_per_s = 0;  // dense tensor-core peak for the format
  double bytes_per_s = 0;  // HBM
};

// Peaks of a chip for a compute format (fp16/bf16, or fp8 where the chip has it), nullopt for
// chips or formats not in the table.
std::optional<Peaks> chip_peaks(std::string_view chip, Format format);

class SimpleRoofline : public FitTarget {
 public:
  explicit SimpleRoofline(Peaks peaks) : peaks_(peaks) {}
  // overhead_s, e_compute, e_memory.
  std::vector<Parameter> parameters() const override;
  double predict(const Measurement& row, std::span<const double> params) const override;

 private:
  Peaks peaks_;
};

struct RooflineGroupFit {
  std::string chip;
  MeasuredOp op = MeasuredOp::gemm;
  Format format = Format::unspecified;
  std::size_t rows = 0, shapes = 0;
  double overhead_s = 0, e_compute = 0, e_memory = 0;  // fitted on all rows
  bool has_compute = false;                            // some row has FLOPs (else e_compute is not determined)
  ErrorSummary training;                               // of the all-rows fit
  ErrorSummary held_out;                               // cross-validated (rows == 0 when the group has one shape)
};

struct RooflineLook {
  std::vector<RooflineGroupFit> groups;
  std::vector<ErrorReport> reports;      // one per chip, cross-validated errors
  std::size_t rows_without_formula = 0;  // rows of kinds work_of() does not cover
};

struct RooflineLookOptions {
  std::size_t folds = 5;
  std::uint64_t seed = 1;
};

// Groups `set` by (chip, kind, format), fits SimpleRoofline to each group with a peak for it,
// and cross-validates by whole shapes.
RooflineLook roofline_look(const MeasurementSet& set, const RooflineLookOptions& options = {});

}  // namespace servesim::calibrate
