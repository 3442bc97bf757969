// `servesim diff`: the attribution of the TTFT, TPOT and throughput deltas. Both bases are
// exercised: the report contract's breakdowns (summary.ttft_breakdown_ms, tpot_breakdown_ms,
// pools[].groups) on report JSON built here, and the fallback (pools[].breakdown time shares) on
// real runs of today's serving model. Expected values are derived by hand next to each check.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/attribution.h"
#include "tests/app/cli_helpers.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::studies;
using namespace servesim::testing;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

const std::string kGptOss = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/models/gpt-oss-120b.yaml";

// The component `name` of an attribution, or null.
const Json* component(const Json& attribution, const std::string& name) {
  for (const Json& c : attribution["components"]) {
    if (c["name"] == name) return &c;
  }
  return nullptr;
}

double sum_of_deltas(const Json& attribution) {
  double s = 0;
  for (const Json& c : attribution["components"]) s += c["delta"].get<double>();
  return s;
}

// A disaggregated deployment's result with the contract's breakdowns.
Json epd_result(double ttft_mean, const Json& ttft_parts, double tpot_mean, const Json& tpot_parts,
                const Json& decode_groups) {
  Json r = Json::object();
  r["ok"] = true;
  r["summary"] = {{"requests", {{"arrived", 1000}, {"completed", 1000}, {"rejected", 0}, {"in_flight", 0}}},
                  {"throughput", {{"output_tokens_per_s", 5000.0}, {"output_tokens_per_s_per_chip", 50.0}}},
                  {"ttft_ms", {{"mean", ttft_mean}, {"p50", ttft_mean}, {"p90", ttft_mean}, {"p99", ttft_mean}}},
                  {"tpot_ms", {{"mean", tpot_mean}, {"p50", tpot_mean}, {"p90", tpot_mean}, {"p99", tpot_mean}}},
                  {"ttft_breakdown_ms", ttft_parts},
                  {"tpot_breakdown_ms", tpot_parts}};
  r["pools"] = Json::array();
  r["pools"].push_back({{"name", "prefill"},
                        {"role", "prefill"},
                        {"instances", 4},
                        {"chips", 32},
                        {"utilization", 0.5},
                        {"breakdown", {{"gemm_mlp", 0.5}, {"idle", 0.5}}},
                        {"kv_cache_peak_fraction", 0.1},
                        {"preemptions", 0},
                        {"iterations", 100}});
  r["pools"].push_back({{"name", "decode"},
                        {"role", "decode"},
                        {"instances", 1},
                        {"chips", 64},
                        {"utilization", 0.8},
                        {"breakdown", {{"gemm_mlp", 0.8}, {"idle", 0.2}}},
                        {"kv_cache_peak_fraction", 0.3},
                        {"preemptions", 0},
                        {"iterations", 1000},
                        {"groups", decode_groups}});
  r["simulation"] = {{"events", 1}, {"fingerprint", "0"}, {"simulated_s", 10.0}};
  return r;
}

Json group(int ranks, bool leaves, const char* tier, int domain) {
  return {{"ranks", ranks}, {"leaves_domain", leaves}, {"tier", tier}, {"domain_chips", domain}};
}

Json epd_scenario(int ep, int moe_tp, bool overlap) {
  Json pools = Json::array();
  pools.push_back({{"name", "prefill"}, {"role", "prefill"}, {"instances", 4}, {"parallel", {{"tp", 8}}}});
  pools.push_back({{"name", "decode"},
                   {"role", "decode"},
                   {"instances", 1},
                   {"parallel", {{"tp", 1}, {"dp", 64}, {"ep", ep}, {"moe_tp", moe_tp}}},
                   {"kv_transfer", {{"overlap", overlap}}}});
  return {{"name", "epd"}, {"seed", 1}, {"deployment", {{"pools", pools}}}};
}

}  // namespace

