#include <doctest/doctest.h>

// A pool chip's `profile` key: a hardware profile by path or shipped name fills the chip's
// efficiencies and the pool's measured tables; figures given next to it win; problems in the
// profile are reported against the profile file.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/errors.h"
#include "models/chip_spec.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/sections.h"
#include "sim/scenario/shipped_profiles.h"
#include "tests/approx.h"
#include "tests/scratch.h"

namespace {

using servesim::Duration;
using servesim::InputError;
using servesim::scenario::Scenario;

const std::string kBaseDir = SERVESIM_SOURCE_DIR "/scenarios";

// The workload section the scenarios below share.
const std::string kWorkload =
    "workload:\n"
    "  requests: 4\n"
    "  arrivals: {process: poisson, rate: 10 /s}\n"
    "  lengths:\n"
    "    prompt: {distribution: fixed, value: 128}\n"
    "    output: {distribution: fixed, value: 8}\n";

std::string scenario_with_chip(const std::string& chip) {
  return "model: llama-3.1-8b\n"
         "deployment:\n"
         "  pools:\n"
         "    - chip: " +
         chip +
         "\n"
         "      instances: 1\n" +
         kWorkload;
}

Scenario load(const std::string& yaml) {
  try {
    return servesim::scenario::load_scenario_text(yaml, "profile.yaml", kBaseDir);
  } catch (const InputError& e) {
    std::string out;
    for (const auto& d : e.diagnostics()) out += "  " + d.to_string() + "\n";
    FAIL("unexpected InputError:\n" << out);
  }
  return {};
}

std::string errors_of(const std::string& yaml) {
  try {
    servesim::scenario::load_scenario_text(yaml, "profile.yaml", kBaseDir);
  } catch (const InputError& e) {
    std::string out;
    for (const auto& d : e.diagnostics()) out += d.to_string() + "\n";
    return out;
  }
  return "";
}

// A profile file in the temporary folder, removed at the end of the test.
struct TempProfile {
  std::string path;
  explicit TempProfile(const std::string& name, const std::string& text)
      : path(servesim::testing::scratch_path(name).string()) {
    std::ofstream(path) << text;
  }
  ~TempProfile() { std::remove(path.c_str()); }
};

// One GEMM table over m (2 knots, extrapolating) and n, k (one knot each), and three efficiency
// keys. Line 7 holds gemm_overhead (the diagnostics test below relies on it).
const char* kProfile = R"(schema: "servesim.profile/1"
chip: "h100-sxm"
created: "2026-12-01"
generator: "test"
sources: []
efficiency:
  gemm_overhead: 7 us
  format_compute: {fp8: 0.5}
  moe_compute: [[1e6, 0.2], [1e9, 0.6]]
entries:
  - op: gemm
    format: bf16
    cost_model: table
    tables:
      - name: latency
        axes:
          - {field: m, knots: [15, 255], extrapolate: true}
          - {field: n, knots: [4095], extrapolate: false}
          - {field: k, knots: [4095], extrapolate: false}
        seconds: [1e-05, 0.00016]
        extrapolation: linear
errors: {cost_model: "test", held_out: "none", cells: []}
)";

// Two readings of the same shipped profile must agree exactly: efficiencies figure by figure,
// tables grid by grid.
void check_same_curve(const servesim::models::EfficiencyCurve& a, const servesim::models::EfficiencyCurve& b) {
  REQUIRE(a.knots.size() == b.knots.size());
  for (std::size_t i = 0; i < a.knots.size(); ++i) {
    CHECK(a.knots[i].size == b.knots[i].size);
    CHECK(a.knots[i].efficiency == b.knots[i].efficiency);
  }
}

void check_same_efficiency(const servesim::models::Efficiency& a, const servesim::models::Efficiency& b) {
  for (const auto curve : {&servesim::models::Efficiency::gemm_compute, &servesim::models::Efficiency::gemm_memory,
                           &servesim::models::Efficiency::attention_prefill,
                           &servesim::models::Efficiency::attention_decode, &servesim::models::Efficiency::elementwise,
                           &servesim::models::Efficiency::moe_compute, &servesim::models::Efficiency::moe_memory}) {
    check_same_curve(a.*curve, b.*curve);
  }
  for (const auto d :
       {&servesim::models::Efficiency::gemm_overhead, &servesim::models::Efficiency::attention_overhead,
        &servesim::models::Efficiency::elementwise_overhead, &servesim::models::Efficiency::moe_overhead,
        &servesim::models::Efficiency::collective_latency, &servesim::models::Efficiency::iteration_overhead,
        &servesim::models::Efficiency::sequence_overhead}) {
    CHECK(a.*d == b.*d);
  }
  REQUIRE(a.moe_experts.size() == b.moe_experts.size());
  for (std::size_t i = 0; i < a.moe_experts.size(); ++i) {
    const auto& x = a.moe_experts[i];
    const auto& y = b.moe_experts[i];
    CHECK(x.format == y.format);
    CHECK(x.overhead == y.overhead);
    check_same_curve(x.compute, y.compute);
    check_same_curve(x.memory, y.memory);
    CHECK(x.token_bytes == y.token_bytes);
    CHECK(x.pair_bytes == y.pair_bytes);
  }
  CHECK(a.format_compute == b.format_compute);
  REQUIRE(a.gemm_formats.size() == b.gemm_formats.size());
  for (std::size_t i = 0; i < a.gemm_formats.size(); ++i) {
    CHECK(a.gemm_formats[i].format == b.gemm_formats[i].format);
    CHECK(a.gemm_formats[i].overhead == b.gemm_formats[i].overhead);
    CHECK(a.gemm_formats[i].quant_bytes == b.gemm_formats[i].quant_bytes);
    CHECK(a.gemm_formats[i].compute == b.gemm_formats[i].compute);
  }
  CHECK(a.gemm_tiling.tile == b.gemm_tiling.tile);
  CHECK(a.gemm_tiling.small_m_tile == b.gemm_tiling.small_m_tile);
  CHECK(a.gemm_tiling.waves == b.gemm_tiling.waves);
  CHECK(a.collective_bandwidth == b.collective_bandwidth);
  CHECK(a.host_overlap == b.host_overlap);
  REQUIRE(a.all_reduce_lines.size() == b.all_reduce_lines.size());
  for (std::size_t i = 0; i < a.all_reduce_lines.size(); ++i) {
    CHECK(a.all_reduce_lines[i].base == b.all_reduce_lines[i].base);
    CHECK(a.all_reduce_lines[i].per_step == b.all_reduce_lines[i].per_step);
    CHECK(a.all_reduce_lines[i].efficiency == b.all_reduce_lines[i].efficiency);
    CHECK(a.all_reduce_lines[i].one_shot == b.all_reduce_lines[i].one_shot);
  }
}

