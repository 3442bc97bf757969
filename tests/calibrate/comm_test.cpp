#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "calibrate/collective_check.h"
#include "calibrate/comm_fit.h"
#include "calibrate/comm_measurements.h"
#include "core/errors.h"
#include "models/chip_spec.h"
#include "tests/approx.h"
#include "tests/scratch.h"

using namespace servesim;
using namespace servesim::calibrate;
using topologies::CollectiveKind;

namespace {

const std::string kData = SERVESIM_SOURCE_DIR "/calibrate/data/comm";

// Writes `text` to a fresh file in the temporary folder and returns its path.
std::string write_temp(const std::string& name, const std::string& text) { return testing::scratch_file(name, text); }

std::string problems(const InputError& e) {
  std::string out;
  for (const auto& d : e.diagnostics()) out += d.to_string() + "\n";
  return out;
}

}  // namespace

TEST_CASE("read_nccl_perf: elements times the type's size, milliseconds to seconds") {
  const std::string path =
      write_temp("nccl.csv",
                 "framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n"
                 "TRTLLM,2.29.2,NVIDIA H200,all_reduce,NCCL,half,8,1048576,0.03746\n"
                 "TRTLLM,2.29.2,NVIDIA H200,alltoall,NCCL,int8,4,256,0.0116\n");
  const auto s = read_nccl_perf(path, "h200_sxm");
  REQUIRE(s.size() == 2);
  CHECK(s[0].kind == CollectiveKind::kAllReduce);
  CHECK(s[0].ranks == 8);
  CHECK(s[0].bytes == 2 * 1048576.0);  // half: 2 bytes per element
  CHECK(s[0].seconds == approx(37.46e-6));
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
    CHECK(problems(e) == path + ":2:24: latency: expected a number, got 'fast'\n" + path +
                             ":3:1: op_name: unknown collective 'broadcast' (expected all_reduce, all_gather, "
                             "reduce_scatter or alltoall)\n" +
                             path + ":4:12: nccl_dtype: unknown data type 'quarter'\n" + path +
                             ":4:20: num_gpus: expected a whole number, got 2.5\n" + path +
                             ":5:1: expected 5 comma-separated fields as in the header, found 3\n");
  }
  const std::string missing =
      write_temp("missing.csv", "op_name,nccl_dtype,num_gpus,message_size\nall_reduce,half,8,1024\n");
  try {
    read_nccl_perf(missing, "h200_sxm");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(problems(e) == missing + ":1:1: latency: missing column 'latency'\n");
  }
  CHECK_THROWS_AS(read_nccl_perf("/nonexistent/nccl.csv.gz", "x"), InputError);
}

TEST_CASE("read_deepep: a count too large for the model is reported, not cast") {
  // 1e300 nodes overflowed the cast to int; 2^24 + 1 tokens is the smallest count over the bound.
  const std::string path = write_temp("deepep.csv",
                                      "node_num,hidden_size,num_token,num_topk,num_experts,dispatch_avg_t_us,"
                                      "combine_avg_t_us\n"
                                      "1e300,7168,128,8,256,10,20\n"
                                      "1,7168,16777217,8,256,10,20\n"
                                      "1,7168,16777216,8,256,10,20\n");
  try {
    read_deepep(path, "h200_sxm", 8, true);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(problems(e) == path + ":2:1: node_num: must be at most 16777216, got 1e300\n" + path +
                             ":3:8: num_token: must be at most 16777216, got 16777217\n");
  }
}