TEST_CASE("diff: on the report contract, exposed KV transfer explains most of the KV-overlap pair's TTFT delta") {
  // A overlaps the KV transfer with prefill; B does not. TTFT parts (ms):
  //   A: queueing 20 + prefill 150 + kv_transfer_exposed 5 + first_decode 15 = 190
  //   B: queueing 22 + prefill 150 + kv_transfer_exposed 85 + first_decode 15 = 272
  // delta +82 ms = exposed transfer +80 (80 / 82 = 97.6%) + queueing +2 (2.4%); prefill and
  // first_decode did not move. The change that bears on exposed transfer is the overlap key, set on
  // the decode pool: a request-level part, so keys of any pool name it.
  const Json groups = {{"ep", group(32, false, "ub", 32)}};
  const Json tpot = {{"gemm_mlp", 20.0}};
  const Json ra =
      epd_result(190, {{"queueing", 20.0}, {"prefill", 150.0}, {"kv_transfer_exposed", 5.0}, {"first_decode", 15.0}},
                 20, tpot, groups);
  const Json rb =
      epd_result(272, {{"queueing", 22.0}, {"prefill", 150.0}, {"kv_transfer_exposed", 85.0}, {"first_decode", 15.0}},
                 20, tpot, groups);
  const Json sa = epd_scenario(32, 2, true), sb = epd_scenario(32, 2, false);
  const Json d = diff_results({&ra, &sa}, {&rb, &sb});

  REQUIRE(d["changes"].size() == 1);
  CHECK(d["changes"][0]["key"] == "deployment.pools[1].kv_transfer.overlap");
  const Json& at = d["attribution"]["ttft_mean"];
  CHECK(at["basis"] == "summary.ttft_breakdown_ms");
  CHECK(at["delta"].get<double>() == approx(82));
  REQUIRE(at["components"].size() >= 2);
  CHECK(at["components"][0]["name"] == "kv_transfer_exposed");
  CHECK(at["components"][0]["delta"].get<double>() == approx(80));
  CHECK(at["components"][0]["share_of_delta"].get<double>() == approx(80.0 / 82.0));
  CHECK(at["components"][0]["why"] == "kv_transfer.overlap true -> false");
  CHECK(at["components"][1]["name"] == "queueing");
  CHECK(at["components"][1]["delta"].get<double>() == approx(2));
  CHECK(sum_of_deltas(at) == approx(82));
  CHECK(component(at, "unattributed") == nullptr);
  // The sentence: "TTFT +82.0 ms (+43%), 190.0 -> 272.0 ms: exposed KV transfer +80.0 ms (...)".
  const std::string s = d["sentences"][0].get<std::string>();
  CHECK(s.find("TTFT +82.0 ms (+43%), 190.0 -> 272.0 ms: exposed KV transfer +80.0 ms (kv_transfer.overlap true -> "
               "false)") == 0);
  CHECK(s.find("these explain 100% of the delta") != std::string::npos);
  CHECK(s.find("busy-time shares") == std::string::npos);
  // TPOT did not move: no components, the sentence says so in numbers.
  CHECK(d["attribution"]["tpot_mean"]["delta"].get<double>() == 0);
}

TEST_CASE("diff: hand-written reports of the KV-overlap pair, in words on a terminal") {
  // The pair of the first test as report files (schema, scenario, summary, pools, simulation),
  // with pools[].kv_transfer on the decode pool and no KV peak figure: "-" where a figure is
  // missing, the exposed transfer per transfer 5 -> 85 ms, and the sentence.
  const fs::path dir = scratch("diff_handwritten");
  fs::create_directories(dir);
  const Json groups = {{"ep", group(32, false, "ub", 32)}};
  const Json tpot = {{"gemm_mlp", 20.0}};
  auto report = [&](double ttft, double exposed, bool overlap) {
    Json r = epd_result(
        ttft, {{"queueing", 20.0}, {"prefill", 150.0}, {"kv_transfer_exposed", exposed}, {"first_decode", 15.0}}, 20,
        tpot, groups);
    r.erase("ok");
    r["schema"] = "servesim.report/1";
    r["scenario"] = epd_scenario(32, 2, overlap);
    r["pools"][1].erase("kv_cache_peak_fraction");
    r["pools"][1]["kv_transfer"] = {{"transfers", 1000},
                                    {"bytes", 1e9},
                                    {"mean_ms", 90.0},
                                    {"exposed_mean_ms", exposed},
                                    {"overhead_fraction", 0.1}};
    return r;
  };
  std::ofstream(dir / "a.json") << report(190, 5, true).dump(2);
  std::ofstream(dir / "b.json") << report(270, 85, false).dump(2);
  const auto r = cli({"diff", (dir / "a.json").string(), (dir / "b.json").string()});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("deployment.pools[1].kv_transfer.overlap: true -> false") != std::string::npos);
  CHECK(r.out.find("pool decode       utilization 80.0% -> 80.0%, KV peak - -> -") != std::string::npos);
  CHECK(r.out.find("KV transfer exposed per transfer 5.00 ms -> 85.0 ms") != std::string::npos);
  // 190 -> 270 ms = exposed transfer +80 alone (80 / 80 = 100%).
  CHECK(r.out.find("TTFT +80.0 ms (+42%), 190.0 -> 270.0 ms: exposed KV transfer +80.0 ms (kv_transfer.overlap true -> "
                   "false); this explains 100% of the delta.") != std::string::npos);
}

