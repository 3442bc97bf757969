// gpu_collector: times GEMMs (cuBLASLt), HBM copies and decode-attention KV reads on one CUDA GPU
// and writes them as servesim.measurements/1 rows (calibrate/native_csv.h). The sweep and the
// timing rules are in plan.h; tools/gpu_collector/README.md says how to run it.
//
//   gpu_collector --out FILE [--chip NAME] [--driver TEXT] [--only gemm,copy,attention] [--quick]
//                 [--no-fp8] [--max-seconds S] [--device N]
//   gpu_collector --list FILE [--quick] ...      write the plan only (no GPU needed)
//   gpu_collector --self-test                    check the kernels' results against the CPU
//
// Output goes to FILE.partial, one flushed row per measurement, renamed to FILE when the sweep
// ends: a run cut short leaves the rows it measured in FILE.partial.
// Exit codes: 0 ok, 2 bad usage, 1 a CUDA or cuBLASLt failure (the message names the call).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/errors.h"
#include "core/output_file.h"
#include "tools/gpu_collector/plan.h"

namespace gc = servesim::gpu_collector;
namespace cal = servesim::calibrate;

namespace {

constexpr const char* kCollector = "servesim gpu_collector 1";

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}
#define CUDA(call) check_cuda((call), #call)
#define LT(call) check_lt((call), #call)

// ---- device buffers and fills ----

struct DeviceBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  explicit DeviceBuffer(std::size_t n) : bytes(n) { CUDA(cudaMalloc(&ptr, std::max<std::size_t>(n, 256))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

__device__ float hash_uniform(std::uint64_t i, std::uint32_t seed) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ULL + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return static_cast<float>(x >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;  // [-1, 1)
}

__global__ void fill_bf16(__nv_bfloat16* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = __float2bfloat16(hash_uniform(i, seed));
  }
}

__global__ void fill_fp8(__nv_fp8_e4m3* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = __nv_fp8_e4m3(hash_uniform(i, seed));
  }
}

void fill(const DeviceBuffer& b, cal::Format f, std::uint32_t seed) {
  if (f == cal::Format::fp8) {
    fill_fp8<<<1024, 256>>>(b.as<__nv_fp8_e4m3>(), b.bytes, seed);
  } else {
    fill_bf16<<<1024, 256>>>(b.as<__nv_bfloat16>(), b.bytes / 2, seed);
  }
  CUDA(cudaGetLastError());
}

// ---- timing ----

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int repeats = 0;
};

// Times `call(i)` (i counts calls, for buffer rotation) by plan.h's rules.
template <typename Call>
Timing time_calls(cudaStream_t stream, Call call) {
  cudaEvent_t start, stop;
  CUDA(cudaEventCreate(&start));
  CUDA(cudaEventCreate(&stop));
  long counter = 0;
  // Warm-up (clocks, cuBLASLt's first-call setup), then one timed call to size the batches.
  for (int i = 0; i < 3; ++i) call(counter++);
  CUDA(cudaEventRecord(start, stream));
  call(counter++);
  CUDA(cudaEventRecord(stop, stream));
  CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA(cudaEventElapsedTime(&ms, start, stop));
  const gc::Repeats rep = gc::choose_repeats(ms * 1e-3);
  std::vector<double> per_call;
  for (int r = 0; r < rep.reps; ++r) {
    CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < rep.inner; ++i) call(counter++);
    CUDA(cudaEventRecord(stop, stream));
    CUDA(cudaEventSynchronize(stop));
    CUDA(cudaEventElapsedTime(&ms, start, stop));
    per_call.push_back(ms * 1e-3 / rep.inner);
  }
  CUDA(cudaEventDestroy(start));
  CUDA(cudaEventDestroy(stop));
  std::sort(per_call.begin(), per_call.end());
  Timing t;
  const std::size_t n = per_call.size();
  t.median_s = n % 2 ? per_call[n / 2] : 0.5 * (per_call[n / 2 - 1] + per_call[n / 2]);
  t.min_s = per_call.front();
  t.max_s = per_call.back();
  t.repeats = rep.reps * rep.inner;
  return t;
}

