#include <doctest/doctest.h>

// Malformed scenarios: each must raise one InputError whose diagnostics name the file, the line and
// column (1-based) of the offending value, its key path, and a message that says what is wrong and
// what would be right. Every scenario is a small inline YAML text; its first line is the line after
// the opening R"( (text_of drops that newline), so the line numbers below can be read off the text.

#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "sim/scenario/scenario.h"
#include "tests/scenario/inline_scenario.h"

namespace {

using servesim::test::text_of;
using servesim::test::with_sets;

using servesim::Diagnostic;
using servesim::InputError;
using servesim::scenario::LoadOptions;

const std::string kFile = "bad.yaml";
const std::string kBaseDir = SERVESIM_SOURCE_DIR "/scenarios";

std::vector<Diagnostic> diagnostics_of(std::string_view yaml, const LoadOptions& options = {}) {
  return servesim::test::diagnostics_of(yaml, kFile, kBaseDir, options);
}

std::string listing(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) out += "  " + d.to_string() + "\n";
  return out;
}

// The diagnostics must be exactly `want` ({file, line, column, path, message}), in this order.
void check_all(const std::vector<Diagnostic>& got, const std::vector<Diagnostic>& want) {
  INFO("diagnostics:\n" << listing(got));
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].file == want[i].file);
    CHECK(got[i].line == want[i].line);
    CHECK(got[i].column == want[i].column);
    CHECK(got[i].path == want[i].path);
    CHECK(got[i].message == want[i].message);
  }
}

void check_one(std::string_view yaml, const Diagnostic& want, const LoadOptions& options = {}) {
  check_all(diagnostics_of(yaml, options), {want});
}

// A valid scenario for the --set cases: every --set below breaks it in one place.
constexpr std::string_view kValid = R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)";

}  // namespace

TEST_CASE("Malformed scenario: the valid base scenario of the --set cases loads") {
  CHECK_NOTHROW(servesim::scenario::load_scenario_text(text_of(kValid), kFile, kBaseDir));
}

// ---- Keys -----------------------------------------------------------------------------------

TEST_CASE("Malformed scenario: an unknown top-level key suggests the closest known key") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
simulaton:
  horizon: 10 s
)",
            {kFile, 12, 1, "simulaton", "unknown key 'simulaton' (did you mean 'simulation'?)"});
}

TEST_CASE("Malformed scenario: an unknown key with no close match lists the keys known there") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
comment: first try
)",
            {kFile, 12, 1, "comment",
             "unknown key 'comment' (known keys here: name, seed, model, deployment, workload, slo, "
             "simulation, cluster)"});
}

TEST_CASE("Malformed scenario: an unknown key inside the scheduler is reported with its full path") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      scheduler:
        max_batch_sise: 64
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 7, 9, "deployment.pools[0].scheduler.max_batch_sise",
             "unknown key 'max_batch_sise' (did you mean 'max_batch_size'?)"});
}

TEST_CASE("Malformed scenario: unknown and out-of-range chip efficiencies are both reported") {
  check_all(diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: {preset: h100-sxm, efficiency: {gemm_compute: 1.2, gemm_overheed: 1 us}}
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 4, 59, "deployment.pools[0].chip.efficiency.gemm_compute",
              "must be greater than 0 and at most 1, got 1.2"},
             {kFile, 4, 64, "deployment.pools[0].chip.efficiency.gemm_overheed",
              "unknown key 'gemm_overheed' (did you mean 'gemm_overhead'?)"}});
}

TEST_CASE("Malformed scenario: a duplicate key is reported at its second occurrence") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      instances: 2
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 7, "deployment.pools[0].instances", "duplicate key 'instances' (first given on line 5)"});
}

// ---- Missing keys: reported at the mapping the key belongs in ----------------------------------

TEST_CASE("Malformed scenario: a missing model is reported at the top of the document") {
  check_one(R"(
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 1, 1, "model",
             "missing required key 'model' (a preset name like 'llama-3.1-8b', {hf_config: FILE}, "
             "or a mapping of the model's figures)"});
}

TEST_CASE("Malformed scenario: a missing workload is reported at the top of the document") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
)",
            {kFile, 1, 1, "workload",
             "missing required key 'workload' (the traffic: arrivals, lengths and a request count)"});
}

TEST_CASE("Malformed scenario: a pool without instances is reported at the pool") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 7, "deployment.pools[0].instances", "missing required key 'instances' (an integer)"});
}

TEST_CASE("Malformed scenario: arrivals without a process are reported at the arrivals mapping") {
  const auto diagnostics = diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)");
  INFO("diagnostics:\n" << listing(diagnostics));
  // Only the missing process: its siblings are not reported as unknown keys on top of it.
  check_all(diagnostics, {{kFile, 8, 13, "workload.arrivals.process",
                           "missing required key 'process' (one of poisson, gamma, closed_loop, trace)"}});
}

