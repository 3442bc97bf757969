#include "models/chip_spec.h"

#include <array>

namespace servesim::models {
namespace {

// Efficiencies fitted to Vidur's kernel measurements (microsoft/vidur @ 7d47513, fp16 kernels,
// GPU time only): scripts/derive_efficiency.py, results and caveats in
// scripts/derive_efficiency.md. Host overheads from Vidur's vLLM CPU profile
// (history e2d00e9 cpu_overheads.csv, A100): schedule + prepare inputs + sampler + process outputs,
// medians, 1.15 ms at batch 8 and 5.78 ms at batch 128 -> 0.84 ms + 38.5 us per sequence.
Efficiency a100_efficiency() {
  Efficiency e;
  e.gemm_compute = 0.72;  // >= 2k tokens, median roofline/measured over 13,568 points
  e.gemm_memory = 0.73;   // <= 128 tokens, line fit with the 7 us intercept below (R^2 0.984)
  e.gemm_overhead = Duration::microseconds(7);
  e.attention_prefill = 0.36;  // rectangle count, 2,804 points, Llama-2-70B TP2
  e.attention_decode = 0.80;   // line fit over 10,240 points, 20 us intercept (R^2 0.98)
  e.attention_overhead = Duration::microseconds(20);
  e.elementwise = 0.45;  // >= 2k tokens; per op 0.34 (RMSNorm) to 0.86 (add)
  e.elementwise_overhead = Duration::microseconds(5);
  e.collective_bandwidth = 0.60;  // all-reduce bus bandwidth 180 GB/s of 300 GB/s NVLink
  e.collective_latency = Duration::microseconds(45);
  e.iteration_overhead = Duration::microseconds(840);
  e.sequence_overhead = Duration::nanoseconds(38'500);
  return e;
}

Efficiency h100_efficiency() {
  Efficiency e = a100_efficiency();
  e.gemm_compute = 0.70;  // 3,328 points
  e.gemm_memory = 0.89;   // line fit with 6 us intercept (R^2 0.995)
  e.gemm_overhead = Duration::microseconds(6);
  e.elementwise_overhead = Duration::microseconds(4);
  e.collective_bandwidth = 0.75;  // 340 GB/s of 450 GB/s
  e.collective_latency = Duration::microseconds(35);
  // Assumed, transferred from A100: attention (no H100 attention table) and host overheads.
  return e;
}

ChipSpec make(std::string name, double memory_bytes, double hbm_bytes_per_s, double flops,
              double nvlink_bytes_per_s, double nic_bytes_per_s, Efficiency e,
              std::string source) {
  ChipSpec c;
  c.name = std::move(name);
  c.memory = Bytes{memory_bytes};
  c.hbm_bandwidth = Bandwidth{hbm_bytes_per_s};
  c.bf16_flops = FlopRate{flops};
  c.scale_up_bandwidth = Bandwidth{nvlink_bytes_per_s};
  c.scale_up_domain = 8;
  c.scale_out_bandwidth = Bandwidth{nic_bytes_per_s};
  // Assumed: one-way latency of an RDMA message across one switch tier, ~5 us.
  c.scale_out_latency = Duration::microseconds(5);
  c.efficiency = e;
  c.source = std::move(source);
  return c;
}

const std::array<ChipSpec, 3>& presets() {
  static const std::array<ChipSpec, 3> kPresets = {
      // [P] NVIDIA A100 datasheet: 312 TFLOP/s dense BF16, 2,039 GB/s HBM2e, NVLink 600 GB/s
      // (both directions, 300 per direction), DGX A100 one 200 Gb/s HDR NIC per GPU.
      // Memory: 81,920 MiB as nvidia-smi reports an A100-SXM4-80GB.
      make("a100-80g", 81920.0 * kMiB, 2039e9, 312e12, 300e9, 25e9, a100_efficiency(),
           "NVIDIA A100 datasheet; efficiencies fitted to Vidur A100 kernel profiles"),
      // [P] NVIDIA H100 page: 989.5 TFLOP/s dense BF16, 3.35 TB/s, NVLink 900 GB/s (450 per
      // direction), DGX H100 one 400 Gb/s NIC per GPU. Memory: 81,559 MiB (nvidia-smi, H100 SXM).
      make("h100-sxm", 81559.0 * kMiB, 3.35e12, 989.5e12, 450e9, 50e9, h100_efficiency(),
           "NVIDIA H100 page; efficiencies fitted to Vidur H100 kernel profiles (attention and "
           "host overheads assumed equal to A100's)"),
      // [P] NVIDIA H200 datasheet: 141 GB HBM3e (143,771 MiB in nvidia-smi), 4.8 TB/s, compute
      // and NVLink as H100. NIC: assumed 400 Gb/s per GPU as in DGX H100.
      make("h200-sxm", 143771.0 * kMiB, 4.8e12, 989.5e12, 450e9, 50e9, h100_efficiency(),
           "NVIDIA H200 datasheet; efficiencies assumed equal to H100's (same SM architecture)"),
  };
  return kPresets;
}

}  // namespace

std::optional<ChipSpec> chip_preset(std::string_view name) {
  for (const auto& c : presets()) {
    if (c.name == name) return c;
  }
  return std::nullopt;
}

std::vector<std::string_view> chip_preset_names() {
  std::vector<std::string_view> out;
  for (const auto& c : presets()) out.push_back(c.name);
  return out;
}

}  // namespace servesim::models
