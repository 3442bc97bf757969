#include <doctest/doctest.h>

// Scenario keys of the serving features added after the EPD landing (prefix caching, kv_aware
// routing): what they load into, and each misuse as one diagnostic at its key (file, line,
// column, path). The texts' first line is the line after the opening R"(.

#include <string>
#include <string_view>
#include <vector>

#include "tests/approx.h"
#include "core/errors.h"
#include "models/chip_spec.h"
#include "sim/scenario/scenario.h"
#include "tests/scenario/inline_scenario.h"

namespace {

using servesim::test::text_of;

using servesim::Diagnostic;
using servesim::InputError;

const std::string kFile = "features.yaml";
const std::string kBaseDir = SERVESIM_SOURCE_DIR "/scenarios/epd";
// The workload every deployment below serves (appended after its deployment, so the line numbers
// of the deployment keys are read off the text above it).
const std::string kWorkload = R"(workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)";

std::vector<Diagnostic> diagnostics_of(std::string_view yaml) {
  return servesim::test::diagnostics_of(yaml, kFile, kBaseDir);
}

void check_one(std::string_view yaml, int line, int column, const std::string& path, const std::string& message_start) {
  const auto got = diagnostics_of(yaml);
  std::string listing;
  for (const auto& d : got) listing += "  " + d.to_string() + "\n";
  INFO("diagnostics:\n" << listing);
  REQUIRE(got.size() == 1);
  CHECK(got[0].file == kFile);
  CHECK(got[0].line == line);
  CHECK(got[0].column == column);
  CHECK(got[0].path == path);
  CHECK(got[0].message.rfind(message_start, 0) == 0);
}

}  // namespace

TEST_CASE("Scenario: prefix_cache and kv_aware load into the pool's config") {
  const auto s = servesim::scenario::load_scenario_text(text_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 2
      prefix_cache: {enabled: true, capacity_fraction: 0.25}
      router: {policy: kv_aware}
)" + kWorkload),
                                                        kFile, kBaseDir, {});
  const auto& p = s.config.pools[0];
  CHECK(p.prefix_cache.enabled);
  CHECK(p.prefix_cache.capacity_fraction == 0.25);
  CHECK(p.router.policy == servesim::cluster::RouterPolicy::kKvAware);
}

TEST_CASE("Scenario: kv_aware without the pool's prefix cache is reported at the policy") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 2
      router: {policy: kv_aware}
)" + kWorkload,
            6, 24, "deployment.pools[0].router.policy", "kv_aware routes by the prefix");
}

TEST_CASE("Scenario: kv_aware with a request-count load is reported at the load") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 2
      prefix_cache: {enabled: true}
      router: {policy: kv_aware, load: requests}
)" + kWorkload,
            7, 40, "deployment.pools[0].router.load", "kv_aware scores outstanding tokens");
}

TEST_CASE("Scenario: a prefix cache on a decode pool is reported at its enabled key") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - {name: p, role: prefill, chip: h100-sxm, instances: 1}
    - name: d
      role: decode
      chip: h100-sxm
      instances: 1
      prefix_cache: {enabled: true}
)" + kWorkload,
            9, 31, "deployment.pools[1].prefix_cache.enabled", "a prefix cache saves prefill work");
}

TEST_CASE("Scenario: a capacity fraction above 1 is out of range") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      prefix_cache: {enabled: true, capacity_fraction: 1.5}
)" + kWorkload,
            6, 56, "deployment.pools[0].prefix_cache.capacity_fraction", "");
}

TEST_CASE("Scenario: trace hash-id blocks that are not whole KV blocks are reported at the cache") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      kv_cache: {block_tokens: 48}
      prefix_cache: {enabled: true}
workload:
  arrivals:
    process: trace
    file: ../../workloads/traces/mooncake_fast25_conversation_trace.jsonl
    window: {start: 0 s, duration: 10 s}
)",
            7, 21, "deployment.pools[0].prefix_cache", "the prefix cache keys the trace's hash ids");
}

TEST_CASE("Scenario: scheduler.preemption takes recompute or swap; chips carry a host bandwidth") {
  const auto s = servesim::scenario::load_scenario_text(text_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: {preset: h100-sxm, host_bandwidth: 50 GB/s}
      instances: 1
      scheduler: {preemption: swap}
)" + kWorkload),
                                                        kFile, kBaseDir, {});
  CHECK(s.config.pools[0].scheduler.preemption == servesim::cluster::PreemptionMode::kSwap);
  CHECK(s.config.pools[0].chip.host_bandwidth.bytes_per_s == 50e9);
  // PCIe 5.0 x16, per direction, for the H100 preset.
  CHECK(servesim::models::chip_preset("h100-sxm")->host_bandwidth.bytes_per_s == 64e9);
}

TEST_CASE("Scenario: an unknown preemption mode lists the known ones") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      scheduler: {preemption: spill}
)" + kWorkload,
            6, 31, "deployment.pools[0].scheduler.preemption", "");
}

