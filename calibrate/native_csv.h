// servesim's own measurement format, `servesim.measurements/1`: one CSV row per measured operator
// call, written by tools/gpu_collector and by anyone converting their own benchmarks. Columns
// (calibrate/README.md has the full table):
//   op, shape, format, kv_format, weight_format, variant, kernel,
//   latency_s, latency_min_s, latency_max_s, repeats,
//   chip, device, driver, backend, collector, collected_at
// Required: op, shape, chip, latency_s. `shape` is space-separated name=integer pairs over the
// Dim vocabulary ("m=4096 n=8192 k=8192"). device, driver, collector and collected_at describe
// the run and must be the same on every row of a file. A *plan* (what the collector would
// measure, `gpu_collector --list`) is the same file with latency_s (and the spread) left empty.
//
// Strict: unknown columns, ops, formats or shape names are errors with a suggestion; each error
// names file:line:column. Ignored: the spread columns are checked (min <= median <= max) but not
// kept in Measurement.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/measurement.h"

namespace servesim::calibrate {

inline constexpr std::string_view kNativeSchema = "servesim.measurements/1";

// What one file says about the run, written on every row.
struct CollectorInfo {
  std::string chip;          // servesim chip name, e.g. "h200-sxm"
  std::string device;        // as the driver names it, e.g. "NVIDIA H200"
  std::string driver;        // driver version
  std::string backend;       // libraries that ran the kernels, e.g. "CUDA 13.0, cuBLASLt 130000"
  std::string collector;     // program and version, e.g. "servesim gpu_collector 1"
  std::string collected_at;  // ISO-8601 date and time (UTC)
};

struct NativeRow {
  MeasuredOp op = MeasuredOp::gemm;
  Shape shape;
  Format format = Format::unspecified;
  Format kv_format = Format::unspecified;
  Format weight_format = Format::unspecified;
  std::string variant;
  std::string kernel;
  // Seconds per call: median, fastest and slowest of `repeats` timed calls. A plan row has
  // repeats == 0 and no latencies.
  double latency_s = 0, latency_min_s = 0, latency_max_s = 0;
  int repeats = 0;
};

// Writes the header at construction, then one line per row. Numbers are written in their
// shortest round-trip form, so reading a file back gives the same doubles.
class NativeCsvWriter {
 public:
  NativeCsvWriter(std::ostream& out, CollectorInfo info);
  void write(const NativeRow& row);

 private:
  std::ostream& out_;
  CollectorInfo info_;
};

enum class NativeCsvKind { measurements, plan };

// Reads a servesim.measurements/1 file (plain or .gz). For `plan`, every latency must be empty
// and the rows come back with latency_s = 0 (a plan is not a measurement: fits must not use it).
MeasurementSet read_native_csv(const std::string& path, NativeCsvKind kind = NativeCsvKind::measurements);

// The native columns, in the order the writer uses.
const std::vector<std::string_view>& native_columns();

}  // namespace servesim::calibrate
