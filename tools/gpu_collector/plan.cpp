#include "tools/gpu_collector/plan.h"

#include <algorithm>
#include <cmath>

namespace servesim::gpu_collector {
namespace {

using calibrate::Dim;
using calibrate::Format;
using calibrate::MeasuredOp;
using calibrate::NativeRow;

struct WeightShape {
  std::int64_t n, k;
};

// Per-GPU projection shapes (n outputs, k inputs) at TP 1, 2, 4, 8, from the models'
// config.json: Llama-3.1-8B (hidden 4096, 32 heads, 8 KV heads, ffn 14336), Llama-3.1-70B
// (8192, 64, 8, 28672), Qwen3-32B (5120, 64 heads of 128, 8 KV heads, ffn 25600).
// QKV n = (heads + 2 kv_heads) x 128 / tp; O k = heads x 128 / tp; gate|up n = 2 ffn / tp;
// down k = ffn / tp.
std::vector<WeightShape> weight_shapes(bool quick) {
  if (quick) return {{6144, 4096}, {4096, 14336}};
  std::vector<WeightShape> out;
  struct Model {
    std::int64_t hidden, heads, kv_heads, ffn;
  };
  const Model models[] = {{4096, 32, 8, 14336}, {8192, 64, 8, 28672}, {5120, 64, 8, 25600}};
  for (const Model& m : models) {
    for (std::int64_t tp : {1, 2, 4, 8}) {
      const std::int64_t kv = std::max<std::int64_t>(1, m.kv_heads / tp);
      out.push_back({(m.heads / tp + 2 * kv) * 128, m.hidden});  // QKV
      out.push_back({m.hidden, m.heads * 128 / tp});             // O
      out.push_back({2 * m.ffn / tp, m.hidden});                 // gate|up
      out.push_back({m.hidden, m.ffn / tp});                     // down
    }
  }
  std::sort(out.begin(), out.end(), [](auto a, auto b) { return a.n != b.n ? a.n < b.n : a.k < b.k; });
  out.erase(std::unique(out.begin(), out.end(), [](auto a, auto b) { return a.n == b.n && a.k == b.k; }), out.end());
  return out;
}

}  // namespace

std::vector<NativeRow> collector_plan(const PlanOptions& o) {
  std::vector<NativeRow> rows;
  if (o.gemm) {
    std::vector<Format> formats = {Format::bf16};
    if (o.fp8) formats.push_back(Format::fp8);
    const std::int64_t max_m = o.quick ? 256 : 16384;
    for (Format f : formats) {
      for (const WeightShape& w : weight_shapes(o.quick)) {
        for (std::int64_t m = 1; m <= max_m; m *= (o.quick ? 16 : 2)) {
          NativeRow r;
          r.op = MeasuredOp::gemm;
          r.shape.set(Dim::m, m);
          r.shape.set(Dim::n, w.n);
          r.shape.set(Dim::k, w.k);
          r.format = f;
          r.kernel = std::string(kGemmKernel);
          rows.push_back(r);
        }
      }
    }
  }
  if (o.copy) {
    const std::int64_t max_bytes = o.quick ? (std::int64_t{1} << 24) : (std::int64_t{1} << 32);
    for (std::int64_t b = 4096; b <= max_bytes; b *= 4) {
      NativeRow r;
      r.op = MeasuredOp::hbm_copy;
      r.shape.set(Dim::bytes, b);
      r.kernel = std::string(kCopyKernel);
      rows.push_back(r);
    }
  }
  if (o.attention) {
    struct Heads {
      int heads, kv_heads;
    };
    const std::vector<Heads> layouts =
        o.quick ? std::vector<Heads>{{32, 8}} : std::vector<Heads>{{32, 8}, {64, 8}, {8, 1}, {32, 32}};
    const std::vector<int> batches = o.quick ? std::vector<int>{1, 16} : std::vector<int>{1, 4, 16, 64, 256};
    const std::vector<int> lengths =
        o.quick ? std::vector<int>{512, 4096} : std::vector<int>{128, 512, 2048, 8192, 32768};
    constexpr double kMaxKvBytes = 16e9;  // K and V together, well inside an H100's 80 GB
    for (const Heads& h : layouts) {
      for (int b : batches) {
        for (int len : lengths) {
          const double kv_bytes = 2.0 * b * len * h.kv_heads * 128 * 2;
          if (kv_bytes > kMaxKvBytes) continue;
          NativeRow r;
          r.op = MeasuredOp::attention_decode;
          r.shape.set(Dim::batch, b);
          r.shape.set(Dim::kv_len, len);
          r.shape.set(Dim::heads, h.heads);
          r.shape.set(Dim::kv_heads, h.kv_heads);
          r.shape.set(Dim::head_dim, 128);
          r.format = Format::bf16;
          r.kv_format = Format::bf16;
          r.kernel = std::string(kDecodeKernel);
          rows.push_back(r);
        }
      }
    }
  }
  return rows;
}

std::string chip_for_device(std::string_view name) {
  struct Known {
    std::string_view needle, chip;
  };
  // Device names as the CUDA runtime reports them (cudaDeviceProp::name).
  static constexpr Known kKnown[] = {{"H200", "h200-sxm"},      {"H100 80GB HBM3", "h100-sxm"},
                                     {"H100 SXM", "h100-sxm"},  {"A100-SXM4-80GB", "a100-80g"},
                                     {"A100 80GB", "a100-80g"}, {"A40", "a40"}};
  for (const Known& k : kKnown) {
    if (name.find(k.needle) != std::string_view::npos) return std::string(k.chip);
  }
  return "";
}

Repeats choose_repeats(double one_call_s) {
  Repeats r;
  const double call = std::max(one_call_s, 1e-7);
  r.inner = static_cast<int>(std::clamp(std::ceil(200e-6 / call), 1.0, 1000.0));
  const double batch = r.inner * call;
  r.reps = static_cast<int>(std::clamp(std::ceil(30e-3 / batch), 10.0, 100.0));
  return r;
}

int decode_splits(int batch, int kv_heads, int kv_len, int sms) {
  const int blocks = std::max(1, batch * kv_heads);
  const int wanted = std::max(1, (2 * sms + blocks - 1) / blocks);
  const int most = std::max(1, kv_len / 64);
  return std::clamp(wanted, 1, most);
}

int rotation_sets(double bytes_per_set, double l2_bytes) {
  if (!(bytes_per_set > 0)) return 1;
  return static_cast<int>(std::clamp(std::ceil(2 * l2_bytes / bytes_per_set), 1.0, 256.0));
}

}  // namespace servesim::gpu_collector
