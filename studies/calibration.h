// `servesim calibrate MEASUREMENTS... --chip NAME --out PROFILE`: fits the simulator's cost model
// to one chip's operator measurements, cross-validates it, writes the hardware profile
// (servesim.profile/1) and answers the error report; or, with `transfer`, derives a profile for a
// chip without measurements from another chip's (calibration.cpp has the details).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/chip_spec.h"
#include "studies/study_io.h"

namespace servesim::studies {

// How a profile's efficiencies carry over to a chip without measurements (`--transfer`), given
// both chips' presets (datasheet peaks and bandwidths):
//   fractions    every efficiency as a fraction of the new chip's own peaks; per-kernel fixed
//                times unchanged (the default: it transferred best, calibrate/README.md);
//   bandwidth    the same, and the fixed times (per-kernel overheads, the MoE models' and the
//                quantised GEMM formats') scaled by the source's HBM bandwidth over the target's:
//                taken as a fixed amount of HBM traffic;
//   time-scaled  the same as bandwidth, and every efficiency curve's sizes scaled so that a kernel
//                taking as long at the new chip's peak as at the old one's reaches the same
//                fraction of it (compute curves by the bf16 peaks' ratio, memory curves by the
//                HBM bandwidths').
// Measured against the real tables of six chips in calibrate/README.md.
enum class TransferRule { fractions, bandwidth, time_scaled };
std::string_view transfer_rule_name(TransferRule r);
std::optional<TransferRule> parse_transfer_rule(std::string_view name);
// The weight formats of `from`'s per-format models (moe_experts, gemm_formats) that `target` runs at
// another rate than `source` (models::gemm_rate: natively at the format's rate on one, dequantised
// to bf16 on the other, e.g. MXFP4 experts on H200 and B200). Their fitted models describe a
// kernel the target does not run (H200's weight-only MXFP4 MoE: an 85 us fixed time per call), so
// no rule carries them: the target costs those formats by the MoE curves and the format factors.
std::vector<models::Format> kernel_class_changes(const models::Efficiency& from, const models::ChipSpec& source,
                                                 const models::ChipSpec& target);
// `from`, the efficiencies a profile of chip `source` gives, carried to `target` by `rule`, less
// the per-format models of kernel_class_changes().
models::Efficiency transfer_efficiency(const models::Efficiency& from, const models::ChipSpec& source,
                                       const models::ChipSpec& target, TransferRule rule);

// A calibration as the command line asks for it (app/calibrate_command.cpp names the options).
struct CalibrateRequest {
  std::vector<std::string> files;        // measurements (with `transfer`: the target chip's, to check against)
  std::string chip;                      // the chip preset they are of
  std::string out;                       // the profile to write
  std::string comm;                      // communication tables' folder, or empty
  std::vector<std::string> comm_tables;  // or the chip's own tables one by one (nccl_perf, custom_allreduce_perf)
  std::size_t folds = 5;
  std::uint64_t seed = 1;  // of the fold assignment
  std::size_t max_fit_rows = 12000;
  bool no_tables = false;                 // the roofline only
  std::optional<std::string> moe_models;  // "bf16,fp8,...": the MoE models that go into the profile
  double gemm_tile = 128;
  std::optional<std::string> transfer;  // a profile of another chip to transfer from (path or shipped name)
  TransferRule transfer_rule = TransferRule::fractions;
  std::optional<std::string> created;  // the profile's date (default: today, UTC)
  std::optional<std::string> engine;   // the serving engine measured (default: what the tables say)
  // GEMM formats whose rows come from another table than `files` ("fp8_block" -> a path): the
  // same kernel timed by another engine's collector on the same chip, where the engine's own
  // table is not the kernel's time (scripts/calibrate_aiconfigurator.sh says where).
  std::vector<std::pair<std::string, std::string>> gemm_from;
};

// Fits (or transfers), writes the profile and answers the JSON error report and the error table.
// Bad input is printed on `err` with exit code 2.
StudyOutput calibrate(const CalibrateRequest& request, std::ostream& err);

}  // namespace servesim::studies