TEST_CASE("Malformed scenario: a workload without lengths is reported at the workload mapping") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
)",
            {kFile, 7, 3, "workload.lengths",
             "missing required key 'lengths' ({prompt: ..., output: ...} or {trace: {file: ...}})"});
}

TEST_CASE("Malformed scenario: lengths without an output distribution are reported") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
)",
            {kFile, 10, 5, "workload.lengths.output",
             "missing required key 'output' (a distribution like {distribution: fixed, value: 512})"});
}

TEST_CASE("Malformed scenario: an inline model without a preset needs every figure") {
  check_all(diagnostics_of(R"(
model: {name: tiny, layers: 2, hidden: 512, heads: 8, kv_heads: 8, head_dim: 64, vocab: 1000}
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 1, 8, "model.intermediate", "missing required key 'intermediate' (an integer)"},
             {kFile, 1, 8, "model.max_context", "missing required key 'max_context' (an integer)"}});
}

TEST_CASE("Malformed scenario: a chip mapping without a preset is rejected") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: {memory: 80 GiB}
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 13, "deployment.pools[0].chip.preset",
             "a chip needs a preset to start from (its efficiencies are measured per chip family); "
             "override any figure next to it"});
}

// ---- Quantities and units ----------------------------------------------------------------------

TEST_CASE("Malformed scenario: a rate without a unit names the units it takes") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 32}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 8, 38, "workload.arrivals.rate",
             "'32' has no unit: a rate needs one, like '32 /s' (units: /s, /min, /h, req/s, req/min, "
             "req/h, Hz)"});
}

TEST_CASE("Malformed scenario: a bandwidth given as a chip's memory is a dimension error") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: {preset: h100-sxm, memory: 3 TB/s}
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 40, "deployment.pools[0].chip.memory",
             "'3 TB/s' is a bandwidth, but a size is expected here, like '80 GiB'"});
}

TEST_CASE("Malformed scenario: an unknown unit suggests the closest unit") {
  check_one(
      R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: {preset: h100-sxm, memory: 80 GiBs}
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
      {kFile, 4, 40, "deployment.pools[0].chip.memory", "unknown unit 'GiBs' in '80 GiBs' (did you mean 'GiB'?)"});
}

TEST_CASE("Malformed scenario: an SLO without a unit is rejected") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
slo: {ttft: 2}
)",
            {kFile, 12, 13, "slo.ttft",
             "'2' has no unit: a duration needs one, like '1.5 us' (units: ps, ns, us, \xC2\xB5s, ms, "
             "s, min, h)"});
}

// ---- Types ----------------------------------------------------------------------------------

TEST_CASE("Malformed scenario: a word where an integer goes is a type error") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: four
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 5, 18, "deployment.pools[0].instances", "expected an integer, got 'four'"});
}

TEST_CASE("Malformed scenario: a fraction where an integer goes asks for a whole number") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 1.5
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 7, 13, "workload.requests", "expected an integer, got '1.5' (a whole number is needed here)"});
}

TEST_CASE("Malformed scenario: a list where an integer goes is a type error") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: [1, 2]}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 22, "deployment.pools[0].parallel.tp", "expected an integer, got a list"});
}

TEST_CASE("Malformed scenario: a mapping where a number goes is a type error") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      kv_cache:
        memory_utilization: {value: 0.8}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 7, 29, "deployment.pools[0].kv_cache.memory_utilization", "expected a number, got a mapping"});
}

TEST_CASE("Malformed scenario: a number where a section goes is a type error") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: 4
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 17, "deployment.pools[0].parallel", "expected a mapping of keys to values, got '4'"});
}

// ---- Ranges ---------------------------------------------------------------------------------

TEST_CASE("Malformed scenario: a negative arrival rate is out of range") {
  check_one(
      R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: -5 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
      {kFile, 8, 38, "workload.arrivals.rate", "must be greater than 0 /s and at most 1000000000 /s, got '-5 /s'"});
}

TEST_CASE("Malformed scenario: zero instances are out of range") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 0
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 5, 18, "deployment.pools[0].instances", "must be between 1 and 1000000, got 0"});
}

TEST_CASE("Malformed scenario: a memory utilization above 1 is out of range") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      kv_cache: {memory_utilization: 1.5}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 38, "deployment.pools[0].kv_cache.memory_utilization",
             "must be greater than 0 and at most 1, got 1.5"});
}

TEST_CASE("Malformed scenario: a zero-length horizon is out of range") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
simulation: {horizon: 0 s}
)",
            // kMaxDuration is 100 days = 2400 h.
            {kFile, 12, 23, "simulation.horizon", "must be between 1 ps and 2400 h, got '0 s'"});
}

