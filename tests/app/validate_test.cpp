// `servesim validate` and `servesim calibrate`: the commands end to end on small inputs, their
// error figures against a hand computation, and their bad-input handling.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "studies/checkpoints.h"
#include "studies/serving_engines.h"
#include "tests/app/cli_helpers.h"
#include "tests/approx.h"

using namespace servesim::testing;
using Json = nlohmann::json;
namespace studies = servesim::studies;

namespace {

const std::string kSilicon = std::string(SERVESIM_SOURCE_DIR) + "/calibrate/data/serving/silicon_dev.csv";

// The header and the rows of the shipped validation set whose id is in `ids`, as a new file.
std::filesystem::path subset(const std::string& name, const std::vector<std::string>& ids) {
  std::ifstream in(kSilicon);
  std::string line, text;
  std::getline(in, line);
  text = line + "\n";
  while (std::getline(in, line)) {
    for (const std::string& id : ids) {
      if (line.rfind(id + ",", 0) == 0) text += line + "\n";
    }
  }
  const auto dir = scratch(name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "rows.csv") << text;
  return dir / "rows.csv";
}

// Two aggregated Qwen3-32B rows on H100 with TensorRT-LLM (one group): 1024 tokens in, 128 out,
// 8 clients, TP 2 and TP 4.
const std::string kAggSmall = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp2_epnone_43";
const std::string kAggLarge = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp4_epnone_87";

}  // namespace