void check_same_tables(const servesim::models::MeasuredTables& a, const servesim::models::MeasuredTables& b) {
  REQUIRE(a.log_grids.size() == b.log_grids.size());
  CHECK(a.series.empty());
  CHECK(b.series.empty());
  CHECK(a.grids.empty());
  CHECK(b.grids.empty());
  for (std::size_t i = 0; i < a.log_grids.size(); ++i) {
    INFO("grid ", i);
    const auto& x = a.log_grids[i];
    const auto& y = b.log_grids[i];
    CHECK(x.kind == y.kind);
    CHECK(x.rate == y.rate);
    CHECK(x.format == y.format);
    CHECK(x.latent == y.latent);
    CHECK(x.roofline_factor == y.roofline_factor);
    CHECK(x.kv_bytes == y.kv_bytes);
    CHECK(x.match == y.match);
    REQUIRE(x.axes.size() == y.axes.size());
    for (std::size_t k = 0; k < x.axes.size(); ++k) {
      CHECK(x.axes[k].field == y.axes[k].field);
      CHECK(x.axes[k].knots == y.axes[k].knots);
      CHECK(x.axes[k].extrapolate == y.axes[k].extrapolate);
    }
    // Bit for bit: the compact form keeps the values read and takes the same logarithm.
    REQUIRE(x.log_seconds.size() == y.log_seconds.size());
    CHECK(std::memcmp(x.log_seconds.data(), y.log_seconds.data(), x.log_seconds.size() * sizeof(double)) == 0);
  }
}

}  // namespace

// A scenario loads a shipped profile from the compact form the build made of it; parsing its
// YAML must give the same profile, on its own chip and on another one (the profile's efficiencies
// apply on top of the chip's), so that the two cannot drift.
TEST_CASE("Profile: every shipped profile's compact form reads as its YAML does") {
  using servesim::scenario::ChipProfile;
  using servesim::scenario::load_shipped_profile;
  std::size_t grids = 0;
  bool first = true;
  for (const auto& p : servesim::scenario::shipped_profiles()) {
    // Each on its own chip; the first also on another (a YAML parse of a table profile is ~1 s).
    std::vector<std::string> chips{p.chip};
    if (std::exchange(first, false)) chips.emplace_back(std::string(p.chip) == "h100-sxm" ? "a100-80g" : "h100-sxm");
    for (const std::string& chip : chips) {
      INFO("profile ", p.name, " on ", chip);
      const auto base = servesim::models::chip_preset(chip);
      REQUIRE(base.has_value());
      const ChipProfile yaml = load_shipped_profile(p.name, *base, true);
      const ChipProfile compact = load_shipped_profile(p.name, *base, false);
      // Every shipped profile loads (a rejected one would ship as its YAML and fail every
      // scenario naming it); both forms report the same problems.
      CHECK(yaml.ok);
      CHECK(yaml.problems.empty());
      REQUIRE(compact.ok == yaml.ok);
      REQUIRE(compact.problems.size() == yaml.problems.size());
      for (std::size_t i = 0; i < yaml.problems.size(); ++i) {
        CHECK(compact.problems[i].to_string() == yaml.problems[i].to_string());
      }
      CHECK(compact.chip == yaml.chip);
      CHECK(compact.engine == yaml.engine);
      CHECK(compact.created == yaml.created);
      CHECK(compact.transferred_from == yaml.transferred_from);
      check_same_efficiency(compact.efficiency, yaml.efficiency);
      REQUIRE(compact.tables != nullptr);
      REQUIRE(yaml.tables != nullptr);
      check_same_tables(compact.tables->tables(), yaml.tables->tables());
      grids += yaml.tables->tables().log_grids.size();
    }
  }
  // The comparison covers tables: the shipped profiles of measured chips carry hundreds.
  CHECK(grids > 100);
}

namespace {}  // namespace