TEST_CASE("Malformed scenario: decode steps per event must be at least 1") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
simulation: {decode_steps_per_event: 0}
)",
            {kFile, 12, 38, "simulation.decode_steps_per_event", "must be between 1 and 4096, got 0"});
}

// ---- Names: presets and enums -------------------------------------------------------------------

TEST_CASE("Malformed scenario: an unknown model preset suggests the closest preset") {
  check_one(R"(
model: {preset: llama-3-8b}
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 1, 17, "model.preset",
             "unknown model preset 'llama-3-8b' (did you mean 'llama-3.1-8b'?); presets: "
             "llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, mixtral-8x7b, mixtral-8x22b, llama-2-70b, qwen3-32b, "
             "qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-30b-a3b, qwen3-coder-480b-a35b, mimo-7b, "
             "qwen3-235b-a22b, deepseek-v3, "
             "deepseek-r1, kimi-k2, kimi-k2.5, kimi-k3, deepseek-v3.2, minimax-m2.5, minimax-m2.7, minimax-m3, "
             "deepseek-v4-flash, deepseek-v4-pro, "
             "qwen3.5-397b-a17b, qwen3.5-122b-a10b, qwen3.5-35b-a3b, qwen3.5-27b, nemotron-3-nano-30b-a3b, "
             "nemotron-3-super-120b-a12b, nemotron-3-ultra-550b-a55b, nemotron-h-56b, glm-4.5, glm-4.5-air, glm-5, "
             "glm-5.2, step-3.7-flash, gemma-4-26b-a4b, gemma-4-31b, mimo-v2-flash, gpt-oss-120b, gpt-oss-20b, "
             "llama-4-scout, llama-4-maverick, qwen2.5-vl-7b"});
}

TEST_CASE("Malformed scenario: an unknown model preset given by name is reported with the same text") {
  const auto diagnostics = diagnostics_of(R"(
model: llama-3-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)");
  INFO("diagnostics:\n" << listing(diagnostics));
  // Reported at the name, under the key the user wrote.
  check_all(diagnostics,
            {{kFile, 1, 8, "model",
              "unknown model preset 'llama-3-8b' (did you mean 'llama-3.1-8b'?); "
              "presets: llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, mixtral-8x7b, mixtral-8x22b, "
              "llama-2-70b, qwen3-32b, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-30b-a3b, "
              "qwen3-coder-480b-a35b, mimo-7b, qwen3-235b-a22b, deepseek-v3, deepseek-r1, kimi-k2, kimi-k2.5, kimi-k3, "
              "deepseek-v3.2, minimax-m2.5, minimax-m2.7, minimax-m3, deepseek-v4-flash, deepseek-v4-pro, "
              "qwen3.5-397b-a17b, qwen3.5-122b-a10b, qwen3.5-35b-a3b, qwen3.5-27b, "
              "nemotron-3-nano-30b-a3b, nemotron-3-super-120b-a12b, nemotron-3-ultra-550b-a55b, "
              "nemotron-h-56b, glm-4.5, glm-4.5-air, glm-5, glm-5.2, step-3.7-flash, gemma-4-26b-a4b, gemma-4-31b, "
              "mimo-v2-flash, gpt-oss-120b, "
              "gpt-oss-20b, llama-4-scout, llama-4-maverick, qwen2.5-vl-7b"}});
}

TEST_CASE("Malformed scenario: an unknown chip preset suggests the closest preset") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: {preset: h100-smx}
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 22, "deployment.pools[0].chip.preset",
             "unknown chip preset 'h100-smx' (did you mean 'h100-sxm'?); presets: a100-80g, h100-sxm, h800-sxm, h20, "
             "h200-sxm, b200, gb200, b300, gb300, ascend-910b, ascend-910c, ascend-910c-die, domestic-64g, h100-pcie, "
             "a100-pcie, a30, l40s, l4, rtx-pro-6000, arc-pro-b60"});
}

TEST_CASE("Malformed scenario: an unknown chip preset far from any preset lists the presets") {
  const auto diagnostics = diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: mi300x
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)");
  INFO("diagnostics:\n" << listing(diagnostics));
  check_all(diagnostics,
            {{kFile, 4, 13, "deployment.pools[0].chip",
              "unknown chip preset 'mi300x' (did you mean 'b300'?); presets: a100-80g, h100-sxm, h800-sxm, h20, "
              "h200-sxm, b200, gb200, b300, gb300, ascend-910b, ascend-910c, ascend-910c-die, domestic-64g, h100-pcie, "
              "a100-pcie, a30, l40s, l4, rtx-pro-6000, arc-pro-b60"}});
}

TEST_CASE("Malformed scenario: an unknown scheduler policy suggests the closest policy") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      scheduler: {policy: sarathy}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 27, "deployment.pools[0].scheduler.policy",
             "unknown value 'sarathy' (did you mean 'sarathi'? expected one of sarathi, whole_prompt)"});
}

