// Number formats of weights, activations and the KV cache, and which of a chip's peak rates a
// matrix multiply in each format runs at.
//
// Bytes per element include the scale factors the format carries (sources per format in
// formats.cpp): block-scaled fp8 stores one fp32 scale per 128 x 128 weight block (DeepSeek-V3's
// checkpoint), W4A8 one bf16 scale per 128 int4 weights, NVFP4 one fp8 scale per 16 fp4 values,
// MXFP4 one 8-bit power-of-two scale per 32 values (OCP MX spec), W4A16 one bf16 scale per 32
// int4 weights (a weight-only format: bf16 activations, the bf16 rate). Per-tensor and per-channel
// scales (fp8, int8) add less than 0.1% and are not counted.
// Ignored: fp16 (costed as bf16: same width and tensor-core rate), per-token activation scales,
// the accuracy of any format.
// Invariant: every Format has a name, a byte width and a compute rate; KV caches use only
// bf16, fp8 and int8.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace servesim::models {

enum class Format : std::uint8_t { kBf16, kFp8, kFp8Block, kInt8, kW4A8, kNvfp4, kMxfp4, kW4A16, kCount };
constexpr std::size_t kFormats = static_cast<std::size_t>(Format::kCount);

// The tensor-core rates a chip may have (dense). A GEMM whose weights are in format f runs at
// compute_rate(f) when the chip has it.
enum class ComputeRate : std::uint8_t { kBf16, kFp8, kInt8, kFp4, kCount };
constexpr std::size_t kComputeRates = static_cast<std::size_t>(ComputeRate::kCount);

std::string_view format_name(Format f);
std::optional<Format> parse_format(std::string_view name);
std::vector<std::string_view> format_names();
std::vector<std::string_view> kv_format_names();
bool is_kv_format(Format f);

// Stored bytes per element, scales included.
double bytes_per_element(Format f);
// Bytes per element of the activations a GEMM in this format reads (its A operand): 2 for bf16
// and the weight-only path (W4A16), 1 for fp8/int8/W4A8 (quantised activations), 0.5625 for NVFP4 and
// MXFP4 (fp4 activations with their scales).
double activation_bytes_per_element(Format f);
ComputeRate compute_rate(Format f);
std::string_view compute_rate_name(ComputeRate r);

}  // namespace servesim::models