// ---- GEMM (cuBLASLt, TN: D[m x n] = X[m x k] W[n x k]^T, column-major M = n, N = m, K = k) ----

// One GEMM shape and format, described to cuBLASLt once; call() runs it on given buffers.
class GemmCall {
 public:
  GemmCall(cublasLtHandle_t lt, std::uint64_t m, std::uint64_t n, std::uint64_t k, cal::Format format,
           std::size_t workspace_bytes)
      : lt_(lt), fp8_(format == cal::Format::fp8) {
    const cudaDataType_t in_type = fp8_ ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    LT(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (fp8_) {
      const std::int8_t fast = 1;  // fast accumulation, as inference engines run fp8 GEMMs
      LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    LT(cublasLtMatrixLayoutCreate(&a_, in_type, k, n, k));      // W: k x n column-major, op T
    LT(cublasLtMatrixLayoutCreate(&b_, in_type, k, m, k));      // X: k x m column-major
    LT(cublasLtMatrixLayoutCreate(&c_, CUDA_R_16BF, n, m, n));  // D: n x m column-major
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                            sizeof workspace_bytes));
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, op_, a_, b_, c_, c_, pref, 1, &heuristic_, &found);
    supported_ = st == CUBLAS_STATUS_SUCCESS && found > 0;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  ~GemmCall() {
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(c_);
    cublasLtMatmulDescDestroy(op_);
  }
  GemmCall(const GemmCall&) = delete;
  GemmCall& operator=(const GemmCall&) = delete;
  bool supported() const { return supported_; }

  void call(const DeviceBuffer& w, const DeviceBuffer& x, const DeviceBuffer& d, const DeviceBuffer& workspace,
            cudaStream_t stream) const {
    const float alpha = 1, beta = 0;
    LT(cublasLtMatmul(lt_, op_, &alpha, w.ptr, a_, x.ptr, b_, &beta, d.ptr, c_, d.ptr, c_, &heuristic_.algo,
                      workspace.ptr, workspace.bytes, stream));
  }

 private:
  cublasLtHandle_t lt_;
  bool fp8_;
  cublasLtMatmulDesc_t op_{};
  cublasLtMatrixLayout_t a_{}, b_{}, c_{};
  cublasLtMatmulHeuristicResult_t heuristic_{};
  bool supported_ = false;
};

struct GemmOperands {
  std::unique_ptr<DeviceBuffer> w, x, d;
};

GemmOperands gemm_operands(std::uint64_t m, std::uint64_t n, std::uint64_t k, cal::Format f, std::uint32_t seed) {
  const double in_bytes = f == cal::Format::fp8 ? 1 : 2;
  GemmOperands o;
  o.w = std::make_unique<DeviceBuffer>(std::size_t(double(n) * k * in_bytes));
  o.x = std::make_unique<DeviceBuffer>(std::size_t(double(m) * k * in_bytes));
  o.d = std::make_unique<DeviceBuffer>(std::size_t(double(m) * n * 2));
  fill(*o.w, f, 2 * seed + 1);
  fill(*o.x, f, 2 * seed + 2);
  return o;
}

struct Gemm {
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer workspace{32u << 20};
  Gemm() { LT(cublasLtCreate(&lt)); }
  ~Gemm() { cublasLtDestroy(lt); }

  // Returns false when cuBLASLt has no algorithm for the shape and format.
  bool run(const cal::NativeRow& row, double l2_bytes, cudaStream_t stream, Timing& out) {
    const auto m = static_cast<std::uint64_t>(row.shape.get(cal::Dim::m));
    const auto n = static_cast<std::uint64_t>(row.shape.get(cal::Dim::n));
    const auto k = static_cast<std::uint64_t>(row.shape.get(cal::Dim::k));
    const GemmCall gemm(lt, m, n, k, row.format, workspace.bytes);
    if (!gemm.supported()) return false;
    const double in_bytes = row.format == cal::Format::fp8 ? 1 : 2;
    const double set_bytes = (double(n) * k + double(m) * k) * in_bytes + double(m) * n * 2;
    std::vector<GemmOperands> sets;
    for (int s = 0; s < gc::rotation_sets(set_bytes, l2_bytes); ++s) {
      sets.push_back(gemm_operands(m, n, k, row.format, std::uint32_t(s)));
    }
    out = time_calls(stream, [&](long i) {
      const GemmOperands& o = sets[std::size_t(i) % sets.size()];
      gemm.call(*o.w, *o.x, *o.d, workspace, stream);
    });
    return true;
  }
};