TEST_CASE("Malformed scenario: an unknown router load metric suggests the closest metric") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      router: {load: token}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 22, "deployment.pools[0].router.load",
             "unknown value 'token' (did you mean 'tokens'? expected one of tokens, requests)"});
}

// ---- The deployment as a whole -----------------------------------------------------------------

TEST_CASE("Malformed scenario: TP 3 on Llama-3.1-8B divides neither its heads, its MLP nor the node") {
  // 32 heads, MLP width 14336 = 2^11 x 7 and 8 chips per scale-up domain: 3 divides none of them.
  check_all(diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 3}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 6, 22, "deployment.pools[0].parallel.tp",
              "tensor parallelism 3 does not divide the 32 attention heads of llama-3.1-8b (choose "
              "one of 1, 2, 4, 8)"},
             {kFile, 6, 22, "deployment.pools[0].parallel.tp",
              "tensor parallelism 3 does not divide the MLP width 14336 of llama-3.1-8b"}});
}

TEST_CASE("Malformed scenario: a TP group wider than the 8-chip scale-up domain must fill whole domains") {
  check_all(diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 12}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 6, 22, "deployment.pools[0].parallel.tp",
              "tensor parallelism 12 does not divide the 32 attention heads of llama-3.1-8b (choose "
              "one of 1, 2, 4, 8)"},
             {kFile, 6, 22, "deployment.pools[0].parallel.tp",
              "tensor parallelism 12 does not divide the MLP width 14336 of llama-3.1-8b"},
             {kFile, 6, 22, "deployment.pools[0].parallel.tp",
              "a tensor-parallel group of 12 chips is wider than the scale-up domain of 8 chips and "
              "must fill whole domains: use tp <= 8 or a multiple of it"}});
}

TEST_CASE("Malformed scenario: Llama-3.1-70B on one A100 does not fit and the weights are to blame") {
  // Weights: 70.55e9 parameters x 2 bytes = 141.1 GB = 131.4 GiB. Usable: 80 GiB (81,920 MiB) x 0.9
  // = 72.0 GiB. Need 131.4 + 0.2 (activations) + 1.0 (reserved) = 132.7 GiB; short by 60.7 GiB.
  check_one(R"(
model: llama-3.1-70b
deployment:
  pools:
    - chip: a100-80g
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 13, "deployment.pools[0].chip",
             "llama-3.1-70b does not fit on a100-80g with tp=1, pp=1: each chip needs 131.4 GiB of "
             "weights + 0.2 GiB of activations + 1.0 GiB reserved = 132.7 GiB before any KV cache, "
             "but has 72.0 GiB usable (80.0 GiB x memory_utilization 0.9): short by 60.7 GiB; the "
             "biggest consumer is weights (more tensor or pipeline parallelism would split them, a "
             "smaller weight format (model.formats) would shrink them)"});
}

TEST_CASE("Malformed scenario: a max_model_len above what the KV cache holds is rejected") {
  // Llama-3.1-70B with tp=2 on H100 (81,559 MiB = 79.6 GiB): per chip 79.6 x 0.9 = 71.7 GiB usable,
  // less 65.7 GiB of weights, 0.2 GiB of activations and 1 GiB reserved = 4.8 GiB of KV cache.
  // KV per token per chip: 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes / 2 = 163,840 B;
  // 4.8 GiB / 163,840 B in 16-token blocks, less the 1% watermark = 31,376 tokens < 65,536.
  check_one(R"(
model: llama-3.1-70b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 2}
      max_model_len: 65536
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 7, 22, "deployment.pools[0].max_model_len",
             "the KV cache of each instance admits at most 31,376 tokens (4.8 GiB of KV memory per "
             "chip at 163,840 bytes per token, less the admission watermark), fewer than "
             "max_model_len 65,536: the longest request could never run; set max_model_len to at "
             "most 31,376 or give the KV cache more room (more chips per instance, context "
             "parallelism (parallel.cp) to split each request over more chips, a bigger chip, a "
             "smaller KV format)"});
}

TEST_CASE("Malformed scenario: a max_model_len above the model's context is rejected") {
  // Llama-2-70B has a 4,096-token context; tp=4 on H100 leaves room for its KV cache.
  check_one(R"(
model: llama-2-70b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 4}
      max_model_len: 8192
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 7, 22, "deployment.pools[0].max_model_len",
             "max_model_len 8192 exceeds the context of llama-2-70b (4096 tokens)"});
}

TEST_CASE("Malformed scenario: a token budget below max_batch_size is rejected") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      scheduler: {max_batch_size: 256, max_batched_tokens: 128}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 60, "deployment.pools[0].scheduler.max_batched_tokens",
             "the token budget (128) is below max_batch_size (256): a full batch of decodes would "
             "not fit in one iteration"});
}