TEST_CASE("Profile: a profile file sets the chip's efficiencies and the pool's GEMM tables") {
  const TempProfile p("servesim_profile_test.yaml", kProfile);
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto& pool = s.config.pools.at(0);
  CHECK(pool.chip.efficiency.gemm_overhead == Duration::microseconds(7));
  CHECK(pool.chip.efficiency.format_compute[1] == approx(0.5));  // fp8
  REQUIRE(pool.chip.efficiency.moe_compute.knots.size() == 2);
  CHECK(pool.chip.efficiency.moe_compute.knots[1].efficiency == approx(0.6));
  CHECK(pool.chip.source.rfind("efficiencies from profile " + p.path + ", 2026-12-01, with GEMM tables; preset: ", 0) ==
        0);
  const auto* table = std::get_if<servesim::models::TableConfig>(&pool.cost_model);
  REQUIRE(table != nullptr);
  REQUIRE(table->tables->tables().log_grids.size() == 1);
  const auto& g = table->tables->tables().log_grids[0];
  CHECK(g.axes.size() == 3);
  CHECK(g.axes[0].extrapolate);
  CHECK_FALSE(g.axes[1].extrapolate);
  CHECK(g.log_seconds[1] == approx(std::log(0.00016)));
  // The resolved scenario names the profile as written.
  CHECK(s.resolved["deployment"]["pools"][0]["chip"]["profile"] == p.path);

  // A figure given next to the profile wins over it.
  const Scenario t =
      load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + ", efficiency: {gemm_overhead: 2 us}}"));
  CHECK(t.config.pools.at(0).chip.efficiency.gemm_overhead == Duration::microseconds(2));
  CHECK(t.config.pools.at(0).chip.efficiency.format_compute[1] == approx(0.5));
}

TEST_CASE("Profile: problems in a profile are reported at the profile's line and column") {
  std::string text = kProfile;
  text.replace(text.find("7 us"), 4, "fast");
  const TempProfile p("servesim_profile_bad.yaml", text);
  const std::string errors = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  CHECK(errors.find(p.path + ":7:") != std::string::npos);
  CHECK(errors.find("efficiency.gemm_overhead") != std::string::npos);
}

TEST_CASE("Profile: gemm_tiling is read strictly, and a profile without it keeps the raw FLOPs") {
  {
    const TempProfile p("servesim_profile_plain.yaml", kProfile);
    const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
    CHECK(s.config.pools.at(0).chip.efficiency.gemm_tiling.tile == 0);
  }
  std::string text = kProfile;
  text.insert(text.find("  format_compute"), "  gemm_tiling: {tile: 128, small_m_tile: 64, waves: false}\n");
  {
    const TempProfile p("servesim_profile_tiling.yaml", text);
    const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
    const auto& t = s.config.pools.at(0).chip.efficiency.gemm_tiling;
    CHECK(t.tile == 128);
    CHECK(t.small_m_tile == 64);
    CHECK_FALSE(t.waves);
  }
  // A misspelt key on line 8 (after gemm_overhead on line 7): an error at that line.
  text.replace(text.find("small_m_tile"), 12, "small_m_tyle");
  const TempProfile p("servesim_profile_tiling_bad.yaml", text);
  const std::string errors = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  CHECK(errors.find(p.path + ":8:") != std::string::npos);
  CHECK(errors.find("small_m_tyle") != std::string::npos);
}

TEST_CASE("Profile: attention_prefill_memory is read where given; without it the chip has none") {
  {
    const TempProfile p("servesim_profile_no_prefill_memory.yaml", kProfile);
    const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
    CHECK(s.config.pools.at(0).chip.efficiency.attention_prefill_memory.knots.empty());
  }
  std::string text = kProfile;
  text.insert(text.find("  format_compute"), "  attention_prefill_memory: [[1.0e6, 0.2], [1.0e9, 0.6]]\n");
  {
    const TempProfile p("servesim_profile_prefill_memory.yaml", text);
    const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
    const auto& c = s.config.pools.at(0).chip.efficiency.attention_prefill_memory;
    REQUIRE(c.knots.size() == 2);
    CHECK(c.knots[0].size == approx(1e6));
    CHECK(c.knots[1].efficiency == approx(0.6));
  }
  // An efficiency above 1 on line 8 (after gemm_overhead on line 7): an error at that line.
  text.replace(text.find("0.6]]"), 3, "1.6");
  const TempProfile p("servesim_profile_prefill_memory_bad.yaml", text);
  const std::string errors = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  CHECK(errors.find(p.path + ":8:") != std::string::npos);
  CHECK(errors.find("attention_prefill_memory") != std::string::npos);
}

TEST_CASE("Profile: attention_latent_prefill is read where given; without it the chip has none") {
  {
    const TempProfile p("servesim_profile_no_latent.yaml", kProfile);
    const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
    CHECK(s.config.pools.at(0).chip.efficiency.attention_latent_prefill.knots.empty());
  }
  std::string text = kProfile;
  text.insert(text.find("  format_compute"), "  attention_latent_prefill: [[1.0e9, 0.2], [1.0e12, 0.45]]\n");
  const TempProfile p("servesim_profile_latent.yaml", text);
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto& c = s.config.pools.at(0).chip.efficiency.attention_latent_prefill;
  REQUIRE(c.knots.size() == 2);
  CHECK(c.knots[1].size == approx(1e12));
  CHECK(c.knots[1].efficiency == approx(0.45));
}

