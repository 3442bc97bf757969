#include <doctest/doctest.h>

// Valid scenarios: what the loader puts into the SimulationConfig, what it echoes in `resolved`
// (every default filled in, presets expanded), how --set and --seed change both, and that the
// resolved scenario loads back to itself.

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/errors.h"
#include "core/units.h"
#include "sim/scenario/scenario.h"
#include "tests/scenario/inline_scenario.h"

namespace {

using servesim::test::text_of;
using servesim::test::with_sets;

using servesim::Duration;
using servesim::InputError;
using servesim::scenario::LoadOptions;
using servesim::scenario::Scenario;
using Json = nlohmann::ordered_json;

const std::string kQuickstart = SERVESIM_SOURCE_DIR "/scenarios/quickstart.yaml";
const std::string kBaseDir = SERVESIM_SOURCE_DIR "/scenarios";

std::string listing(const InputError& e) {
  std::string out;
  for (const auto& d : e.diagnostics()) out += "  " + d.to_string() + "\n";
  return out;
}

// Loads a scenario that must be valid; on an InputError, fails with its diagnostics.
Scenario load_file(const std::string& path, const LoadOptions& options = {}) {
  try {
    return servesim::scenario::load_scenario_file(path, options);
  } catch (const InputError& e) {
    FAIL("unexpected InputError:\n" << listing(e));
  }
  return {};
}

Scenario load_text(std::string_view yaml, const std::string& name, const LoadOptions& options = {}) {
  try {
    return servesim::scenario::load_scenario_text(text_of(yaml), name, kBaseDir, options);
  } catch (const InputError& e) {
    FAIL("unexpected InputError:\n" << listing(e));
  }
  return {};
}

// Only the model, one pool's chip and instance count, and the traffic are given; everything else
// takes its default.
constexpr std::string_view kMinimal = R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: a100-80g
      instances: 2
workload:
  requests: 100
  arrivals: {process: closed_loop, clients: 8}
  lengths:
    prompt: {distribution: uniform, min: 64, max: 512}
    output: {distribution: fixed, value: 32}
)";

// A small made-up model given figure by figure: 16 heads x 64 = 1024 wide, 4 KV heads (GQA groups
// of 4). Every optional value is set, so that the resolved scenario has no nulls (see the
// round-trip test).
constexpr std::string_view kTiny = R"(
model:
  name: tiny-llama
  layers: 4
  hidden: 1024
  heads: 16
  kv_heads: 4
  head_dim: 64
  intermediate: 4096
  vocab: 32000
  max_context: 4096
deployment:
  pools:
    - chip: h200-sxm
      instances: 2
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
slo: {ttft: 1 s, tpot: 100 ms, e2e: 60 s}
simulation: {horizon: 1 h}
)";

}  // namespace

