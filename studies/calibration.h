// `servesim calibrate MEASUREMENTS... --chip NAME --out PROFILE`: fits the simulator's cost model
// to one chip's operator measurements, cross-validates it, writes the hardware profile
// (servesim.profile/1) and answers the error report; or, with `transfer`, derives a profile for a
// chip without measurements from another chip's (calibration.cpp has the details).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "studies/study_io.h"

namespace servesim::studies {

// A calibration as the command line asks for it (app/calibrate_command.cpp names the options).
struct CalibrateRequest {
  std::vector<std::string> files;        // measurements (none with `transfer`)
  std::string chip;                      // the chip preset they are of
  std::string out;                       // the profile to write
  std::string comm;                      // communication tables' folder, or empty
  std::size_t folds = 5;
  std::uint64_t seed = 1;                // of the fold assignment
  std::size_t max_fit_rows = 12000;
  bool no_tables = false;                // the roofline only
  std::optional<std::string> moe_models; // "bf16,fp8,...": the MoE models that go into the profile
  double gemm_tile = 128;
  std::optional<std::string> transfer;   // a profile of another chip to transfer from
  bool keep_overheads = false;           // with `transfer`: per-kernel fixed times unscaled
  std::optional<std::string> created;    // the profile's date (default: today, UTC)
};

// Fits (or transfers), writes the profile and answers the JSON error report and the error table.
// Bad input is printed on `err` with exit code 2.
StudyOutput calibrate(const CalibrateRequest& request, std::ostream& err);

}  // namespace servesim::studies
