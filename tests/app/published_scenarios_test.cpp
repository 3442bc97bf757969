// The published deployments of scenarios/published/: each runs as shipped and its steady
// throughput per node (or per NPU) is divided by the published figure. The ratios are pinned to
// within 3% of what the model gives now, so that a change to the model that moves one shows here
// (and the pin is updated with the reason). The target is 0.85-1.15 each; the ratios outside it,
// and why, are in docs/notes/2026-12-04-published-deployments.md.
// Moved by the H100 profiles of AIConfigurator's tables (H800 takes h100's, the same die; the
// SGLang scenarios h100-sglang instead of Vidur's kernels) and by table-costed MTP verification
// attention: Day-6 prefill 1.717 -> 1.818, decode 1.560 -> 1.510; SGLang prefill 1.057 -> 0.807
// (SGLang's Triton MoE kernel), decode 1.178 -> 1.069. Moved by prefill attention's curves of
// their own (the AIConfigurator profiles refitted, 2026-12-07; H800 takes h100's): Day-6 prefill
// 1.818 -> 1.756, decode 1.379 -> 1.304 (docs/notes/2026-12-07-refitted-profiles.md); the
// others within 2%.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/app.h"

using namespace servesim;

namespace {

struct Published {
  const char* scenario;
  const char* field;  // summary.throughput.<field>
  double units;       // nodes (8 GPUs) or NPUs the compared pool has
  double published;   // tokens/s per node or NPU
  double ratio;       // simulated / published, as measured when pinned
};

double simulated(const Published& p) {
  std::ostringstream out, err;
  const std::string file = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/published/" + p.scenario + ".yaml";
  const int code = app::run_cli({"run", file, "--reproducible", "--json", "-"}, out, err);
  REQUIRE_MESSAGE(code == 0, err.str());
  const auto report = nlohmann::json::parse(out.str());
  CHECK(report["summary"]["requests"]["rejected"] == 0);
  return report["summary"]["throughput"][p.field].get<double>() / p.units;
}

void check(const Published& p) {
  const std::string name = p.scenario;  // doctest prints a const char* as a pointer
  CAPTURE(name);
  const double ratio = simulated(p) / p.published;
  MESSAGE(name << ": simulated / published = " << ratio);
  CHECK(ratio == doctest::Approx(p.ratio).epsilon(0.03));
}

}  // namespace

// DeepSeek Day 6 (open-infra-index, 202502OpenSourceWeek): "~73.7k tokens/s input (including cache
// hits) during prefilling" per H800 node; the pool is one EP32 instance on 4 nodes.
TEST_CASE("Published: DeepSeek Day 6 prefill, 73.7k input tokens/s per H800 node") {
  check({"deepseek_day6_prefill", "steady_input_tokens_per_s", 4, 73700, 1.756});
}

// DeepSeek Day 6: "~14.8k tokens/s output during decoding" per H800 node; one EP144 instance on
// 18 nodes.
TEST_CASE("Published: DeepSeek Day 6 decode, 14.8k output tokens/s per H800 node") {
  check({"deepseek_day6_decode", "steady_output_tokens_per_s", 18, 14800, 1.304});
}

// LMSYS, 2025-05-05 "large-scale EP" blog, profile table: 59,337 tokens/s per node prefilling
// 4,096-token prompts at 16,384 tokens per device with simulated perfect EPLB, EP32 on 4 nodes.
TEST_CASE("Published: SGLang prefill on H100, 59,337 input tokens/s per node") {
  check({"sglang_h100_prefill", "steady_input_tokens_per_s", 4, 59337, 0.807});
}

// LMSYS blog: "9 nodes (9x8xH100, EP72) ... 22,282 tokens/sec per node for 2K inputs", batch 256
// per device.
TEST_CASE("Published: SGLang decode on H100, 22,282 output tokens/s per node") {
  check({"sglang_h100_decode", "steady_output_tokens_per_s", 9, 22282, 1.069});
}

// arXiv 2506.12708: prefill 6,688 tokens/s per NPU (perfect EPLB, 4K prompts); 16 NPUs = 32 dies.
TEST_CASE("Published: CloudMatrix384 prefill, 6,688 input tokens/s per NPU") {
  check({"cloudmatrix384_prefill", "steady_input_tokens_per_s", 16, 6688, 0.984});
}

// arXiv 2506.12708: decode 1,943 tokens/s per NPU at batch 96 and TPOT 49.4 ms (= 96 / 49.4 ms);
// EP320 on 160 NPUs = 320 dies.
TEST_CASE("Published: CloudMatrix384 decode, 1,943 output tokens/s per NPU") {
  check({"cloudmatrix384_decode", "steady_output_tokens_per_s", 160, 1943, 1.275});
}