TEST_CASE("moe_bytes_per_rank: the collectors' byte counts, by hand") {
  // Low-latency dispatch: 1,024 tokens x top-8 x (7,168 FP8 bytes + 7,168 / 128 x 4 scale bytes
  // + 16) = 8,192 x 7,408 = 60,686,336 B; DeepEP's printed 287.48 GB/s x 211.099 us agrees.
  CHECK(moe_bytes_per_rank(CollectiveKind::kDispatchLowLatency, 1024, 7168, 8, 256, 8) == 60'686'336.0);
  // Low-latency combine: 8,192 x 7,168 x 2 = 117,440,512 B (244.17 GB/s x 480.969 us).
  CHECK(moe_bytes_per_rank(CollectiveKind::kCombineLowLatency, 1024, 7168, 8, 256, 8) == 117'440'512.0);
  // Normal combine with top-1 over 16 experts on 8 ranks: one destination per token:
  // 100 x 1 x 5,120 x 2 = 1,024,000 B.
  CHECK(moe_bytes_per_rank(CollectiveKind::kCombine, 100, 5120, 1, 16, 8) == approx(1'024'000.0));
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

namespace {

// Synthetic all-reduce samples on a 450 GB/s chip from two known lines (bytes 2^10 .. 2^23 per
// group size, steps 2 (n - 1)), priced by models::all_reduce_line_seconds. `noise` multiplies
// sample i by 1 + noise x ((7 i) mod 5 - 2) / 2: -1, -1/2, 0, +1/2, +1 times it, a fixed pattern.
constexpr double kBw = 450e9;
using Lines = std::vector<models::Efficiency::CollectiveLine>;
// The engines' kernels: one-shot 2.6 us + 0.04 us per step at 0.7 (factor n - 1), two-shot 1 us +
// 1.3 us per step at 0.6 (factor 2 (n - 1) / n).
const Lines kShots = {
    {Duration::nanoseconds(2600), Duration::nanoseconds(40), 0.7, true},
    {Duration::nanoseconds(1000), Duration::nanoseconds(1300), 0.6, false},
};
// NCCL-like protocols, both rings with the same 0.5 us per step: LL 5 us at 0.35, Simple 20 us at
// 0.78. Equal per-step costs make them cross at one transfer time for every n:
// 15 us / (1 / 0.35 - 1 / 0.78) = 9.52 us, so sorted by transfer the samples split cleanly.
const Lines kProtocols = {
    {Duration::nanoseconds(5000), Duration::nanoseconds(500), 0.35, false},
    {Duration::nanoseconds(20000), Duration::nanoseconds(500), 0.78, false},
};

std::vector<LinePoint> synthetic(const Lines& lines, const std::vector<int>& sizes, double noise) {
  std::vector<LinePoint> pts;
  int i = 0;
  for (int n : sizes) {
    for (int e = 10; e <= 23; ++e, ++i) {
      const double bytes = std::ldexp(1.0, e);
      LinePoint p;
      p.steps = 2.0 * (n - 1);
      p.transfer = 2.0 * (n - 1) / n * bytes / kBw;
      if (lines[0].one_shot) p.small_transfer = (n - 1.0) * bytes / kBw;
      p.t = p.y =
          models::all_reduce_line_seconds(lines, bytes, n, Bandwidth{kBw}) * (1 + noise * ((7 * i) % 5 - 2) / 2.0);
      pts.push_back(p);
    }
  }
  return pts;
}

}  // namespace

TEST_CASE("fit_two_lines: exact one-shot and two-shot lines come back from noiseless samples of one group size") {
  // n = 8 alone: the steps (14) do not vary, so each line's base absorbs them: one-shot
  // 2.6 + 14 x 0.04 = 3.16 us, two-shot 1 + 14 x 1.3 = 19.2 us. Slopes 1 / 0.7 and 1 / 0.6 per
  // transfer second. They cross at 16.04 us / (7 / 315e9 - 1.75 / 270e9 s/B) = 1.02e6 B: 2^10 ..
  // 2^19 lie on the one-shot line (10 samples), 2^20 .. 2^23 on the two-shot one (4), so the best
  // split leaves no error and the fit is the truth.
  const TwoLineFit f = fit_two_lines(synthetic(kShots, {8}, 0.0));
  REQUIRE(f.large.ok);
  REQUIRE_FALSE(f.one_line);
  CHECK(f.small.base * 1e6 == approx(3.16));
  CHECK(1 / f.small.slope == approx(0.7));
  CHECK(f.large.base * 1e6 == approx(19.2));
  CHECK(1 / f.large.slope == approx(0.6));
  CHECK(f.p90 < 1e-9);
}

TEST_CASE("fit_two_lines: LL and Simple lines over 2, 4 and 8 ranks, exact without noise, within it with noise") {
  const TwoLineFit exact = fit_two_lines(synthetic(kProtocols, {2, 4, 8}, 0.0));
  REQUIRE(exact.large.ok);
  REQUIRE_FALSE(exact.one_line);
  CHECK(exact.small.base * 1e6 == approx(5));
  CHECK(exact.small.per_step * 1e6 == approx(0.5));
  CHECK(1 / exact.small.slope == approx(0.35));
  CHECK(exact.large.base * 1e6 == approx(20));
  CHECK(exact.large.per_step * 1e6 == approx(0.5));
  CHECK(1 / exact.large.slope == approx(0.78));
  // The split: the first sample past 9.52 us. Below it: n = 2 at 2^22 B (9.32 us), n = 8 at 2^21
  // (8.16 us); above: n = 4 at 2^22 B, 1.5 x 4,194,304 / 450e9 = 13.98 us.
  CHECK(exact.threshold * 1e6 == approx(1.5 * 4194304 / 450e9 * 1e6));

  // Noise up to 1%: least squares averages it, so every sample's fitted time stays within that of
  // the noiseless truth (2% allowed), and the median in-sample error within the noise.
  const std::vector<LinePoint> truth = synthetic(kProtocols, {2, 4, 8}, 0.0);
  const TwoLineFit f = fit_two_lines(synthetic(kProtocols, {2, 4, 8}, 0.01));
  REQUIRE(f.large.ok);
  REQUIRE_FALSE(f.one_line);
  for (const LinePoint& p : truth) {
    INFO("steps ", p.steps, " transfer ", p.transfer);
    CHECK(std::abs(f.seconds(p) / p.t - 1) < 0.02);
  }
  CHECK(1 / f.small.slope == approx(0.35).epsilon(0.03));
  CHECK(1 / f.large.slope == approx(0.78).epsilon(0.03));
  CHECK(f.p50 < 0.01);
}

TEST_CASE("fit_two_lines: one-shot and two-shot lines over 2, 4 and 8 ranks stay within 10% of the truth") {
  // Where the threshold split falls short: at n = 2 the one-shot and two-shot factors are equal
  // (1), so with these lines one-shot is the cheaper at every size (2.68 us at 0.7 against 3.6 us
  // at 0.6), while the split by transfer time hands the large n = 2 samples to the two-shot line.
  // Samples near the crossovers are then missed by more than the noise (up to ~7.5% here); the
  // median one is still within it.
  const std::vector<LinePoint> truth = synthetic(kShots, {2, 4, 8}, 0.0);
  const TwoLineFit f = fit_two_lines(synthetic(kShots, {2, 4, 8}, 0.01));
  REQUIRE(f.large.ok);
  REQUIRE_FALSE(f.one_line);
  double worst = 0;
  for (const LinePoint& p : truth) worst = std::max(worst, std::abs(f.seconds(p) / p.t - 1));
  CHECK(worst < 0.10);
  CHECK(f.p50 < 0.01);
}

TEST_CASE("fit_chip_collectives: H200's custom all-reduce lines meet the 10% held-out target on the shipped tables") {
  const auto chip = models::chip_preset("h200-sxm");
  REQUIRE(chip);
  const CollectiveFitResult r = fit_chip_collectives(kData, *chip, 5);
  REQUIRE(r.fitted);
  // One-shot below, two-shot above, as the kernel switches.
  REQUIRE(r.all_reduce_lines.size() == 2);
  CHECK(r.all_reduce_lines[0].one_shot);
  CHECK_FALSE(r.all_reduce_lines[1].one_shot);
  std::map<std::string, ErrorCell> all;
  for (const ErrorCell& c : r.errors.cells) {
    if (c.size == "all") all[c.kind + " " + c.format] = c;
  }
  REQUIRE(all.count("all_reduce custom (engines)"));
  REQUIRE(all.count("all_reduce nccl"));
  CHECK(all["all_reduce custom (engines)"].held_out);
  CHECK(all["all_reduce custom (engines)"].error.rows == 48);  // 16 sizes up to 8 MiB x 2, 4, 8 ranks
  CHECK(all["all_reduce custom (engines)"].error.ape_p50 <= 0.10);
  CHECK(all["all_reduce nccl"].error.rows == 378);
  CHECK(all["all_reduce nccl"].error.ape_p50 <= 0.10);
}

TEST_CASE("fit_chip_collectives: an engine's eagerly timed custom all-reduce rows are read, marked and not fitted") {
  // A vLLM-style table: every size timed replayed from a CUDA graph (4 us plus (n - 1) S at
  // 225 GB/s) and eagerly (20 us flat: the host's dispatch rate); the same table without the
  // eager rows; an NCCL table (the fit needs one) on the same sizes.
  auto graph_s = [](int n, double bytes) { return 4e-6 + (n - 1) * bytes / 225e9; };
  const std::string header =
      "framework,version,device,op_name,kernel_source,allreduce_dtype,num_gpus,message_size,latency,backend\n";
  std::string both = header, graph = header;
  std::string nccl = "framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n";
  char row[200];
  for (int n : {2, 4, 8}) {
    for (long elements = 128; elements <= 1L << 20; elements *= 4) {
      const double bytes = 2.0 * static_cast<double>(elements);
      std::snprintf(row, sizeof row, "vLLM,0.24.0,H100,all_reduce,vLLM_custom_graph,bfloat16,%d,%ld,%.9g,vllm_graph\n",
                    n, elements, graph_s(n, bytes) * 1e3);
      both += row;
      graph += row;
      std::snprintf(row, sizeof row, "vLLM,0.24.0,H100,all_reduce,vLLM_custom_eager,bfloat16,%d,%ld,0.02,vllm_eager\n",
                    n, elements);
      both += row;
      std::snprintf(row, sizeof row, "NCCL,2.29.2,H100,all_reduce,NCCL,half,%d,%ld,%.9g\n", n, elements,
                    2 * graph_s(n, bytes) * 1e3);
      nccl += row;
    }
  }
  const std::string both_path = write_temp("custom_allreduce_perf_both.csv", both);
  const std::string graph_path = write_temp("custom_allreduce_perf_graph.csv", graph);
  const std::string nccl_path = write_temp("nccl_perf_eager.csv", nccl);
  const auto samples = read_trtllm_custom_all_reduce(both_path, "h100-sxm");
  REQUIRE(samples.size() == 2 * 3 * 7);  // 7 sizes (128 .. 2^20 elements by 4) x 3 groups, twice
  CHECK(std::count_if(samples.begin(), samples.end(), [](const CommSample& s) { return s.eager; }) == 21);
  CHECK(samples[0].line == 2);
  CHECK_FALSE(samples[0].eager);  // vLLM_custom_graph
  CHECK(samples[1].eager);        // vLLM_custom_eager

  const auto chip = models::chip_preset("h100-sxm");
  REQUIRE(chip);
  const CollectiveFitResult r = fit_chip_collectives({nccl_path, both_path}, *chip);
  const CollectiveFitResult g = fit_chip_collectives({nccl_path, graph_path}, *chip);
  REQUIRE(r.fitted);
  // The lines are the replayed rows' alone.
  REQUIRE(r.all_reduce_lines.size() == g.all_reduce_lines.size());
  for (std::size_t i = 0; i < r.all_reduce_lines.size(); ++i) {
    CHECK(r.all_reduce_lines[i].base == g.all_reduce_lines[i].base);
    CHECK(r.all_reduce_lines[i].per_step == g.all_reduce_lines[i].per_step);
    CHECK(r.all_reduce_lines[i].efficiency == g.all_reduce_lines[i].efficiency);
  }
  CHECK(r.latency == g.latency);
  // Small messages cost about the replayed kernel's 4 us, far from the eager rows' 20 us that a
  // fit through both would be pulled toward.
  for (int n : {2, 4, 8}) {
    const double small = models::all_reduce_line_seconds(r.all_reduce_lines, 256, n, chip->scale_up_bandwidth);
    CHECK(small < 1.25 * graph_s(n, 256));
  }
  CHECK(std::any_of(r.notes.begin(), r.notes.end(),
                    [](const std::string& s) { return s.rfind("21 custom all-reduce rows timed eagerly", 0) == 0; }));
}
