// What the GPU collector measures and how long it times each call: the host-side half of
// tools/gpu_collector, plain C++ so that it builds and is tested on machines without CUDA.
//
// The sweep (collector_plan):
// - GEMM, cuBLASLt, D[m x n] = A[m x k] W^T with W stored [n][k] (PyTorch's Linear layout, the
//   "TN" layout cuBLASLt needs for fp8): bf16, and fp8 e4m3 with bf16 output; m = 1 .. 16384
//   tokens (powers of two), (n, k) the per-GPU weight shapes of Llama-3.1-8B / 70B and
//   Qwen3-32B projections at TP 1, 2, 4, 8.
// - HBM copy: cudaMemcpyAsync device to device, 4 KiB .. 4 GiB (powers of 4).
// - Decode attention: one new token per sequence against a bf16 KV cache, batch 1 .. 256,
//   KV length 128 .. 32768, head layouts (32, 8), (64, 8), (8, 1), (32, 32) x head_dim 128, run
//   by the collector's own split-KV kernel (not FlashAttention or FlashInfer: it measures the
//   KV-reading pattern, and says so in the `kernel` column).
// Timing (choose_repeats): after warm-up, each repetition times `inner` back-to-back calls with
// CUDA events (so launch latency overlaps, as in a CUDA graph or a busy stream), long enough to
// drown the event resolution; the median over repetitions is the latency.
// Ignored: power and clock state (the run script records clocks), multi-GPU effects.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/native_csv.h"

namespace servesim::gpu_collector {

struct PlanOptions {
  bool gemm = true, copy = true, attention = true;
  bool fp8 = true;     // include fp8 GEMMs (the collector skips them on GPUs without fp8)
  bool quick = false;  // a few shapes of each kind: a smoke test that runs in seconds
};

// The calls to measure, as native rows without timings (repeats == 0), in measuring order.
std::vector<calibrate::NativeRow> collector_plan(const PlanOptions& options);

// Kernel labels written to the `kernel` column.
inline constexpr std::string_view kGemmKernel = "cublasLt heuristic top-1";
inline constexpr std::string_view kCopyKernel = "cudaMemcpyAsync device to device";
inline constexpr std::string_view kDecodeKernel = "servesim split-KV decode (bf16, fp32 softmax)";

// servesim's chip name for a CUDA device name ("NVIDIA H200" -> "h200-sxm"), "" if unknown.
std::string chip_for_device(std::string_view device_name);

struct Repeats {
  int inner = 1;  // calls per timed batch
  int reps = 10;  // timed batches
};
// From one call's duration: inner calls so a batch lasts >= 200 us (event timing resolution is
// about 0.5 us), and enough batches for >= 30 ms of timed work, clamped to 10 .. 100.
Repeats choose_repeats(double one_call_s);

// How many KV-length splits the decode kernel uses: enough blocks (batch x kv_heads x splits)
// to fill `sms` multiprocessors twice, but never fewer than 64 keys per split.
int decode_splits(int batch, int kv_heads, int kv_len, int sms);

// Buffer sets to rotate through so that consecutive calls do not find their inputs in L2:
// enough to cover twice the L2 size (so about 2 x L2 of memory in all), at least 1 and at most
// 256 (below 2 x L2 / 256, about 0.5 MB on an H200, inputs stay in L2: such calls are
// latency-bound anyway).
int rotation_sets(double bytes_per_set, double l2_bytes);

}  // namespace servesim::gpu_collector
