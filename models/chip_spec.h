// Accelerator chips: peak rates, memory, the links each chip has, and how close real kernels come
// to the peaks (efficiencies).
//
// Peaks are dense (vendor pages often print 2:4-sparse figures at twice these). Bandwidths are per
// direction. An efficiency is achieved / peak for one operator kind on this chip; presets take them
// from measurements where the project has them (see chip_spec.cpp for each figure's source) and
// say "assumed" where they were transferred from another chip.
// Not yet modelled (the models issue): formats other than bf16, size-dependent efficiency curves.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/time.h"
#include "sim/core/units.h"

namespace servesim::models {

// How close real kernels come to the peaks, and their fixed costs. A kernel takes
//   overhead + max(FLOPs / (peak x compute efficiency), bytes / (HBM bandwidth x memory efficiency))
// (fitted that way, so overheads and efficiencies belong together).
struct Efficiency {
  double gemm_compute = 0;       // dense GEMMs (QKV, O, MLP, LM head), compute-bound regime
  double gemm_memory = 0;        // dense GEMMs, weight-streaming regime (small token counts)
  Duration gemm_overhead;        // per GEMM kernel
  double attention_prefill = 0;  // of peak FLOP/s, counting the full q-k rectangle (operators.h)
  double attention_decode = 0;   // of HBM bandwidth, reading the KV cache
  Duration attention_overhead;   // per attention kernel
  double elementwise = 0;        // norms, residual adds, rotary, activation: of HBM bandwidth
  Duration elementwise_overhead; // per elementwise kernel
  double collective_bandwidth = 0;  // NCCL bus bandwidth / scale-up link bandwidth
  Duration collective_latency;      // fixed cost of one collective call
  Duration iteration_overhead;   // host time per iteration: schedule, prepare inputs, sample, outputs
  Duration sequence_overhead;    // host time per sequence in the batch, on top
};

struct ChipSpec {
  std::string name;
  Bytes memory;                 // HBM capacity as the runtime sees it
  Bandwidth hbm_bandwidth;
  FlopRate bf16_flops;          // dense
  Bandwidth scale_up_bandwidth; // per chip per direction (NVLink)
  int scale_up_domain = 1;      // chips that share the scale-up fabric (8 in a DGX/HGX node)
  Bandwidth scale_out_bandwidth;// NIC bandwidth per chip
  Duration scale_out_latency;
  Efficiency efficiency;
  std::string source;           // where the figures come from, and which are assumptions
};

std::optional<ChipSpec> chip_preset(std::string_view name);
std::vector<std::string_view> chip_preset_names();

}  // namespace servesim::models