TEST_CASE("diff: on the report contract, the TPOT sentence names the tier the EP group now crosses") {
  // TPOT parts (ms), A -> B:
  //   gemm_mlp 20 -> 20, moe_experts 10 -> 9, ep_dispatch 8 -> 14.05, ep_combine 8 -> 14.05,
  //   attention_decode 5 -> 5, kv_transfer_exposed 0 (absent) -> 5.2
  //   sum 51 -> 67.3, delta +16.3 ms = 6.05 + 6.05 + 5.2 - 1 (16.3 / 51 = +32%).
  // Groups: EP 32 ranks inside the 32-chip supernode ("ub") -> 64 ranks that leave it over RDMA.
  const Json ga = {{"tp", group(1, false, "", 32)}, {"ep", group(32, false, "ub", 32)}};
  const Json gb = {{"tp", group(1, false, "", 32)}, {"ep", group(64, true, "rdma", 32)}};
  const Json ttft = {{"prefill", 100.0}};
  const Json ra = epd_result(
      100, ttft, 51,
      {{"gemm_mlp", 20.0}, {"moe_experts", 10.0}, {"ep_dispatch", 8.0}, {"ep_combine", 8.0}, {"attention_decode", 5.0}},
      ga);
  const Json rb = epd_result(100, ttft, 67.3,
                             {{"gemm_mlp", 20.0},
                              {"moe_experts", 9.0},
                              {"ep_dispatch", 14.05},
                              {"ep_combine", 14.05},
                              {"attention_decode", 5.0},
                              {"kv_transfer_exposed", 5.2}},
                             gb);
  const Json sa = epd_scenario(32, 2, true), sb = epd_scenario(64, 1, true);
  const Json d = diff_results({&ra, &sa}, {&rb, &sb});

  const Json& at = d["attribution"]["tpot_mean"];
  CHECK(at["basis"] == "summary.tpot_breakdown_ms");
  CHECK(at["delta"].get<double>() == approx(16.3));
  CHECK(sum_of_deltas(at) == approx(16.3));
  // Largest first; the two equal all-to-all halves keep their (alphabetical) order.
  REQUIRE(at["components"].size() >= 4);
  CHECK(at["components"][0]["name"] == "ep_combine");
  CHECK(at["components"][1]["name"] == "ep_dispatch");
  CHECK(at["components"][2]["name"] == "kv_transfer_exposed");
  CHECK(at["components"][3]["name"] == "moe_experts");
  CHECK(at["components"][3]["delta"].get<double>() == approx(-1));
  // The EP key is said by the group phrase and not repeated; moe_tp is named after it.
  const std::string why = at["components"][0]["why"].get<std::string>();
  CHECK(why == "EP 32 -> 64: the EP group now leaves the 32-chip scale-up domain (over rdma); parallel.moe_tp 2 -> 1");
  CHECK(d["groups"][1]["source"] == "pools[].groups");
  CHECK(d["groups"][1]["ep"]["b"]["tier"] == "rdma");
  // The TPOT sentence is the second (TTFT, TPOT, throughput).
  const std::string s = d["sentences"][1].get<std::string>();
  CHECK(s.find("TPOT +16.3 ms (+32%), 51.0 -> 67.3 ms: MoE combine (all-to-all) +6.05 ms (EP 32 -> 64") == 0);
  // The four listed sum to 16.3 of 16.3 (attention and GEMM parts did not move).
  CHECK(s.find("these explain 100% of the delta") != std::string::npos);
}

