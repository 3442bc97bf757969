#include "models/chip_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace servesim::models {

double EfficiencyCurve::at(double size) const {
  if (knots.size() <= 1) return first();
  if (size <= knots.front().size) return knots.front().efficiency;
  if (size >= knots.back().size) return knots.back().efficiency;
  const auto hi =
      std::upper_bound(knots.begin(), knots.end(), size, [](double s, const Knot& k) { return s < k.size; });
  const Knot& b = *hi;
  const Knot& a = *(hi - 1);
  const double t = (std::log10(size) - std::log10(a.size)) / (std::log10(b.size) - std::log10(a.size));
  return a.efficiency + t * (b.efficiency - a.efficiency);
}

double all_reduce_line_seconds(const std::vector<Efficiency::CollectiveLine>& lines, double bytes, int ranks,
                               Bandwidth bandwidth) {
  if (lines.empty() || ranks <= 1 || !(bytes > 0)) return 0.0;
  const double n = ranks;
  double best = std::numeric_limits<double>::infinity();
  for (const Efficiency::CollectiveLine& l : lines) {
    const double factor = l.one_shot ? n - 1.0 : 2.0 * (n - 1.0) / n;
    best = std::min(best, l.base.to_seconds() + 2.0 * (n - 1.0) * l.per_step.to_seconds() +
                              factor * bytes / (bandwidth.bytes_per_s * l.efficiency));
  }
  return best;
}

std::vector<std::string> EfficiencyCurve::problems() const {
  std::vector<std::string> out;
  if (knots.empty()) out.emplace_back("an efficiency curve needs at least one knot");
  for (std::size_t i = 0; i < knots.size(); ++i) {
    if (!(knots[i].efficiency > 0 && knots[i].efficiency <= 1)) {
      out.emplace_back("efficiencies must lie in (0, 1]");
      break;
    }
    if (!(knots[i].size > 0) || (i > 0 && !(knots[i].size > knots[i - 1].size))) {
      out.emplace_back("knot sizes must be positive and strictly ascending");
      break;
    }
  }
  return out;
}

double ChipSpec::peak_flops(ComputeRate r) const {
  switch (r) {
    case ComputeRate::kBf16: return bf16_flops.flop_per_s;
    case ComputeRate::kFp8: return fp8_flops.flop_per_s;
    case ComputeRate::kInt8: return int8_flops.flop_per_s;
    case ComputeRate::kFp4: return fp4_flops.flop_per_s;
    case ComputeRate::kCount: break;
  }
  return 0;
}

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
  // Elementwise kernels (norms, residual adds, rotary, activation), fitted with their overhead by
  // `servesim calibrate` to Vidur's H100 kernel measurements (profiles/h100-vidur.yaml; the one
  // elementwise measurement of a Hopper chip): memory efficiency by bytes per kernel, 1.62 us per
  // kernel. They are the chip's and its CUDA stack's, not an engine's (AIConfigurator measures no
  // elementwise kernels), so every profile of the chip without its own takes them; chips without
  // a measurement take them by the fractions rule (calibrate/README.md "Elementwise kernels").
  e.elementwise.knots = {{1e3, 0.39379}, {1e4, 0.39379}, {1e5, 0.39379}, {1e6, 0.39896},
                         {1e7, 0.76205}, {1e8, 0.76205}, {1e9, 0.76205}};
  e.elementwise_overhead = Duration::picoseconds(1'623'100);
  e.collective_bandwidth = 0.75;  // 340 GB/s of 450 GB/s
  e.collective_latency = Duration::microseconds(35);
  // FP8 GEMMs reach a smaller fraction of their doubled peak than bf16 ones: on H200
  // (AIConfigurator gemm_perf.csv, TensorRT-LLM 1.3.0rc20, n = k = 8192, m = 2048..8192)
  // bf16 runs at 723-806 TFLOP/s (0.73-0.81 of 989) and fp8 at 1,192-1,243 (0.60-0.63 of 1,979):
  // 0.77 of the bf16 efficiency. Assumed the same on every Hopper chip; int8 likewise.
  e.format_compute[static_cast<std::size_t>(ComputeRate::kFp8)] = 0.77;
  e.format_compute[static_cast<std::size_t>(ComputeRate::kInt8)] = 0.77;
  // Assumed, transferred from A100: attention (no H100 attention table) and host overheads.
  return e;
}