TEST_CASE("Malformed scenario: whole_prompt with a token budget below max_model_len is rejected") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      max_model_len: 8192
      scheduler: {policy: whole_prompt, max_batched_tokens: 4096}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 7, 61, "deployment.pools[0].scheduler.max_batched_tokens",
             "whole_prompt scheduling needs a token budget of at least max_model_len (8192) so that "
             "every admissible prompt fits; got 4096"});
}

TEST_CASE("Malformed scenario: a prefill pool without a decode pool") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      role: prefill
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 5, "deployment.pools", "a prefill pool needs a decode pool to send its KV caches to"});
}

TEST_CASE("Malformed scenario: two pools of one role") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
    - chip: h200-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 6, 7, "deployment.pools[1].role",
             "a second pool of role 'combined': a deployment has at most one pool per role"});
}

// ---- Workload ---------------------------------------------------------------------------------

TEST_CASE("Malformed scenario: a lognormal length with max below min is rejected") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: lognormal, median: 512, sigma: 0.5, min: 100, max: 50}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 10, 79, "workload.lengths.prompt.max", "max (50) is below min (100)"});
}

TEST_CASE("Malformed scenario: a uniform length with min above max is reported at max") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output:
      distribution: uniform
      min: 64
      max: 32
)",
            {kFile, 14, 12, "workload.lengths.output.max", "max (32) is below min (64)"});
}

TEST_CASE("Malformed scenario: a trace and length distributions together are rejected") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    trace: {file: ../workloads/traces/splitwise_conv.csv}
    prompt: {distribution: fixed, value: 128}
)",
            {kFile, 10, 5, "workload.lengths", "give either a trace or prompt and output distributions, not both"});
}

TEST_CASE("Malformed scenario: a trace file that does not exist is reported at its key") {
  // The trace is resolved relative to base_dir; the message names the path the loader tried.
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    trace: {file: ../workloads/traces/no_such_trace.csv}
)",
            {kFile, 10, 19, "workload.lengths.trace.file",
             "cannot open the trace file: No such file or directory ('" + kBaseDir +
                 "/../workloads/traces/no_such_trace.csv'; relative paths start at the scenario "
                 "file's folder)"});
}

TEST_CASE("Malformed scenario: a trace column that does not exist lists the trace's columns") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    trace:
      file: ../workloads/traces/splitwise_conv.csv
      prompt_column: prompt_tokens
)",
            {kBaseDir + "/../workloads/traces/splitwise_conv.csv", 1, 1, "workload.lengths.trace",
             "no column 'prompt_tokens' in the header (columns: arrived_at, num_prefill_tokens, "
             "num_decode_tokens)"});
}

TEST_CASE("Malformed scenario: a run with neither a request count nor a horizon has no end") {
  const auto diagnostics = diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
workload:
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)");
  INFO("diagnostics:\n" << listing(diagnostics));
  // At the workload mapping, where `requests` belongs.
  check_all(diagnostics, {{kFile, 7, 3, "workload",
                           "the run needs an end: set workload.requests (how many requests to "
                           "send) or simulation.horizon (how long to simulate)"}});
}

// ---- The document itself ----------------------------------------------------------------------

TEST_CASE("Malformed scenario: invalid YAML is reported where the parser stopped") {
  // Line 5 is indented one column less than the `- chip` mapping it continues.
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
     instances: 1
)",
            {kFile, 5, 6, "", "not valid YAML: end of sequence not found"});
}

TEST_CASE("Malformed scenario: an unclosed flow mapping is invalid YAML") {
  check_one(R"(
model: llama-3.1-8b
workload: {requests: 10, arrivals: {process: poisson, rate: 10 /s}
)",
            {kFile, 3, 1, "", "not valid YAML: end of map flow not found"});
}

TEST_CASE("Malformed scenario: a top-level list is not a scenario") {
  check_one(R"(
- model: llama-3.1-8b
- workload: {requests: 10}
)",
            {kFile, 1, 1, "", "a scenario is a mapping of sections (model, deployment, workload, ...), got a list"});
}

TEST_CASE("Malformed scenario: an empty document reports every required section") {
  check_all(diagnostics_of(""), {{kFile, 1, 1, "model",
                                  "missing required key 'model' (a preset name like 'llama-3.1-8b', {hf_config: FILE}, "
                                  "or a mapping of the model's figures)"},
                                 {kFile, 1, 1, "deployment",
                                  "missing required key 'deployment' (the pools of instances that serve the model)"},
                                 {kFile, 1, 1, "workload",
                                  "missing required key 'workload' (the traffic: arrivals, lengths and a request "
                                  "count)"}});
}

TEST_CASE("Malformed scenario: a scenario file that does not exist cannot be opened") {
  const std::string path = SERVESIM_SOURCE_DIR "/scenarios/no_such_scenario.yaml";
  try {
    servesim::scenario::load_scenario_file(path);
    FAIL("the scenario loaded, but an InputError was expected");
  } catch (const InputError& e) {
    check_all(e.diagnostics(), {{path, 0, 0, "", "cannot open the scenario file: No such file or directory"}});
  }
}

