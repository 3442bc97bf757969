// Measured end-to-end serving benchmarks (the format of calibrate/data/serving/silicon_dev.csv,
// described in calibrate/data/SOURCE.md): one row per benchmark of one serving configuration under a
// closed loop of `batch_size` clients with fixed input and output lengths, and its measured mean
// TTFT and TPOT.
//
// The file must have the columns that identify and measure a benchmark (id, backend, model_path,
// system, mode, isl, osl, silicon_ttft_ms, silicon_tpot_ms); a missing one, or a damaged CSV
// record, is a diagnostic with file:line:col, all reported at once (exit code 2). The other
// columns it reads (backend_version, precision, the quant modes, batch_size, the plan columns of
// each role, silicon_data_source) may be absent: their fields are then empty. A row whose fields
// do not parse or make no sense (a mode other than agg / disagg, lengths or measured figures that
// are not positive) is kept with `problem` set ("line 12, column silicon_ttft_ms: ..."), and
// validate skips it with that reason: one bad benchmark does not hide the others. Columns it does
// not use are ignored. Empty plan fields mean "not recorded" and stay 0 here; the scenario builder
// decides what they default to and says so in the row's assumptions.
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
  int line = 0;  // 1-based line in the file
  std::string backend, backend_version, model_path, system, precision, mode;
  std::string gemm_quant_mode, moe_quant_mode;
  int isl = 0, osl = 0;
  int batch_size = 0;            // 0 = not recorded (disaggregated rows)
  int concurrency = 0;           // silicon_concurrency=N in silicon_data_source; 0 = absent
  MeasuredPlan plan;             // aggregated rows
  MeasuredRole prefill, decode;  // disaggregated rows
  double ttft_ms = 0, tpot_ms = 0;
  std::string problem;  // why the row cannot be read; empty when it can
};

// Reads the file; throws InputError with every problem of the file itself (columns, records).
std::vector<ServingMeasurement> read_serving_measurements(const std::string& path);

}  // namespace servesim::studies