// ---- decode attention: split-KV ("flash decoding") over a contiguous bf16 KV cache ----
// K, V: [batch][kv_len][kv_heads][128]; q, out: [batch][heads][128]. Block = 4 warps; one block
// per (split, kv head, sequence) handles the G = heads / kv_heads query heads that share the KV
// head; each warp takes every 4th key of the split, keeps an online softmax per query head,
// then the block merges its warps and writes one partial (max, sum, weighted values) per head.

constexpr int kHeadDim = 128;
constexpr int kWarps = 4;
constexpr int kPer = kHeadDim / 32;  // elements per lane

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int G>
__global__ void decode_partial(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                               const __nv_bfloat16* __restrict__ v, float* __restrict__ part_acc,
                               float* __restrict__ part_ml, int kv_len, int kv_heads, int chunk, int splits) {
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int heads = kv_heads * G;
  const float scale = rsqrtf(float(kHeadDim));
  float qr[G][kPer], acc[G][kPer], m[G], l[G];
  for (int g = 0; g < G; ++g) {
    const __nv_bfloat16* qp = q + (std::size_t(b) * heads + kvh * G + g) * kHeadDim + lane * kPer;
    for (int i = 0; i < kPer; ++i) {
      qr[g][i] = __bfloat162float(qp[i]) * scale;
      acc[g][i] = 0;
    }
    m[g] = -INFINITY;
    l[g] = 0;
  }
  const int begin = split * chunk, end = min(kv_len, begin + chunk);
  for (int j = begin + warp; j < end; j += kWarps) {
    const std::size_t off = ((std::size_t(b) * kv_len + j) * kv_heads + kvh) * kHeadDim + lane * kPer;
    float kf[kPer], vf[kPer];
    for (int i = 0; i < kPer; ++i) {
      kf[i] = __bfloat162float(k[off + i]);
      vf[i] = __bfloat162float(v[off + i]);
    }
    for (int g = 0; g < G; ++g) {
      float s = 0;
      for (int i = 0; i < kPer; ++i) s += qr[g][i] * kf[i];
      s = warp_sum(s);
      const float nm = fmaxf(m[g], s);
      const float corr = __expf(m[g] - nm), p = __expf(s - nm);
      l[g] = l[g] * corr + p;
      for (int i = 0; i < kPer; ++i) acc[g][i] = acc[g][i] * corr + p * vf[i];
      m[g] = nm;
    }
  }
  __shared__ float sm_m[kWarps][G], sm_l[kWarps][G], sm_acc[kWarps][G][kHeadDim];
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
    for (int i = 0; i < kPer; ++i) sm_acc[warp][g][lane * kPer + i] = acc[g][i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * kHeadDim; idx += blockDim.x) {
    const int g = idx / kHeadDim, d = idx % kHeadDim;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float sum = 0, a = 0;
    if (mx > -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float f = __expf(sm_m[w][g] - mx);
        sum += sm_l[w][g] * f;
        a += sm_acc[w][g][d] * f;
      }
    }
    const std::size_t slot = (std::size_t(b) * heads + kvh * G + g) * splits + split;
    part_acc[slot * kHeadDim + d] = a;
    if (d == 0) {
      part_ml[2 * slot] = mx;
      part_ml[2 * slot + 1] = sum;
    }
  }
}

__global__ void decode_combine(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                               __nv_bfloat16* __restrict__ out, int heads, int splits) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const std::size_t base = (std::size_t(b) * heads + h) * splits;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, part_ml[2 * (base + s)]);
  float sum = 0, a = 0;
  for (int s = 0; s < splits; ++s) {
    const float ms = part_ml[2 * (base + s)];
    if (ms == -INFINITY) continue;
    const float f = __expf(ms - mx);
    sum += part_ml[2 * (base + s) + 1] * f;
    a += part_acc[(base + s) * kHeadDim + d] * f;
  }
  out[(std::size_t(b) * heads + h) * kHeadDim + d] = __float2bfloat16(sum > 0 ? a / sum : 0.0f);
}

