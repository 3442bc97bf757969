#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/measurement_files.h"
#include "calibrate/native_csv.h"
#include "core/rng.h"
#include "test_files.h"

using namespace servesim::calibrate;
using calibrate_test::input_errors;
using calibrate_test::TempFile;

namespace {

CollectorInfo info() {
  return CollectorInfo{"h200-sxm",
                       "NVIDIA H200",
                       "580.95.05",
                       "CUDA 13.0, cuBLASLt 130000",
                       "servesim gpu_collector 1",
                       "2026-11-30T12:00:00Z"};
}

std::string written(const std::vector<NativeRow>& rows, const CollectorInfo& ci = info()) {
  std::ostringstream out;
  NativeCsvWriter w(out, ci);
  for (const NativeRow& r : rows) w.write(r);
  return out.str();
}

NativeRow gemm_row(std::int64_t m, double seconds) {
  NativeRow r;
  r.op = MeasuredOp::gemm;
  r.shape.set(Dim::m, m);
  r.shape.set(Dim::n, 8192);
  r.shape.set(Dim::k, 4096);
  r.format = Format::bf16;
  r.kernel = "cublasLt heuristic 0";
  r.latency_s = seconds;
  r.latency_min_s = seconds * 0.99;
  r.latency_max_s = seconds * 1.02;
  r.repeats = 50;
  return r;
}

const std::string kHeader =
    "op,shape,format,kv_format,weight_format,variant,kernel,latency_s,latency_min_s,latency_max_s,"
    "repeats,chip,device,driver,backend,collector,collected_at\n";

}  // namespace

TEST_CASE("Native CSV: what the writer writes, the reader reads back exactly") {
  // Random latencies over nine decades: shortest round-trip formatting must give back the same
  // doubles, not approximately the same.
  servesim::Rng rng(5, "test.native.latency");
  std::vector<NativeRow> rows;
  for (int i = 0; i < 200; ++i) rows.push_back(gemm_row(i + 1, 1e-6 * std::exp(20.0 * rng.uniform01())));
  NativeRow copy;
  copy.op = MeasuredOp::hbm_copy;
  copy.shape.set(Dim::bytes, std::int64_t{4} << 30);
  copy.kernel = "cudaMemcpyAsync";
  copy.variant = "device to device, with \"quotes\", and commas";
  copy.latency_s = copy.latency_min_s = copy.latency_max_s = 1.9e-3;
  copy.repeats = 10;
  rows.push_back(copy);
  const TempFile f("roundtrip.csv", written(rows));
  const MeasurementSet set = read_native_csv(f.path());
  REQUIRE(set.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("row ", i);
    CHECK(set[i].op == rows[i].op);
    CHECK(set[i].shape == rows[i].shape);
    CHECK(set[i].format == rows[i].format);
    CHECK(set[i].latency_s == rows[i].latency_s);
    CHECK(set.label(set[i].kernel) == rows[i].kernel);
    CHECK(set.label(set[i].variant) == rows[i].variant);
    CHECK(set.label(set[i].chip) == "h200-sxm");
    CHECK(set.label(set[i].backend) == "CUDA 13.0, cuBLASLt 130000");
    CHECK(set[i].line == i + 2);
  }
  const auto& meta = set.sources()[0].metadata;
  REQUIRE(meta.size() == 4);
  CHECK(meta[0] == std::pair<std::string, std::string>("device", "NVIDIA H200"));
  CHECK(meta[3] == std::pair<std::string, std::string>("collected_at", "2026-11-30T12:00:00Z"));
  CHECK(detect_file_kind(f.path()) == FileKind::native);
  CHECK(read_measurements(f.path()).size() == rows.size());
}

TEST_CASE("Native CSV: a plan has shapes and no timings, and is not a measurement") {
  NativeRow planned = gemm_row(16, 0);
  planned.repeats = 0;
  const std::string text = written({planned, planned});
  CHECK(text.find("gemm,m=16 n=8192 k=4096,bf16,,,,cublasLt heuristic 0,,,,,h200-sxm,") != std::string::npos);
  const TempFile f("plan.csv", text);
  CHECK(detect_file_kind(f.path()) == FileKind::native_plan);
  const MeasurementSet plan = read_native_csv(f.path(), NativeCsvKind::plan);
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].latency_s == 0);
  CHECK(plan.sources()[0].reader == "servesim-plan");
  const auto ds = input_errors([&] { read_native_csv(f.path()); });
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].line == 2);
  CHECK(ds[0].message.find("no latency") != std::string::npos);
}

TEST_CASE("Native CSV: malformed rows point at the field, and inside the shape at the pair") {
  // Line 2: op "gemn" (column 1). Line 3: shape field "q" at column 6 (after "gemm," the shape
  // starts at column 6; "m=1 " is 4 characters, so "q=2" starts at 10). Line 4: a negative
  // value ("k=-3" at 14; its value at 16). Line 5: the median above the max.
  // Line 6: another device (per-file metadata must not change).
  const std::string tail = ",h200-sxm,NVIDIA H200,580,CUDA,c,2026\n";
  const std::string text = kHeader + "gemn,m=1 n=2 k=3,bf16,,,,,1e-5,,,1" + tail +
                           "gemm,m=1 q=2 k=3,bf16,,,,,1e-5,,,1" + tail + "gemm,m=1 n=2 k=-3,bf16,,,,,1e-5,,,1" + tail +
                           "gemm,m=1 n=2 k=3,bf16,,,,,1e-5,1e-6,2e-6,1" + tail +
                           "gemm,m=1 n=2 k=3,bf16,,,,,1e-5,,,1,h200-sxm,NVIDIA H100,580,CUDA,c,2026\n";
  const TempFile f("bad_native.csv", text);
  const auto ds = input_errors([&] { read_native_csv(f.path()); });
  REQUIRE(ds.size() == 5);
  CHECK(ds[0].to_string() == f.path() + ":2:1: op: unknown operator kind 'gemn' (did you mean 'gemm'?)");
  CHECK(ds[1].to_string() == f.path() + ":3:10: shape: unknown shape field 'q' (did you mean 'm'?)");
  CHECK(ds[2].to_string() == f.path() + ":4:16: shape: '-3' is not a non-negative whole number");
  CHECK(ds[3].to_string() == f.path() + ":5:27: latency_s: the median lies outside [latency_min_s, latency_max_s]");
  CHECK(ds[4].to_string() ==
        f.path() +
            ":6:45: device: 'NVIDIA H100' differs from 'NVIDIA H200' on the first row: one file is one collector run");
}

TEST_CASE("Native CSV: unknown and missing columns") {
  const TempFile f("cols.csv", "op,shape,format,latency_s,chips\ngemm,m=1,bf16,1e-5,h200-sxm\n");
  const auto ds = input_errors([&] { read_native_csv(f.path()); });
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].to_string() == f.path() + ":1:27: chips: unknown column 'chips' (did you mean 'chip'?)");
  CHECK(ds[1].to_string() == f.path() + ":1:1: missing column 'chip' (did you mean 'chips'?)");
}