// ---- --set overrides: reported against the --set, in command-line order -----------------------

TEST_CASE("Malformed scenario: a --set without '=' is rejected") {
  check_one(kValid, {"--set #1", 0, 0, "", "expected KEY.PATH=VALUE, got 'deployment.pools[0].instances'"},
            with_sets({"deployment.pools[0].instances"}));
}

TEST_CASE("Malformed scenario: a --set with a list index out of range is rejected") {
  check_one(
      kValid,
      {"--set #1", 0, 0, "deployment.pools[1].instances", "index 1 is out of range: 'deployment.pools' has 1 entry"},
      with_sets({"deployment.pools[1].instances=2"}));
}

TEST_CASE("Malformed scenario: a --set of a key under a scalar is rejected") {
  check_one(kValid,
            {"--set #1", 0, 0, "workload.requests.count",
             "cannot set 'workload.requests.count': 'workload.requests' is '10', not a mapping"},
            with_sets({"workload.requests.count=5"}));
}

TEST_CASE("Malformed scenario: a --set with an empty key in its path is rejected") {
  check_one(
      kValid,
      {"--set #1", 0, 0, "deployment..pools", "bad key path 'deployment..pools': expected a key name at position 12"},
      with_sets({"deployment..pools=1"}));
}

TEST_CASE("Malformed scenario: a --set value that fails validation is reported against the --set") {
  check_one(kValid, {"--set #1", 0, 0, "deployment.pools[0].instances", "must be between 1 and 1000000, got 0"},
            with_sets({"deployment.pools[0].instances=0"}));
}

TEST_CASE("Malformed scenario: a --set of an unknown key suggests the closest key") {
  check_one(kValid, {"--set #1", 0, 0, "workload.request", "unknown key 'request' (did you mean 'requests'?)"},
            with_sets({"workload.request=5"}));
}

TEST_CASE("Malformed scenario: a --set that breaks a whole-deployment check is reported against it") {
  check_one(kValid,
            {"--set #2", 0, 0, "deployment.pools[0].max_model_len",
             "max_model_len 200000 exceeds the context of llama-3.1-8b (131072 tokens)"},
            with_sets({"workload.requests=20", "deployment.pools[0].max_model_len=200000"}));
}

// ---- Several problems at once --------------------------------------------------------------------

TEST_CASE("Malformed scenario: independent problems are all reported, in document order") {
  const auto diagnostics = diagnostics_of(R"(
name: multi
seed: -3
model: llama-3.1-8b
deployment:
  pools:
    - chip: {preset: h100-sxm, memory: 80}
      instances: 0
      scheduler: {policy: sarathy}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 32}
  lengths:
    prompt: {distribution: uniform, min: 64, max: 32}
    output: {distribution: fixed, value: 16}
slo: {ttft: 2 seconds}
simulaton: {horizon: 10 s}
)",
                                          with_sets({"workload.requests=ten"}));
  check_all(diagnostics, {{kFile, 2, 7, "seed", "must be at least 0, got -3"},
                          {kFile, 6, 40, "deployment.pools[0].chip.memory",
                           "'80' has no unit: a size needs one, like '80 GiB' (units: B, kB, KB, MB, GB, TB, PB, "
                           "KiB, MiB, GiB, TiB, PiB, b, kb, Kb, Mb, Gb, Tb)"},
                          {kFile, 7, 18, "deployment.pools[0].instances", "must be between 1 and 1000000, got 0"},
                          {kFile, 8, 27, "deployment.pools[0].scheduler.policy",
                           "unknown value 'sarathy' (did you mean 'sarathi'? expected one of sarathi, "
                           "whole_prompt)"},
                          {kFile, 11, 38, "workload.arrivals.rate",
                           "'32' has no unit: a rate needs one, like '32 /s' (units: /s, /min, /h, req/s, "
                           "req/min, req/h, Hz)"},
                          {kFile, 13, 51, "workload.lengths.prompt.max", "max (32) is below min (64)"},
                          {kFile, 15, 13, "slo.ttft",
                           "unknown unit 'seconds' in '2 seconds': a duration takes one of ps, ns, us, "
                           "\xC2\xB5s, ms, s, min, h"},
                          {kFile, 16, 1, "simulaton", "unknown key 'simulaton' (did you mean 'simulation'?)"},
                          // --set diagnostics come after the file's, in command-line order.
                          {"--set #1", 0, 0, "workload.requests", "expected an integer, got 'ten'"}});
}

// ---- Independent problems are all reported --------------------------------------------------------