TEST_CASE("diff: throughput splits exactly into tokens per iteration, utilization and per-component iteration time") {
  // One combined instance, 10 s. T = k u S / t (attribution.h):
  //   A: T 1000 tok/s, 1000 iterations, utilization 0.5 (gemm_mlp 0.5)
  //      k = 1000 x 10 / 1000 = 10 tokens, u = 0.5, S = 1, t = 0.5 x 10 s / 1000 = 5 ms (gemm_mlp 5)
  //   B: T 1500 tok/s, 1000 iterations, utilization 1.0 (gemm_mlp 0.6, tp_all_reduce 0.4)
  //      k = 15, u = 1, t = 10 ms (gemm_mlp 6, tp_all_reduce 4)
  // L(1500, 1000) = 500 / ln 1.5 = 1233.152; L(10, 5) = 5 / ln 2 = 7.21348 ms
  //   tokens/iteration  1233.152 x ln 1.5        = +500.000
  //   utilization       1233.152 x ln 2          = +854.755
  //   gemm_mlp          -1233.152 x 1 / 7.21348  = -170.951
  //   tp_all_reduce     -1233.152 x 4 / 7.21348  = -683.803      sum = +500.00 = 1500 - 1000
  auto result = [](double t, double u, const Json& breakdown) {
    Json r = Json::object();
    r["ok"] = true;
    r["summary"] = {{"throughput", {{"output_tokens_per_s", t}}}};
    r["pools"] = Json::array();
    r["pools"].push_back({{"name", "serving"},
                          {"role", "combined"},
                          {"instances", 1},
                          {"chips", 1},
                          {"utilization", u},
                          {"breakdown", breakdown},
                          {"iterations", 1000}});
    r["simulation"] = {{"simulated_s", 10.0}};
    return r;
  };
  const Json ra = result(1000, 0.5, {{"gemm_mlp", 0.5}, {"tp_all_reduce", 0.0}, {"idle", 0.5}});
  const Json rb = result(1500, 1.0, {{"gemm_mlp", 0.6}, {"tp_all_reduce", 0.4}, {"idle", 0.0}});
  const Json d = diff_results({&ra, nullptr}, {&rb, nullptr});
  const Json& at = d["attribution"]["throughput"];
  CHECK(at["basis"] == "lmdi");
  CHECK(at["delta"].get<double>() == approx(500));
  CHECK(sum_of_deltas(at) == approx(500).epsilon(1e-9));
  REQUIRE(component(at, "utilization"));
  CHECK(component(at, "utilization")->at("delta").get<double>() == approx(854.755).epsilon(1e-5));
  CHECK(component(at, "tp_all_reduce")->at("delta").get<double>() == approx(-683.803).epsilon(1e-5));
  CHECK(component(at, "tokens_per_iteration")->at("delta").get<double>() == approx(500).epsilon(1e-6));
  CHECK(component(at, "gemm_mlp")->at("delta").get<double>() == approx(-170.951).epsilon(1e-5));
  CHECK(component(at, "stage_slots") == nullptr);  // S did not move: ln(1) = 0
  CHECK(at["components"][0]["name"] == "utilization");
  CHECK(at["factors"]["tokens_per_iteration"]["b"].get<double>() == approx(15));
  CHECK(at["factors"]["iteration_ms"]["a"].get<double>() == approx(5));
  CHECK(component(at, "tp_all_reduce")->at("factor_b").get<double>() == approx(4));
  const std::string s = d["sentences"][0].get<std::string>();
  CHECK(
      s.find("throughput +500.0 tok/s (+50%), 1,000 -> 1,500 tok/s: utilization +854.8 tok/s (50.0% -> 100.0% busy)") ==
      0);
  CHECK(s.find("these explain 100% of the delta.") != std::string::npos);
  // With one component named, +854.8 alone is 171% of +500 (the others pull back): the sentence
  // gives its value, not a share over 100%.
  DiffOptions one;
  one.words_components = 1;
  const std::string s1 = diff_results({&ra, nullptr}, {&rb, nullptr}, one)["sentences"][0].get<std::string>();
  CHECK(s1.find("; this is +854.8 tok/s (the other 3: -354.8 tok/s).") != std::string::npos);
}