Efficiency blackwell_efficiency() {
  // Assumed: no Blackwell kernel measurements in the project; H100's efficiencies, with fp4 at
  // the fp8 fraction. The calibration issue replaces these.
  Efficiency e = h100_efficiency();
  e.format_compute[static_cast<std::size_t>(ComputeRate::kFp4)] = 0.77;
  return e;
}

struct Peaks {
  double bf16 = 0, fp8 = 0, int8 = 0, fp4 = 0;
};

ChipSpec make(std::string name, double memory_bytes, double hbm_bytes_per_s, Peaks peaks, double scale_up_bytes_per_s,
              int domain, double nic_bytes_per_s, Efficiency e, std::string source) {
  ChipSpec c;
  c.name = std::move(name);
  c.memory = Bytes{memory_bytes};
  c.hbm_bandwidth = Bandwidth{hbm_bytes_per_s};
  c.bf16_flops = FlopRate{peaks.bf16};
  c.fp8_flops = FlopRate{peaks.fp8};
  c.int8_flops = FlopRate{peaks.int8};
  c.fp4_flops = FlopRate{peaks.fp4};
  c.scale_up_bandwidth = Bandwidth{scale_up_bytes_per_s};
  c.scale_up_domain = domain;
  c.scale_out_bandwidth = Bandwidth{nic_bytes_per_s};
  // Assumed: one-way latency of an RDMA message across one switch tier, ~5 us.
  c.scale_out_latency = Duration::microseconds(5);
  c.efficiency = std::move(e);
  c.source = std::move(source);
  return c;
}