TEST_CASE("Scenario: quickstart.yaml loads with the values it gives") {
  const Scenario s = load_file(kQuickstart);
  const auto& c = s.config;
  CHECK(s.name == "quickstart");
  CHECK(c.seed == 42);
  CHECK(c.model.name == "llama-3.1-8b");
  CHECK(c.model.layers == 32);
  REQUIRE(c.pools.size() == 1);
  const auto& p = c.pools[0];
  CHECK(p.name == "serving");
  CHECK(p.role == "combined");
  CHECK(p.chip.name == "h100-sxm");
  CHECK(p.instances == 4);
  CHECK(p.plan.tp == 1);
  CHECK(p.plan.pp == 1);
  CHECK(p.max_model_len == 16384);
  CHECK(p.scheduler.policy == servesim::cluster::SchedulerPolicy::kSarathi);
  CHECK(p.scheduler.max_batch_size == 128);
  CHECK(p.scheduler.max_batched_tokens == 1024);
  CHECK(p.router.policy == servesim::cluster::RouterPolicy::kLeastLoaded);
  CHECK(p.router.load == servesim::cluster::LoadMetric::kOutstandingTokens);

  CHECK(c.workload.requests == 4000);
  const auto* poisson = std::get_if<servesim::workloads::PoissonArrivals>(&c.workload.classes.at(0).arrivals);
  REQUIRE(poisson != nullptr);
  CHECK(poisson->rate.per_s == 24.0);
  const auto* lengths = std::get_if<servesim::workloads::IndependentLengths>(&*c.workload.classes.at(0).lengths);
  REQUIRE(lengths != nullptr);
  const auto* prompt = std::get_if<servesim::workloads::LognormalLength>(&lengths->prompt);
  REQUIRE(prompt != nullptr);
  CHECK(prompt->median == 1024.0);
  CHECK(prompt->sigma == 0.8);
  CHECK(prompt->min == 16);
  CHECK(prompt->max == 12288);
  const auto* output = std::get_if<servesim::workloads::LognormalLength>(&lengths->output);
  REQUIRE(output != nullptr);
  CHECK(output->median == 256.0);
  CHECK(output->max == 2048);

  REQUIRE(c.slo.ttft.has_value());
  CHECK(*c.slo.ttft == Duration::seconds(2));
  REQUIRE(c.slo.tpot.has_value());
  CHECK(*c.slo.tpot == Duration::milliseconds(50));
  CHECK_FALSE(c.slo.e2e.has_value());
  CHECK_FALSE(c.horizon.has_value());

  // Values given in the file are echoed as written.
  CHECK(s.resolved["workload"]["arrivals"]["rate"] == "24 /s");
  CHECK(s.resolved["slo"]["ttft"] == "2 s");
  CHECK(s.resolved["slo"]["e2e"].is_null());
  CHECK(s.resolved["simulation"]["horizon"].is_null());
}

TEST_CASE("Scenario: quickstart's H100 preset is expanded with its memory as nvidia-smi reports it") {
  const Scenario s = load_file(kQuickstart);
  // 81,559 MiB (nvidia-smi on an H100 SXM) = 85,520,809,984 bytes.
  CHECK(s.config.pools.at(0).chip.memory.value == 81559.0 * servesim::kMiB);
  const Json& chip = s.resolved["deployment"]["pools"][0]["chip"];
  CHECK(chip["preset"] == "h100-sxm");
  const auto memory = servesim::parse_quantity(chip["memory"].get<std::string>(), servesim::Dimension::kBytes);
  REQUIRE(memory.ok);
  CHECK(memory.value == 81559.0 * servesim::kMiB);
  CHECK(chip["hbm_bandwidth"] == "3.35 TB/s");
  CHECK(chip["bf16_flops"] == "989.5 TFLOP/s");
}