TEST_CASE("Malformed scenario: a bad field does not hide a deployment check on other fields") {
  check_all(diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: four
      parallel: {tp: 3}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 5, 18, "deployment.pools[0].instances", "expected an integer, got 'four'"},
             {kFile, 6, 22, "deployment.pools[0].parallel.tp",
              "tensor parallelism 3 does not divide the 32 attention heads of llama-3.1-8b "
              "(choose one of 1, 2, 4, 8)"},
             {kFile, 6, 22, "deployment.pools[0].parallel.tp",
              "tensor parallelism 3 does not divide the MLP width 14336 of llama-3.1-8b"}});
}

TEST_CASE("Malformed scenario: a missing trace file is reported next to other problems") {
  check_all(diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 0
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    trace: {file: nowhere.csv}
)"),
            {{kFile, 5, 18, "deployment.pools[0].instances", "must be between 1 and 1000000, got 0"},
             {kFile, 10, 19, "workload.lengths.trace.file",
              "cannot open the trace file: No such file or directory ('" + kBaseDir +
                  "/nowhere.csv'; relative paths start at the scenario file's folder)"}});
}

TEST_CASE("Malformed scenario: a reserve too big to fit names the reserve and how to shrink it") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      kv_cache: {reserved: 100 GiB, memory_utilization: 0.925}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 13, "deployment.pools[0].chip",
             "llama-3.1-8b does not fit on h100-sxm with tp=1, pp=1: each chip needs 15.0 GiB of "
             "weights + 0.2 GiB of activations + 100.0 GiB reserved = 115.1 GiB before any KV "
             "cache, but has 73.7 GiB usable (79.6 GiB x memory_utilization 0.925): short by "
             "41.5 GiB; the biggest consumer is reserved (a smaller kv_cache.reserved would free it)"});
}

TEST_CASE("Malformed scenario: a workload whose every request exceeds max_model_len is an error") {
  // Fixed prompts of 4,000 and outputs of 200 tokens: 4,200 > 4,096.
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      max_model_len: 4096
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 4000}
    output: {distribution: uniform, min: 200, max: 300}
)",
            {kFile, 6, 22, "deployment.pools[0].max_model_len",
             "every request would be rejected: the shortest prompt + output the workload draws is "
             "4200 tokens, more than max_model_len 4096"});
}

TEST_CASE("Malformed scenario: an abbreviated key or preset name gets the full name suggested") {
  check_all(diagnostics_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100
      instances: 1
      scheduler: {max_batched: 1024}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 4, 13, "deployment.pools[0].chip",
              "unknown chip preset 'h100' (did you mean 'h100-sxm'?); presets: a100-80g, h100-sxm, h800-sxm, h20, "
              "h200-sxm, b200, gb200, b300, gb300, ascend-910b, ascend-910c, ascend-910c-die, domestic-64g, h100-pcie, "
              "a100-pcie, a30, l40s, l4, rtx-pro-6000, arc-pro-b60"},
             {kFile, 6, 19, "deployment.pools[0].scheduler.max_batched",
              "unknown key 'max_batched' (did you mean 'max_batched_tokens'?)"}});
}

TEST_CASE("Malformed scenario: an empty list of pools says it is empty") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools: []
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 3, 10, "deployment.pools", "expected a non-empty list of pools, got an empty list"});
}

TEST_CASE("Malformed scenario: --set problems are listed in command-line order, past nine") {
  // Set #10 breaks a key that is read before the one #2 breaks; the list still starts with #2
  // (numeric order, not "#10" < "#2" as text).
  std::vector<std::string> sets(11, "seed=1");
  sets[1] = "workload.requests=ten";
  sets[9] = "deployment.pools[0].instances=0";
  check_all(diagnostics_of(kValid, with_sets(sets)),
            {{"--set #2", 0, 0, "workload.requests", "expected an integer, got 'ten'"},
             {"--set #10", 0, 0, "deployment.pools[0].instances", "must be between 1 and 1000000, got 0"}});
}

TEST_CASE("Malformed scenario: fp8 weights on a chip without fp8 name the chip, the format and the way out") {
  // A100 has bf16 and int8 tensor-core rates only (chip_spec.cpp).
  check_one(R"(
model: deepseek-v3
deployment:
  pools:
    - chip: a100-80g
      instances: 1
      parallel: {tp: 8}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 13, "deployment.pools[0].chip",
             "deepseek-v3's weights are fp8_block, which runs at the fp8 rate a100-80g does not "
             "have (it has bf16, int8); serve them in a format it has (model.formats.weights), or "
             "set model.formats.emulate: true to run them as weight-only kernels (stored and read "
             "at their width, math at the bf16 rate plus the dequantisation work)"});
}

