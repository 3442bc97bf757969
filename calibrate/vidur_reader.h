// Readers for Vidur's compute profiles (microsoft/vidur, data/profiling/): the per-layer operator
// table `mlp.csv` (current and older schemas) and the attention table `attention.csv`.
//
// mlp.csv: one record per (model shape, num_tokens, TP), one `time_stats.<op>.median` column per
// operator (milliseconds, GPU kernel time from the PyTorch profiler). Each non-empty operator
// cell becomes one Measurement: the four projections (and the older `deemb`, the LM head) as
// GEMMs with m = tokens and n, k from the model figures sharded by TP; norms, residual adds,
// rotary, activation and embedding as their own kinds. The older schemas differ in columns
// (`layer_norm`, `rms_norm`, `add_norm`, `deemb`, pandas' `Unnamed: 0`, merge suffixes `_add`);
// only `time_stats.<op>.median` columns and the model figures are read, others are ignored.
// attention.csv: prefill rows (batch, chunk, cached prefix) and decode rows (batch, KV length);
// decode queries attend kv_cache_size + 1 keys (the new token's too). The reshape copies around
// the FlashAttention call (`attn_input_reshape`, `attn_output_reshape`) are not read.
// Vidur profiled in fp16; rows carry Format::fp16.
// Not read here: all_reduce.csv and send_recv.csv (calibrate/comm_measurements), cpu_overheads.csv.
#pragma once

#include <string>
#include <string_view>

#include "calibrate/measurement.h"

namespace servesim::calibrate {

// `chip` and `model` label the rows (Vidur's folder names say which: compute/<sku>/<org>/<model>/).
MeasurementSet read_vidur_mlp(const std::string& path, std::string_view chip, std::string_view model);
MeasurementSet read_vidur_attention(const std::string& path, std::string_view chip, std::string_view model);

}  // namespace servesim::calibrate