TEST_CASE("Scenario: omitted keys take their defaults in the config and in the resolved echo") {
  const Scenario s = load_text(kMinimal, "minimal.yaml");
  const auto& c = s.config;
  CHECK(s.name == "minimal");  // the display name's stem
  CHECK(c.seed == 0);
  REQUIRE(c.pools.size() == 1);
  const auto& p = c.pools[0];
  CHECK(p.name == "pool0");
  CHECK(p.role == "combined");
  CHECK(p.plan.tp == 1);
  CHECK(p.plan.pp == 1);
  CHECK(p.max_model_len == 131072);  // the model's context
  CHECK(p.scheduler.policy == servesim::cluster::SchedulerPolicy::kSarathi);
  CHECK(p.scheduler.max_batch_size == 256);
  CHECK(p.scheduler.max_batched_tokens == 512);  // Sarathi-Serve's chunk
  CHECK(p.scheduler.max_queue == 0);
  CHECK(p.kv_cache.block_tokens == 16);
  CHECK(p.kv_cache.memory_utilization == 0.9);
  CHECK(p.kv_cache.reserved.value == 1.0 * servesim::kGiB);
  CHECK(p.kv_cache.watermark == 0.01);
  CHECK(p.router.policy == servesim::cluster::RouterPolicy::kLeastLoaded);
  CHECK(p.router.load == servesim::cluster::LoadMetric::kOutstandingTokens);
  const auto* closed = std::get_if<servesim::workloads::ClosedLoopArrivals>(&c.workload.classes.at(0).arrivals);
  REQUIRE(closed != nullptr);
  CHECK(closed->clients == 8);
  CHECK(closed->think_time == Duration::zero());
  CHECK_FALSE(c.slo.any());
  CHECK_FALSE(c.horizon.has_value());

  const Json expected_pool = Json::parse(R"({
    "name": "pool0",
    "role": "combined",
    "chip": {
      "preset": "a100-80g",
      "name": "a100-80g",
      "memory": "80 GiB",
      "hbm_bandwidth": "2.039 TB/s",
      "bf16_flops": "312 TFLOP/s",
      "fp8_flops": "0 FLOP/s",
      "int8_flops": "624 TFLOP/s",
      "fp4_flops": "0 FLOP/s",
      "scale_up_bandwidth": "300 GB/s",
      "scale_up_domain": 8,
      "scale_out_bandwidth": "25 GB/s",
      "host_bandwidth": "32 GB/s",
      "scale_out_latency": "5 us",
      "profile": "a100",
      "efficiency": {
        "gemm_compute": [[1e+06, 0.36474], [1e+07, 0.36474], [1e+08, 0.37924], [1e+09, 0.57543], [1e+10, 0.70824], [1e+11, 0.72424], [1e+12, 0.72424], [1e+13, 0.84882], [1e+14, 0.84882]],
        "gemm_memory": [[1e+06, 0.37548], [1e+07, 0.73998], [1e+08, 0.73998], [1e+09, 0.74055], [1e+10, 0.74055]],
        "gemm_overhead": "7.2407 us",
        "attention_prefill": 0.36,
        "attention_decode": 0.8,
        "attention_overhead": "20 us",
        "elementwise": [[1000.0, 0.002], [10000.0, 0.002], [100000.0, 0.018151], [1e+06, 0.18413], [1e+07, 0.6305], [1e+08, 0.63049], [1e+09, 0.63049], [1e+10, 0.63049]],
        "elementwise_overhead": "1.0524 us",
        "format_compute": {"fp8": 1.0, "int8": 1.0, "fp4": 1.0},
        "collective_bandwidth": 0.51289,
        "collective_latency": "33.591 us",
        "iteration_overhead": "840 us",
        "sequence_overhead": "38.5 us",
        "host_overlap": false,
        "all_reduce_lines": [{"base": "27.143 us", "per_step": "288.25 ns", "efficiency": 0.38894, "algorithm": "ring"}, {"base": "47.848 us", "per_step": "2.3722 us", "efficiency": 0.60775, "algorithm": "ring"}]
      }
    },
    "instances": 2,
    "parallel": {"tp": 1, "pp": 1, "dp": 1, "ep": 1, "moe_tp": 1, "cp": 1, "redundant_experts": 0,
                 "tbo": false},
    "moe_routing": {"distribution": "balanced", "alpha": 1.2},
    "max_model_len": 131072,
    "scheduler": {"policy": "sarathi", "max_batch_size": 256, "max_batched_tokens": 512,
                  "max_queue": 0, "preemption": "recompute"},
    "kv_cache": {"block_tokens": 16, "memory_utilization": 0.9, "reserved": "1 GiB",
                 "watermark": 0.01},
    "router": {"policy": "least_loaded", "load": "tokens"},
    "prefix_cache": {"enabled": false, "capacity_fraction": 1.0}
  })");
  const Json& pool = s.resolved["deployment"]["pools"][0];
  CHECK(pool.dump(2) == expected_pool.dump(2));

  CHECK(s.resolved["name"] == "minimal");
  CHECK(s.resolved["seed"] == 0);
  CHECK(s.resolved["model"]["preset"] == "llama-3.1-8b");
  CHECK(s.resolved["model"]["max_context"] == 131072);
  CHECK(s.resolved["model"]["tied_embeddings"] == false);
  CHECK(s.resolved["workload"]["arrivals"]["think_time"] == "0 ps");
  CHECK(s.resolved["slo"].dump() == R"({"ttft":null,"tpot":null,"e2e":null})");
  CHECK(s.resolved["simulation"].dump() == R"({"horizon":null,"decode_steps_per_event":64})");
}