TEST_CASE("validate: per-row errors, the group's median and signed mean match a hand computation") {
  const auto file = subset("validate_rows", {kAggSmall, kAggLarge});
  const CliResult r =
      cli({"validate", file.string(), "--json", "-", "--rounds", "2", "--threads", "1", "--reproducible"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Json j = Json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  double ape_ttft[2], signed_tpot[2];
  for (int i = 0; i < 2; ++i) {
    const Json& row = j["rows"][i];
    REQUIRE_MESSAGE(row["status"] == "ok", row.dump());
    CHECK(row["predicted_ttft_ms"].get<double>() > 0);
    ape_ttft[i] = std::fabs(row["predicted_ttft_ms"].get<double>() / row["measured_ttft_ms"].get<double>() - 1);
    signed_tpot[i] = row["predicted_tpot_ms"].get<double>() / row["measured_tpot_ms"].get<double>() - 1;
  }
  // One group (Qwen/Qwen3-32B, h100_sxm, agg) of two rows: the median of two APEs is their mean
  // (interpolated between the order statistics), the p90 is 0.9 of the way from the smaller to
  // the larger, the signed mean is the plain mean.
  REQUIRE(j["groups"].size() == 1);
  const Json& g = j["groups"][0];
  CHECK(g["rows"] == 2);
  CHECK(g["predicted"] == 2);
  CHECK(g["ttft_ape_p50"].get<double>() == approx((ape_ttft[0] + ape_ttft[1]) / 2));
  const double lo = std::min(ape_ttft[0], ape_ttft[1]), hi = std::max(ape_ttft[0], ape_ttft[1]);
  CHECK(g["ttft_ape_p90"].get<double>() == approx(lo + 0.9 * (hi - lo)));
  CHECK(g["tpot_signed_mean"].get<double>() == approx((signed_tpot[0] + signed_tpot[1]) / 2));
  CHECK(j["overall"]["predicted"] == 2);
  CHECK_FALSE(j.contains("wall_s"));  // --reproducible
  // The same run twice gives the same JSON.
  CHECK(cli({"validate", file.string(), "--json", "-", "--rounds", "2", "--threads", "1", "--reproducible"}).out ==
        r.out);
}

TEST_CASE("validate: the measured phase starts on an idle engine after the drained warm-up") {
  // The benchmarks ran aiperf with --warmup-request-count 2N --request-count 10N (N clients), and
  // aiperf waits for every warm-up response before profiling: by default only the profiling
  // phase is simulated, 8 x 10 = 80 requests from 8 clients starting together, all measured.
  const auto file = subset("validate_window", {kAggSmall});
  const CliResult sc = cli({"validate", file.string(), "--print-scenario", kAggSmall});
  REQUIRE_MESSAGE(sc.code == 0, sc.err);
  CHECK(sc.out.find("requests: 80\n") != std::string::npos);
  const CliResult r = cli({"validate", file.string(), "--json", "-", "--threads", "1", "--reproducible"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Json j = Json::parse(r.out);
  CHECK(j["warmup"] == "drained");
  CHECK(j["warmup_rounds"] == 2);
  CHECK(j["rows"][0]["window_requests"] == 80);
  // --warmup continuous: one loop of 8 x (2 + 10) = 96 requests, the 80 sent after the first 16
  // measured.
  const CliResult c =
      cli({"validate", file.string(), "--json", "-", "--threads", "1", "--warmup", "continuous", "--reproducible"});
  REQUIRE_MESSAGE(c.code == 0, c.err);
  const Json jc = Json::parse(c.out);
  CHECK(jc["warmup"] == "continuous");
  CHECK(jc["rows"][0]["window_requests"] == 80);
  CHECK(cli({"validate", file.string(), "--warmup", "continuous", "--print-scenario", kAggSmall})
            .out.find("requests: 96\n") != std::string::npos);
  // The drained window holds the first round's burst: TensorRT-LLM admits two whole 1,024-token
  // prompts per iteration (its budget is batch + isl + 1,500: 2,560), so the k-th pair of the 8
  // simultaneous prompts waits k - 1 prefills; the continuous window, whose clients have spread
  // out, has less of that queue, so its mean TTFT is lower.
  CHECK(j["rows"][0]["predicted_ttft_ms"].get<double>() > jc["rows"][0]["predicted_ttft_ms"].get<double>());
  // --warmup continuous --warmup-rounds 1 --rounds 3: 8 x 4 = 32 requests sent, the last 24 measured.
  const CliResult w = cli({"validate", file.string(), "--json", "-", "--threads", "1", "--warmup", "continuous",
                           "--warmup-rounds", "1", "--rounds", "3", "--reproducible"});
  REQUIRE_MESSAGE(w.code == 0, w.err);
  CHECK(Json::parse(w.out)["rows"][0]["window_requests"] == 24);
  CHECK(cli({"validate", file.string(), "--warmup-rounds", "-1"}).code == 2);
  CHECK(cli({"validate", file.string(), "--warmup", "sometimes"}).code == 2);
}

TEST_CASE("validate: disaggregated rows run on prefill and decode pools, their missing figures derived") {
  // The first disaggregated row of the set (Qwen3-32B on H100, SGLang) records no concurrency but
  // its decode batch (48 per rank) and workers (11): 528 clients. The first GB200 disaggregated
  // row (gpt-oss-120b, TensorRT-LLM) records its clients but no worker counts: derived.
  std::ifstream in(kSilicon);
  std::string line, first, gb200;
  while (std::getline(in, line) && (first.empty() || gb200.empty())) {
    if (line.find(",disagg,") == std::string::npos) continue;
    const std::string id = line.substr(0, line.find(','));
    if (first.empty()) first = id;
    if (gb200.empty() && line.find("gb200") != std::string::npos) gb200 = id;
  }
  REQUIRE_FALSE(first.empty());
  REQUIRE_FALSE(gb200.empty());
  const auto file = subset("validate_disagg", {first, gb200});
  const CliResult r = cli({"validate", file.string(), "--json", "-", "--rounds", "1", "--threads", "1"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Json j = Json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][0]["status"] == "ok");
  CHECK(j["rows"][0]["window_requests"] == 528);  // 48 x 1 x 11 clients, one round
  CHECK(j["rows"][0]["assumptions"].dump().find(
            "decode_batch_size 48 x attention DP 1 x 11 decode workers = 528 clients") != std::string::npos);
  CHECK(j["rows"][1]["status"] == "ok");
  CHECK(j["rows"][1]["predicted_ttft_ms"].get<double>() > 0);
  CHECK(j["rows"][1]["predicted_tpot_ms"].get<double>() > 0);
  const std::string derived = j["rows"][1]["assumptions"].dump();
  CHECK(derived.find("decode workers not recorded") != std::string::npos);
  CHECK(derived.find("prefill workers not recorded") != std::string::npos);
  CHECK(derived.find("rate-matched to the decode pool") != std::string::npos);
  CHECK(j["overall"]["rows"] == 2);
  CHECK(j["overall"]["predicted"] == 2);
  CHECK(j["skipped"].empty());
  // The row's scenario has a prefill and a decode pool.
  const CliResult sc = cli({"validate", file.string(), "--print-scenario", gb200});
  REQUIRE_MESSAGE(sc.code == 0, sc.err);
  CHECK(sc.out.find("role: prefill") != std::string::npos);
  CHECK(sc.out.find("role: decode") != std::string::npos);
  // TensorRT-LLM's context servers run without the overlap scheduler (serving_engines.cpp): the
  // prefill pool's host time is serial and it does not form ahead; the decode pool overlaps.
  const std::size_t decode_at = sc.out.find("role: decode");
  const std::string prefill_pool = sc.out.substr(0, decode_at), decode_pool = sc.out.substr(decode_at);
  CHECK(prefill_pool.find("host_overlap: false") != std::string::npos);
  CHECK(prefill_pool.find("form_ahead") == std::string::npos);
  CHECK(decode_pool.find("host_overlap: true") != std::string::npos);
  CHECK(decode_pool.find("form_ahead: true") != std::string::npos);
  // Its generation server answers a request whose KV arrived after the second decode step
  // (serving_engines.cpp: the overlap scheduler's skipped first response behind Dynamo).
  CHECK(decode_pool.find("first_response_step: 2") != std::string::npos);
  CHECK(prefill_pool.find("first_response_step") == std::string::npos);
}

TEST_CASE("validate: a bad row is skipped with its line and column; a bad file is exit code 2") {
  const auto dir = scratch("validate_bad");
  std::filesystem::create_directories(dir);
  std::ifstream in(kSilicon);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  // The isl column (the 9th) made non-numeric on line 2: that row is skipped, with where.
  std::string bad = row;
  std::size_t at = 0;
  for (int c = 0; c < 8; ++c) at = bad.find(',', at) + 1;
  bad.replace(at, bad.find(',', at) - at, "many");
  std::ofstream(dir / "bad.csv") << header << "\n" << bad << "\n";
  const CliResult r = cli({"validate", (dir / "bad.csv").string(), "--json", "-", "--rounds", "1"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Json j = Json::parse(r.out);
  CHECK(j["rows"][0]["status"] == "skipped");
  CHECK(j["rows"][0]["reason"].get<std::string>().rfind("line 2, column isl: ", 0) == 0);
  // A file without a column it needs (silicon_ttft_ms) is bad input: exit code 2, file and column.
  const std::size_t ttft = header.find(",silicon_ttft_ms");
  REQUIRE(ttft != std::string::npos);
  std::ofstream(dir / "no_ttft.csv") << header.substr(0, ttft) + header.substr(ttft + 16) << "\n";
  const CliResult missing = cli({"validate", (dir / "no_ttft.csv").string()});
  CHECK(missing.code == 2);
  CHECK(missing.err.find((dir / "no_ttft.csv").string() + ":1:") != std::string::npos);
  CHECK(missing.err.find("silicon_ttft_ms") != std::string::npos);
  CHECK(cli({"validate", (dir / "missing.csv").string()}).code == 2);
}

TEST_CASE("validate: every kind of row of an AIConfigurator-style file is predicted or skipped with its reason") {
  // tests/app/data/validate_kinds.csv: one row per kind the reader handles (measured figures are
  // placeholders: only the statuses, reasons and derived figures are checked).
  const std::string file = std::string(SERVESIM_SOURCE_DIR) + "/tests/app/data/validate_kinds.csv";
  const CliResult r = cli({"validate", file, "--json", "-", "--rounds", "1", "--threads", "1", "--reproducible"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Json j = Json::parse(r.out);
  std::map<std::string, Json> rows;
  for (const Json& row : j["rows"]) rows[row["id"].get<std::string>()] = row;
  REQUIRE(rows.size() == 34);
  for (const auto& [id, row] : rows) {
    CAPTURE(id);
    CAPTURE(row.dump());
    if (id.rfind("ok_", 0) == 0) {
      CHECK(row["status"] == "ok");
      CHECK(row["predicted_ttft_ms"].get<double>() > 0);
      CHECK(row["predicted_tpot_ms"].get<double>() > 0);
    } else {
      CHECK(row["status"] == "skipped");
    }
  }
  auto assumed = [&](const std::string& id, const std::string& text) {
    CAPTURE(id);
    CAPTURE(text);
    CHECK(rows[id]["assumptions"].dump().find(text) != std::string::npos);
  };
  auto reason = [&](const std::string& id, const std::string& text) {
    CAPTURE(id);
    CHECK(rows[id]["reason"].get<std::string>().find(text) != std::string::npos);
  };
  // Checkpoint names: a family's quant mode served from its published checkpoint, a name with
  // variant suffixes read as its base, a re-uploaded name under another organisation.
  assumed("ok_qwen35_gdn", "served from Qwen/Qwen3.5-397B-A17B-FP8");
  assumed("ok_suffix_derived", "read as Qwen/Qwen3-235B-A22B-Instruct-2507 with the suffix '-fp8'");
  assumed("ok_glm5_dsa", "read as zai-org/GLM-5 (the same name under another organisation)");
  // Family members with presets of their own (ok_mixtral_moe, ok_qwen3_30b_fp8, ok_gpt_oss_20b,
  // ok_qwen3_vl_text, Qwen3-VL's language model, ok_llama4_chunked and ok_nemotron_h_mamba2, a
  // Mamba-2 hybrid: predicted, checked
  // above); gpt-oss-20b pinned to its one checkpoint as the 120b is.
  assumed("ok_gpt_oss_20b", "openai/gpt-oss-20b from its own checkpoint");
  // tp_size 16 = moe_tp 4 x moe_ep 4 on 8-GPU nodes: TP 4 with EP 4.
  assumed("ok_tp_size_is_tp_times_ep", "read as tp 4 with expert parallelism 4");
  // Disaggregated: concurrency from the decode batch per attention-DP rank, workers derived.
  assumed("ok_disagg_concurrency_from_batches",
          "decode_batch_size 16 x attention DP 1 x 2 decode workers = 32 clients");
  CHECK(rows["ok_disagg_concurrency_from_batches"]["window_requests"] == 32);
  assumed("ok_disagg_decode_workers_from_batch",
          "decode workers not recorded: 32 clients / (batch 8 x attention DP 1) = 4");
  assumed("ok_disagg_workers_derived", "prefill workers not recorded");
  // AIConfigurator's PCIe systems: predicted on their presets' assumed figures (no profile).
  assumed("ok_h100_pcie_preset", "h100-pcie has no calibration profile: the preset's efficiencies (AIC h100_pcie.yaml");
  assumed("ok_l40s_preset", "l40s has no calibration profile: the preset's efficiencies (AIC l40s.yaml");
  // Skipped rows keep their reason.
  reason("skip_unknown_model", "model 'acme/Unknown-7B' has no preset");
  reason("skip_unknown_system", "system 'mi300x' has no chip preset");
  reason("skip_unknown_backend", "serving engine 'tgi' is not modelled");
  reason("skip_unknown_quant_mode", "quantisation mode 'fp6' is not modelled");
  reason("skip_bad_measurement", "column silicon_ttft_ms");
  reason("skip_bad_mode", "mode must be 'agg' or 'disagg', found 'hybrid'");
  reason("skip_tp_not_dividing_heads", "tensor parallelism 36 does not divide the 128 attention heads");
  reason("skip_no_concurrency", "no concurrency recorded");
  reason("skip_does_not_fit", "does not fit on h100-sxm");
  CHECK(j["overall"]["rows"] == 34);
  CHECK(j["overall"]["predicted"] == 25);
}

TEST_CASE("calibrate: fits a native CSV, writes a profile a scenario loads, reports the error") {
  // GEMMs of a synthetic chip: latency = 5 us + max(2 m n k / (989.5 TFLOP/s x 0.7),
  // 2 (n k + m k + m n) bytes / (3.35 TB/s x 0.8)), the simulator's own roofline form
  // (models::gemm_op counts weights, input and output in bf16), which the fitted curves and
  // overhead must reproduce on held-out shapes.
  const auto dir = scratch("calibrate_native");
  std::filesystem::create_directories(dir);
  std::ofstream csv(dir / "gemm.csv");
  csv << "op,shape,format,latency_s,chip\n";
  int rows = 0;
  for (int m : {1, 4, 16, 64, 256, 1024, 4096}) {
    for (int n : {1024, 2048, 4096, 8192}) {
      for (int k : {1024, 4096, 8192}) {
        const double flops = 2.0 * m * n * k, bytes = 2.0 * (double(n) * k + double(m) * k + double(m) * n);
        const double s = 5e-6 + std::max(flops / (989.5e12 * 0.7), bytes / (3.35e12 * 0.8));
        csv << "gemm,m=" << m << " n=" << n << " k=" << k << ",bf16," << s << ",h100-sxm\n";
        ++rows;
      }
    }
  }
  csv.close();
  const CliResult r =
      cli({"calibrate", (dir / "gemm.csv").string(), "--chip", "h100-sxm", "--out", (dir / "p.yaml").string(), "--json",
           (dir / "e.json").string(), "--created", "2026-12-01", "--no-tables"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("held out") != std::string::npos);
  const std::string profile = read(dir / "p.yaml");
  CHECK(profile.find("schema: servesim.profile/1") != std::string::npos);
  CHECK(profile.find("gemm_overhead:") != std::string::npos);
  // A noiseless roofline is recovered: the held-out median error over all 84 shapes is below 2%.
  const Json e = Json::parse(read(dir / "e.json"));
  bool found = false;
  for (const Json& c : e["cells"]) {
    if (c["kind"] == "gemm" && c["size"] == "all") {
      found = true;
      CHECK(c["rows"] == rows);
      CHECK(c["held_out"] == true);
      CHECK(c["ape_p50"].get<double>() < 0.02);
    }
  }
  CHECK(found);
  // The profile loads in a scenario (by path) and sets the fitted overhead, about 5 us.
  std::ofstream(dir / "s.yaml")
      << "model: llama-3.1-8b\ndeployment:\n  pools:\n    - chip: {preset: h100-sxm, profile: "
      << (dir / "p.yaml").string()
      << "}\n      instances: 1\nworkload:\n  requests: 2\n  arrivals: {process: poisson, rate: 1 /s}\n"
         "  lengths:\n    prompt: {distribution: fixed, value: 64}\n    output: {distribution: fixed, value: 4}\n";
  const CliResult run = cli({"run", (dir / "s.yaml").string(), "--json", "-"});
  REQUIRE_MESSAGE(run.code == 0, run.err);
  const Json report = Json::parse(run.out);
  const std::string overhead = report["scenario"]["deployment"]["pools"][0]["chip"]["efficiency"]["gemm_overhead"];
  CHECK(std::stod(overhead) == approx(5.0).epsilon(0.2));

  // A bad row: exit 2 with file:line:col, nothing written.
  std::ofstream(dir / "bad.csv") << "op,shape,format,latency_s,chip\ngemm,m=1 n=2 k=x,bf16,3e-6,h100-sxm\n";
  const CliResult bad =
      cli({"calibrate", (dir / "bad.csv").string(), "--chip", "h100-sxm", "--out", (dir / "q.yaml").string()});
  CHECK(bad.code == 2);
  CHECK(bad.err.find((dir / "bad.csv").string() + ":2:") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "q.yaml"));
  // Rows of another chip than --chip.
  CHECK(
      cli({"calibrate", (dir / "gemm.csv").string(), "--chip", "a100-80g", "--out", (dir / "r.yaml").string()}).code ==
      2);
}

namespace {

// The line of `yaml` that starts with `key` (two spaces of indent, as the efficiency map is
// written), or "" when there is none.
std::string efficiency_line(const std::string& yaml, const std::string& key) {
  const std::size_t at = yaml.find("\n  " + key + ": ");
  if (at == std::string::npos) return "";
  return yaml.substr(at + 1, yaml.find('\n', at + 1) - at - 1);
}

}  // namespace

TEST_CASE("calibrate --transfer: another chip's efficiencies without its tables; the chip's collectives with --comm") {
  const std::string source = std::string(SERVESIM_SOURCE_DIR) + "/profiles/h200.yaml";
  const std::string h200 = read(source);
  REQUIRE(h200.find("cost_model: \"table\"") != std::string::npos);  // the source has GEMM tables
  const auto dir = scratch("calibrate_transfer");
  std::filesystem::create_directories(dir);
  const CliResult r = cli({"calibrate", "--transfer", source, "--chip", "gb200", "--out", (dir / "t.yaml").string(),
                           "--created", "2026-12-01", "--transfer-rule", "bandwidth"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const std::string t = read(dir / "t.yaml");
  CHECK(t.find("chip: \"gb200\"") != std::string::npos);
  CHECK(t.find("cost_model: \"table\"") == std::string::npos);  // no tables: they are H200's latencies
  CHECK(t.find("entries:\n  []") != std::string::npos);
  // Every fraction-of-peak key is H200's, collectives included (no --comm).
  for (const char* key :
       {"gemm_compute", "moe_memory", "attention_decode", "collective_latency", "collective_bandwidth"}) {
    CAPTURE(key);
    REQUIRE_FALSE(efficiency_line(h200, key).empty());
    CHECK(efficiency_line(t, key) == efficiency_line(h200, key));
  }
  // The per-kernel fixed times are scaled by the HBM bandwidths of the presets, H200 4.8 TB/s
  // over GB200 8 TB/s = 0.6: H200's fitted gemm / moe / attention overheads x 0.6, and the
  // elementwise overhead the H200 profile does not carry from the h200-sxm preset (H100's 1.6231
  // us, models/chip_spec.cpp) x 0.6 = 0.97386 us.
  auto microseconds = [](const std::string& line) {
    return std::stod(line.substr(line.find(": ") + 2));  // "  gemm_overhead: 2.7997 us"
  };
  for (const char* key : {"gemm_overhead", "moe_overhead", "attention_overhead"}) {
    CAPTURE(key);
    REQUIRE_FALSE(efficiency_line(h200, key).empty());
    CHECK(microseconds(efficiency_line(t, key)) ==
          approx(microseconds(efficiency_line(h200, key)) * 0.6).epsilon(1e-4));
  }
  CHECK(efficiency_line(h200, "elementwise_overhead").empty());
  CHECK(efficiency_line(t, "elementwise_overhead") == "  elementwise_overhead: 0.97386 us");
  CHECK(t.find("per-kernel fixed times x HBM 4.8 / 8 TB/s = 0.6 (presets)") != std::string::npos);
  CHECK(t.find("\ntransferred_from: \"h200-sxm\"\n") != std::string::npos);
  // The fractions rule (the default) transfers them as they are, and adds none.
  const CliResult k = cli({"calibrate", "--transfer", source, "--chip", "gb200", "--out", (dir / "k.yaml").string()});
  REQUIRE_MESSAGE(k.code == 0, k.err);
  const std::string ky = read(dir / "k.yaml");
  CHECK(microseconds(efficiency_line(ky, "gemm_overhead")) ==
        approx(microseconds(efficiency_line(h200, "gemm_overhead"))).epsilon(1e-4));
  CHECK(efficiency_line(ky, "elementwise_overhead").empty());
  // With --comm the collectives are fitted to GB200's own NCCL tables: different constants, and
  // their held-out error cells in the report; the compute keys stay H200's.
  const CliResult c = cli({"calibrate", "--transfer", source, "--chip", "gb200", "--comm",
                           std::string(SERVESIM_SOURCE_DIR) + "/calibrate/data/comm", "--out",
                           (dir / "c.yaml").string(), "--json", "-"});
  REQUIRE_MESSAGE(c.code == 0, c.err);
  const std::string cy = read(dir / "c.yaml");
  CHECK(efficiency_line(cy, "gemm_compute") == efficiency_line(h200, "gemm_compute"));
  CHECK(efficiency_line(cy, "collective_latency") != efficiency_line(h200, "collective_latency"));
  CHECK_FALSE(Json::parse(c.out)["cells"].empty());
  // The transferred profile loads on a GB200 pool, and the summary names it as the pool's source.
  std::ofstream(dir / "s.yaml")
      << "model: llama-3.1-8b\ndeployment:\n  pools:\n    - chip: {preset: gb200, profile: "
      << (dir / "t.yaml").string()
      << "}\n      instances: 1\nworkload:\n  requests: 2\n  arrivals: {process: poisson, rate: 1 /s}\n"
         "  lengths:\n    prompt: {distribution: fixed, value: 64}\n    output: {distribution: fixed, value: 4}\n";
  const CliResult run = cli({"run", (dir / "s.yaml").string()});
  REQUIRE_MESSAGE(run.code == 0, run.err);
  CHECK(run.out.find("gb200 (efficiencies from profile " + (dir / "t.yaml").string()) != std::string::npos);
  // A source that is neither a file nor a shipped profile is bad input, and nothing is written.
  CHECK(cli({"calibrate", "--transfer", "h300", "--chip", "gb200", "--out", (dir / "x.yaml").string()}).code == 2);
  CHECK_FALSE(std::filesystem::exists(dir / "x.yaml"));
}

TEST_CASE("calibrate --transfer: a format another rate runs on the target keeps none of the source's kernel model") {
  // H200 has no FP4 rate: its profile's mxfp4 experts model is the weight-only kernel (MXFP4
  // dequantised to bf16 in the GEMM); B200 runs MXFP4 at its FP4 rate, another kernel. fp8 and
  // fp8_block run at the fp8 rate on both, and their models are carried.
  const std::string h200 = read(std::string(SERVESIM_SOURCE_DIR) + "/profiles/h200.yaml");
  REQUIRE(efficiency_line(h200, "moe_experts").find("mxfp4: {") != std::string::npos);
  const auto dir = scratch("calibrate_transfer_rate");
  std::filesystem::create_directories(dir);
  const CliResult r = cli({"calibrate", "--transfer", "h200", "--chip", "b200", "--out", (dir / "b.yaml").string()});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("not carried: the models of the mxfp4 kernels (another rate on b200)") != std::string::npos);
  const std::string b = read(dir / "b.yaml");
  CHECK(efficiency_line(b, "moe_experts").find("mxfp4: {") == std::string::npos);
  CHECK(efficiency_line(b, "moe_experts").find("fp8_block: {") != std::string::npos);
  CHECK(efficiency_line(b, "gemm_formats").find("fp8: {") != std::string::npos);
  // Between two Hopper chips every model is carried (the same rates).
  const CliResult h =
      cli({"calibrate", "--transfer", "h200", "--chip", "h100-sxm", "--out", (dir / "h.yaml").string()});
  REQUIRE_MESSAGE(h.code == 0, h.err);
  CHECK(h.out.find("not carried") == std::string::npos);
  CHECK(efficiency_line(read(dir / "h.yaml"), "moe_experts") == efficiency_line(h200, "moe_experts"));
}

TEST_CASE("validate --profile: a chip's rows take another profile, the others keep theirs; bad ones are exit 2") {
  // One B200 TensorRT-LLM row and one H100 row; B200's rows under TensorRT-LLM take its preset's
  // figures (`none`) or a profile transferred from H200.
  const std::string b200_row = "2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x8192_c4_tp8_ep1_192";
  const auto file = subset("validate_profile", {kAggSmall, b200_row});
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"validate",  file.string(), "--json",        "-", "--rounds", "1",
                                     "--threads", "1",           "--reproducible"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = cli(args);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return Json::parse(r.out);
  };
  auto predicted = [](const Json& j, const std::string& id) {
    for (const Json& row : j["rows"]) {
      if (row["id"] == id) return std::make_pair(row["predicted_tpot_ms"].get<double>(), row["assumptions"].dump());
    }
    FAIL("no row " << id);
    return std::make_pair(0.0, std::string());
  };
  const Json own = run({});
  CHECK_FALSE(own.contains("profiles"));
  const Json none = run({"--profile", "b200_sxm/trtllm=none"});  // a system name of the file works too
  REQUIRE(none["profiles"].size() == 1);
  CHECK(none["profiles"][0]["chip"] == "b200");
  CHECK(none["profiles"][0]["engine"] == "trtllm");
  CHECK(predicted(none, b200_row).first != predicted(own, b200_row).first);
  CHECK(predicted(none, b200_row).second.find("has no calibration profile") != std::string::npos);
  CHECK(predicted(none, kAggSmall) == predicted(own, kAggSmall));  // H100's row is untouched
  // Another engine's override leaves the row alone.
  CHECK(predicted(run({"--profile", "b200/vllm=none"}), b200_row) == predicted(own, b200_row));

  const auto dir = scratch("validate_profile_transfer");
  std::filesystem::create_directories(dir);
  REQUIRE(cli({"calibrate", "--transfer", "h200", "--chip", "b200", "--out", (dir / "t.yaml").string()}).code == 0);
  const Json moved = run({"--profile", "b200=" + (dir / "t.yaml").string()});
  CHECK(moved["profiles"][0]["transferred_from"] == "h200-sxm");
  CHECK(moved["profiles"][0]["engine"].is_null());
  const auto [tpot, assumptions] = predicted(moved, b200_row);
  CHECK(tpot != predicted(own, b200_row).first);
  CHECK(tpot != predicted(none, b200_row).first);
  CHECK(assumptions.find("h200-sxm's efficiencies transferred") != std::string::npos);

  // Bad values: the command's error, nothing run.
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--profile", "b200"},
                                              {"--profile", "z9=none"},
                                              {"--profile", "b200/tgi=none"},
                                              {"--profile", "b200=" + (dir / "missing.yaml").string()}}) {
    CAPTURE(bad[1]);
    const CliResult r = cli({"validate", file.string(), bad[0], bad[1]});
    CHECK(r.code == 2);
    CHECK(r.err.find("--profile") != std::string::npos);
    CHECK(r.out.empty());
  }
  // A profile file with problems is reported at its file and line.
  std::ofstream(dir / "bad.yaml") << "schema: servesim.profile/1\nchip: b200\nefficiency: {gemm_compute: 7}\n";
  const CliResult r = cli({"validate", file.string(), "--profile", "b200=" + (dir / "bad.yaml").string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("bad.yaml:3:") != std::string::npos);
}

TEST_CASE("validate: each engine's rows get the scheduler of the configuration the benchmark ran with") {
  // AIConfigurator's generator rules (studies/serving_engines.cpp, benchmark_limits).
  const std::string vllm_sync = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x128_c8_tp2_epnone_1";
  const std::string vllm_async = "2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_8192x1024_c64_tp1_ep1_142";
  const auto file = subset("validate_engines", {kAggSmall, vllm_sync, vllm_async});
  const auto scheduler_of = [&](const std::string& id) {
    const CliResult sc = cli({"validate", file.string(), "--print-scenario", id});
    REQUIRE_MESSAGE(sc.code == 0, sc.err);
    const std::size_t at = sc.out.find("scheduler: ");
    REQUIRE(at != std::string::npos);
    return sc.out.substr(at, sc.out.find('\n', at) - at);
  };
  // TensorRT-LLM, 8 clients, 1,024 tokens in: 8 + 1,024 + 1,500 = 2,532 tokens, rounded up to the
  // 32-token KV block: 2,560; whole prompts only; the overlap scheduler forms ahead.
  CHECK(scheduler_of(kAggSmall) ==
        "scheduler: {policy: sarathi, max_batch_size: 8, max_batched_tokens: 2560, chunked_prefill: false, "
        "form_ahead: true}");
  // vLLM 0.12 (synchronous): 8 + 1,024 + 1,500 = 2,532, chunked, no form-ahead.
  CHECK(scheduler_of(vllm_sync) == "scheduler: {policy: sarathi, max_batch_size: 8, max_batched_tokens: 2532}");
  // vLLM 0.18 (async scheduling), 64 clients, 8,192 in: 64 + 8,192 + 1,500 = 9,756.
  CHECK(scheduler_of(vllm_async) ==
        "scheduler: {policy: sarathi, max_batch_size: 64, max_batched_tokens: 9756, form_ahead: true}");
  {
    // The TensorRT-LLM row with two pipeline stages (its pp_size column, the 15th, set to 2):
    // TensorRT-LLM runs its pipeline loop, not the overlap loop, so the pool does not form ahead
    // (and its lanes share one queue and KV pool, the default).
    std::ifstream in(file);
    std::string header, line, row;
    std::getline(in, header);
    while (std::getline(in, line)) {
      if (line.rfind(kAggSmall + ",", 0) == 0) row = line;
    }
    REQUIRE_FALSE(row.empty());
    std::vector<std::string> fields;
    for (std::size_t at = 0;;) {
      const std::size_t comma = row.find(',', at);
      fields.push_back(row.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    REQUIRE(fields.size() > 14);
    REQUIRE(fields[14] == "1");
    fields[0] += "_pp2";
    fields[14] = "2";
    std::string pp_row;
    for (std::size_t i = 0; i < fields.size(); ++i) pp_row += (i ? "," : "") + fields[i];
    const auto pp_file = scratch("validate_engines_pp") / "rows.csv";
    std::filesystem::create_directories(pp_file.parent_path());
    std::ofstream(pp_file) << header << "\n" << pp_row << "\n";
    const CliResult sc = cli({"validate", pp_file.string(), "--print-scenario", kAggSmall + "_pp2"});
    REQUIRE_MESSAGE(sc.code == 0, sc.err);
    CHECK(sc.out.find("pp: 2") != std::string::npos);
    CHECK(sc.out.find("form_ahead") == std::string::npos);
  }
  // The other roles of TensorRT-LLM's rule, and its KV cache: a prefill worker without a recorded
  // batch takes one prompt and isl + 1,500 tokens (8,192 + 1,500 = 9,692, rounded up to the
  // 32-token block: 9,696); a decode worker's budget is its batch, rounded up the same way (48 ->
  // 64); the KV cache is 0.8 of the free memory, the generator's engine files' value.
  std::string why;
  const auto trt = studies::serving_engine("trtllm", "1.0.0rc3", 80, 1, why);
  REQUIRE_MESSAGE(trt, why);
  const studies::EngineLimits prefill = studies::benchmark_limits(*trt, "prefill", 8192, 0);
  CHECK(prefill.max_batched_tokens == 9696);
  CHECK(prefill.max_batch_size == 1);
  const studies::EngineLimits decode = studies::benchmark_limits(*trt, "decode", 8192, 48);
  CHECK(decode.max_batched_tokens == 64);
  CHECK(decode.max_batch_size == 48);
  CHECK(trt->kv_sizing == studies::KvSizing::kFreeFraction);
  CHECK(trt->kv_fraction == doctest::Approx(0.8));
}

TEST_CASE("validate: TensorRT-LLM's MXFP4 experts on Hopper run expert-parallel (TRITON backend)") {
  // gpt-oss-120b rows recorded as tp 4 with moe_tp 4 x ep 1: on H200 (no FP4 rate) with
  // TensorRT-LLM the experts are read as ep 4 (studies/validate.cpp, triton_expert_parallel); the
  // same recorded split with vLLM keeps moe_tp 4.
  const std::string trt_h200 = "2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_8192x1024_c4_tp4_ep1_422";
  const std::string vllm_h200 = "2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_1024x8192_c64_tp4_ep1_178";
  const auto file = subset("validate_triton_ep", {trt_h200, vllm_h200});
  const auto scenario_of = [&](const std::string& id) {
    const CliResult sc = cli({"validate", file.string(), "--print-scenario", id});
    REQUIRE_MESSAGE(sc.code == 0, sc.err);
    return sc.out;
  };
  const std::string trt = scenario_of(trt_h200);
  CHECK(trt.find("parallel: {tp: 4, pp: 1, dp: 1, moe_tp: 1, ep: 4}") != std::string::npos);
  CHECK(trt.find("expert-parallel only: moe_tp 4 x ep 1 read as ep 4") != std::string::npos);
  const std::string vllm = scenario_of(vllm_h200);
  CHECK(vllm.find("parallel: {tp: 4, pp: 1, dp: 1, moe_tp: 4, ep: 1}") != std::string::npos);
  CHECK(vllm.find("expert-parallel only") == std::string::npos);
}

TEST_CASE("validate: mixed-precision checkpoints keep their MLP format (Qwen3.6-27B-NVFP4, Gemma-4-31B)") {
  // nvidia/Qwen3.6-27B-NVFP4 hf_quant_config.json: MIXED_PRECISION, FP8 projections and
  // W4A16_NVFP4 MLPs (the simulator's W4A16 bytes and rate) on Qwen3.5-27B's architecture.
  const auto qwen = servesim::studies::checkpoint("nvidia/Qwen3.6-27B-NVFP4");
  REQUIRE(qwen.has_value());
  CHECK(qwen->preset == "qwen3.5-27b");
  CHECK(qwen->formats.weights == servesim::models::Format::kFp8);
  CHECK(qwen->formats.mlp == servesim::models::Format::kW4A16);
  const auto gemma = servesim::studies::checkpoint("nvidia/Gemma-4-31B-IT-NVFP4");
  REQUIRE(gemma.has_value());
  CHECK(gemma->formats.weights == servesim::models::Format::kBf16);
  CHECK(gemma->formats.mlp == servesim::models::Format::kNvfp4);
  // Checkpoints without one keep their MLPs in the weights' format.
  const auto fp8 = servesim::studies::checkpoint("Qwen/Qwen3-32B-FP8");
  REQUIRE(fp8.has_value());
  CHECK(fp8->formats.mlp == fp8->formats.weights);
}

TEST_CASE("validate: a Qwen3-VL checkpoint runs its language model, which is a Qwen3 preset's") {
  // Text-prompt benchmarks of Qwen3-VL run its language model. Each Qwen3-VL config.json
  // (tests/scenario/hf/qwen3-vl/, from AIConfigurator's model_configs) has a text_config whose
  // architecture keys equal those of the Qwen3 model its checkpoint row names (that model's
  // config.json in tests/scenario/hf/PRESET/, which imports to exactly the preset).
  const std::string hf = std::string(SERVESIM_SOURCE_DIR) + "/tests/scenario/hf/";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), path);
    return Json::parse(in);
  };
  const std::map<std::string, std::string> expected = {{"Qwen3-VL-235B-A22B-Instruct", "qwen3-235b-a22b"},
                                                       {"Qwen3-VL-30B-A3B-Instruct", "qwen3-30b-a3b"},
                                                       {"Qwen3-VL-32B-Instruct", "qwen3-32b"},
                                                       {"Qwen3-VL-32B-Thinking", "qwen3-32b"},
                                                       {"Qwen3-VL-8B-Instruct", "qwen3-8b"},
                                                       {"Qwen3-VL-4B-Instruct", "qwen3-4b"},
                                                       {"Qwen3-VL-2B-Instruct", "qwen3-1.7b"}};
  for (const auto& [name, preset] : expected) {
    CAPTURE(name);
    const auto cp = servesim::studies::checkpoint("Qwen/" + name);
    REQUIRE(cp.has_value());
    CHECK(cp->preset == preset);
    const Json vl = read(hf + "qwen3-vl/" + name + ".json");
    const Json& text = vl.at("text_config");
    const Json lm = read(hf + preset + "/config.json");
    for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                            "head_dim", "intermediate_size", "vocab_size", "moe_intermediate_size", "num_experts",
                            "num_experts_per_tok", "decoder_sparse_step", "norm_topk_prob", "attention_bias"}) {
      CAPTURE(key);
      CHECK(text.value(key, Json()) == lm.value(key, Json()));
    }
    // Tied embeddings are a top-level key of the VL config.
    CHECK(vl.value("tie_word_embeddings", false) == lm.value("tie_word_embeddings", false));
  }
}

TEST_CASE("calibrate: --gemm-from takes one format's GEMM rows from another table") {
  // An engine's table whose fp8_block rows carry 200 us of host time, and a donor table of the
  // same kernel without it: the fit reads the donor's fp8_block rows and the engine's bf16 ones.
  const auto dir = scratch("calibrate_gemm_from");
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, double fp8_block_extra, bool with_bf16) {
    std::ofstream csv(dir / name);
    csv << "op,shape,format,latency_s,chip\n";
    for (int m : {1, 16, 256, 4096}) {
      for (int n : {1024, 4096}) {
        for (int k : {1024, 4096}) {
          const double s = 5e-6 + 2.0 * m * n * k / 500e12;
          if (with_bf16) csv << "gemm,m=" << m << " n=" << n << " k=" << k << ",bf16," << 2 * s << ",h100-sxm\n";
          csv << "gemm,m=" << m << " n=" << n << " k=" << k << ",fp8_block," << s + fp8_block_extra << ",h100-sxm\n";
        }
      }
    }
  };
  write("engine.csv", 200e-6, true);
  write("donor.csv", 0, false);
  const CliResult r = cli({"calibrate", (dir / "engine.csv").string(), "--chip", "h100-sxm", "--gemm-from",
                           "fp8_block=" + (dir / "donor.csv").string(), "--out", (dir / "p.yaml").string(), "--json",
                           (dir / "e.json").string(), "--no-tables"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  // 16 fp8_block rows from the donor, 16 bf16 rows from the engine's table; the donor a source.
  const Json e = Json::parse(read(dir / "e.json"));
  int fp8_block = 0, bf16 = 0;
  for (const Json& c : e["cells"]) {
    if (c["kind"] != "gemm" || c["size"] != "all") continue;
    if (c["format"] == "fp8_block") fp8_block = c["rows"];
    if (c["format"] == "bf16") bf16 = c["rows"];
  }
  CHECK(fp8_block == 16);
  CHECK(bf16 == 16);
  CHECK(read(dir / "p.yaml").find("donor.csv") != std::string::npos);
  // A donor without the format, and a spec without '=': exit 2, nothing written.
  const CliResult none = cli({"calibrate", (dir / "engine.csv").string(), "--chip", "h100-sxm", "--gemm-from",
                              "nvfp4=" + (dir / "donor.csv").string(), "--out", (dir / "q.yaml").string()});
  CHECK(none.code == 2);
  CHECK(none.err.find("holds no nvfp4 GEMM rows") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "q.yaml"));
  CHECK(cli({"calibrate", (dir / "engine.csv").string(), "--chip", "h100-sxm", "--gemm-from", "fp8_block", "--out",
             (dir / "q.yaml").string()})
            .code == 2);
}

TEST_CASE("calibrate: --moe-models refuses two kernels of one simulator format") {
  // W4A16 (Hopper) and MXFP4 x MXFP8 (Blackwell) are both the simulator's MXFP4 experts, and a
  // profile holds one MoE model per format: refused before any file is read, exit code 2.
  const CliResult r = cli({"calibrate", "missing.csv", "--chip", "b200", "--moe-models",
                           "bf16,w4a16_mxfp4,w4a8_mxfp4_mxfp8", "--out", "unused.yaml"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--moe-models: w4a16_mxfp4 and w4a8_mxfp4_mxfp8 are both the simulator's mxfp4 experts") !=
        std::string::npos);
}