struct DecodeBuffers {
  std::unique_ptr<DeviceBuffer> q, k, v, out, acc, ml;
};

void launch_decode(const DecodeBuffers& buf, int batch, int kv_len, int heads, int kv_heads, int splits,
                   cudaStream_t stream) {
  const int chunk = (kv_len + splits - 1) / splits;
  const dim3 grid(splits, kv_heads, batch);
  const int g = heads / kv_heads;
  auto* q = buf.q->as<__nv_bfloat16>();
  auto* k = buf.k->as<__nv_bfloat16>();
  auto* v = buf.v->as<__nv_bfloat16>();
  auto* acc = buf.acc->as<float>();
  auto* ml = buf.ml->as<float>();
  switch (g) {
    case 1:
      decode_partial<1><<<grid, 32 * kWarps, 0, stream>>>(q, k, v, acc, ml, kv_len, kv_heads, chunk, splits);
      break;
    case 4:
      decode_partial<4><<<grid, 32 * kWarps, 0, stream>>>(q, k, v, acc, ml, kv_len, kv_heads, chunk, splits);
      break;
    case 8:
      decode_partial<8><<<grid, 32 * kWarps, 0, stream>>>(q, k, v, acc, ml, kv_len, kv_heads, chunk, splits);
      break;
    default: throw std::runtime_error("decode kernel: heads / kv_heads must be 1, 4 or 8");
  }
  decode_combine<<<dim3(heads, batch), kHeadDim, 0, stream>>>(acc, ml, buf.out->as<__nv_bfloat16>(), heads, splits);
}

DecodeBuffers decode_buffers(int batch, int kv_len, int heads, int kv_heads, int splits) {
  DecodeBuffers b;
  const std::size_t kv = std::size_t(batch) * kv_len * kv_heads * kHeadDim * 2;
  b.q = std::make_unique<DeviceBuffer>(std::size_t(batch) * heads * kHeadDim * 2);
  b.k = std::make_unique<DeviceBuffer>(kv);
  b.v = std::make_unique<DeviceBuffer>(kv);
  b.out = std::make_unique<DeviceBuffer>(std::size_t(batch) * heads * kHeadDim * 2);
  b.acc = std::make_unique<DeviceBuffer>(std::size_t(batch) * heads * splits * kHeadDim * 4);
  b.ml = std::make_unique<DeviceBuffer>(std::size_t(batch) * heads * splits * 2 * 4);
  fill(*b.q, cal::Format::bf16, 11);
  fill(*b.k, cal::Format::bf16, 12);
  fill(*b.v, cal::Format::bf16, 13);
  return b;
}

Timing run_decode(const cal::NativeRow& row, int sms, double l2_bytes, cudaStream_t stream, int& splits) {
  const int batch = int(row.shape.get(cal::Dim::batch)), kv_len = int(row.shape.get(cal::Dim::kv_len));
  const int heads = int(row.shape.get(cal::Dim::heads)), kv_heads = int(row.shape.get(cal::Dim::kv_heads));
  splits = gc::decode_splits(batch, kv_heads, kv_len, sms);
  const double set_bytes = 2.0 * batch * kv_len * kv_heads * kHeadDim * 2;
  const int sets = gc::rotation_sets(set_bytes, l2_bytes);
  std::vector<DecodeBuffers> bufs;
  for (int s = 0; s < sets; ++s) bufs.push_back(decode_buffers(batch, kv_len, heads, kv_heads, splits));
  return time_calls(stream, [&](long i) {
    launch_decode(bufs[std::size_t(i) % bufs.size()], batch, kv_len, heads, kv_heads, splits, stream);
  });
}