TEST_CASE("diff: quickstart vs tp=2, on the runs' contract keys and on the pools[].breakdown fallback") {
  const fs::path dir = scratch("diff_tp");
  fs::create_directories(dir);
  const std::string shorter = "workload.requests=600";
  const auto d_run = cli({"diff", kQuickstart, "--set-both", shorter, "--set", "deployment.pools[0].parallel.tp=2",
                          "--json", "-", "--reproducible"});
  REQUIRE_MESSAGE(d_run.code == 0, d_run.err);
  const Json d = Json::parse(d_run.out);
  const auto a_run = cli({"run", kQuickstart, "--set", shorter, "--json", (dir / "a.json").string(), "--reproducible"});
  REQUIRE(a_run.code == 0);
  const Json a = Json::parse(read(dir / "a.json"));

  // The structural diff finds the one key that changed.
  REQUIRE(d["changes"].size() == 1);
  CHECK(d["changes"][0]["key"] == "deployment.pools[0].parallel.tp");
  CHECK(d["changes"][0]["a"] == 1);
  CHECK(d["changes"][0]["b"] == 2);
  CHECK(d["a"]["seed"] == d["b"]["seed"]);
  CHECK(d["a"]["wall_s"].is_null());

  // The runs carry summary.tpot_breakdown_ms, so the split is the reports' own parts: A's MLP GEMM
  // part is A's tpot_breakdown_ms.gemm_mlp.
  const Json& at = d["attribution"]["tpot_mean"];
  CHECK(at["basis"] == "summary.tpot_breakdown_ms");
  const double mean_a = a["summary"]["tpot_ms"]["mean"].get<double>();
  REQUIRE(component(at, "gemm_mlp"));
  CHECK(component(at, "gemm_mlp")->at("a").get<double>() ==
        approx(a["summary"]["tpot_breakdown_ms"]["gemm_mlp"].get<double>()));
  CHECK(at["a"].get<double>() == approx(mean_a));
  CHECK(sum_of_deltas(at) == approx(at["delta"].get<double>()).epsilon(1e-9));
  // TP 1 has no all-reduce; TP 2 does, on a group of 2 chips inside the H100's 8-chip NVLink
  // domain (the fallback derives the group from the resolved plan and the chip).
  const Json* ar = component(at, "tp_all_reduce");
  REQUIRE(ar);
  CHECK(ar->at("a").get<double>() == 0);
  CHECK(ar->at("b").get<double>() > 0);
  CHECK(ar->at("why").get<std::string>().find("TP 1 -> 2, inside the 8-chip scale-up domain") == 0);
  // GEMMs split over two chips get faster, and say why.
  CHECK(component(at, "gemm_mlp")->at("delta").get<double>() < 0);
  CHECK(component(at, "gemm_mlp")->at("why") == "parallel.tp 1 -> 2");
  CHECK(d["groups"][0]["source"] == "pools[].groups");

  // TTFT and throughput sum to their deltas too; the throughput factors are the runs' own:
  // k = T x simulated_s / iterations.
  CHECK(sum_of_deltas(d["attribution"]["ttft_mean"]) ==
        approx(d["attribution"]["ttft_mean"]["delta"].get<double>()).epsilon(1e-9));
  const Json& th = d["attribution"]["throughput"];
  CHECK(sum_of_deltas(th) == approx(th["delta"].get<double>()).epsilon(1e-9));
  CHECK(th["factors"]["tokens_per_iteration"]["a"].get<double>() ==
        approx(a["summary"]["throughput"]["output_tokens_per_s"].get<double>() *
               a["simulation"]["simulated_s"].get<double>() / a["pools"][0]["iterations"].get<double>()));
  // Chips 4 -> 8 in the metric rows.
  bool chips_row = false;
  for (const Json& r : d["metrics"]) {
    if (r["metric"] == "chips") {
      chips_row = true;
      CHECK(r["a"].get<double>() == 4);
      CHECK(r["b"].get<double>() == 8);
    }
  }
  CHECK(chips_row);
  REQUIRE(d["sentences"].size() == 3);

  // Fallback basis: the same pair as saved reports without the contract keys. The mean TPOT of A
  // splits in the decode (here: combined) pool's busy shares, part_c = mean x share_c / (1 - idle);
  // measured when this was written, MLP GEMMs in A = 13.64 ms x 0.405 / (1 - 0.047) = 5.80 ms.
  {
    const auto b_run = cli({"run", kQuickstart, "--set", shorter, "--set", "deployment.pools[0].parallel.tp=2",
                            "--json", (dir / "b.json").string(), "--reproducible"});
    REQUIRE(b_run.code == 0);
    Json a_old = a, b_old = Json::parse(read(dir / "b.json"));
    for (Json* r : {&a_old, &b_old}) {
      for (const char* key : {"ttft_breakdown_ms", "tpot_breakdown_ms", "throughput_breakdown"})
        (*r)["summary"].erase(key);
      for (Json& pool : (*r)["pools"]) pool.erase("groups");
    }
    std::ofstream(dir / "a_old.json") << a_old.dump(2);
    std::ofstream(dir / "b_old.json") << b_old.dump(2);
    const auto f_run = cli({"diff", (dir / "a_old.json").string(), (dir / "b_old.json").string(), "--json", "-"});
    REQUIRE_MESSAGE(f_run.code == 0, f_run.err);
    const Json f = Json::parse(f_run.out);
    const Json& ft = f["attribution"]["tpot_mean"];
    CHECK(ft["basis"] == "pools[].breakdown");
    const Json& bd = a["pools"][0]["breakdown"];
    const double busy = 1 - bd["idle"].get<double>();
    REQUIRE(component(ft, "gemm_mlp"));
    CHECK(component(ft, "gemm_mlp")->at("a").get<double>() == approx(mean_a * bd["gemm_mlp"].get<double>() / busy));
    CHECK(ft["a"].get<double>() == approx(mean_a));
    CHECK(sum_of_deltas(ft) == approx(ft["delta"].get<double>()).epsilon(1e-9));
    const Json* far = component(ft, "tp_all_reduce");
    REQUIRE(far);
    CHECK(far->at("why") == "TP 1 -> 2, inside the 8-chip scale-up domain");
    CHECK(f["groups"][0]["source"] == "scenario");
    REQUIRE(f["sentences"].size() == 3);
    CHECK(f["sentences"][1].get<std::string>().find("[from the pool's busy-time shares]") != std::string::npos);
  }

  // The text output says the same sentences.
  const auto text = cli({"diff", kQuickstart, "--set-both", shorter, "--set", "deployment.pools[0].parallel.tp=2"});
  REQUIRE(text.code == 0);
  CHECK(text.out.find("deployment.pools[0].parallel.tp: 1 -> 2") != std::string::npos);
  CHECK(text.out.find(d["sentences"][1].get<std::string>()) != std::string::npos);
}