TEST_CASE("Scenario: whole_prompt scheduling defaults its token budget to max_model_len, at least 2048") {
  const Scenario s = load_text(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      max_model_len: 8192
      scheduler: {policy: whole_prompt}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
                               "whole.yaml");
  CHECK(s.config.pools.at(0).scheduler.policy == servesim::cluster::SchedulerPolicy::kWholePrompt);
  CHECK(s.config.pools.at(0).scheduler.max_batched_tokens == 8192);
  CHECK(s.resolved["deployment"]["pools"][0]["scheduler"]["max_batched_tokens"] == 8192);
}

TEST_CASE("Scenario: --set changes a top-level count, a nested scheduler value and a quantity") {
  const Scenario s = load_file(
      kQuickstart, with_sets({"deployment.pools[0].instances=8", "deployment.pools[0].scheduler.max_batch_size=64",
                              "workload.arrivals.rate=40 /s"}));
  const auto& p = s.config.pools.at(0);
  CHECK(p.instances == 8);
  CHECK(p.scheduler.max_batch_size == 64);
  CHECK(p.scheduler.max_batched_tokens == 1024);  // untouched
  const auto* poisson = std::get_if<servesim::workloads::PoissonArrivals>(&s.config.workload.classes.at(0).arrivals);
  REQUIRE(poisson != nullptr);
  CHECK(poisson->rate.per_s == 40.0);
  const Json& pool = s.resolved["deployment"]["pools"][0];
  CHECK(pool["instances"] == 8);
  CHECK(pool["scheduler"]["max_batch_size"] == 64);
  CHECK(s.resolved["workload"]["arrivals"]["rate"] == "40 /s");
}

TEST_CASE("Scenario: --set below a model preset name overrides one figure of the preset") {
  const Scenario s = load_file(kQuickstart, with_sets({"model.max_context=65536"}));
  CHECK(s.config.model.max_context == 65536);
  CHECK(s.config.model.name == "llama-3.1-8b");
  CHECK(s.config.model.layers == 32);  // the rest comes from the preset
  CHECK(s.config.model.heads == 32);
  const Json& model = s.resolved["model"];
  CHECK(model["preset"] == "llama-3.1-8b");
  CHECK(model["max_context"] == 65536);
  CHECK(model["layers"] == 32);
}

TEST_CASE("Scenario: --set of a whole section replaces it") {
  // simulation is absent from quickstart.yaml; a mapping value creates it.
  const Scenario s = load_file(kQuickstart, with_sets({"simulation={horizon: 90 s}"}));
  REQUIRE(s.config.horizon.has_value());
  CHECK(*s.config.horizon == Duration::seconds(90));
  CHECK(s.resolved["simulation"]["horizon"] == "90 s");
}

TEST_CASE("Scenario: --set creates the sections a key path needs") {
  // quickstart.yaml has no simulation section and its pool no kv_cache section.
  const Scenario s =
      load_file(kQuickstart, with_sets({"simulation.horizon=90 s", "deployment.pools[0].kv_cache.block_tokens=32"}));
  REQUIRE(s.config.horizon.has_value());
  CHECK(*s.config.horizon == Duration::seconds(90));
  CHECK(s.config.pools.at(0).kv_cache.block_tokens == 32);
}

TEST_CASE("Scenario: --seed overrides the scenario's seed and is echoed") {
  LoadOptions options;
  options.seed = 7;
  const Scenario s = load_file(kQuickstart, options);
  CHECK(s.config.seed == 7);
  CHECK(s.resolved["seed"] == 7);
  // Without --seed, the file's seed stands.
  CHECK(load_file(kQuickstart).config.seed == 42);
}