Timing run_copy(const cal::NativeRow& row, double l2_bytes, cudaStream_t stream) {
  const auto bytes = std::size_t(row.shape.get(cal::Dim::bytes));
  const int sets = gc::rotation_sets(2.0 * bytes, l2_bytes);
  std::vector<std::unique_ptr<DeviceBuffer>> src, dst;
  for (int s = 0; s < sets; ++s) {
    src.push_back(std::make_unique<DeviceBuffer>(bytes));
    dst.push_back(std::make_unique<DeviceBuffer>(bytes));
    fill(*src.back(), cal::Format::bf16, 21 + s);
  }
  return time_calls(stream, [&](long i) {
    const std::size_t s = std::size_t(i) % src.size();
    CUDA(cudaMemcpyAsync(dst[s]->ptr, src[s]->ptr, bytes, cudaMemcpyDeviceToDevice, stream));
  });
}

// ---- self-test: the kernels' results against a CPU reference ----

std::vector<float> to_host_bf16(const DeviceBuffer& b) {
  std::vector<__nv_bfloat16> raw(b.bytes / 2);
  CUDA(cudaMemcpy(raw.data(), b.ptr, b.bytes, cudaMemcpyDeviceToHost));
  std::vector<float> out;
  for (auto x : raw) out.push_back(__bfloat162float(x));
  return out;
}