// Figures: the vendor documents cited per chip ([P] primary, [S] secondary) and AIConfigurator's
// system files (ai-dynamo/aiconfigurator @ 095f58a, aic-core/src/aiconfigurator_core/systems/*.yaml,
// Apache-2.0), named "AIC" below.
std::vector<ChipSpec> build_presets() {
  std::vector<ChipSpec> p;
  // [P] NVIDIA A100 datasheet: 312 TFLOP/s dense BF16, 624 TOPS INT8, no FP8; 2,039 GB/s HBM2e,
  // NVLink 600 GB/s (both directions, 300 per direction), DGX A100 one 200 Gb/s HDR NIC per GPU.
  // Memory: 81,920 MiB as nvidia-smi reports an A100-SXM4-80GB.
  p.push_back(make("a100-80g", 81920.0 * kMiB, 2039e9, {312e12, 0, 624e12, 0}, 300e9, 8, 25e9, a100_efficiency(),
                   "NVIDIA A100 datasheet; efficiencies fitted to Vidur A100 kernel profiles"));
  // [P] NVIDIA H100 page: 989.5 TFLOP/s dense BF16, 1,979 FP8 and INT8, 3.35 TB/s, NVLink
  // 900 GB/s (450 per direction), DGX H100 one 400 Gb/s NIC per GPU. Memory: 81,559 MiB
  // (nvidia-smi, H100 SXM).
  p.push_back(make("h100-sxm", 81559.0 * kMiB, 3.35e12, {989.5e12, 1979e12, 1979e12, 0}, 450e9, 8, 50e9,
                   h100_efficiency(),
                   "NVIDIA H100 page; efficiencies fitted to Vidur H100 kernel profiles (attention "
                   "and host overheads assumed equal to A100's)"));
  // [P] DeepEP README, [S] OEM pages: H100 compute and memory, NVLink cut to 400 GB/s (200 per
  // direction), one 400 Gb/s IB NIC per GPU. Memory assumed as H100 (81,559 MiB).
  p.push_back(make("h800-sxm", 81559.0 * kMiB, 3.35e12, {989.5e12, 1979e12, 1979e12, 0}, 200e9, 8, 50e9,
                   h100_efficiency(),
                   "hardware.md (DeepEP README, OEM pages); efficiencies assumed equal to "
                   "H100's; memory assumed as H100's"));
  // [S] H20: 148 TFLOP/s BF16, 296 FP8 / INT8, 96 GB at 4.0 TB/s, NVLink 900 GB/s. Assumed: 96 GB
  // read as 96e9 bytes, a 400 Gb/s NIC per GPU (hardware.md has no scale-out figure).
  p.push_back(make("h20", 96e9, 4.0e12, {148e12, 296e12, 296e12, 0}, 450e9, 8, 50e9, h100_efficiency(),
                   "hardware.md [S]; NIC and efficiencies (H100's) assumed"));
  // [P] NVIDIA H200 datasheet: 141 GB HBM3e (143,771 MiB in nvidia-smi), 4.8 TB/s, compute and
  // NVLink as H100. NIC: assumed 400 Gb/s per GPU as in DGX H100 (AIC: 50 GB/s per GPU).
  p.push_back(make("h200-sxm", 143771.0 * kMiB, 4.8e12, {989.5e12, 1979e12, 1979e12, 0}, 450e9, 8, 50e9,
                   h100_efficiency(),
                   "NVIDIA H200 datasheet; efficiencies assumed equal to H100's (same SM "
                   "architecture)"));
  // [P] NVIDIA HGX B200 page [D]: 2.25 PFLOP/s dense BF16, 4.5 FP8 / INT8, 9 FP4 (AIC
  // b200_sxm.yaml), ~8 TB/s (AIC uses 7.7), NVLink5 1.8 TB/s (900 per direction), 800 Gb/s NIC per
  // GPU. Memory: AIC mem_capacity 193,273,528,320 bytes (180 GiB).
  p.push_back(make("b200", 193273528320.0, 8e12, {2.25e15, 4.5e15, 4.5e15, 9e15}, 900e9, 8, 100e9,
                   blackwell_efficiency(), "NVIDIA HGX B200 page, AIC b200_sxm.yaml; efficiencies assumed (H100's)"));
  // [S] GB200 NVL72 page, AIC gb200.yaml: 2.5 PFLOP/s BF16, 5 FP8 / INT8, 10 FP4 per GPU,
  // 189,471 MiB (nvidia-smi), 8 TB/s, NVLink5 900 GB/s per direction across a 72-GPU domain,
  // CX8 800 Gb/s (100 GB/s) between racks.
  p.push_back(make("gb200", 189471.0 * kMiB, 8e12, {2.5e15, 5e15, 5e15, 10e15}, 900e9, 72, 100e9,
                   blackwell_efficiency(), "GB200 NVL72 page, AIC gb200.yaml; efficiencies assumed (H100's)"));
  // AIC b300_sxm.yaml (citing NVIDIA's Blackwell Ultra datasheet): 2.25 PFLOP/s dense BF16, 4.5
  // FP8, 14 FP4, INT8 cut to 153.5 TOPS (307 sparse / 2), 7.75 TB/s (62 TB/s per 8-GPU node),
  // 275,040 MiB as nvidia-smi reports it (288,400,343,040 bytes), NVLink5 900 GB/s per direction
  // in an 8-GPU HGX node, CX8 800 Gb/s (100 GB/s) per GPU. hardware.md has no B300 row.
  p.push_back(make("b300", 288400343040.0, 7.75e12, {2.25e15, 4.5e15, 153.5e12, 14e15}, 900e9, 8, 100e9,
                   blackwell_efficiency(),
                   "AIC b300_sxm.yaml (Blackwell Ultra datasheet); efficiencies assumed (H100's)"));
  // AIC gb300.yaml (Blackwell Ultra datasheet): 2.5 PFLOP/s BF16, 5 FP8, 15 FP4, 165 TOPS INT8,
  // 8 TB/s, 284,208 MiB (nvidia-smi; 298,013,687,808 bytes), NVLink5 900 GB/s per direction across
  // the 72-GPU rack, CX8 800 Gb/s (100 GB/s) per GPU between racks.
  p.push_back(make("gb300", 298013687808.0, 8e12, {2.5e15, 5e15, 165e12, 15e15}, 900e9, 72, 100e9,
                   blackwell_efficiency(),
                   "AIC gb300.yaml (Blackwell Ultra datasheet); efficiencies assumed (H100's)"));
  // [P] Atlas 800T A2 whitepaper v16: 64 GB HBM at 1.6 TB/s, 8-chip HCCS full mesh of 392 GB/s,
  // 200 GbE RoCE per NPU, no FP8. Assumed: the 376 TFLOP/s FP16 SKU (the other is 313), INT8 at
  // twice FP16, 64 GB read as 64 GiB, HCCS 392 GB/s counted in both directions (196 per
  // direction), A100's efficiencies (no Ascend measurements in the project).
  p.push_back(make("ascend-910b", 64.0 * kGiB, 1.6e12, {376e12, 0, 752e12, 0}, 196e9, 8, 25e9, a100_efficiency(),
                   "Atlas 800T A2 whitepaper v16; FP16 SKU, INT8 rate, HCCS direction and "
                   "efficiencies (A100's) assumed"));
  // [P] CloudMatrix384 paper (arXiv 2506.12708) section 3: Ascend 910C = two dies, ~750 TFLOP/s
  // FP16 and ~1.5 POPS INT8 per NPU, no FP8, 128 GB at 3.2 TB/s, UB 392 GB/s per NPU per
  // direction inside a 384-NPU supernode, 400 Gb/s RDMA per NPU. As one NPU: the two dies'
  // die-to-die link (270 GB/s) is not modelled. Assumed: 128 GB read as 128 GiB, A100's
  // efficiencies.
  p.push_back(make("ascend-910c", 128.0 * kGiB, 3.2e12, {750e12, 0, 1500e12, 0}, 392e9, 384, 50e9, a100_efficiency(),
                   "CloudMatrix384 paper (arXiv 2506.12708) sec. 3; capacity unit and "
                   "efficiencies (A100's) assumed"));
  // The same NPU as two chips (dies): half of each figure per die, 768 dies in the supernode.
  // Assumed: die-to-die traffic at the UB rate (the 270 GB/s die-to-die link is faster).
  p.push_back(make("ascend-910c-die", 64.0 * kGiB, 1.6e12, {375e12, 0, 750e12, 0}, 196e9, 768, 25e9, a100_efficiency(),
                   "CloudMatrix384 paper (arXiv 2506.12708) sec. 3, per die; die-to-die link, "
                   "capacity unit and efficiencies (A100's) assumed"));
  // A generic domestic accelerator class: 64 GB at 1.6 TB/s (the class the issue names). Assumed:
  // 300 TFLOP/s BF16 and 600 TOPS INT8 (Cambricon MLU590 / MetaX C500 class, hardware.md [S]
  // unverified), no FP8, an 8-chip scale-up domain at 200 GB/s per direction, a 200 Gb/s NIC,
  // A100's efficiencies.
  p.push_back(make("domestic-64g", 64.0 * kGiB, 1.6e12, {300e12, 0, 600e12, 0}, 200e9, 8, 25e9, a100_efficiency(),
                   "generic 64 GB / 1.6 TB/s class; compute, links and efficiencies assumed"));
  // The PCIe systems AIConfigurator measures (AIC <name>.yaml: dense tensor-core peaks, memory
  // bandwidth and capacity, eight GPUs a node joined by PCIe only, at the per-GPU, per-direction
  // rate the file gives, and its NIC per GPU). Efficiencies: assumed, the architecture's nearest
  // preset's: H100's for H100 PCIe (the same GH100 die), A100's for the Ampere parts and for Ada
  // (L40S, L4: an Ampere-derived SM), Blackwell's for the RTX PRO 6000 (a GB202, not the
  // datacenter die), A100's for Intel's Arc Pro B60 (no Intel measurement in the project; AIC
  // itself notes ~48% of its 456 GB/s reached by memory-bound kernels).
  p.push_back(make("h100-pcie", 85899345920.0, 2e12, {756.5e12, 1513e12, 1513e12, 0}, 64e9, 8, 50e9, h100_efficiency(),
                   "AIC h100_pcie.yaml; efficiencies assumed (H100's)"));
  p.push_back(make("a100-pcie", 85899345920.0, 1935e9, {312e12, 0, 624e12, 0}, 32e9, 8, 25e9, a100_efficiency(),
                   "AIC a100_pcie.yaml; efficiencies assumed (A100's)"));
  p.push_back(make("a30", 25769803776.0, 933e9, {165e12, 0, 330e12, 0}, 32e9, 8, 25e9, a100_efficiency(),
                   "AIC a30.yaml; efficiencies assumed (A100's)"));
  p.push_back(make("l40s", 48305799168.0, 864e9, {362.05e12, 733e12, 733e12, 0}, 32e9, 8, 50e9, a100_efficiency(),
                   "AIC l40s.yaml; efficiencies assumed (A100's)"));
  p.push_back(make("l4", 25769803776.0, 300e9, {121e12, 242e12, 242e12, 0}, 32e9, 8, 25e9, a100_efficiency(),
                   "AIC l4.yaml; efficiencies assumed (A100's)"));
  p.push_back(make("rtx-pro-6000", 102641958912.0, 1.792e12, {467.8e12, 935.6e12, 935.6e12, 1871.2e12}, 64e9, 8, 50e9,
                   blackwell_efficiency(),
                   "AIC rtx_pro_6000_server.yaml (peaks at its observed 2,430 MHz); efficiencies assumed (H100's)"));
  p.push_back(make("arc-pro-b60", 25769803776.0, 456e9, {98.304e12, 0, 197e12, 0}, 28.4e9, 8, 50e9, a100_efficiency(),
                   "AIC b60.yaml (no FP8 matrix rate); efficiencies assumed (A100's)"));
  // Host links, per direction (KV swap to host memory). [P] PCI-SIG: PCIe 4.0 x16 carries 32 GB/s
  // per direction, PCIe 5.0 x16 64 GB/s (raw, before ~3% encoding and protocol overhead, which
  // the figures below do not subtract). [P] NVIDIA A100 datasheet: PCIe Gen4; H100 / H200 / H800 /
  // H20 datasheets and the HGX B200 page: PCIe Gen5 x16; GB200 NVL72 page: NVLink-C2C 900 GB/s
  // between Grace and each Blackwell GPU (450 per direction), the same on GB300 (AIC gb300.yaml).
  // [S] Atlas 800T A2 whitepaper: PCIe 5.0 x16 per NPU. Assumed: the 910C (and each of its dies,
  // sharing it) and the generic domestic class on PCIe 5.0 x16 and 4.0 x16.
  for (ChipSpec& c : p) {
    double host = 64e9;
    if (c.name == "a100-80g" || c.name == "domestic-64g" || c.name == "a100-pcie" || c.name == "a30" ||
        c.name == "l40s" || c.name == "l4" || c.name == "arc-pro-b60") {
      host = 32e9;  // AIC pcie_bw (PCIe 4.0 x16; the B60's 5.0 x8)
    }
    if (c.name == "gb200" || c.name == "gb300") host = 450e9;
    if (c.name == "b300") host = 128e9;  // AIC b300_sxm.yaml: PCIe Gen6, 256 GB/s both directions
    if (c.name == "ascend-910c-die") host = 32e9;
    c.host_bandwidth = Bandwidth{host};
  }
  // SMs per chip. [P] NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs on
  // A100; [P] NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 132 SMs on H100 SXM5;
  // H200 and H800 are the same GH100 configuration (132). [S] Chips and Cheese, "Nvidia's B200:
  // Keeping the CUDA Juggernaut Rolling" (2025): 74 of each die's 80 SMs enabled, 148 on B200;
  // GB200 pairs the same GPU with Grace. [P] NVIDIA technical blog "Inside NVIDIA Blackwell Ultra"
  // (Hot Chips 2025): 160 SMs on Blackwell Ultra (B300, GB300). Others unknown (0).
  for (ChipSpec& c : p) {
    if (c.name == "a100-80g") c.sms = 108;
    if (c.name == "h100-sxm" || c.name == "h200-sxm" || c.name == "h800-sxm") c.sms = 132;
    if (c.name == "b200" || c.name == "gb200") c.sms = 148;
    if (c.name == "b300" || c.name == "gb300") c.sms = 160;
  }
  // The H800 SXM is the H100 SXM's die with its NVLink cut ([P] DeepEP README, [S] OEM page:
  // tensor-core rates, SMs and 80 GB of HBM3 at 3.35 TB/s as H100; NVLink 400 GB/s, ~160 GB/s
  // achieved by DeepEP): a kernel takes the same time on both, so it takes the H100 profiles'
  // operator figures, while its collective figures stay its own (200 GB/s per direction).
  for (ChipSpec& c : p) {
    if (c.name == "h800-sxm") c.kernels_of = "h100-sxm";
  }
  return p;
}

const std::vector<ChipSpec>& presets() {
  static const std::vector<ChipSpec> kPresets = build_presets();
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