TEST_CASE("Scenario: the resolved scenario, loaded again, resolves to itself") {
  SUBCASE("quickstart as it is, with unset optional values echoed as null") {
    const Scenario first = load_file(kQuickstart);
    CHECK(first.resolved["slo"]["e2e"].is_null());
    CHECK(first.resolved["simulation"]["horizon"].is_null());
    const Scenario second = load_text(first.resolved.dump(2), "resolved.json");
    CHECK(second.resolved == first.resolved);
    CHECK_FALSE(second.config.slo.e2e.has_value());
    CHECK_FALSE(second.config.horizon.has_value());
  }
  const Scenario first = load_file(kQuickstart, with_sets({"slo.e2e=30 s", "simulation={horizon: 10 min}"}));
  const std::string json = first.resolved.dump(2);  // JSON is valid YAML
  const Scenario second = load_text(json, "resolved.json");
  INFO("first:\n" << json << "\nsecond:\n" << second.resolved.dump(2));
  CHECK(second.resolved == first.resolved);
  CHECK(second.name == first.name);
  CHECK(second.config.seed == first.config.seed);
  CHECK(second.config.model.max_context == first.config.model.max_context);
  CHECK(second.config.pools.at(0).chip.memory == first.config.pools.at(0).chip.memory);
  CHECK(second.config.pools.at(0).scheduler.max_batched_tokens ==
        first.config.pools.at(0).scheduler.max_batched_tokens);
  CHECK(second.config.horizon == first.config.horizon);
  CHECK(second.config.slo.e2e == first.config.slo.e2e);
}

TEST_CASE("Scenario: an inline model mapping with every figure loads without a preset") {
  const Scenario s = load_text(kTiny, "tiny.yaml");
  const auto& m = s.config.model;
  CHECK(m.name == "tiny-llama");
  CHECK(m.layers == 4);
  CHECK(m.hidden == 1024);
  CHECK(m.heads == 16);
  CHECK(m.kv_heads == 4);
  CHECK(m.head_dim == 64);
  CHECK(m.intermediate == 4096);
  CHECK(m.vocab == 32000);
  CHECK(m.max_context == 4096);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.source == "scenario");
  CHECK(s.config.pools.at(0).max_model_len == 4096);  // defaults to the model's context
  CHECK_FALSE(s.resolved["model"].contains("preset"));
  CHECK(s.resolved["model"]["tied_embeddings"] == false);
  CHECK(s.resolved["model"]["name"] == "tiny-llama");
}

TEST_CASE("Scenario: a resolved inline model without a preset round-trips too") {
  const Scenario first = load_text(kTiny, "tiny.yaml");
  const Scenario second = load_text(first.resolved.dump(), "resolved.json");
  CHECK(second.resolved == first.resolved);
  CHECK(second.config.model.source == "scenario");
  CHECK(second.config.model.intermediate == first.config.model.intermediate);
}

TEST_CASE("Scenario: a trace file resolves against the scenario's folder") {
  const Scenario s = load_text(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    trace: {file: ../workloads/traces/splitwise_conv.csv, order: sequential}
)",
                               "trace.yaml");
  const auto* trace = std::get_if<servesim::workloads::TraceLengths>(&*s.config.workload.classes.at(0).lengths);
  REQUIRE(trace != nullptr);
  CHECK(trace->path == kBaseDir + "/../workloads/traces/splitwise_conv.csv");
  CHECK(trace->prompt_column == "num_prefill_tokens");
  CHECK(trace->output_column == "num_decode_tokens");
  CHECK(trace->max_total_tokens == 0);
  CHECK_FALSE(trace->shuffle);
  // The echo keeps the path as written, so that the resolved scenario reads the same file again.
  CHECK(s.resolved["workload"]["lengths"]["trace"]["file"] == "../workloads/traces/splitwise_conv.csv");
}
