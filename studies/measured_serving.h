// Measured end-to-end serving benchmarks (the format of calibrate/data/serving/silicon_dev.csv,
// described in calibrate/data/SOURCE.md): one row per benchmark of one serving configuration under a
// closed loop of `batch_size` clients with fixed input and output lengths, and its measured mean
// TTFT and TPOT.
//
// The reader is strict about what it uses: every column `servesim validate` reads must be in the
// header, numbers must parse, lengths and measured figures must be positive; each problem is a
// diagnostic with file:line:col and the column name, all reported at once (exit code 2). Columns
// it does not use are ignored. Empty plan fields mean "not recorded" and stay 0 here; the scenario
// builder decides what they default to and says so in the row's assumptions.
// Ignored: every column that describes the measurement's provenance other than
// `silicon_concurrency=N` inside `silicon_data_source` (the concurrency, cross-checked against
// batch_size for aggregated rows).
#pragma once

#include <string>
#include <vector>

namespace servesim::studies {

// A parallel plan as a row gives it; 0 = the field was empty.
struct MeasuredPlan {
  int tp = 0, pp = 0, dp = 0, moe_tp = 0, ep = 0;
};

struct MeasuredRole {
  MeasuredPlan plan;
  int workers = 0;     // 0 = not recorded
  int batch_size = 0;  // 0 = not recorded
};

struct ServingMeasurement {
  std::string id;
  int line = 0;                    // 1-based line in the file
  std::string backend, backend_version, model_path, system, precision, mode;
  std::string gemm_quant_mode, moe_quant_mode;
  int isl = 0, osl = 0;
  int batch_size = 0;              // 0 = not recorded (disaggregated rows)
  int concurrency = 0;             // silicon_concurrency=N in silicon_data_source; 0 = absent
  MeasuredPlan plan;               // aggregated rows
  MeasuredRole prefill, decode;    // disaggregated rows
  double ttft_ms = 0, tpot_ms = 0;
};

// Reads the file; throws InputError with every problem.
std::vector<ServingMeasurement> read_serving_measurements(const std::string& path);

}  // namespace servesim::studies