TEST_CASE("diff: a MoE pair whose EP group leaves the scale-up domain says so on the all-to-all") {
  // gpt-oss-120b on B200s (8-chip NVLink domain). A: tp 8, ep 8 (moe_tp 1): the EP group is the
  // instance's 8 chips, inside the domain. B: tp 8, dp 2, ep 16: the MoE group is tp x dp = 16
  // chips, EP ranks 1 apart span 16 > 8 chips, so the group leaves the domain; its all-to-all
  // grows from 0 (A) to a positive time per token.
  const std::string p = "deployment.pools[0].parallel.";
  const auto r = cli({"diff", kGptOss, "--set-both", "workload.requests=150", "--set-both", p + "tp=8", "--set-both",
                      p + "ep=8", "--set", p + "dp=2", "--set", p + "ep=16", "--json", "-", "--reproducible"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Json d = Json::parse(r.out);
  CHECK(d["changes"].size() == 2);
  const Json& at = d["attribution"]["tpot_mean"];
  const Json* dispatch = component(at, "ep_dispatch");
  REQUIRE(dispatch);
  CHECK(dispatch->at("delta").get<double>() > 0);
  // The tier is the report's pools[].groups name for the fabric level the group crosses.
  CHECK(dispatch->at("why") ==
        "EP 8 -> 16: the EP group now leaves the 8-chip scale-up domain (over scale_out); parallel.dp 1 -> 2");
  CHECK(d["groups"][0]["ep"]["a"]["leaves_domain"] == false);
  CHECK(d["groups"][0]["ep"]["b"]["leaves_domain"] == true);
}

TEST_CASE("diff: saved reports compare like their scenarios; a report with the contract keys uses them") {
  const fs::path dir = scratch("diff_reports");
  fs::create_directories(dir);
  const std::string shorter = "workload.requests=300";
  const std::string tp2 = "deployment.pools[0].parallel.tp=2";
  REQUIRE(cli({"run", kQuickstart, "--set", shorter, "--json", (dir / "a.json").string(), "--reproducible"}).code == 0);
  REQUIRE(
      cli({"run", kQuickstart, "--set", shorter, "--set", tp2, "--json", (dir / "b.json").string(), "--reproducible"})
          .code == 0);
  const auto from_reports = cli({"diff", (dir / "a.json").string(), (dir / "b.json").string(), "--json", "-"});
  REQUIRE_MESSAGE(from_reports.code == 0, from_reports.err);
  const auto from_runs =
      cli({"diff", kQuickstart, "--set-both", shorter, "--set", tp2, "--json", "-", "--reproducible"});
  REQUIRE(from_runs.code == 0);
  const Json x = Json::parse(from_reports.out), y = Json::parse(from_runs.out);
  CHECK(x["a"]["kind"] == "report");
  CHECK(x["attribution"] == y["attribution"]);
  CHECK(x["changes"] == y["changes"]);

  // The same report with the contract's TTFT parts added by hand (they sum to each mean):
  // A: queueing 10 + prefill (mean - 10); B: queueing 10 + prefill (mean - 10) - 3 + 3 (the same
  // split, moved 3 ms from prefill to exposed transfer) -> the delta splits into queueing 0,
  // prefill (delta - 3), exposed transfer +3.
  Json a = Json::parse(read(dir / "a.json")), b = Json::parse(read(dir / "b.json"));
  const double ma = a["summary"]["ttft_ms"]["mean"].get<double>(), mb = b["summary"]["ttft_ms"]["mean"].get<double>();
  a["summary"]["ttft_breakdown_ms"] = {{"queueing", 10.0}, {"prefill", ma - 10}};
  b["summary"]["ttft_breakdown_ms"] = {{"queueing", 10.0}, {"prefill", mb - 13}, {"kv_transfer_exposed", 3.0}};
  a["summary"].erase("tpot_breakdown_ms");
  b["summary"].erase("tpot_breakdown_ms");
  std::ofstream(dir / "a2.json") << a.dump(2);
  std::ofstream(dir / "b2.json") << b.dump(2);
  const auto contract = cli({"diff", (dir / "a2.json").string(), (dir / "b2.json").string(), "--json", "-"});
  REQUIRE_MESSAGE(contract.code == 0, contract.err);
  const Json at = Json::parse(contract.out)["attribution"]["ttft_mean"];
  CHECK(at["basis"] == "summary.ttft_breakdown_ms");
  CHECK(component(at, "kv_transfer_exposed")->at("delta").get<double>() == approx(3));
  CHECK(component(at, "prefill")->at("delta").get<double>() == approx(mb - ma - 3));
  CHECK(component(at, "queueing")->at("delta").get<double>() == 0);
  // Without tpot_breakdown_ms TPOT still falls back.
  CHECK(Json::parse(contract.out)["attribution"]["tpot_mean"]["basis"] == "pools[].breakdown");
}

TEST_CASE("diff: bad input exits 2 with the loader's file:line:col messages and writes nothing") {
  const fs::path dir = scratch("diff_bad");
  fs::create_directories(dir);
  // B has two problems, on lines 3 and 5: both are listed, with their key paths.
  std::ofstream(dir / "b.yaml") << "name: b\n"
                                   "model: llama-3.1-8b\n"
                                   "seeed: 1\n"
                                   "deployment:\n"
                                   "  pools: [{name: s, chip: h100-sxm, instances: many}]\n"
                                   "workload: {requests: 10, arrivals: {process: poisson, rate: 1 /s}}\n";
  const fs::path out = dir / "diff.json";
  const auto r = cli({"diff", kQuickstart, (dir / "b.yaml").string(), "--json", out.string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("b.yaml:3:1:") != std::string::npos);
  CHECK(r.err.find("did you mean 'seed'") != std::string::npos);
  CHECK(r.err.find("b.yaml:5:") != std::string::npos);
  CHECK(r.err.find("deployment.pools[0].instances") != std::string::npos);
  CHECK(!fs::exists(out));
  // A report that is not JSON: its line and column.
  std::ofstream(dir / "bad.json") << "{\"schema\": \"servesim.report/1\",\n  \"summary\": {,\n}";
  const auto j = cli({"diff", (dir / "bad.json").string(), kQuickstart});
  CHECK(j.code == 2);
  CHECK(j.err.find("bad.json:2:15: not valid JSON") != std::string::npos);
  // One file and no change; a --set on a report.
  CHECK(cli({"diff", kQuickstart}).code == 2);
  CHECK(cli({"diff", (dir / "bad.json").string(), "--set", "seed=2"}).code == 2);
  // A --set the loader refuses names the override.
  const auto s = cli({"diff", kQuickstart, "--set", "deployment.pools[0].parallel.tp=3"});
  CHECK(s.code == 2);
  CHECK(s.err.find("--set #1: deployment.pools[0].parallel.tp: tensor parallelism 3 does not divide") !=
        std::string::npos);
}

TEST_CASE("diff: --reproducible output is byte-identical, and --json FILE holds what --json - prints") {
  const fs::path dir = scratch("diff_repro");
  fs::create_directories(dir);
  const std::vector<std::string> base = {
      "diff",          kQuickstart, "--set-both", "workload.requests=200", "--set", "deployment.pools[0].instances=2",
      "--reproducible"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return cli(a);
  };
  const auto x = with({"--json", "-"}), y = with({"--json", "-"});
  REQUIRE(x.code == 0);
  CHECK(x.out == y.out);
  const auto f = with({"--json", (dir / "d.json").string()});
  REQUIRE(f.code == 0);
  CHECK(read(dir / "d.json") == x.out);
  CHECK(f.out.find("wrote") != std::string::npos);
}

TEST_CASE("diff: the shipped KV-overlap pair attributes its TTFT gain to exposed KV transfer") {
  // kv_overlap_off / kv_overlap_on differ only in deployment.kv_transfer.mode (after_prefill ->
  // layer_streamed, plus the name). Streaming hides the transfer behind the prefill's layers, so
  // the TTFT delta is the exposed-transfer delta, and the largest component is that one.
  const std::string dir = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/epd/";
  const auto r =
      cli({"diff", dir + "kv_overlap_off.yaml", dir + "kv_overlap_on.yaml", "--json", "-", "--reproducible"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const Json d = Json::parse(r.out);
  const Json& at = d["attribution"]["ttft_mean"];
  CHECK(at["basis"] == "summary.ttft_breakdown_ms");
  REQUIRE(!at["components"].empty());
  CHECK(at["components"][0]["name"] == "kv_transfer_exposed");
  const double delta = at["delta"].get<double>();
  const double exposed = at["components"][0]["delta"].get<double>();
  CHECK(delta < 0);
  CHECK(exposed < 0);
  CHECK(exposed / delta > 0.9);  // measured when written: -111.4 of -111.8 ms
  CHECK(at["components"][0]["why"].get<std::string>().find("kv_transfer.mode") != std::string::npos);
  CHECK(sum_of_deltas(at) == approx(delta).epsilon(1e-9));
}
