// Reader for AIConfigurator's operator-performance tables (ai-dynamo/aiconfigurator, collected
// with TensorRT-LLM on one GPU; gzip CSV conversions of its parquet files): GEMM, context and
// generation attention, MLA kernels and modules, MLA batched matmuls, DSA modules, MoE, encoder
// attention, the quantisation kernels and the linear-attention layers (GDN, Mamba-2).
//
// One table per file; the `op_name` column says which (every row of a file must name the same
// table). Latencies are milliseconds per call in the file and seconds here. Column-to-shape
// mapping per table: calibrate/README.md ("AIConfigurator tables"). Generation tables attend
// isl + step keys (kv_len); context tables keep `step` as is (0 in every shipped context-attention
// row; 0 or 128 in the DSA context module, whose meaning the source does not document).
// Not read here: the communication tables (NCCL, custom all-reduce, DeepEP, NVLink all-to-all),
// which calibrate/comm_measurements reads, and mHC.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "calibrate/measurement.h"

namespace servesim::calibrate {

// Reads `path` (plain or .gz). `chip` labels the rows (e.g. "h200-sxm"). Throws InputError with
// every problem (file:line:column, column name) when the table is malformed.
MeasurementSet read_aiconfigurator(const std::string& path, std::string_view chip);

// The `op_name` values this reader understands.
std::vector<std::string_view> aiconfigurator_tables();

}  // namespace servesim::calibrate