TEST_CASE("Profile: an unknown name lists the shipped profiles and suggests the closest") {
  const std::string errors = errors_of(scenario_with_chip("{preset: h200-sxm, profile: h2000}"));
  CHECK(errors.find("unknown profile 'h2000' (did you mean 'h200'?)") != std::string::npos);
  CHECK(errors.find(
            "a100, b200, b200-sglang, b200-vllm, b300, b300-sglang, b300-vllm, gb200, gb200-sglang, gb200-vllm, gb300, "
            "gb300-sglang, gb300-vllm, h100, h100-sglang, h100-vidur, h100-vllm, h20, h20-sglang, h20-vllm, h200, "
            "h200-sglang, h200-vllm") != std::string::npos);
  CHECK(errors_of(scenario_with_chip("{preset: h200-sxm, profile: missing/none.yaml}"))
            .find("cannot open the profile file: No such file or directory") != std::string::npos);
}

TEST_CASE("Profile: the shipped H200 profile loads by name with its GEMM tables") {
  const Scenario s = load(scenario_with_chip("{preset: h200-sxm, profile: h200}"));
  const auto& pool = s.config.pools.at(0);
  CHECK(pool.chip.source.rfind("efficiencies from profile h200, ", 0) == 0);
  const auto* table = std::get_if<servesim::models::TableConfig>(&pool.cost_model);
  REQUIRE(table != nullptr);
  // GEMM tables at bf16, fp8 and block fp8 (one per weight format); attention and MLA tables (bf16 attention, per KV
  // format, head dim and window: 14 generation + 14 context + 4 MLA + 3 encoder, head dims 64, 72, 80), and the two MoE
  // tables whose held-out error beats the roofline and meets the 12% target (fp8_block, and w4a16_mxfp4, whose
  // grouped-GEMM model ships in the TensorRT-LLM profile; profiles/h200.yaml), and Gated DeltaNet's
  // prefill and decode tables.
  std::size_t gemm = 0, attention = 0, moe = 0, gdn = 0;
  for (const auto& g : table->tables->tables().log_grids) {
    (g.recurrent != servesim::models::Recurrence::kNone ? gdn
     : g.kind == servesim::models::OpKind::kGemmQkv     ? gemm
     : g.kind == servesim::models::OpKind::kMoeExperts  ? moe
                                                        : attention) += 1;
  }
  CHECK(gemm == 3);
  CHECK(attention == 35);
  CHECK(moe == 2);
  CHECK(gdn == 2);
  CHECK(pool.chip.source.find("with GEMM and attention tables") != std::string::npos);
  // The fitted curves replace the preset's constants.
  CHECK_FALSE(pool.chip.efficiency.gemm_compute.is_constant());
  CHECK_FALSE(pool.chip.efficiency.moe_compute.knots.empty());
}

TEST_CASE("Profile: attention tables carry their match conditions; bad ones are reported at their key") {
  std::string text = kProfile;
  const std::string attention = R"(  - op: mla_decode
    format: bf16
    cost_model: table
    tables:
      - name: latency
        axes:
          - {field: batch, knots: [1, 16]}
          - {field: kv_len, knots: [1023]}
        seconds: [1e-05, 2e-05]
        match: {head_dim: 576, window: 0}
        kv_format: fp8
)";
  text.insert(text.find("errors:"), attention);
  const TempProfile p("servesim_profile_attention.yaml", text);
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto* table = std::get_if<servesim::models::TableConfig>(&s.config.pools.at(0).cost_model);
  REQUIRE(table != nullptr);
  REQUIRE(table->tables->tables().log_grids.size() == 2);
  const auto& g = table->tables->tables().log_grids[1];
  CHECK(g.kind == servesim::models::OpKind::kAttentionDecode);
  CHECK(g.latent);  // mla_*: MLA kernels only
  CHECK(g.kv_bytes == 1);
  REQUIRE(g.match.size() == 2);
  CHECK(g.match[0].first == servesim::models::MeasuredLogGrid::Field::kHeadDim);
  CHECK(g.match[0].second == 576);

  // An unknown match field and a KV format that is not one, each at its line (the attention
  // entry starts at line 22 of the profile) and key path; with an op that has no tables, the
  // entry is refused at its op before its tables are read.
  auto errors_with = [&](bool bad_op, const std::string& name) {
    std::string bad = text;
    bad.replace(bad.find("head_dim: 576"), 13, "head_dims: 576");
    bad.replace(bad.find("kv_format: fp8"), 14, "kv_format: fp9");
    if (bad_op) bad.replace(bad.find("op: mla_decode"), 14, "op: mla_bmm");
    const TempProfile q(name, bad);
    return std::make_pair(q.path, errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + q.path + "}")));
  };
  const auto [op_path, op_errors] = errors_with(true, "servesim_profile_attention_bad.yaml");
  CHECK(op_errors.find(op_path + ":22:") != std::string::npos);
  CHECK(op_errors.find("entries[1].op") != std::string::npos);
  const auto [path, errors] = errors_with(false, "servesim_profile_attention_bad2.yaml");
  CHECK(errors.find(path + ":31:") != std::string::npos);
  CHECK(errors.find("entries[1].tables[0].match.head_dims") != std::string::npos);
  CHECK(errors.find(path + ":32:") != std::string::npos);
  CHECK(errors.find("entries[1].tables[0].kv_format") != std::string::npos);
}