TEST_CASE("Scenario: two-batch overlap on a dense model is reported at parallel.tbo") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 1, tbo: true}
)" + kWorkload,
            6, 30, "deployment.pools[0].parallel.tbo", "tbo overlaps the MoE dispatch");
}

namespace {

// One deepseek-v3 pool on h200-sxm with the given keys (from line 6 on), and the workload.
std::string deepseek_pool(std::string_view keys) {
  return "model: deepseek-v3\ndeployment:\n  pools:\n    - chip: h200-sxm\n      instances: 1\n" +
         std::string(text_of(keys)) + kWorkload;
}

}  // namespace

TEST_CASE("Scenario: pools[].speculative loads MTP with one rate for every position or a list") {
  const auto s = servesim::scenario::load_scenario_text(text_of(deepseek_pool(R"(
      parallel: {tp: 8}
      scheduler: {max_batch_size: 64, max_batched_tokens: 256}
      speculative: {method: mtp, draft_tokens: 2, acceptance: [0.9, 0.8]}
)")),
                                                        kFile, kBaseDir, {});
  const auto& spec = s.config.pools[0].speculative;
  CHECK(spec.enabled());
  CHECK(spec.draft_tokens == 2);
  REQUIRE(spec.acceptance.size() == 2);
  // Expected accepted drafts: 0.9 + 0.9 x 0.8 = 1.62.
  CHECK(spec.expected_accepted() == approx(1.62));
  CHECK(s.resolved["deployment"]["pools"][0]["speculative"]["acceptance"][1] == 0.8);
}

TEST_CASE("Scenario: mtp on a model without MTP layers is reported at the method") {
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      speculative: {method: mtp, draft_tokens: 1, acceptance: 0.8}
)" + kWorkload,
            6, 29, "deployment.pools[0].speculative.method", "mtp drafts with the model's");
}

TEST_CASE("Scenario: speculative acceptance lists need one rate per draft, each in [0, 1]") {
  check_one(deepseek_pool(R"(
      parallel: {tp: 8}
      scheduler: {max_batch_size: 64}
      speculative: {draft_tokens: 2, acceptance: [0.9]}
)"),
            8, 50, "deployment.pools[0].speculative.acceptance", "expected one acceptance rate per");
  check_one(deepseek_pool(R"(
      parallel: {tp: 8}
      speculative: {draft_tokens: 1, acceptance: 1.5}
)"),
            7, 50, "deployment.pools[0].speculative.acceptance", "expected an acceptance rate between");
}

TEST_CASE("Scenario: a token budget below the verification of a full batch is reported at draft_tokens") {
  // 256 decodes x (1 + 1) = 512 tokens > a budget of 384.
  check_one(deepseek_pool(R"(
      parallel: {tp: 8}
      scheduler: {max_batch_size: 256, max_batched_tokens: 384}
      speculative: {draft_tokens: 1, acceptance: 0.8}
)"),
            8, 35, "deployment.pools[0].speculative.draft_tokens", "each decode verifies its 1 draft");
}

TEST_CASE("Scenario: parallel.attention_dp loads per-rank batches and needs dp > 1") {
  const auto s = servesim::scenario::load_scenario_text(text_of(deepseek_pool(R"(
      parallel: {tp: 1, dp: 8, ep: 8, attention_dp: round_robin}
)")),
                                                        kFile, kBaseDir, {});
  CHECK(s.config.pools[0].attention_dp == servesim::cluster::AttentionDpBalance::kRoundRobin);
  check_one(deepseek_pool(R"(
      parallel: {tp: 8, attention_dp: least_kv}
)"),
            6, 39, "deployment.pools[0].parallel.attention_dp", "attention_dp spreads decoding");
}

TEST_CASE("Scenario: kv_transfer.a2a_contention defaults to on, takes a boolean, and says where it is not one") {
  const auto on = servesim::scenario::load_scenario_text(text_of(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
)" + kWorkload),
                                                         kFile, kBaseDir, {});
  CHECK(on.config.disaggregation.a2a_contention);
  const auto off = servesim::scenario::load_scenario_text(text_of(R"(
model: llama-3.1-8b
deployment:
  kv_transfer: {a2a_contention: false}
  pools:
    - chip: h100-sxm
      instances: 1
)" + kWorkload),
                                                          kFile, kBaseDir, {});
  CHECK_FALSE(off.config.disaggregation.a2a_contention);
  check_one(R"(
model: llama-3.1-8b
deployment:
  kv_transfer: {a2a_contention: sometimes}
  pools:
    - chip: h100-sxm
      instances: 1
)" + kWorkload,
            3, 33, "deployment.kv_transfer.a2a_contention", "");
}

