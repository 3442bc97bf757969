// Models, chips, operators, memory and the roofline, checked against figures derived by hand.
#include <doctest/doctest.h>

#include "models/memory.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/parallel_plan.h"
#include "models/roofline.h"

using namespace servesim;
using namespace servesim::models;

TEST_CASE("Models: Llama-3.1-8B has 8.03 billion parameters") {
  const ModelSpec m = *model_preset("llama-3.1-8b");
  // Per layer: Q 4096^2 + K, V 2 x 4096 x 1024 + O 4096^2 = 41,943,040; MLP 3 x 4096 x 14336 =
  // 176,160,768; norms 2 x 4096 = 8,192; total 218,112,000.
  CHECK(m.layer_params() == 218'112'000);
  // 32 layers + embedding and untied LM head 2 x 128,256 x 4096 + final norm 4096.
  CHECK(m.total_params() == 32LL * 218'112'000 + 2LL * 128'256 * 4096 + 4096);
  CHECK(m.total_params() == 8'030'261'248);
}

TEST_CASE("Models: Llama-3.1-70B has 70.55 billion parameters and 320 KiB of KV per token") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  // Per layer: attention 2 x 8192^2 + 2 x 8192 x 1024 = 150,994,944; MLP 3 x 8192 x 28672 =
  // 704,643,072; norms 16,384; total 855,654,400. 80 layers + 2 x 128,256 x 8192 + 8192.
  CHECK(m.layer_params() == 855'654'400);
  CHECK(m.total_params() == 70'553'706'496);
  // K and V: 2 x 8 KV heads x 128 x 2 bytes x 80 layers = 327,680 bytes.
  CHECK(m.kv_bytes_per_token() == 327'680);
}

TEST_CASE("Models: presets are found by name and unknown names are not") {
  CHECK(model_preset("llama-2-70b")->max_context == 4096);
  CHECK_FALSE(model_preset("llama-3-8b").has_value());
  CHECK(model_preset_names().size() == 3);
  CHECK(validate_model(*model_preset("llama-3.1-70b")).empty());
  ModelSpec bad = *model_preset("llama-3.1-8b");
  bad.kv_heads = 5;
  CHECK(validate_model(bad).size() == 1);
}

TEST_CASE("Parallel plans: TP must divide the heads, PP splits layers with the remainder first") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  CHECK(validate_plan(m, {8, 1}).empty());
  const auto problems = validate_plan(m, {3, 1});
  REQUIRE(problems.size() >= 1);
  CHECK(problems[0] == "tensor parallelism 3 does not divide the 64 attention heads of "
                       "llama-3.1-70b (choose one of 1, 2, 4, 8, 16, 32, 64)");
  // 80 layers over 3 stages: 27, 27, 26.
  const ParallelPlan p{1, 3};
  CHECK(p.stage_layers(m, 0) == 27);
  CHECK(p.stage_layers(m, 1) == 27);
  CHECK(p.stage_layers(m, 2) == 26);
  // 8 KV heads over TP 16: each chip holds one (replicated), as vLLM does.
  CHECK(ParallelPlan{16, 1}.kv_heads_per_chip(m) == 1);
  CHECK(ParallelPlan{4, 1}.kv_heads_per_chip(m) == 2);
}

TEST_CASE("Operators: GEMM FLOPs and bytes of one Llama-3.1-8B layer") {
  const ModelSpec m = *model_preset("llama-3.1-8b");
  const auto ops = linear_layer_ops(m, {1, 1}, 1);
  // QKV: 2 x 1 x 4096 x (32 + 2 x 8) x 128 = 50,331,648 FLOPs; bytes 2 x 4096 x 6144 weights +
  // 2 x (4096 + 6144) activations = 50,331,648 + 20,480.
  CHECK(ops[0].flops == 50'331'648.0);
  CHECK(ops[0].bytes == 50'331'648.0 + 20'480.0);
  // MLP with TP 2: gate|up 2 x 4096 x 14336 and down 2 x 7168 x 4096 per token, 2 FLOPs per MAC.
  const auto tp2 = linear_layer_ops(m, {2, 1}, 10);
  CHECK(tp2[2].flops == 2.0 * 10 * 4096 * 14336 + 2.0 * 10 * 7168 * 4096);
  CHECK(tp2[2].kernels == 2);
}

TEST_CASE("Operators: decode attention reads each sequence's whole KV once") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  BatchShape b;
  b.decode_seqs = 4;
  b.decode_kv_tokens = 4 * 1000;
  const Operator op = attention_decode_op(m, {2, 1}, b);
  // Per layer per chip with TP 2: K and V of 4 KV heads x 128 x 2 bytes = 2,048 bytes per token;
  // 4,000 tokens -> 8,192,000 bytes, plus q and o of 32 heads x 128 x 2 bytes x 4 sequences.
  CHECK(op.bytes == 8'192'000.0 + 2.0 * 2 * 4 * 32 * 128);
  // 4 x 128 x 32 FLOPs per context token.
  CHECK(op.flops == 4.0 * 128 * 32 * 4000);
}

TEST_CASE("Roofline: time is the kernel overhead plus the slower of compute and memory") {
  ChipSpec chip = *chip_preset("a100-80g");
  const Roofline roofline(chip);
  // A large GEMM: 2 x 4096 x 8192 x 8192 FLOPs at 312 TFLOP/s x 0.72, plus 7 us.
  Operator big{OpKind::kGemmMlp, 2.0 * 4096 * 8192 * 8192, 2.0 * 8192 * 8192, 1};
  CHECK(roofline.seconds(big) == doctest::Approx(7e-6 + big.flops / (312e12 * 0.72)));
  // A weight-streaming GEMM: 128 MiB of weights at 2,039 GB/s x 0.73, plus 7 us.
  Operator thin{OpKind::kGemmQkv, 2.0 * 8192 * 8192, 2.0 * 8192 * 8192, 1};
  CHECK(roofline.seconds(thin) == doctest::Approx(7e-6 + thin.bytes / (2039e9 * 0.73)));
  // Communication kinds are not chip operators.
  CHECK(roofline.seconds(Operator{OpKind::kTpAllReduce, 1e12, 1e12, 1}) == 0.0);
}

TEST_CASE("Memory: Llama-3.1-70B in bf16 does not fit on one A100-80GB") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  const ChipSpec chip = *chip_preset("a100-80g");
  MemoryConfig c{0.9, Bytes{1.0 * kGiB}, 512, 128};
  const MemoryPlan plan = plan_memory(m, chip, {1, 1}, c);
  CHECK_FALSE(plan.fits());
  // 70,553,706,496 parameters x 2 bytes = 141.1 GB of weights, against 72 GiB usable.
  CHECK(plan.weights.value == doctest::Approx(2.0 * 70'553'706'496));
  CHECK(plan.usable.value == doctest::Approx(0.9 * 80 * kGiB));
  CHECK(plan.biggest_consumer() == "weights");
}

TEST_CASE("Memory: Llama-3.1-70B fits on 2 x H100 only with a small KV cache") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  const ChipSpec chip = *chip_preset("h100-sxm");
  MemoryConfig c{0.9, Bytes{1.0 * kGiB}, 2048, 256};
  const MemoryPlan plan = plan_memory(m, chip, {2, 1}, c);
  REQUIRE(plan.fits());
  // Weights per chip: half of 141.1 GB = 65.7 GiB of 71.7 GiB usable (81,559 MiB x 0.9), so
  // a few GiB remain for KV: at 163,840 bytes per token per chip (half the 327,680), tens of
  // thousands of tokens, far below one 128K-token context.
  CHECK(plan.weights.value == doctest::Approx(70'553'706'496.0));
  CHECK(plan.kv_bytes_per_token == 163'840.0);
  CHECK(plan.kv_tokens > 10'000);
  CHECK(plan.kv_tokens < 50'000);
  CHECK(plan.kv_tokens < m.max_context);
}

TEST_CASE("Memory: pipeline stages hold their own layers; the embedding and LM head sit at the ends") {
  const ModelSpec m = *model_preset("llama-2-70b");
  const ParallelPlan p{2, 2};
  // Stage 0: 40 layers / 2 + embedding / 2; stage 1: 40 layers / 2 + LM head / 2 + final norm.
  const double layer = static_cast<double>(m.layer_params()) / 2 * 40;
  const double embed = static_cast<double>(m.embedding_params()) / 2;
  CHECK(stage_weight_bytes(m, p, 0).value == doctest::Approx(2 * (layer + embed)));
  CHECK(stage_weight_bytes(m, p, 1).value == doctest::Approx(2 * (layer + embed + m.hidden)));
}