TEST_CASE("Profile: all_reduce_lines set the chip's in-domain all-reduce lines; a bad key is reported at its line") {
  std::string text = kProfile;
  const std::string lines =
      "  all_reduce_lines: [{base: 2.5 us, per_step: 0.05 us, efficiency: 0.7, algorithm: one_shot},\n"
      "                     {base: 9 us, efficiency: 1.2}]\n";
  text.insert(text.find("entries:"), lines);
  const TempProfile p("servesim_profile_lines.yaml", text);
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto& l = s.config.pools.at(0).chip.efficiency.all_reduce_lines;
  REQUIRE(l.size() == 2);
  CHECK(l[0].base == Duration::nanoseconds(2500));
  CHECK(l[0].per_step == Duration::nanoseconds(50));
  CHECK(l[0].efficiency == approx(0.7));
  CHECK(l[0].one_shot);
  CHECK(l[1].per_step == Duration::zero());  // per_step defaults to none, algorithm to ring
  CHECK(l[1].efficiency == approx(1.2));
  CHECK_FALSE(l[1].one_shot);
  // A preset's own figures have none: the single collective line applies.
  CHECK(load(scenario_with_chip("{preset: h100-sxm, profile: none}"))
            .config.pools.at(0)
            .chip.efficiency.all_reduce_lines.empty());

  // A misspelt key in the second line (line 11 of the profile: the efficiency map starts at 7).
  std::string bad = text;
  bad.replace(bad.find("efficiency: 1.2"), 11, "eficiency:");
  const TempProfile q("servesim_profile_lines_bad.yaml", bad);
  const std::string errors = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + q.path + "}"));
  CHECK(errors.find(q.path + ":11:") != std::string::npos);
  CHECK(errors.find("all_reduce_lines[1]") != std::string::npos);
  CHECK(errors.find("eficiency") != std::string::npos);
}

TEST_CASE("Profile: a MoE table of roofline factors loads as a factor grid; one with both value lists is refused") {
  std::string text = kProfile;
  // The entry starts at line 22 (kProfile's `errors:` line); its table map opens at line 26,
  // column 9 (after "      - "), and its roofline_factor list holds its second value at line
  // 29, column 32 (8 spaces, "roofline_factor: [" and "0.8, " before it).
  const std::string moe = R"(  - op: moe
    format: fp8_block
    cost_model: table
    tables:
      - name: latency
        axes:
          - {field: m, knots: [1, 16]}
        roofline_factor: [0.8, 1.25]
)";
  text.insert(text.find("errors:"), moe);
  const TempProfile p("servesim_profile_moe_factor.yaml", text);
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto* table = std::get_if<servesim::models::TableConfig>(&s.config.pools.at(0).cost_model);
  REQUIRE(table != nullptr);
  REQUIRE(table->tables->tables().log_grids.size() == 2);
  CHECK_FALSE(table->tables->tables().log_grids[0].roofline_factor);  // the GEMM table of seconds
  const auto& g = table->tables->tables().log_grids[1];
  CHECK(g.kind == servesim::models::OpKind::kMoeExperts);
  CHECK(g.roofline_factor);
  REQUIRE(g.log_seconds.size() == 2);
  CHECK(g.log_seconds[0] == approx(std::log(0.8)));

  std::string both = text;
  both.insert(both.find("        roofline_factor:"), "        seconds: [1e-05, 2e-05]\n");
  const TempProfile q("servesim_profile_moe_both.yaml", both);
  const std::string e1 = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + q.path + "}"));
  CHECK(e1.find(q.path + ":26:9:") != std::string::npos);
  CHECK(e1.find("a table needs axes[] and one of microseconds[], seconds[] or roofline_factor[]") != std::string::npos);

  std::string zero = text;
  zero.replace(zero.find("[0.8, 1.25]"), 11, "[0.8, 0]");
  const TempProfile r("servesim_profile_moe_zero.yaml", zero);
  const std::string e2 = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + r.path + "}"));
  CHECK(e2.find(r.path + ":29:32:") != std::string::npos);
  CHECK(e2.find("expected a positive factor, got") != std::string::npos);
}

TEST_CASE("Profile: gdn tables load as recurrent grids, their kind from the name; another name is refused") {
  const auto with_gdn = [](const std::string& name) {
    std::string text = kProfile;
    text.insert(text.find("errors:"), R"(  - op: gdn
    format: bf16
    cost_model: table
    tables:
      - name: decode
        axes:
          - {field: batch, knots: [1, 64]}
          - {field: heads, knots: [8, 32]}
        microseconds: [10, 20, 30, 40]
        match: {head_dim: 128}
      - name: )" + name + R"(
        axes:
          - {field: batch, knots: [1, 16]}
          - {field: tokens, knots: [64, 4096]}
        microseconds: [10, 20, 30, 40]
        match: {head_dim: 128}
)");
    return text;
  };
  const TempProfile p("servesim_profile_gdn.yaml", with_gdn("prefill"));
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto* table = std::get_if<servesim::models::TableConfig>(&s.config.pools.at(0).cost_model);
  REQUIRE(table != nullptr);
  const auto& grids = table->tables->tables().log_grids;
  REQUIRE(grids.size() == 3);
  using servesim::models::Recurrence;
  CHECK(grids[0].recurrent == Recurrence::kNone);  // the GEMM entry
  CHECK(grids[1].recurrent == Recurrence::kGatedDeltaNet);
  CHECK(grids[1].kind == servesim::models::OpKind::kAttentionDecode);
  CHECK(grids[2].recurrent == Recurrence::kGatedDeltaNet);
  CHECK(grids[2].kind == servesim::models::OpKind::kAttentionPrefill);
  CHECK_FALSE(grids[2].latent);

  const TempProfile bad("servesim_profile_gdn_bad.yaml", with_gdn("latency"));
  const std::string errors = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + bad.path + "}"));
  CHECK(errors.find("tables[1].name") != std::string::npos);
  CHECK(errors.find("prefill or decode") != std::string::npos);
}