TEST_CASE("Malformed scenario: NVFP4 MLPs on a chip without fp4 name the MLP format's key") {
  // H100 has no fp4 rate (chip_spec.cpp); the attention stays bf16, which it has.
  check_one(R"(
model: {preset: gemma-4-31b, formats: {mlp: nvfp4}}
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 2}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 13, "deployment.pools[0].chip",
             "gemma-4-31b's dense MLPs are nvfp4, which runs at the fp4 rate h100-sxm does not "
             "have (it has bf16, fp8, int8); serve them in a format it has (model.formats.mlp), or "
             "set model.formats.emulate: true to run them as weight-only kernels (stored and read "
             "at their width, math at the bf16 rate plus the dequantisation work)"});
}

TEST_CASE("Malformed scenario: an expert split that does not cover the chips is reported at its keys") {
  // tp 2 x dp 4 = 8 chips per stage; ep 3 divides neither the 128 experts nor the 8 chips.
  check_all(diagnostics_of(R"(
model: qwen3-235b-a22b
deployment:
  pools:
    - chip: h200-sxm
      instances: 1
      parallel: {tp: 2, dp: 4, ep: 3, moe_tp: 2}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 6, 36, "deployment.pools[0].parallel.ep",
              "expert parallelism ep 3 does not divide the 128 experts of qwen3-235b-a22b (choose "
              "one of 1, 2, 4, 8)"},
             {kFile, 6, 47, "deployment.pools[0].parallel.moe_tp",
              "the MoE layers are split moe_tp x ep over the tp x dp = 8 chips of a stage, but "
              "moe_tp 2 x ep 3 = 6; choose ep among 1, 2, 4, 8"}});
}

TEST_CASE("Malformed scenario: DeepSeek-V3 in fp8 does not fit on 8 x H100, and the weights say why") {
  // Per chip 79.3 GiB of weights (models/memory_test.cpp) against 81,559 MiB x 0.9 = 71.7 GiB.
  check_one(R"(
model: deepseek-v3
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 8}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)",
            {kFile, 4, 13, "deployment.pools[0].chip",
             "deepseek-v3 does not fit on h100-sxm with tp=8, pp=1, ep=1, moe_tp=8: each chip "
             "needs 79.3 GiB of weights (78.9 GiB layers, 0.4 GiB embedding and LM head) + 0.2 GiB "
             "of activations + 1.0 GiB reserved = 80.5 GiB before any KV cache, but has 71.7 GiB "
             "usable (79.6 GiB x memory_utilization 0.9): short by 8.8 GiB; the biggest consumer is "
             "weights (more tensor, expert or pipeline parallelism would split them)"});
}

TEST_CASE("Malformed scenario: unknown formats and a curve out of order are all reported") {
  check_all(diagnostics_of(R"(
model: {preset: llama-3.1-8b, formats: {weights: fp6, kv_cache: nvfp4}}
deployment:
  pools:
    - chip: {preset: h100-sxm, efficiency: {gemm_compute: [[1e12, 0.7], [1e9, 0.3]]}}
      instances: 1
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)"),
            {{kFile, 1, 50, "model.formats.weights",
              "unknown value 'fp6' (did you mean 'fp8'? expected one of bf16, fp8, fp8_block, int8, "
              "w4a8, nvfp4, mxfp4, w4a16)"},
             {kFile, 1, 65, "model.formats.kv_cache", "unknown value 'nvfp4' (expected one of bf16, fp8, int8)"},
             {kFile, 4, 59, "deployment.pools[0].chip.efficiency.gemm_compute",
              "knot sizes must be positive and strictly ascending"}});
}

TEST_CASE("Malformed scenario: a 1M-token context needs context parallelism, and the message says so") {
  // Llama-3.1-8B on one H100: 55.5 GiB of KV at 131,072 bytes per token = 450,432 tokens in blocks,
  // less the watermark. With parallel.cp 8 the same scenario loads (tests/models/memory_test.cpp).
  const char* yaml = R"(
model: {preset: llama-3.1-8b, max_context: 1048576}
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      max_model_len: 1048576
workload:
  requests: 2
  arrivals: {process: poisson, rate: 1 /s}
  lengths:
    prompt: {distribution: fixed, value: 1000000}
    output: {distribution: fixed, value: 16}
)";
  check_one(yaml, {kFile, 6, 22, "deployment.pools[0].max_model_len",
                   "the KV cache of each instance admits at most 450,432 tokens (55.5 GiB of KV "
                   "memory per chip at 131,072 bytes per token, less the admission watermark), "
                   "fewer than max_model_len 1,048,576: the longest request could never run; set "
                   "max_model_len to at most 450,432 or give the KV cache more room (more chips per "
                   "instance, context parallelism (parallel.cp) to split each request over more "
                   "chips, a bigger chip, a smaller KV format)"});
  LoadOptions cp8;
  cp8.sets = {"deployment.pools[0].parallel.cp=8"};
  const auto s = servesim::scenario::load_scenario_text(text_of(yaml), kFile, kBaseDir, cp8);
  CHECK(s.config.pools[0].plan.cp == 8);
}