TEST_CASE("Scenario: parallel.cp_min_tokens loads for a CP pool and is reported without cp or on a decode pool") {
  const auto s = servesim::scenario::load_scenario_text(text_of(deepseek_pool(R"(
      parallel: {tp: 8, cp: 2, cp_min_tokens: 65536}
)")),
                                                        kFile, kBaseDir, {});
  CHECK(s.config.pools[0].cp_min_tokens == 65536);
  check_one(deepseek_pool(R"(
      parallel: {tp: 8, cp_min_tokens: 4096}
)"),
            6, 40, "deployment.pools[0].parallel.cp_min_tokens", "cp_min_tokens says which prompts");
  check_one(deepseek_pool(R"(
      parallel: {tp: 8, cp: 2, cp_min_tokens: -1}
)"),
            6, 47, "deployment.pools[0].parallel.cp_min_tokens", "");
  const auto got = diagnostics_of(R"(
model: deepseek-v3
deployment:
  pools:
    - {name: p, role: prefill, chip: h200-sxm, instances: 1, parallel: {tp: 8}}
    - name: d
      role: decode
      chip: h200-sxm
      instances: 1
      parallel: {tp: 8, cp: 2, cp_min_tokens: 4096}
)" + kWorkload);
  bool found = false;
  for (const auto& d : got) {
    if (d.path == "deployment.pools[1].parallel.cp_min_tokens") {
      found = true;
      CHECK(d.line == 9);
      CHECK(d.message.rfind("cp_min_tokens applies to prefill", 0) == 0);
    }
  }
  CHECK(found);
}

TEST_CASE("Scenario: scheduler.first_response_step loads on a decode pool and is reported elsewhere") {
  const std::string disagg = R"(
model: llama-3.1-8b
deployment:
  pools:
    - {name: p, role: prefill, chip: h100-sxm, instances: 1}
    - name: d
      role: decode
      chip: h100-sxm
      instances: 1
      scheduler: {first_response_step: 2}
)" + kWorkload;
  const auto s = servesim::scenario::load_scenario_text(text_of(disagg), kFile, kBaseDir, {});
  CHECK(s.config.pools[1].scheduler.first_response_step == 2);
  CHECK(s.config.pools[0].scheduler.first_response_step == 1);
  CHECK(s.resolved["deployment"]["pools"][1]["scheduler"]["first_response_step"] == 2);
  // Only when given: a pool without it echoes nothing new.
  CHECK_FALSE(s.resolved["deployment"]["pools"][0]["scheduler"].contains("first_response_step"));
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      scheduler: {first_response_step: 2}
)" + kWorkload,
            // At the value: 6 spaces + "scheduler: {" (12) + "first_response_step: " (21) = column 40.
            6, 40, "deployment.pools[0].scheduler.first_response_step", "a held first response is a decode server's");
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - {name: p, role: prefill, chip: h100-sxm, instances: 1}
    - {name: d, role: decode, chip: h100-sxm, instances: 1, scheduler: {first_response_step: 65}}
)" + kWorkload,
            // At the value 65, column 94 of its line.
            5, 94, "deployment.pools[1].scheduler.first_response_step", "must be between 0 and 64");
}

TEST_CASE("Scenario: scheduler.pipeline_queue loads, is echoed when given, and says where it does not apply") {
  for (const auto& [name, queue] : {std::pair{"shared", servesim::cluster::PipelineQueue::kShared},
                                    std::pair{"per_lane", servesim::cluster::PipelineQueue::kPerLane}}) {
    CAPTURE(name);
    const std::string given = R"(
model: llama-3.1-70b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      parallel: {tp: 4, pp: 2}
      scheduler: {pipeline_queue: )" +
                              std::string(name) + "}\n" + kWorkload;
    const auto s = servesim::scenario::load_scenario_text(text_of(given), kFile, kBaseDir, {});
    CHECK(s.config.pools[0].scheduler.pipeline_queue == queue);
    CHECK(s.resolved["deployment"]["pools"][0]["scheduler"]["pipeline_queue"] == name);
  }
  const std::string plain = R"(
model: llama-3.1-8b
deployment:
  pools:
    - {chip: h100-sxm, instances: 1}
)" + kWorkload;
  const auto p = servesim::scenario::load_scenario_text(text_of(plain), kFile, kBaseDir, {});
  CHECK(p.config.pools[0].scheduler.pipeline_queue == servesim::cluster::PipelineQueue::kShared);  // the default
  CHECK_FALSE(p.resolved["deployment"]["pools"][0]["scheduler"].contains("pipeline_queue"));
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - {name: p, role: prefill, chip: h100-sxm, instances: 1}
    - {name: d, role: decode, chip: h100-sxm, instances: 1, scheduler: {pipeline_queue: shared}}
)" + kWorkload,
            // At the value: column 89 of its line.
            5, 89, "deployment.pools[1].scheduler.pipeline_queue", "a shared waiting queue is where prompts wait");
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      scheduler: {form_ahead: true, pipeline_queue: shared}
)" + kWorkload,
            // 6 spaces + "scheduler: {" (12) + "form_ahead: true, " (18) + "pipeline_queue: " (16) = 52
            // characters before the value.
            6, 53, "deployment.pools[0].scheduler.pipeline_queue", "pipeline_queue: shared models a scheduler");
  check_one(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
      scheduler: {pipeline_queue: lanes}
)" + kWorkload,
            // An unknown value, at the value (28 characters before it).
            6, 35, "deployment.pools[0].scheduler.pipeline_queue", "");
}