TEST_CASE("Profile: an encoder_attention table loads as a prefill grid for operators without a KV cache") {
  std::string text = kProfile;
  const std::string encoder = R"(  - op: encoder_attention
    format: bf16
    cost_model: table
    tables:
      - name: latency
        axes:
          - {field: batch, knots: [1, 16]}
          - {field: tokens, knots: [64, 4096]}
        seconds: [1e-05, 2e-05, 3e-05, 4e-05]
        match: {head_dim: 80, window: 0, prefix: 0}
)";
  text.insert(text.find("errors:"), encoder);
  const TempProfile p("servesim_profile_encoder.yaml", text);
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto* table = std::get_if<servesim::models::TableConfig>(&s.config.pools.at(0).cost_model);
  REQUIRE(table != nullptr);
  REQUIRE(table->tables->tables().log_grids.size() == 2);
  const auto& g = table->tables->tables().log_grids[1];
  using F = servesim::models::MeasuredLogGrid::Field;
  CHECK(g.kind == servesim::models::OpKind::kAttentionPrefill);
  CHECK_FALSE(g.latent);
  CHECK(g.kv_bytes == 0);
  // The file's three conditions, then the loader's: no KV cache.
  REQUIRE(g.match.size() == 4);
  CHECK(g.match[3].first == F::kKvBytes);
  CHECK(g.match[3].second == 0);
  // The GEMM entry before it gets no such condition.
  for (const auto& [field, value] : table->tables->tables().log_grids[0].match) CHECK(field != F::kKvBytes);
}

TEST_CASE(
    "Profile: moe_experts sets per-format grouped-GEMM models; unknown formats and keys are reported at their line") {
  std::string text = kProfile;
  const std::string experts =
      "  moe_experts:\n"
      "    bf16: {overhead: 9 us, compute: [[1e6, 0.1], [1e9, 0.5]], memory: 0.8, token_bytes: 6, pair_bytes: 3.5}\n"
      "    fp8_block: {overhead: 11 us, compute: 0.4, memory: [[1e6, 0.6], [1e8, 0.9]], token_bytes: 4, pair_bytes: "
      "2}\n";
  text.insert(text.find("entries:"), experts);
  const TempProfile p("servesim_profile_moe_experts.yaml", text);
  const Scenario s = load(scenario_with_chip("{preset: h100-sxm, profile: " + p.path + "}"));
  const auto& x = s.config.pools.at(0).chip.efficiency.moe_experts;
  REQUIRE(x.size() == 2);
  CHECK(x[0].format == servesim::models::Format::kBf16);
  CHECK(x[0].overhead == Duration::microseconds(9));
  REQUIRE(x[0].compute.knots.size() == 2);
  CHECK(x[0].compute.knots[1].efficiency == approx(0.5));
  CHECK(x[0].memory.at(1e7) == approx(0.8));
  CHECK(x[0].token_bytes == approx(6));
  CHECK(x[0].pair_bytes == approx(3.5));
  CHECK(x[1].format == servesim::models::Format::kFp8Block);
  CHECK(x[1].memory.knots.size() == 2);
  // A preset has none (its shipped profile has them: opted out).
  CHECK(load(scenario_with_chip("{preset: h100-sxm, profile: none}"))
            .config.pools.at(0)
            .chip.efficiency.moe_experts.empty());

  // Line 10 (the efficiency map starts at 7, moe_experts at 10, bf16 at 11, fp8_block at 12): a
  // misspelt format, and a misspelt key in fp8_block's model.
  std::string bad = text;
  bad.replace(bad.find("    bf16:"), 9, "    bf61:");
  bad.replace(bad.find("pair_bytes: 2"), 10, "pair_byte:");
  const TempProfile q("servesim_profile_moe_experts_bad.yaml", bad);
  const std::string errors = errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + q.path + "}"));
  CHECK(errors.find(q.path + ":11:") != std::string::npos);
  CHECK(errors.find("unknown expert weight format 'bf61' (did you mean 'bf16'?)") != std::string::npos);
  CHECK(errors.find(q.path + ":12:") != std::string::npos);
  CHECK(errors.find("pair_byte") != std::string::npos);
  // A model without its required keys.
  std::string partial = text;
  partial.replace(partial.find(", token_bytes: 6"), 16, "");
  const TempProfile r("servesim_profile_moe_experts_partial.yaml", partial);
  CHECK(errors_of(scenario_with_chip("{preset: h100-sxm, profile: " + r.path + "}")).find("token_bytes") !=
        std::string::npos);
}

TEST_CASE("Profile: every shipped profile is of a chip preset, one per chip and engine") {
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& p : servesim::scenario::shipped_profiles()) {
    INFO("profile ", p.name);
    CHECK(servesim::models::chip_preset(p.chip).has_value());
    const std::string engine = p.engine;
    CHECK((engine.empty() || engine == "trtllm" || engine == "sglang" || engine == "vllm"));
    CHECK(seen.insert({p.chip, p.engine}).second);
    // The text inflates and names the same chip the index does.
    const auto text = servesim::scenario::shipped_profile_text(p.name);
    REQUIRE(text.has_value());
    CHECK(text->find("\nchip: \"" + std::string(p.chip) + "\"\n") != std::string::npos);
  }
}

