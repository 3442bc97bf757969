// Memory per chip and the KV capacity it leaves, against public facts and hand derivations.
#include <doctest/doctest.h>

#include "models/chip_spec.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/parallel_plan.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::models;

namespace {
MemoryConfig config(std::int64_t tokens, std::int64_t seqs, double utilization = 0.9) {
  MemoryConfig c;
  c.memory_utilization = utilization;
  c.reserved = Bytes{1.0 * kGiB};
  c.max_batched_tokens = tokens;
  c.max_sequences = seqs;
  return c;
}
}  // namespace

TEST_CASE("Memory: Llama-3.1-70B in bf16 does not fit on one A100-80GB") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  const ChipSpec chip = *chip_preset("a100-80g");
  const MemoryPlan plan = plan_memory(m, chip, {1, 1}, config(512, 128));
  CHECK_FALSE(plan.fits());
  // 70,553,706,496 parameters x 2 bytes = 141.1 GB of weights, against 72 GiB usable.
  CHECK(plan.weights.value == approx(2.0 * 70'553'706'496));
  CHECK(plan.usable.value == approx(0.9 * 80 * kGiB));
  CHECK(plan.biggest_consumer() == "weights");
}

TEST_CASE("Memory: Llama-3.1-70B fits on 2 x H100 only with a small KV cache") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  const ChipSpec chip = *chip_preset("h100-sxm");
  const MemoryPlan plan = plan_memory(m, chip, {2, 1}, config(2048, 256));
  REQUIRE(plan.fits());
  // Weights per chip: half of 141.1 GB = 65.7 GiB of 71.7 GiB usable (81,559 MiB x 0.9), so
  // a few GiB remain for KV: at 163,840 bytes per token per chip (half the 327,680), tens of
  // thousands of tokens, far below one 128K-token context.
  CHECK(plan.weights.value == approx(70'553'706'496.0));
  CHECK(plan.kv_bytes_per_token == 163'840.0);
  CHECK(plan.kv_tokens > 10'000);
  CHECK(plan.kv_tokens < 50'000);
  CHECK(plan.kv_tokens < m.max_context);
  // On 4 chips: 71.7 - 32.9 (weights) - 0.1 (activations) - 1.0 = 37.7 GiB at 81,920 bytes per
  // token = 494,000 tokens, more than three full contexts.
  CHECK(plan_memory(m, chip, {4, 1}, config(2048, 256)).kv_tokens > 3 * m.max_context);
}

TEST_CASE("Memory: pipeline stages hold their own layers; the embedding and LM head sit at the ends") {
  const ModelSpec m = *model_preset("llama-2-70b");
  const ParallelPlan p{2, 2};
  // Stage 0: 40 layers / 2 + embedding / 2; stage 1: 40 layers / 2 + LM head / 2 + final norm.
  const double layer = static_cast<double>(m.layer_params()) / 2 * 40;
  const double embed = static_cast<double>(m.embedding_params()) / 2;
  CHECK(stage_weight_bytes(m, p, 0).value == approx(2 * (layer + embed)));
  CHECK(stage_weight_bytes(m, p, 1).value == approx(2 * (layer + embed + m.hidden)));
}

TEST_CASE("Memory: DeepSeek-V3 in fp8 does not fit on 8 x H100-80G but does on 8 x H200") {
  const ModelSpec m = *model_preset("deepseek-v3");
  ParallelPlan p;
  p.tp = 8;
  p.moe_tp = 8;  // experts split over the 8 TP ranks (vLLM's default without expert parallelism)
  // Per chip: each MoE layer holds 256 experts x 44,040,192 / 8 fp8 elements (1.41e9), its
  // attention (q_b, kv_b, o split over 8, the down-projections replicated: 36.7e6) and shared
  // expert (5.5e6); 58 MoE layers + 3 dense ones + the bf16 embedding and LM head shards
  // (2 x 129,280 x 7168 / 8 x 2 bytes = 0.46 GB) = 85.1 GB = 79.3 GiB, while an H100 offers
  // 81,559 MiB x 0.9 = 71.7 GiB. It cannot even hold the weights.
  const MemoryPlan h100 = plan_memory(m, *chip_preset("h100-sxm"), p, config(8192, 256));
  CHECK_FALSE(h100.fits());
  CHECK(h100.weights.value / kGiB == approx(79.3).epsilon(0.005));
  CHECK(h100.biggest_consumer() == "weights");
  // H200: 143,771 MiB x 0.9 = 126.4 GiB usable; after 79.3 GiB of weights, the activations at 8,192
  // tokens and 1 GiB reserved, ~44 GiB of KV at 70,272 bytes per token (MLA's latent is replicated
  // on every TP rank): ~670,000 tokens.
  const MemoryPlan h200 = plan_memory(m, *chip_preset("h200-sxm"), p, config(8192, 256));
  REQUIRE(h200.fits());
  CHECK(h200.kv_bytes_per_token == 70'272.0);
  CHECK(h200.kv_tokens > 600'000);
  CHECK(h200.kv_tokens < 720'000);
  // With attention DP x EP 8 each chip holds the whole attention but 1/8 of the experts.
  ParallelPlan dp;
  dp.dp = 8;
  dp.ep = 8;
  const MemoryPlan dep = plan_memory(m, *chip_preset("h200-sxm"), dp, config(8192, 256));
  REQUIRE(dep.fits());
  CHECK(dep.weights.value > h200.weights.value);
  // Each dp group caches its own requests: 8 groups of ~410,000 tokens.
  CHECK(dep.kv_tokens == 8 * dep.kv_tokens_per_group);
}

TEST_CASE("Memory: a 1M-token request needs context parallelism on Llama-3.1-8B / H100") {
  ModelSpec m = *model_preset("llama-3.1-8b");
  m.max_context = 1 << 20;
  const ChipSpec h100 = *chip_preset("h100-sxm");
  // One chip: 71.7 GiB usable - 15.0 GiB of weights - activations - 1 GiB = ~55 GiB of KV at
  // 131,072 bytes per token (32 layers x 8 heads x 128 x 2 x 2): ~450,000 tokens < 1,048,576.
  const MemoryPlan one = plan_memory(m, h100, {1, 1}, config(8192, 64));
  CHECK(one.kv_tokens_per_group < (1 << 20));
  // CP 8: every chip holds the weights but 1/8 of each token's KV (16,384 bytes): ~3.6M tokens.
  ParallelPlan cp;
  cp.cp = 8;
  const MemoryPlan eight = plan_memory(m, h100, cp, config(8192, 64));
  CHECK(eight.kv_bytes_per_token == 16'384.0);
  CHECK(eight.kv_tokens_per_group > (1 << 20));
  CHECK(eight.weights.value == approx(one.weights.value));
}

TEST_CASE("Memory: sliding-window layers reserve window + one block per sequence (gpt-oss)") {
  const ModelSpec m = *model_preset("gpt-oss-120b");
  const MemoryPlan plan = plan_memory(m, *chip_preset("h200-sxm"), {1, 1}, config(8192, 256));
  REQUIRE(plan.fits());
  // 256 sequences x (128 + 16) tokens x 2,048 bytes (8 KV heads x 64 x 2 x 2) x 18 window layers.
  CHECK(plan.window_kv.value == 256.0 * 144 * 2048 * 18);
  // Only the 18 full layers cache every token: 18 x 2,048 = 36,864 bytes per token.
  CHECK(plan.kv_bytes_per_token == 36'864.0);
  // The MXFP4 experts take 0.53 bytes per element: 36 x 128 x 3 x 2880^2 x 0.53125 = 60.9 GB.
  CHECK(plan.weights.value / 1e9 > 60.0);
  CHECK(plan.weights.value / 1e9 < 66.0);
}

TEST_CASE("Memory: MTP layers and the vision encoder count when present") {
  const ModelSpec ds = *model_preset("deepseek-v3");
  ParallelPlan p;
  p.tp = 8;
  p.moe_tp = 8;
  MemoryConfig c = config(2048, 64);
  const Bytes without = stage_weights(ds, p, 0, c).mtp;
  c.load_mtp = true;
  const Bytes with = stage_weights(ds, p, 0, c).mtp;
  CHECK(without.value == 0.0);
  // One MoE layer's share (1.455e9 bytes: 256 x 44,040,192 / 8 expert elements + 36.7e6 of
  // attention + 5.5e6 shared, x 1.000244, + the bf16 router) + eh_proj 2 x 7168^2 (0.103e9)
  // = 1.558e9 bytes = 1.45 GiB.
  CHECK(with.value / kGiB == approx(1.45).epsilon(0.01));
  const ModelSpec vl = *model_preset("qwen2.5-vl-7b");
  // 676,550,144 vision parameters in bf16 on the first stage.
  CHECK(stage_weights(vl, {1, 1}, 0, c).vision.value == 2.0 * 676'550'144);
}

TEST_CASE("Memory: dense MLPs in a format of their own hold its bytes (Gemma-4-31B-IT-NVFP4)") {
  ModelSpec g = *model_preset("gemma-4-31b");
  ParallelPlan p;
  p.tp = 2;
  const MemoryConfig c = config(2048, 64);
  const double bf16 = stage_weights(g, p, 0, c).layers.value;
  g.formats.mlp = Format::kNvfp4;
  const double mixed = stage_weights(g, p, 0, c).layers.value;
  // 60 MLPs of 3 x 5376 x 21504 elements over 2 chips go from 2 bytes to 0.5625 (fp4 + an e4m3
  // scale per 16); attention stays bf16.
  CHECK(bf16 - mixed == approx(60.0 * 3 * 5376 * 21504 / 2 * (2.0 - 0.5625)));
}

TEST_CASE("Memory: Gated DeltaNet layers reserve a state per sequence and cache no KV (Qwen3.5-397B-A17B)") {
  const ModelSpec m = *model_preset("qwen3.5-397b-a17b");
  ParallelPlan p;
  p.tp = 8;
  p.ep = 8;
  p.moe_tp = 1;
  // Per chip at TP 8: 8 value heads x 128 x 128 x 4 bytes = 524,288 of state, and the convolution's
  // 3 inputs of (2 x 2 key heads x 128 + 8 x 128) = 1,536 channels x 2 bytes = 9,216: 533,504.
  CHECK(linear_state_bytes_per_layer_chip(m, p) == 533'504.0);
  const MemoryPlan plan = plan_memory(m, *chip_preset("h200-sxm"), p, config(8192, 128));
  REQUIRE(plan.fits());
  // 128 sequences x 45 linear layers x 533,504 bytes, reserved up front.
  CHECK(plan.linear_state.value == 128.0 * 45 * 533'504);
  // KV only in the 15 full layers; the 2 KV heads are replicated over 8 ranks: 2 x 256 x 2 bytes
  // x 15 = 15,360 bytes per token per chip.
  CHECK(plan.kv_bytes_per_token == 15'360.0);
  // What the state takes comes out of the KV cache: 64 sequences fewer free their states and
  // their fp32 logits over the chip's vocabulary shard (4 x 248,320 / 8 bytes each).
  const MemoryPlan half = plan_memory(m, *chip_preset("h200-sxm"), p, config(8192, 64));
  CHECK(half.kv.value - plan.kv.value == approx(64.0 * 45 * 533'504 + 64.0 * 4 * 248'320 / 8));
}