int self_test() {
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  int failures = 0;
  // Decode attention: batch 2, 300 keys (not a multiple of the split or the warp count), 8 heads
  // over 2 KV heads, 3 splits; against softmax(q k^T / sqrt(128)) v in double.
  {
    const int batch = 2, len = 300, heads = 8, kvh = 2, splits = 3;
    DecodeBuffers b = decode_buffers(batch, len, heads, kvh, splits);
    launch_decode(b, batch, len, heads, kvh, splits, stream);
    CUDA(cudaStreamSynchronize(stream));
    const auto q = to_host_bf16(*b.q), k = to_host_bf16(*b.k), v = to_host_bf16(*b.v), o = to_host_bf16(*b.out);
    double worst = 0;
    for (int s = 0; s < batch; ++s) {
      for (int h = 0; h < heads; ++h) {
        const int g = h / (heads / kvh);
        std::vector<double> score(len);
        double mx = -1e300;
        for (int j = 0; j < len; ++j) {
          double d = 0;
          for (int i = 0; i < kHeadDim; ++i) {
            d += q[(s * heads + h) * kHeadDim + i] * k[((std::size_t(s) * len + j) * kvh + g) * kHeadDim + i];
          }
          score[j] = d / std::sqrt(double(kHeadDim));
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        for (double& x : score) sum += (x = std::exp(x - mx));
        for (int i = 0; i < kHeadDim; ++i) {
          double ref = 0;
          for (int j = 0; j < len; ++j)
            ref += score[j] / sum * v[((std::size_t(s) * len + j) * kvh + g) * kHeadDim + i];
          worst = std::max(worst, std::fabs(o[(s * heads + h) * kHeadDim + i] - ref));
        }
      }
    }
    // Outputs are softmax averages of 300 values uniform in [-1, 1), of order 0.03, rounded to
    // bf16 (2^-9 relative: about 1e-4); a wrong index gives differences of the outputs' own
    // size. 2e-3 sits between the two.
    const bool ok = worst < 2e-3;
    failures += !ok;
    std::printf("self-test decode attention: max abs error %.2e %s\n", worst, ok ? "ok" : "FAILED");
  }
  // GEMM bf16 and fp8: D = X W^T on 64 x 128 x 256 through the timed path's GemmCall, against
  // the same inputs on the CPU.
  Gemm gemm;
  for (cal::Format f : {cal::Format::bf16, cal::Format::fp8}) {
    const GemmCall call(gemm.lt, 64, 128, 256, f, gemm.workspace.bytes);
    if (!call.supported()) {
      std::printf("self-test GEMM %s: no cuBLASLt algorithm on this GPU\n", std::string(cal::format_name(f)).c_str());
      continue;
    }
    const GemmOperands o = gemm_operands(64, 128, 256, f, 7);
    call.call(*o.w, *o.x, *o.d, gemm.workspace, stream);
    CUDA(cudaStreamSynchronize(stream));
    auto host = [&](const DeviceBuffer& b) {
      if (f != cal::Format::fp8) return to_host_bf16(b);
      std::vector<__nv_fp8_e4m3> raw(b.bytes);
      CUDA(cudaMemcpy(raw.data(), b.ptr, b.bytes, cudaMemcpyDeviceToHost));
      std::vector<float> out;
      for (auto x : raw) out.push_back(float(x));
      return out;
    };
    const auto hw = host(*o.w), hx = host(*o.x), hd = to_host_bf16(*o.d);
    double worst = 0;
    for (int i = 0; i < 64; ++i) {
      for (int j = 0; j < 128; ++j) {
        double ref = 0;
        for (int p = 0; p < 256; ++p) ref += double(hx[i * 256 + p]) * hw[j * 256 + p];
        worst = std::max(worst, std::fabs(hd[i * 128 + j] - ref) / (1 + std::fabs(ref)));
      }
    }
    // Sums of 256 products of values in [-1, 1): |ref| up to ~10; bf16 output rounding is 2^-8
    // relative, fp8 fast accumulation adds a little: 2e-2 relative to (1 + |ref|).
    const bool ok = worst < 2e-2;
    failures += !ok;
    std::printf("self-test GEMM %s: max relative error %.2e %s\n", std::string(cal::format_name(f)).c_str(), worst,
                ok ? "ok" : "FAILED");
  }
  CUDA(cudaStreamDestroy(stream));
  return failures == 0 ? 0 : 1;
}

// ---- command line ----

struct Args {
  std::string out, list, chip, driver, only;
  bool quick = false, fp8 = true, self_test = false;
  double max_seconds = 1e9;
  int device = 0;
};

// Parses the command line (Boost.Program_options, as the main binary). Prints the usage and
// returns the exit code when the program is done (0 for --help, 2 for a bad command line).
std::optional<int> parse(int argc, char** argv, Args& a) {
  namespace po = boost::program_options;
  po::options_description d(
      "usage: gpu_collector --out FILE [options]       measure and write the native CSV\n"
      "       gpu_collector --list FILE [options]      write the plan only (no GPU)\n"
      "       gpu_collector --self-test [--device N]   check the kernels against a reference\n\noptions");
  d.add_options()("help,h", "show this help")("out", po::value<std::string>(&a.out),
                                              "the measurements (FILE.partial while measuring)")(
      "list", po::value<std::string>(&a.list), "the planned calls, without measuring")(
      "chip", po::value<std::string>(&a.chip), "the chip's preset name (default: from the device name)")(
      "driver", po::value<std::string>(&a.driver), "the driver text recorded in the file")(
      "only", po::value<std::string>(&a.only), "gemm,copy,attention: measure only these")("quick", "a short plan")(
      "no-fp8", "leave fp8 GEMMs out")("self-test", "check the kernels against a reference")(
      "max-seconds", po::value<double>(&a.max_seconds), "stop measuring after this long")(
      "device", po::value<int>(&a.device), "the CUDA device");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(d).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "error: " << e.what() << "\n\n" << d;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << d;
    return 0;
  }
  a.quick = vm.count("quick") > 0;
  a.fp8 = vm.count("no-fp8") == 0;
  a.self_test = vm.count("self-test") > 0;
  std::string problem;
  if (!a.self_test && a.out.empty() == a.list.empty()) problem = "give exactly one of --out, --list, --self-test";
  if (!(a.max_seconds > 0)) problem = "--max-seconds must be greater than 0";
  if (a.device < 0) problem = "--device must be at least 0";
  if (!problem.empty()) {
    std::cerr << "error: " << problem << "\n\n" << d;
    return 2;
  }
  return std::nullopt;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

gc::PlanOptions plan_options(const Args& a) {
  gc::PlanOptions o;
  o.quick = a.quick;
  o.fp8 = a.fp8;
  if (!a.only.empty()) {
    o.gemm = a.only.find("gemm") != std::string::npos;
    o.copy = a.only.find("copy") != std::string::npos;
    o.attention = a.only.find("attention") != std::string::npos;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto done = parse(argc, argv, args)) return *done;
  try {
    // Where the results go is checked before the GPU is touched.
    if (!args.list.empty()) servesim::check_output_file(args.list, "plan (--list)");
    if (!args.out.empty()) {
      servesim::check_output_file(args.out, "measurements (--out)");
      servesim::check_output_file(args.out + ".partial", "measurement log (--out FILE.partial)");
    }
    const auto plan = gc::collector_plan(plan_options(args));
    if (!args.list.empty()) {
      std::ostringstream out;
      cal::NativeCsvWriter w(
          out, cal::CollectorInfo{args.chip.empty() ? "unspecified" : args.chip, "", "", "", kCollector, ""});
      for (const auto& r : plan) w.write(r);
      servesim::write_atomically(args.list, out.str());
      std::printf("%zu planned calls written to %s\n", plan.size(), args.list.c_str());
      return 0;
    }
    CUDA(cudaSetDevice(args.device));
    if (args.self_test) return self_test();

    cudaDeviceProp prop{};
    CUDA(cudaGetDeviceProperties(&prop, args.device));
    const std::string chip = args.chip.empty() ? gc::chip_for_device(prop.name) : args.chip;
    if (chip.empty()) {
      std::cerr << "unknown device '" << prop.name << "': name the chip with --chip\n";
      return 2;
    }
    int runtime = 0, driver = 0;
    CUDA(cudaRuntimeGetVersion(&runtime));
    CUDA(cudaDriverGetVersion(&driver));
    cal::CollectorInfo info;
    info.chip = chip;
    info.device = prop.name;
    info.driver = args.driver.empty()
                      ? "CUDA driver API " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10)
                      : args.driver;
    info.backend = "CUDA runtime " + std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
                   ", cuBLASLt " + std::to_string(cublasLtGetVersion());
    info.collector = kCollector;
    info.collected_at = utc_now();
    const bool has_fp8 = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
    const double l2 = prop.l2CacheSize;

    // A measurement log, not a report: flushed row by row so that a killed run (hours on a GPU)
    // keeps what it measured; renamed to --out when complete. Write errors end the run.
    const std::string partial = args.out + ".partial";
    std::ofstream out(partial);
    if (!out) {
      std::cerr << "cannot write " << partial << "\n";
      return 2;
    }
    cal::NativeCsvWriter writer(out, info);
    cudaStream_t stream;
    CUDA(cudaStreamCreate(&stream));
    Gemm gemm;
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t done = 0, skipped = 0;
    for (cal::NativeRow row : plan) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (elapsed > args.max_seconds) {
        std::fprintf(stderr, "time budget of %.0f s reached after %zu of %zu calls\n", args.max_seconds, done,
                     plan.size());
        break;
      }
      Timing t;
      if (row.op == cal::MeasuredOp::gemm) {
        if (row.format == cal::Format::fp8 && !has_fp8) {
          ++skipped;
          continue;
        }
        if (!gemm.run(row, l2, stream, t)) {
          std::fprintf(stderr, "no cuBLASLt algorithm for %s %s: skipped\n", row.shape.to_string().c_str(),
                       std::string(cal::format_name(row.format)).c_str());
          ++skipped;
          continue;
        }
      } else if (row.op == cal::MeasuredOp::hbm_copy) {
        t = run_copy(row, l2, stream);
      } else {
        int splits = 1;
        t = run_decode(row, prop.multiProcessorCount, l2, stream, splits);
        row.variant = "splits=" + std::to_string(splits);
      }
      row.latency_s = t.median_s;
      row.latency_min_s = t.min_s;
      row.latency_max_s = t.max_s;
      row.repeats = t.repeats;
      writer.write(row);
      out.flush();
      if (!out) {
        std::cerr << "error: " << partial << ": cannot write the measurements (disk full?)\n";
        return 2;
      }
      ++done;
      if (done % 50 == 0) std::fprintf(stderr, "%zu / %zu calls measured (%.0f s)\n", done, plan.size(), elapsed);
    }
    CUDA(cudaStreamDestroy(stream));
    out.close();
    if (std::rename(partial.c_str(), args.out.c_str()) != 0) {
      std::cerr << "cannot rename " << partial << " to " << args.out << "\n";
      return 1;
    }
    std::printf("%zu calls measured, %zu skipped, written to %s (%s, %s)\n", done, skipped, args.out.c_str(),
                info.device.c_str(), info.backend.c_str());
    return 0;
  } catch (const servesim::InputError& e) {
    servesim::print_diagnostics(e, std::cerr);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gpu_collector: " << e.what() << "\n";
    return 1;
  }
}
