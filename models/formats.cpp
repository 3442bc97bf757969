#include "models/formats.h"

namespace servesim::models {
namespace {

struct FormatInfo {
  std::string_view name;
  double bytes;             // stored bytes per element, scales included
  double activation_bytes;  // bytes per activation element the GEMM reads
  ComputeRate rate;
  bool kv;
};

// bf16: 2 bytes.
// fp8 (e4m3, per-tensor scale; vLLM's fp8 and fp8 KV cache): 1 byte.
// fp8_block: 1 byte + one fp32 scale per 128 x 128 block = 1 + 4 / 16384 (DeepSeek-V3
//   config.json quantization_config.weight_block_size [128, 128]).
// int8 (W8A8, SmoothQuant-style per-channel weight scales): 1 byte.
// w4a8: int4 weights (0.5 byte) + one bf16 scale per group of 128 = 0.5 + 2 / 128 (TensorRT-LLM
//   W4A8 AWQ, group size 128); activations fp8, so the GEMM runs at the fp8 rate.
// nvfp4: e2m1 (0.5 byte) + one e4m3 scale per 16 elements = 0.5 + 1 / 16 (NVIDIA NVFP4).
// mxfp4: e2m1 (0.5 byte) + one e8m0 scale per 32 elements = 0.5 + 1 / 32 (OCP Microscaling
//   Formats spec v1.0; gpt-oss experts).
// w4a16: int4 weights (0.5 byte) + one bf16 scale per group of 32 = 0.5 + 2 / 32 (compressed-tensors
//   pack-quantized, group_size 32: moonshotai/Kimi-K2.5 config.json quantization_config; AIConfigurator's
//   int4_wo mode); activations stay bf16 and the weight-only kernels (Marlin / Machete) dequantise
//   in registers, so the GEMM runs at the bf16 rate.
constexpr std::array<FormatInfo, kFormats> kInfo = {{
    {"bf16", 2.0, 2.0, ComputeRate::kBf16, true},
    {"fp8", 1.0, 1.0, ComputeRate::kFp8, true},
    {"fp8_block", 1.0 + 4.0 / 16384.0, 1.0 + 4.0 / 128.0, ComputeRate::kFp8, false},
    {"int8", 1.0, 1.0, ComputeRate::kInt8, true},
    {"w4a8", 0.5 + 2.0 / 128.0, 1.0, ComputeRate::kFp8, false},
    {"nvfp4", 0.5 + 1.0 / 16.0, 0.5 + 1.0 / 16.0, ComputeRate::kFp4, false},
    {"mxfp4", 0.5 + 1.0 / 32.0, 0.5 + 1.0 / 32.0, ComputeRate::kFp4, false},
    {"w4a16", 0.5 + 2.0 / 32.0, 2.0, ComputeRate::kBf16, false},
}};

const FormatInfo& info(Format f) { return kInfo[static_cast<std::size_t>(f)]; }

}  // namespace

std::string_view format_name(Format f) { return info(f).name; }

std::optional<Format> parse_format(std::string_view name) {
  for (std::size_t i = 0; i < kFormats; ++i) {
    if (kInfo[i].name == name) return static_cast<Format>(i);
  }
  return std::nullopt;
}

std::vector<std::string_view> format_names() {
  std::vector<std::string_view> out;
  out.reserve(kInfo.size());
  for (const auto& i : kInfo) out.push_back(i.name);
  return out;
}

std::vector<std::string_view> kv_format_names() {
  std::vector<std::string_view> out;
  for (const auto& i : kInfo) {
    if (i.kv) out.push_back(i.name);
  }
  return out;
}

bool is_kv_format(Format f) { return info(f).kv; }
double bytes_per_element(Format f) { return info(f).bytes; }
double activation_bytes_per_element(Format f) { return info(f).activation_bytes; }
ComputeRate compute_rate(Format f) { return info(f).rate; }

std::string_view compute_rate_name(ComputeRate r) {
  switch (r) {
    case ComputeRate::kBf16: return "bf16";
    case ComputeRate::kFp8: return "fp8";
    case ComputeRate::kInt8: return "int8";
    case ComputeRate::kFp4: return "fp4";
    case ComputeRate::kCount: break;
  }
  return "?";
}

}  // namespace servesim::models