TEST_CASE("Profile: a chip without the key takes its preset's profile for the deployment's engine; none opts out") {
  const auto with_engine = [](const std::string& engine, const std::string& chip) {
    std::string y = scenario_with_chip(chip);
    return y.replace(y.find("deployment:\n"), 12, "deployment:\n  engine: " + engine + "\n");
  };
  const Scenario trt = load(scenario_with_chip("h200-sxm"));
  const auto& pool = trt.config.pools.at(0);
  CHECK(pool.chip.source.rfind("efficiencies from profile h200, ", 0) == 0);
  CHECK(trt.resolved["deployment"]["engine"] == "trtllm");
  CHECK(trt.resolved["deployment"]["pools"][0]["chip"]["profile"] == "h200");
  CHECK(pool.chip.calibration.rfind("calibrated: profile h200 (the preset's default), TensorRT-LLM kernels measured on "
                                    "h200-sxm",
                                    0) == 0);
  CHECK(std::holds_alternative<servesim::models::TableConfig>(pool.cost_model));
  // The same chip under vLLM takes the profile of vLLM's kernels.
  const Scenario vllm = load(with_engine("vllm", "h200-sxm"));
  CHECK(vllm.resolved["deployment"]["pools"][0]["chip"]["profile"] == "h200-vllm");
  CHECK(vllm.config.pools.at(0).chip.calibration.find("vLLM kernels") != std::string::npos);
  // Blackwell likewise: every Blackwell chip has an SGLang and a vLLM profile.
  CHECK(load(with_engine("vllm", "b200")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "b200-vllm");
  CHECK(load(with_engine("sglang", "b200")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "b200-sglang");
  CHECK(load(with_engine("sglang", "gb200")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "gb200-sglang");
  CHECK(load(with_engine("sglang", "gb300")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "gb300-sglang");
  CHECK(load(with_engine("sglang", "b300")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "b300-sglang");
  // profile: none keeps the preset's own figures, and says they are not calibrated.
  const Scenario none = load(scenario_with_chip("{preset: h200-sxm, profile: none}"));
  const auto& bare = none.config.pools.at(0).chip;
  CHECK(none.resolved["deployment"]["pools"][0]["chip"]["profile"] == "none");
  CHECK(bare.efficiency.gemm_overhead == servesim::models::chip_preset("h200-sxm")->efficiency.gemm_overhead);
  CHECK(bare.calibration.rfind("uncalibrated: ", 0) == 0);
  CHECK(std::holds_alternative<servesim::models::RooflineConfig>(none.config.pools.at(0).cost_model));
  // A named profile is applied as named, not as the default.
  CHECK(load(scenario_with_chip("{preset: h200-sxm, profile: h200}"))
            .config.pools.at(0)
            .chip.calibration.find("(the preset's default)") == std::string::npos);
  // An engine outside the three is an error at its key.
  CHECK(errors_of(with_engine("tensorrt", "h200-sxm")).find("deployment.engine") != std::string::npos);
}

TEST_CASE("Profile: an H20 pool takes H200's efficiencies transferred for its engine, without H200's tables") {
  const auto with_engine = [](const std::string& engine, const std::string& chip) {
    std::string y = scenario_with_chip(chip);
    return y.replace(y.find("deployment:\n"), 12, "deployment:\n  engine: " + engine + "\n");
  };
  const Scenario trt = load(scenario_with_chip("h20"));
  const auto& chip = trt.config.pools.at(0).chip;
  CHECK(trt.resolved["deployment"]["pools"][0]["chip"]["profile"] == "h20");
  CHECK(chip.calibration ==
        "transferred: profile h20 (the preset's default), TensorRT-LLM kernels measured on h200-sxm, carried to h20 "
        "by calibrate's transfer rule; nothing of h20 was measured");
  // H200's fitted figures as fractions of H20's own peaks (rule fractions), no tables of H200's seconds.
  const Scenario h200 = load(scenario_with_chip("h200-sxm"));
  CHECK(chip.efficiency.gemm_overhead == h200.config.pools.at(0).chip.efficiency.gemm_overhead);
  CHECK(chip.efficiency.gemm_compute.knots.size() == h200.config.pools.at(0).chip.efficiency.gemm_compute.knots.size());
  CHECK(chip.efficiency.gemm_overhead != servesim::models::chip_preset("h20")->efficiency.gemm_overhead);
  CHECK(std::holds_alternative<servesim::models::RooflineConfig>(trt.config.pools.at(0).cost_model));
  // Each engine its own engine's kernels.
  CHECK(load(with_engine("vllm", "h20")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "h20-vllm");
  CHECK(load(with_engine("sglang", "h20")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "h20-sglang");
  CHECK(
      load(with_engine("vllm", "h20")).config.pools.at(0).chip.calibration.find("vLLM kernels measured on h200-sxm") !=
      std::string::npos);
}

TEST_CASE("Profile: an H800 pool takes H100's profile for its engine and keeps its own collective figures") {
  const auto with_engine = [](const std::string& engine, const std::string& chip) {
    std::string y = scenario_with_chip(chip);
    return y.replace(y.find("deployment:\n"), 12, "deployment:\n  engine: " + engine + "\n");
  };
  const Scenario h800 = load(scenario_with_chip("h800-sxm"));
  const Scenario h100 = load(scenario_with_chip("h100-sxm"));
  const auto& chip = h800.config.pools.at(0).chip;
  const auto& same_die = h100.config.pools.at(0).chip;
  CHECK(h800.resolved["deployment"]["pools"][0]["chip"]["profile"] == "h100");
  CHECK(chip.calibration ==
        "borrowed: profile h100 (the preset's default), TensorRT-LLM kernels measured on h100-sxm, applied to "
        "h800-sxm; collectives h800-sxm's own (another scale-up fabric)");
  // The operators: H100's fitted figures and tables.
  CHECK(chip.efficiency.gemm_overhead == same_die.efficiency.gemm_overhead);
  CHECK(chip.efficiency.attention_decode.knots.size() == same_die.efficiency.attention_decode.knots.size());
  CHECK(std::holds_alternative<servesim::models::TableConfig>(h800.config.pools.at(0).cost_model));
  // The collectives: the H800 preset's, not the lines fitted over H100's 450 GB/s NVLink.
  const auto preset = servesim::models::chip_preset("h800-sxm");
  REQUIRE(preset.has_value());
  CHECK(chip.efficiency.collective_latency == preset->efficiency.collective_latency);
  CHECK(chip.efficiency.collective_bandwidth == approx(preset->efficiency.collective_bandwidth));
  CHECK(chip.efficiency.all_reduce_lines.size() == preset->efficiency.all_reduce_lines.size());
  CHECK_FALSE(same_die.efficiency.all_reduce_lines.empty());
  CHECK(chip.efficiency.collective_latency != same_die.efficiency.collective_latency);
  CHECK(chip.scale_up_bandwidth.bytes_per_s == approx(200e9));
  // Per engine, as on H100.
  CHECK(load(with_engine("sglang", "h800-sxm")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "h100-sglang");
  CHECK(load(with_engine("vllm", "h800-sxm")).resolved["deployment"]["pools"][0]["chip"]["profile"] == "h100-vllm");
  // A profile applied to a chip of the same fabric keeps its collective figures (H100 -> H200).
  const Scenario h200 = load(scenario_with_chip("{preset: h200-sxm, profile: h100}"));
  CHECK(h200.config.pools.at(0).chip.efficiency.collective_latency == same_die.efficiency.collective_latency);
  CHECK(h200.config.pools.at(0).chip.calibration.find("collectives") == std::string::npos);
}

TEST_CASE("Profile: TensorRT-LLM's MXFP4 experts on Hopper with moe_tp > 1 are warned about") {
  // gpt-oss's experts are MXFP4; H200 has no FP4 rate, so TensorRT-LLM serves them with its
  // TRITON MoE backend, expert-parallel only. moe_tp 2 is costed, and said; ep 2 is not; nor is
  // moe_tp 2 under SGLang (other kernels), nor on B200 (the FP4 rate: another backend).
  auto yaml = [](const std::string& engine, const std::string& chip, const std::string& parallel) {
    return "model: {preset: gpt-oss-120b, formats: {emulate: true}}\n"
           "deployment:\n"
           "  engine: " +
           engine +
           "\n"
           "  pools:\n"
           "    - chip: " +
           chip +
           "\n"
           "      instances: 1\n"
           "      parallel: " +
           parallel + "\n" + kWorkload;
  };
  const Scenario warned = load(yaml("trtllm", "h200-sxm", "{tp: 2, moe_tp: 2, ep: 1}"));
  REQUIRE(warned.warnings.size() == 1);
  CHECK(warned.warnings[0].to_string() ==
        "profile.yaml:7:33: deployment.pools[0].parallel.moe_tp: TensorRT-LLM runs MXFP4 experts on h200-sxm (no FP4 "
        "rate) with its TRITON MoE backend, which is expert-parallel only: moe_tp 2 is not a plan it serves (use ep 2, "
        "moe_tp 1)");
  CHECK(load(yaml("trtllm", "h200-sxm", "{tp: 2, moe_tp: 1, ep: 2}")).warnings.empty());
  CHECK(load(yaml("sglang", "h200-sxm", "{tp: 2, moe_tp: 2, ep: 1}")).warnings.empty());
  CHECK(load(yaml("trtllm", "b200", "{tp: 2, moe_tp: 2, ep: 1}")).warnings.empty());
}

TEST_CASE("Profile: the pools and loads of a session share one prepared copy of a profile's tables") {
  // Two h100-sxm pools (prefill and decode) take the shipped H100 profile by default; a session
  // (serve's hypotheses) loads the scenario again with the same caches.
  std::string yaml = scenario_with_chip("h100-sxm");
  const std::string pool = yaml.substr(yaml.find("    - chip:"), yaml.find("workload:") - yaml.find("    - chip:"));
  yaml.replace(yaml.find(pool), pool.size(), pool + "      role: prefill\n" + pool + "      role: decode\n");
  servesim::scenario::Caches caches;
  servesim::scenario::LoadOptions options;
  options.caches = &caches;
  const auto tables_of = [](const Scenario& s, std::size_t i) {
    const auto* table = std::get_if<servesim::models::TableConfig>(&s.config.pools.at(i).cost_model);
    REQUIRE(table != nullptr);
    REQUIRE(table->tables != nullptr);
    return table->tables;
  };
  const Scenario first = servesim::scenario::load_scenario_text(yaml, "profile.yaml", kBaseDir, options);
  const Scenario second = servesim::scenario::load_scenario_text(yaml, "profile.yaml", kBaseDir, options);
  CHECK(tables_of(first, 0) == tables_of(first, 1));
  CHECK(tables_of(first, 0) == tables_of(second, 0));
  CHECK_FALSE(tables_of(first, 0)->tables().log_grids.empty());
  // Without a session's caches a load keeps its own: its pools still share, loads do not.
  const Scenario alone = load(yaml);
  CHECK(tables_of(alone, 0) == tables_of(alone, 1));
  CHECK(tables_of(alone, 0) != tables_of(first, 0));
}
