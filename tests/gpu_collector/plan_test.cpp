// The collector's host side, without a GPU: the sweep it plans, the file it writes (with
// synthetic timings standing in for measurements) read back by calibrate's reader, and the
// timing rules.
#include <doctest/doctest.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "calibrate/measurement_files.h"
#include "calibrate/native_csv.h"
#include "tests/scratch.h"
#include "tools/gpu_collector/plan.h"

using namespace servesim::gpu_collector;
namespace cal = servesim::calibrate;

namespace {

std::string temp_path(const std::string& name) { return servesim::testing::scratch_path(name).string(); }

std::size_t count(const std::vector<cal::NativeRow>& rows, cal::MeasuredOp op) {
  std::size_t n = 0;
  for (const auto& r : rows) n += r.op == op;
  return n;
}

}  // namespace

TEST_CASE("Collector plan: the full sweep's size, derived from its definition") {
  const auto plan = collector_plan(PlanOptions{});
  // GEMM: 3 models x 4 TP degrees x 4 projections = 48 weight shapes, one shared (Qwen3-32B's O
  // projection at TP1 and Llama-3.1-70B's QKV at TP2 are both n 5120 x k 8192): 47 shapes x 15
  // token counts (1 .. 16384) x 2 formats = 1410.
  CHECK(count(plan, cal::MeasuredOp::gemm) == 1410);
  // Copies: 4 KiB x 4^i up to 4 GiB, i = 0 .. 10.
  CHECK(count(plan, cal::MeasuredOp::hbm_copy) == 11);
  // Decode: 4 head layouts x 5 batches x 5 KV lengths = 100, less those whose K + V
  // (512 x batch x kv_len x kv_heads bytes) exceed 16 GB: 8 KV heads at 256 x 32768, and 32 KV
  // heads at 64 x 32768, 256 x 8192 and 256 x 32768; the 32-head MHA layout at 16 x 32768 is
  // 8.6 GB and stays. 100 - 5 = 95.
  CHECK(count(plan, cal::MeasuredOp::attention_decode) == 95);
  CHECK(plan.size() == 1516);
  std::set<std::string> shapes;
  for (const auto& r : plan) {
    CHECK(r.repeats == 0);
    shapes.insert(std::string(cal::op_name(r.op)) + " " + r.shape.to_string() + " " +
                  std::string(cal::format_name(r.format)));
  }
  CHECK(shapes.size() == plan.size());  // nothing measured twice
}

TEST_CASE("Collector plan: the quick plan and the --only choices") {
  PlanOptions quick;
  quick.quick = true;
  // 2 weight shapes x m in {1, 16, 256} x 2 formats = 12; copies 4 KiB .. 16 MiB = 7;
  // decode 1 layout x 2 batches x 2 lengths = 4.
  CHECK(collector_plan(quick).size() == 23);
  PlanOptions gemm_only;
  gemm_only.copy = gemm_only.attention = false;
  gemm_only.fp8 = false;
  CHECK(collector_plan(gemm_only).size() == 705);
}

TEST_CASE("Collector output: the reader parses what the writer writes, plans and measurements") {
  const auto plan = collector_plan(PlanOptions{});
  const std::string plan_path = temp_path("plan.csv"), data_path = temp_path("data.csv");
  {
    std::ofstream out(plan_path);
    cal::NativeCsvWriter w(out, cal::CollectorInfo{"unspecified", "", "", "", "servesim gpu_collector 1", ""});
    for (const auto& r : plan) w.write(r);
  }
  const cal::MeasurementSet planned = cal::read_measurements(plan_path);
  CHECK(planned.sources()[0].reader == "servesim-plan");
  REQUIRE(planned.size() == plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    CHECK(planned[i].op == plan[i].op);
    CHECK(planned[i].shape == plan[i].shape);
  }

  // Synthetic timings, as the collector's loop fills them in: a median inside [min, max].
  {
    std::ofstream out(data_path);
    cal::NativeCsvWriter w(out, cal::CollectorInfo{"h200-sxm", "NVIDIA H200", "NVIDIA driver 580.159.04",
                                                   "CUDA runtime 13.0, cuBLASLt 130100", "servesim gpu_collector 1",
                                                   "2026-11-30T12:00:00Z"});
    double t = 2e-6;
    for (auto r : plan) {
      r.latency_s = t;
      r.latency_min_s = 0.98 * t;
      r.latency_max_s = 1.05 * t;
      r.repeats = 40;
      if (r.op == cal::MeasuredOp::attention_decode) r.variant = "splits=4";
      w.write(r);
      t *= 1.003;
    }
  }
  const cal::MeasurementSet measured = cal::read_measurements(data_path);
  CHECK(measured.sources()[0].reader == "servesim");
  REQUIRE(measured.size() == plan.size());
  CHECK(measured.label(measured[0].chip) == "h200-sxm");
  CHECK(measured[0].latency_s == 2e-6);
  CHECK(measured.label(measured[0].kernel) == std::string(kGemmKernel));
  std::remove(plan_path.c_str());
  std::remove(data_path.c_str());
}

TEST_CASE("Collector: device names to chip names") {
  CHECK(chip_for_device("NVIDIA H200") == "h200-sxm");
  CHECK(chip_for_device("NVIDIA H100 80GB HBM3") == "h100-sxm");
  CHECK(chip_for_device("NVIDIA A100-SXM4-80GB") == "a100-80g");
  CHECK(chip_for_device("NVIDIA GeForce RTX 4090").empty());
}

TEST_CASE("Collector timing rules") {
  // 3 us per call: ceil(200 / 3) = 67 calls per batch (201 us); ceil(30 ms / 201 us) = 150
  // batches, capped at 100.
  Repeats r = choose_repeats(3e-6);
  CHECK(r.inner == 67);
  CHECK(r.reps == 100);
  // 1 ms: one call per batch, 30 batches.
  r = choose_repeats(1e-3);
  CHECK(r.inner == 1);
  CHECK(r.reps == 30);
  // 20 ms: ceil(30 / 20) = 2 batches, raised to the floor of 10.
  r = choose_repeats(20e-3);
  CHECK(r.reps == 10);
  // Decode splits: 1 sequence x 8 KV heads on 132 SMs wants ceil(264 / 8) = 33 splits; a
  // 32768-key cache allows 512 (64 keys each). A 128-key cache allows only 2.
  CHECK(decode_splits(1, 8, 32768, 132) == 33);
  CHECK(decode_splits(1, 8, 128, 132) == 2);
  CHECK(decode_splits(256, 8, 4096, 132) == 1);  // 2048 blocks already fill the GPU
  // Rotation: a 33.6 MB set (4096 x 4096 bf16 weights) against a 60 MB L2: ceil(120 / 33.6) = 4.
  CHECK(rotation_sets(4096.0 * 4096 * 2, 60e6) == 4);
  CHECK(rotation_sets(3e9, 60e6) == 1);
  CHECK(rotation_sets(1e3, 60e6) == 256);  // 120,000 sets wanted, capped
}
