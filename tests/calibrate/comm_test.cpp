#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "calibrate/collective_check.h"
#include "calibrate/comm_measurements.h"
#include "sim/core/errors.h"

using namespace servesim;
using namespace servesim::calibrate;
using topologies::CollectiveKind;

namespace {

const std::string kData = SERVESIM_SOURCE_DIR "/calibrate/data/comm";

// Writes `text` to a fresh file in the temporary folder and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("servesim_comm_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string problems(const InputError& e) {
  std::string out;
  for (const auto& d : e.diagnostics()) out += d.to_string() + "\n";
  return out;
}

}  // namespace

TEST_CASE("read_nccl_perf: elements times the type's size, milliseconds to seconds") {
  const std::string path = write_temp("nccl.csv",
                                      "framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n"
                                      "TRTLLM,2.29.2,NVIDIA H200,all_reduce,NCCL,half,8,1048576,0.03746\n"
                                      "TRTLLM,2.29.2,NVIDIA H200,alltoall,NCCL,int8,4,256,0.0116\n");
  const auto s = read_nccl_perf(path, "h200_sxm");
  REQUIRE(s.size() == 2);
  CHECK(s[0].kind == CollectiveKind::kAllReduce);
  CHECK(s[0].ranks == 8);
  CHECK(s[0].bytes == 2 * 1048576.0);  // half: 2 bytes per element
  CHECK(s[0].seconds == doctest::Approx(37.46e-6));
  CHECK(s[0].line == 2);
  CHECK(s[1].kind == CollectiveKind::kAllToAll);
  CHECK(s[1].bytes == 256.0);  // int8
}

TEST_CASE("read_nccl_perf: malformed rows are reported with file, line, column and column name") {
  const std::string path = write_temp("bad.csv",
                                      "op_name,nccl_dtype,num_gpus,message_size,latency\n"
                                      "all_reduce,half,8,1024,fast\n"
                                      "broadcast,half,8,1024,0.1\n"
                                      "all_gather,quarter,2.5,1024,0.1\n"
                                      "all_gather,half,2\n");
  try {
    read_nccl_perf(path, "h200_sxm");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(problems(e) ==
          path + ":2:24: latency: expected a number, got 'fast'\n" +
          path + ":3:1: op_name: unknown collective 'broadcast' (expected all_reduce, all_gather, reduce_scatter or alltoall)\n" +
          path + ":4:12: nccl_dtype: unknown data type 'quarter'\n" +
          path + ":4:20: num_gpus: expected a whole number, got 2.5\n" +
          path + ":5:1: has 3 fields, the header 5\n");
  }
  const std::string missing = write_temp("missing.csv", "op_name,nccl_dtype,num_gpus,message_size\nall_reduce,half,8,1024\n");
  try {
    read_nccl_perf(missing, "h200_sxm");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(problems(e) == missing + ":1:1: latency: missing column 'latency'\n");
  }
  CHECK_THROWS_AS(read_nccl_perf("/nonexistent/nccl.csv.gz", "x"), InputError);
}

TEST_CASE("moe_bytes_per_rank: the collectors' byte counts, by hand") {
  // Low-latency dispatch: 1,024 tokens x top-8 x (7,168 FP8 bytes + 7,168 / 128 x 4 scale bytes
  // + 16) = 8,192 x 7,408 = 60,686,336 B; DeepEP's printed 287.48 GB/s x 211.099 us agrees.
  CHECK(moe_bytes_per_rank(CollectiveKind::kDispatchLowLatency, 1024, 7168, 8, 256, 8) == 60'686'336.0);
  // Low-latency combine: 8,192 x 7,168 x 2 = 117,440,512 B (244.17 GB/s x 480.969 us).
  CHECK(moe_bytes_per_rank(CollectiveKind::kCombineLowLatency, 1024, 7168, 8, 256, 8) == 117'440'512.0);
  // Normal combine with top-1 over 16 experts on 8 ranks: one destination per token:
  // 100 x 1 x 5,120 x 2 = 1,024,000 B.
  CHECK(moe_bytes_per_rank(CollectiveKind::kCombine, 100, 5120, 1, 16, 8) == doctest::Approx(1'024'000.0));
}

TEST_CASE("read_comm_tables: every copied table reads, with the rows their collectors recorded") {
  const auto samples = read_comm_tables(kData);
  std::map<std::string, std::size_t> per_table;
  for (const auto& s : samples) ++per_table[s.system + "/" + s.table];
  // Row counts (from the collectors' collection_meta.yaml and the files): nccl 504 and 1,008
  // rows on H200, 336 on GB200; custom all-reduce 69; DeepEP low-latency 176 rows, two samples
  // each; DeepEP normal 2,484 and 2,622 rows at 6 SM settings, the fastest kept: 414 and 437
  // shapes, two samples each; TensorRT-LLM all-to-all: 180 BF16 two-sided dispatch and combine
  // rows each; Vidur: 6,958 and 1,988 rows for A100, 2,982 and 1,988 for H100.
  CHECK(per_table["h200_sxm/nccl_perf_2.29.2.csv.gz"] == 504);
  CHECK(per_table["h200_sxm/nccl_perf_2.26.2_folder.csv.gz"] == 1008);
  CHECK(per_table["gb200/nccl_perf_2.29.2.csv.gz"] == 336);
  CHECK(per_table["h200_sxm/custom_allreduce_perf.csv.gz"] == 69);
  CHECK(per_table["h200_sxm/wideep_deepep_ll_perf.csv.gz"] == 352);
  CHECK(per_table["h200_sxm/wideep_deepep_normal_perf.csv.gz"] == 828);
  CHECK(per_table["gb200/wideep_deepep_normal_perf.csv.gz"] == 874);
  CHECK(per_table["gb200/trtllm_alltoall_perf.csv.gz"] == 360);
  CHECK(per_table["a100_dgx/all_reduce.csv.gz"] == 6958);
  CHECK(per_table["h100_dgx/send_recv.csv.gz"] == 1988);
}

TEST_CASE("collective check: the calibrated model stays within its reported error on the tables it was fitted to") {
  const auto samples = read_comm_tables(kData);
  const auto rows = error_summary(predict_all(samples));
  std::map<std::string, ErrorRow> by;
  for (const auto& r : rows) by[r.system + " " + r.implementation + " " + r.collective] = r;
  // Medians reported in topologies/README.md; a recalibration that moves them must update both.
  CHECK(by.at("h200_sxm nccl all_reduce").ape_p50 < 0.08);
  CHECK(by.at("h200_sxm nccl all_gather").ape_p50 < 0.09);
  CHECK(by.at("h200_sxm deepep dispatch").ape_p50 < 0.05);
  CHECK(by.at("gb200 nccl all_reduce").ape_p50 < 0.05);
  CHECK(by.at("h100_dgx nccl p2p").ape_p50 < 0.04);
  // A transfer nothing was fitted to: TensorRT-LLM's all-to-all on EP 2-64 of an NVL72 rack,
  // priced with the NCCL all-to-all fit from 2 and 4 GPUs.
  CHECK(by.at("gb200 trtllm_alltoall combine").ape_p50 < 0.2);
  for (const auto& r : rows) {
    INFO(r.system, " ", r.implementation, " ", r.collective);
    CHECK(r.points > 0);
    CHECK(std::abs(r.signed_mean) < 0.3);
  }
}
