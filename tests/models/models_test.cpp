// Architectures, presets, formats, chips and parallel plans, checked against figures derived by
// hand (and against the parameter totals the model cards and checkpoints publish).
#include <doctest/doctest.h>

#include "models/chip_spec.h"
#include "models/formats.h"
#include "models/model_spec.h"
#include "models/parallel_plan.h"
#include "tests/approx.h"

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
  CHECK(m.active_params_per_token() == m.total_params());  // dense
  // In bf16 the weights are 2 bytes each: 141.1 GB.
  CHECK(m.weight_bytes_per_element() == 2.0);
}

TEST_CASE("Models: DeepSeek-V3 has 671.0e9 parameters, 37.6e9 active, and 70,272 bytes of latent KV") {
  const ModelSpec m = *model_preset("deepseek-v3");
  // Attention per layer (MLA, 128 heads, h = 7168):
  //   q_a 7168 x 1536 = 11,010,048 + its norm 1536 + q_b 1536 x 128 x (128 + 64) = 37,748,736
  //   kv_a 7168 x (512 + 64) = 4,128,768 + its norm 512 + kv_b 512 x 128 x (128 + 128) = 16,777,216
  //   o 128 x 128 x 7168 = 117,440,512; two layer norms 14,336            -> 187,121,664
  CHECK(m.attention_params() == 187'121'664);
  // One expert 3 x 7168 x 2048 = 44,040,192; the router 7168 x 256 + 256 bias = 1,835,264.
  CHECK(m.expert_params() == 44'040'192);
  CHECK(m.router_params() == 1'835'264);
  // Dense layers (0-2): 187,121,664 + 3 x 7168 x 18432 = 583,483,392. MoE layers (3-60):
  // 187,121,664 + 256 x 44,040,192 + 44,040,192 (shared) + 1,835,264 = 11,507,286,272.
  CHECK(m.layer_params(0) == 583'483'392);
  CHECK(m.layer_params(3) == 11'507'286'272);
  // 3 x 583,483,392 + 58 x 11,507,286,272 + 2 x 129,280 x 7168 (embedding, LM head) + 7168
  // = 671,026,419,200: the "671B" of the DeepSeek-V3 report.
  CHECK(m.total_params() == 671'026'419'200);
  // Active: 8 of 256 experts in 58 layers: 671.0e9 - 58 x 248 x 44,040,192 = 37.55e9 ("37B").
  CHECK(m.active_params_per_token() == 671'026'419'200 - 58LL * 248 * 44'040'192);
  // MLA caches the latent and the shared rotary key: (512 + 64) x 2 bytes x 61 layers.
  CHECK(m.kv_bytes_per_token() == 70'272);
  ModelSpec fp8 = m;
  fp8.formats.kv_cache = Format::kFp8;
  CHECK(fp8.kv_bytes_per_token() == 35'136);  // (512 + 64) x 1 byte x 61
  // The checkpoint's fp8 weights carry one fp32 scale per 128 x 128 block.
  CHECK(m.weight_bytes_per_element() == approx(1.0 + 4.0 / 16384));
  // The MTP layer is a MoE layer + eh_proj 2 x 7168^2 + 3 norms = 11,610,068,224.
  CHECK(m.mtp_layer_params() == 11'507'286'272 + 2LL * 7168 * 7168 + 3 * 7168);
}

TEST_CASE("Models: GLM-5 has 743.9e9 parameters (753.9e9 with MTP) and 1,284 bytes of KV per layer") {
  const ModelSpec m = *model_preset("glm-5");
  // Attention per layer (MLA, 64 heads, h = 6144):
  //   q_a 6144 x 2048 = 12,582,912 + 2048 + q_b 2048 x 64 x (192 + 64) = 33,554,432
  //   kv_a 6144 x 576 = 3,538,944 + 512 + kv_b 512 x 64 x (192 + 256) = 14,680,064
  //   o 64 x 256 x 6144 = 100,663,296; layer norms 12,288
  //   DSA indexer: wq_b 2048 x 32 x 128 = 8,388,608, wk 6144 x 128 = 786,432, its LayerNorm 256,
  //   weights_proj 6144 x 32 = 196,608                                     -> 174,406,400
  CHECK(m.attention_params() == 174'406'400);
  // 3 dense layers (+ 3 x 6144 x 12288) and 75 MoE layers (256 experts of 3 x 6144 x 2048 =
  // 37,748,736, one shared, router 6144 x 256 + 256), embedding and LM head 2 x 154,880 x 6144.
  CHECK(m.total_params() == 743'911'218'432);
  // With the MTP layer: 753,864,139,008, the parameter total of the released checkpoint's tensors.
  CHECK(m.total_params() + m.mtp_layers * m.mtp_layer_params() == 753'864'139'008);
  // KV per token and layer: latent (512 + 64) x 2 bytes = 1,152, plus the DSA indexer key
  // 128 fp8 values + one fp32 scale = 132; x 78 layers = 100,152 bytes.
  CHECK(m.kv_bytes_per_token_layer() == 1152.0);
  CHECK(m.index_bytes_per_token_layer() == 132.0);
  CHECK(m.kv_bytes_per_token() == 100'152);
  CHECK(m.dsa.top_k == 2048);
}

TEST_CASE("Models: GLM-5.2 holds and runs the DSA indexer on 21 of its 78 layers") {
  const ModelSpec m = *model_preset("glm-5.2");
  // indexer_types: full on layers 0-2 and every fourth from 6 (6, 10, ..., 74: 18 layers).
  const LayerCounts n = m.count_layers(0, m.layers);
  CHECK(n.indexer == 21);
  CHECK(m.is_indexer_layer(2));
  CHECK_FALSE(m.is_indexer_layer(3));
  CHECK(m.is_indexer_layer(6));
  CHECK_FALSE(m.is_indexer_layer(77));
  // One indexer: wq_b 2048 x 32 x 128 + wk 6144 x 128 + LayerNorm 256 + weights_proj 6144 x 32.
  CHECK(m.indexer_params() == 9'371'904);
  // GLM-5's total less the 57 shared layers' indexers: 743,911,218,432 - 57 x 9,371,904.
  CHECK(m.total_params() == 743'911'218'432 - 57LL * 9'371'904);
  // The MTP layer runs its own indexer (the last layer, 77, shares one): GLM-5's MTP layer.
  CHECK(m.mtp_layer_params() == model_preset("glm-5")->mtp_layer_params());
  // KV per token: the latent on 78 layers (1,152 bytes each) and index keys on 21 (132 each).
  CHECK(m.kv_bytes_per_token() == 78 * 1152 + 21 * 132);
  CHECK(validate_model(m).empty());
  ModelSpec bad = m;
  bad.dsa.pattern = "SF";
  CHECK(validate_model(bad).size() == 1);  // a shared layer needs a full one before it
}

TEST_CASE("Models: Kimi-K3, Kimi Delta Attention beside gated MLA, a latent MoE") {
  const ModelSpec m = *model_preset("kimi-k3");
  // kda_layers: three of every four from layer 1 (counted from 1); full_attn_layers 4, 8, ..., 92, 93.
  const LayerCounts n = m.count_layers(0, m.layers);
  CHECK(n.linear == 69);
  CHECK(n.full() == 24);
  CHECK_FALSE(m.is_linear_layer(3));
  CHECK(m.is_linear_layer(90));
  CHECK_FALSE(m.is_linear_layer(92));
  CHECK(n.dense() == 1);
  // MLA: norms 2 x 7168, q_a 7168 x 1536 (+ norm), q_b 1536 x 96 x 192, kv_a 7168 x 576 (+ norm
  // 512), kv_b 512 x 96 x 256, o 96 x 128 x 7168 and the output gate 7168 x 96 x 128.
  CHECK(m.attention_params() ==
        14'336 + 11'010'048 + 1'536 + 28'311'552 + 4'128'768 + 512 + 12'582'912 + 88'080'384 + 88'080'384);
  // KDA: norms 2 x 7168; q, k, v and the output gate 7168 x 4 x 12,288; beta and the forget gate's
  // first stage 7168 x (96 + 128); its second stage 128 x 12,288; the convolution 36,864 x 4;
  // A_log 96, dt_bias 12,288, the gated norm 128; o 12,288 x 7168.
  CHECK(m.linear_attention_params() ==
        14'336 + 7168LL * 49'152 + 7168LL * 224 + 1'572'864 + 147'456 + 96 + 12'288 + 128 + 88'080'384);
  // KV per token: the MLA latent (512 + 64) x 2 bytes on 24 layers; a KDA layer holds 96 fp32
  // states of 128 x 128 and the convolution's last 3 inputs of 36,864 channels (bf16).
  CHECK(m.kv_bytes_per_token() == 24 * 1152);
  CHECK(m.linear_state_bytes_per_layer() == 96.0 * 128 * 128 * 4 + 3.0 * 36'864 * 2);
  // AIConfigurator's kimi_k3.py: "2.8T".
  CHECK(m.total_params() == 2'779'481'465'440);
  CHECK(validate_model(m).empty());
}

TEST_CASE("Models: MiniMax-M3's block sparse attention on 57 of 60 layers") {
  const ModelSpec m = *model_preset("minimax-m3");
  REQUIRE(m.dsa.block_scored());
  // sparse_attention_freq 0, 0, 0, 1, ...: the first three layers attend densely, no indexer.
  const LayerCounts n = m.count_layers(0, m.layers);
  CHECK(n.dense_attention == 3);
  CHECK(n.indexer == 57);
  CHECK(m.is_dense_attention_layer(2));
  CHECK_FALSE(m.is_dense_attention_layer(3));
  CHECK_FALSE(m.is_indexer_layer(0));
  CHECK(m.is_indexer_layer(59));
  // Index projections q 6144 x 4 x 128 and k 6144 x 128.
  CHECK(m.indexer_params() == 3'932'160);
  // Attention: norms 2 x 6144, q and o 2 x 6144 x 64 x 128, k and v 2 x 6144 x 4 x 128, QK-norm
  // 2 x 128, the index projections.
  CHECK(m.attention_params() == 12'288 + 100'663'296 + 6'291'456 + 256 + 3'932'160);
  // KV per token: K and V of 4 heads x 128 in bf16 on 60 layers (2,048 bytes each) and the index
  // key, 128 bf16 values (256 bytes), on the 57 sparse layers.
  CHECK(m.index_bytes_per_token_layer() == 256.0);
  CHECK(m.kv_bytes_per_token() == 60 * 2048 + 57 * 256);
  // The dense layers hold no indexer: a layer 0 and a layer 3 of the same MLP would differ by it.
  CHECK(m.layer_params(3) - m.layer_params(59) == 0);
  // MiniMax: 428B total with the vision tower (its 32 CLIP layers of 1280, about 0.6e9).
  CHECK(m.total_params() == 426'174'558'336);
  CHECK(validate_model(m).empty());
  ModelSpec bad = m;
  bad.dsa.pattern = "DS";
  CHECK(validate_model(bad).size() == 1);  // the first sparse layer must run the indexer
  bad = m;
  bad.attention = AttentionKind::kMla;
  bad.mla = {0, 512, 128, 64, 128};
  CHECK(validate_model(bad).size() == 1);  // block scoring is modelled on GQA only
}

TEST_CASE("Models: DeepSeek-V4's compressed attention, grouped output and hyper-connections") {
  const ModelSpec m = *model_preset("deepseek-v4-flash");
  REQUIRE(m.compress.enabled());
  // compress_ratios 0, 0, then 4 and 128 alternating: CSA (indexer) on layers 2, 4, ..., 42; the
  // HCA layers and the two window-only ones (taken as HCA) attend densely.
  const LayerCounts n = m.count_layers(0, m.layers);
  CHECK(n.indexer == 21);
  CHECK(n.dense_attention == 22);
  CHECK(m.is_dense_attention_layer(0));
  CHECK(m.is_indexer_layer(42));
  // A CSA layer over an HCA layer: the compressor of overlapping windows (wkv and wgate 4096 ->
  // 2 x 512 against 4096 -> 512; ape 4 x 2 x 512 against 128 x 512), the indexer's wq_b 1024 -> 64
  // x 128, weights_proj 4096 -> 64, its compressor 4096 -> 2 x 128 twice, ape 4 x 2 x 128, norm 128.
  CHECK(m.indexer_params() ==
        2LL * 4096 * 512 + (8 - 128) * 512 + 1024LL * 64 * 128 + 4096 * 64 + 4LL * 4096 * 128 + 8 * 128 + 128);
  // A CSA layer: norms 2 x 4096; wq_a 4096 x 1024 and its norm; wq_b 1024 x 64 x 512; wkv 4096 x
  // 512 and its norm; wo_a 64 x 512 x 1024; wo_b 8 x 1024 x 4096; an HCA compressor (2 x 4096 x
  // 512, ape 128 x 512, norm 512); the indexer part; a sink per head.
  CHECK(m.attention_params() == 8192 + 4'194'304 + 1024 + 33'554'432 + 2'097'152 + 512 + 33'554'432 + 33'554'432 +
                                    4'194'304 + 65'536 + 512 + m.indexer_params() + 64);
  // mHC: two hyper-connections a layer, each 4 x 4096 -> (4 + 2) x 4 mixing weights, 24 biases and
  // 3 scales.
  CHECK(m.mhc_params() == 2 * (24 * 4 * 4096 + 24 + 3));
  // KV per token: a CSA layer an fp8 entry of 512 per 4 tokens and an fp4 index key of 128 per 4
  // (128 + 16 bytes); an HCA layer 512 bytes per 128 tokens.
  CHECK(m.kv_bytes_per_token() == 21 * (128 + 16) + 22 * 4);
  // What a sequence holds beside its entries: 128 window tokens of 512 bytes on 43 layers, the
  // CSA compressors' fp32 state (kv and score, 4 x 2 x 512, and the index keys' 4 x 2 x 128) and
  // the HCA ones' (kv and score, 128 x 512).
  CHECK(m.compressed_state_bytes(n) ==
        43.0 * 128 * 512 + 21 * 4.0 * (2 * 4 * 2 * 512 + 2 * 4 * 2 * 128) + 22 * 4.0 * (2 * 128 * 512));
  CHECK(m.kv_transfer_bytes(1000) ==
        1000.0 * static_cast<double>(m.kv_bytes_per_token()) + m.compressed_state_bytes(n));
  // DeepSeek: 284B total. The sum counts the two window-only layers with an HCA layer's compressor
  // (2 x 4096 x 512 + 128 x 512 + 512 = 4,260,352 parameters each, not in the checkpoint).
  CHECK(m.total_params() == 284'340'761'943);
  CHECK(validate_model(m).empty());
  // DeepSeek-V4-Pro: ratios 128, 128, then 4 and 128 alternating; 30 CSA layers, 31 HCA. DeepSeek:
  // 1.6T total, and a 1M-token sequence's KV 9.62 GiB in bf16 (entries of 1,024 bytes, bf16 index
  // keys of 256: 30 x (256 + 64) + 31 x 8 = 9,848 bytes per token, times 2^20 = 9.62 GiB); the
  // indexer's keys here are fp4 (64 bytes).
  ModelSpec pro = *model_preset("deepseek-v4-pro");
  CHECK(pro.count_layers(0, pro.layers).indexer == 30);
  CHECK(pro.total_params() == 1'572'997'202'915);
  pro.formats.kv_cache = Format::kBf16;
  CHECK(pro.kv_bytes_per_token() == 30 * (256 + 16) + 31 * 8);
  ModelSpec bad = m;
  bad.kv_heads = 2;
  CHECK(validate_model(bad).size() == 1);  // MQA only
  bad = m;
  bad.compress.o_groups = 7;
  CHECK(validate_model(bad).size() == 1);  // groups must divide the heads
}

TEST_CASE("Models: sliding-window layers of their own shape (Gemma-4, MiMo-V2-Flash)") {
  const ModelSpec g = *model_preset("gemma-4-26b-a4b");
  REQUIRE(g.window_shape_differs());
  const ModelSpec w = g.window_layer_spec();
  CHECK(w.kv_heads == 8);
  CHECK(w.head_dim == 256);
  CHECK(w.value_dim() == 256);
  CHECK_FALSE(w.k_eq_v);
  // Full layers: q 2816 x 16 x 512, k 2816 x 2 x 512 (no v_proj: V is K's projection), o 16 x 512
  // x 2816, QK-norm 2 x 512, norms 2 x 2816 = 49,027,584. Window layers: q 2816 x 16 x 256, k and
  // v 2 x 2816 x 8 x 256, o 16 x 256 x 2816, QK-norm 2 x 256, norms = 34,609,152.
  CHECK(g.attention_params() == 49'027'584);
  CHECK(w.attention_params() == 34'609'152);
  // KV per token: 5 full layers of K and V, 2 heads x 512 x 2 bytes each, and 25 window layers of
  // 8 heads x 256 x 2 x 2 bytes (AIConfigurator's gemma4.py: both tensors cached).
  CHECK(g.kv_bytes_per_token() == 5 * 2 * 2 * 512 * 2 + 25 * 8 * 2 * 256 * 2);
  // Google: 25.2B total, 3.8B active; 30.7B for the dense 31B.
  CHECK(g.total_params() == 25'232'631'040);
  CHECK(g.active_params_per_token() == 3'822'019'840);
  CHECK(model_preset("gemma-4-31b")->total_params() == 30'696'700'160);
  // MiMo-V2-Flash: queries and keys of 192, values of 128 on both kinds of layer; 4 KV heads on
  // the 9 full layers, 8 on the 39 sliding ones. KV per token: 9 x 4 x (192 + 128) x 2 bytes +
  // 39 x 8 x (192 + 128) x 2 bytes. Xiaomi: 309B total, 15B active.
  const ModelSpec mimo = *model_preset("mimo-v2-flash");
  CHECK(mimo.count_layers(0, mimo.layers).window == 39);
  CHECK(mimo.window_layer_spec().value_dim() == 128);
  CHECK(mimo.kv_bytes_per_token() == 9 * 4 * 320 * 2 + 39 * 8 * 320 * 2);
  CHECK(mimo.total_params() == 308'778'778'368);
  CHECK(mimo.active_params_per_token() == 15'445'933'824);
}

TEST_CASE("Models: the other presets match their published parameter totals") {
  // Qwen3-32B: 64 x (94,371,840 attention + 256 QK-norm + 393,216,000 MLP + 10,240 norms)
  // + 2 x 151,936 x 5120 + 5120 = 32.76e9 ("32.8B").
  CHECK(model_preset("qwen3-32b")->total_params() == 32'762'123'264);
  // Qwen3-235B-A22B: 94 layers of 128 experts x 3 x 4096 x 1536 (no shared, no router bias).
  CHECK(model_preset("qwen3-235b-a22b")->total_params() == 235'093'634'560);
  // Kimi-K2: DeepSeek-V3 layout with 64 heads, 384 experts, 1 dense layer: 1.026e12 ("1T").
  CHECK(model_preset("kimi-k2")->total_params() == 1'026'408'232'448);
  // GLM-4.5-Air: 106.9e9 ("106B"); GLM-4.5: 352.8e9 without its MTP layer ("355B").
  CHECK(model_preset("glm-4.5-air")->total_params() == 106'852'251'264);
  CHECK(model_preset("glm-4.5")->total_params() == 352'797'829'024);
  // gpt-oss-120b: 36 x (attention 2880 x 4096 + 2 x 2880 x 512 + 4096 x 2880 with biases and 64
  // sinks; router 2880 x 128 + 128; 128 experts of 3 x 2880^2 + biases) + 2 x 201,088 x 2880
  // = 116.83e9 ("117B").
  const ModelSpec oss = *model_preset("gpt-oss-120b");
  CHECK(oss.total_params() == 116'829'156'672);
  CHECK(oss.formats.experts == Format::kMxfp4);
  CHECK(oss.formats.weights == Format::kBf16);
  // Qwen2.5-VL-7B: a 7.62e9 language model and a 676.6e6 vision encoder ("8.3B").
  const ModelSpec vl = *model_preset("qwen2.5-vl-7b");
  CHECK(vl.total_params() == 7'615'616'512);
  REQUIRE(vl.vision.has_value());
  CHECK(vl.vision->params() == 676'550'144);
  // The smaller Qwen3 (QK-norm, head_dim 128; the two smallest tie the LM head) against their
  // model cards: 0.6B (0.44B without the 151,936 x 1024 embedding), 1.7B (1.4B), 8.2B.
  CHECK(model_preset("qwen3-0.6b")->total_params() == 596'049'920);
  CHECK(model_preset("qwen3-0.6b")->total_params() - 151'936LL * 1024 == 440'467'456);
  CHECK(model_preset("qwen3-1.7b")->total_params() == 1'720'574'976);
  CHECK(model_preset("qwen3-8b")->total_params() == 8'190'735'360);
  // Qwen3-4B: 36 x (26,219,776 attention with QK-norm + 3 x 2560 x 9728 + 5,120 norms) +
  // 151,936 x 2560 (tied) + 2560 = 4.02e9 (model card: 4.0B, 3.6B without the embedding).
  CHECK(model_preset("qwen3-4b")->total_params() == 4'022'468'096);
  CHECK(model_preset("qwen3-4b")->total_params() - 151'936LL * 2560 == 3'633'511'936);
  // MiMo-7B-Base: 36 x (41,951,232 attention + 6,144 q/k/v biases + 3 x 4096 x 11008 + 8,192
  // norms) + 2 x 151,680 x 4096 + 4096 = 7.62e9; with its MTP layer 7.83e9 (the checkpoint's 7.8B).
  const ModelSpec mimo = *model_preset("mimo-7b");
  CHECK(mimo.total_params() == 7'622'619'136);
  CHECK(mimo.total_params() + mimo.mtp_layer_params() == 7'833'409'536);
  // Step-3.7-Flash: 3 dense layers of 75,505,664 attention + 3 x 4096 x 11264, 42 MoE layers of
  // 288 experts of 3 x 4096 x 1280, a shared one, router 4096 x 288 + 288; untied embeddings of
  // 128,896 x 4096: 195.8e9, 10.9e9 active (StepFun for Step-3.5-Flash: 196B, 11B active).
  const ModelSpec step = *model_preset("step-3.7-flash");
  CHECK(step.total_params() == 195'832'700'736);
  CHECK(step.active_params_per_token() == 10'863'894'336);
  // K and V of 8 heads x 128 x 2 bytes on all 45 layers (windows cap what 33 of them keep).
  CHECK(step.kv_bytes_per_token() == 45 * 4096);
  CHECK(step.count_layers(0, step.layers).window == 33);
  // MoE members of the families, against their safetensors totals: Qwen3-30B-A3B 30,532,122,624
  // (3.35e9 active: "A3B"), Qwen3-Coder-480B-A35B 480.15e9 (35.5e9 active), Mixtral-8x7B
  // 46,702,792,704 (12.9e9 active), Mixtral-8x22B 140,620,634,112 (39.2e9 active), gpt-oss-20b
  // 20,914,757,184 ("21B", 4.19e9 active: "3.6B" without the embeddings), Llama-3.1-405B
  // 405,853,388,800; MiniMax-M2.7 is M2.5's architecture.
  CHECK(model_preset("qwen3-30b-a3b")->total_params() == 30'532'122'624);
  CHECK(model_preset("qwen3-30b-a3b")->active_params_per_token() == 3'353'032'704);
  CHECK(model_preset("qwen3-coder-480b-a35b")->total_params() == 480'154'875'392);
  CHECK(model_preset("mixtral-8x7b")->total_params() == 46'702'792'704);
  CHECK(model_preset("mixtral-8x7b")->active_params_per_token() == 12'879'925'248);
  CHECK(model_preset("mixtral-8x22b")->total_params() == 140'620'634'112);
  CHECK(model_preset("gpt-oss-20b")->total_params() == 20'914'757'184);
  CHECK(model_preset("gpt-oss-20b")->formats.experts == Format::kMxfp4);
  CHECK(model_preset("llama-3.1-405b")->total_params() == 405'853'388'800);
  CHECK(model_preset("minimax-m2.7")->total_params() == model_preset("minimax-m2.5")->total_params());
  // Llama-4's text models, derived from their config.json in models/model_spec.cpp (Scout's card
  // says 109B with the vision encoder, Maverick's 400B); both activate 17B-class figures: 48 x
  // (62,914,560 attention + 2 x 125,829,120 for the routed and the shared expert) in Scout's
  // layers.
  CHECK(model_preset("llama-4-scout")->total_params() == 107'769'861'120);
  CHECK(model_preset("llama-4-maverick")->total_params() == 400'711'848'960);
  CHECK(model_preset("llama-4-maverick")->window.pattern == "SSSF");
  // Nemotron-H hybrids (Mamba-2 layers, squared-ReLU MLPs, layers without a feed-forward block),
  // derived in models/model_spec.cpp from their config.json; NVIDIA's cards give 31.6B total and
  // 3.6B active with embeddings for Nemotron-3-Nano-30B-A3B, the report 56B for Nemotron-H-56B.
  // Nano: 23 Mamba-2 layers of 2688 x (2 x 8 x 128 + 2 x 64 x 64 + 64) in_proj + 6,144-channel
  // conv (+ bias) + 3 x 64 + 4,096 norm + 4,096 x 2688 out_proj + 2 x 2688 norms (six of them
  // without an MLP after them hold one), 6 attention layers, 23 MoE blocks of 128 experts x 2 x
  // 2688 x 1856, a shared 2 x 2688 x 3712 and a router with bias, 2 x 131,072 x 2688 embeddings.
  const ModelSpec nano = *model_preset("nemotron-3-nano-30b-a3b");
  CHECK(nano.total_params() == 31'577'940'288);
  CHECK(nano.active_params_per_token() == 3'580'076'352);
  const LayerCounts nc = nano.count_layers(0, nano.layers);
  CHECK(nc.linear == 23);
  CHECK(nc.full() == 6);
  CHECK(nc.moe == 23);
  CHECK(nc.no_ffn == 6);
  CHECK(nc.dense() == 0);
  CHECK(model_preset("nemotron-h-56b")->total_params() == 56'324'350'464);
  CHECK(model_preset("nemotron-h-56b")->count_layers(0, 64).dense() == 54);
  // Latent MoE (Super: experts of 2 x 1024 x 2688 in the latent, + 2 x 4096 x 1024 projections per
  // MoE layer; Ultra: 2 x 2048 x 5120, + 2 x 8192 x 2048): 120.7e9 total, 12.8e9 active with
  // embeddings (NVIDIA: 120B, A12B); 549.3e9, 56.1e9 (550B, A55B: 55.0e9 without the input
  // embedding).
  const ModelSpec super = *model_preset("nemotron-3-super-120b-a12b");
  CHECK(super.expert_params() == 2LL * 1024 * 2688);
  CHECK(super.total_params() == 120'668'707'840);
  CHECK(super.active_params_per_token() == 12'770'237'440);
  CHECK(model_preset("nemotron-3-ultra-550b-a55b")->total_params() == 549'308'993'536);
  CHECK(model_preset("nemotron-3-ultra-550b-a55b")->active_params_per_token() == 56'058'843'136);
  // 13, deepseek-v3.2, kimi-k2.5, minimax-m2.5, four qwen3.5, the ten above, Llama-4's two,
  // Nemotron's four, GLM-5.2, Qwen3-4B, MiMo-7B, Step-3.7-Flash, Gemma-4's two, MiMo-V2-Flash,
  // MiniMax-M3, Kimi-K3 and DeepSeek-V4's two.
  CHECK(model_preset_names().size() == 47);
  for (auto name : model_preset_names()) {
    CAPTURE(name);
    CHECK(validate_model(*model_preset(name)).empty());
  }
}

TEST_CASE("Models: gpt-oss alternates sliding-window and full layers, sliding first") {
  const ModelSpec m = *model_preset("gpt-oss-120b");
  CHECK(m.is_window_layer(0));
  CHECK_FALSE(m.is_window_layer(1));
  const LayerCounts c = m.count_layers(0, 36);
  CHECK(c.window == 18);
  CHECK(c.full() == 18);
  CHECK(c.moe == 36);
  // Layers 9..17 (a second pipeline stage of 9): 10, 12, 14 and 16 are window layers.
  CHECK(m.count_layers(9, 9).window == 4);
  // DeepSeek-V3: dense layers 0-2, MoE from layer 3.
  const ModelSpec ds = *model_preset("deepseek-v3");
  CHECK_FALSE(ds.is_moe_layer(2));
  CHECK(ds.is_moe_layer(3));
  CHECK(ds.count_layers(0, 61).moe == 58);
}

TEST_CASE("Models: structural problems are sentences") {
  ModelSpec bad = *model_preset("llama-3.1-8b");
  bad.kv_heads = 5;
  CHECK(validate_model(bad).size() == 1);
  ModelSpec moe = *model_preset("qwen3-235b-a22b");
  moe.moe.top_k = 200;
  REQUIRE(validate_model(moe).size() == 1);
  CHECK(validate_model(moe)[0] == "MoE top_k (200) must be between 1 and the 128 experts");
  ModelSpec dsa = *model_preset("llama-3.1-8b");
  dsa.dsa = {32, 128, 2048, {}};
  CHECK(validate_model(dsa)[0] ==
        "DSA sparse attention is modelled on top of MLA; set attention: mla (or dsa.block > 1: block sparse on GQA)");
  ModelSpec window = *model_preset("gpt-oss-120b");
  window.window.pattern = "SFX";
  CHECK(validate_model(window).size() == 1);
  CHECK_FALSE(model_preset("llama-3-8b").has_value());
}

TEST_CASE("Vision: Qwen2.5-VL turns an image into tokens of 28 x 28 pixels within the pixel caps") {
  const models::VisionSpec v = *model_preset("qwen2.5-vl-7b")->vision;
  // 1280 x 720: sides rounded to multiples of 14 x 2 = 28 -> 1288 x 728 (937,664 pixels, within
  // [3,136, 1,003,520]); (728 / 14) x (1288 / 14) = 52 x 92 = 4,784 patches; / 4 = 1,196 tokens.
  const auto hd = v.resize(1280, 720);
  CHECK(hd.width == 1288);
  CHECK(hd.height == 728);
  CHECK(hd.patches == 4784);
  CHECK(v.image_tokens(1280, 720) == 1196);
  // 4000 x 3000 exceeds max_pixels: scale by sqrt(12e6 / 1,003,520) = 3.458 and floor to 28:
  // 1148 x 840 -> 41 x 30 merged tokens... (1148 / 14) x (840 / 14) = 82 x 60 = 4,920 patches,
  // 1,230 tokens.
  CHECK(v.image_tokens(4000, 3000) == 1230);
  // 10 x 10 is below min_pixels: scaled up to 56 x 56 -> 4 x 4 patches, 4 tokens.
  CHECK(v.image_tokens(10, 10) == 4);
}

TEST_CASE("Formats: bytes per element include the scales") {
  CHECK(bytes_per_element(Format::kBf16) == 2.0);
  CHECK(bytes_per_element(Format::kFp8) == 1.0);
  CHECK(bytes_per_element(Format::kFp8Block) == approx(1.000244140625));  // 1 + 4/16384
  CHECK(bytes_per_element(Format::kW4A8) == approx(0.515625));            // 0.5 + 2/128
  CHECK(bytes_per_element(Format::kNvfp4) == approx(0.5625));             // 0.5 + 1/16
  CHECK(bytes_per_element(Format::kMxfp4) == approx(0.53125));            // 0.5 + 1/32
  CHECK(compute_rate(Format::kW4A8) == ComputeRate::kFp8);
  CHECK(compute_rate(Format::kMxfp4) == ComputeRate::kFp4);
  CHECK(parse_format("fp8_block") == Format::kFp8Block);
  CHECK_FALSE(parse_format("fp6").has_value());
  CHECK(is_kv_format(Format::kInt8));
  CHECK_FALSE(is_kv_format(Format::kNvfp4));
}

TEST_CASE("Chips: every preset has its peaks, and the formats it lacks are zero") {
  CHECK(chip_preset_names().size() == 20);
  const ChipSpec a100 = *chip_preset("a100-80g");
  CHECK_FALSE(a100.has(ComputeRate::kFp8));
  CHECK(a100.peak_flops(ComputeRate::kInt8) == 624e12);
  const ChipSpec h100 = *chip_preset("h100-sxm");
  CHECK(h100.peak_flops(ComputeRate::kFp8) == 1979e12);
  CHECK_FALSE(h100.has(ComputeRate::kFp4));
  CHECK(chip_preset("b200")->peak_flops(ComputeRate::kFp4) == 9e15);
  CHECK(chip_preset("gb200")->scale_up_domain == 72);
  // Blackwell Ultra (AIConfigurator's b300_sxm.yaml and gb300.yaml): FP4 up, INT8 cut.
  CHECK(chip_preset("b300")->peak_flops(ComputeRate::kFp4) == 14e15);
  CHECK(chip_preset("b300")->peak_flops(ComputeRate::kInt8) == 153.5e12);
  CHECK(chip_preset("b300")->hbm_bandwidth.bytes_per_s == 7.75e12);
  CHECK(chip_preset("gb300")->scale_up_domain == 72);
  CHECK(chip_preset("gb300")->memory.value == 298013687808.0);
  CHECK(chip_preset("h800-sxm")->scale_up_bandwidth.bytes_per_s == 200e9);
  CHECK(chip_preset("h20")->bf16_flops.flop_per_s == 148e12);
  // AIConfigurator's PCIe systems: PCIe between the node's eight GPUs (AIC intra_node_bw), no
  // FP8 rate on Ampere or on Intel's B60, FP4 on the RTX PRO 6000 (Blackwell).
  CHECK(chip_preset("h100-pcie")->scale_up_bandwidth.bytes_per_s == 64e9);
  CHECK(chip_preset("h100-pcie")->bf16_flops.flop_per_s == 756.5e12);
  CHECK(chip_preset("l40s")->hbm_bandwidth.bytes_per_s == 864e9);
  CHECK_FALSE(chip_preset("a100-pcie")->has(ComputeRate::kFp8));
  CHECK_FALSE(chip_preset("arc-pro-b60")->has(ComputeRate::kFp8));
  CHECK(chip_preset("rtx-pro-6000")->has(ComputeRate::kFp4));
  CHECK(chip_preset("l4")->host_bandwidth.bytes_per_s == 32e9);
  for (auto name : {"ascend-910b", "ascend-910c", "ascend-910c-die", "domestic-64g"}) {
    CAPTURE(name);
    const ChipSpec c = *chip_preset(name);
    CHECK_FALSE(c.has(ComputeRate::kFp8));
    CHECK(c.source.find("assumed") != std::string::npos);
  }
  // The 910C as one NPU is two dies: twice the memory, bandwidth and compute of one die.
  const ChipSpec npu = *chip_preset("ascend-910c"), die = *chip_preset("ascend-910c-die");
  CHECK(npu.memory.value == 2 * die.memory.value);
  CHECK(npu.hbm_bandwidth.bytes_per_s == 2 * die.hbm_bandwidth.bytes_per_s);
  CHECK(npu.bf16_flops.flop_per_s == 2 * die.bf16_flops.flop_per_s);
  CHECK(npu.scale_up_domain * 2 == die.scale_up_domain);
  CHECK(chip_preset("domestic-64g")->memory.value == 64.0 * kGiB);
  CHECK(chip_preset("domestic-64g")->hbm_bandwidth.bytes_per_s == 1.6e12);
}

TEST_CASE("Efficiency curves interpolate in log size and are flat beyond their ends") {
  EfficiencyCurve c;
  c.knots = {{1e9, 0.2}, {1e11, 0.6}};
  CHECK(c.at(1e8) == 0.2);
  CHECK(c.at(1e12) == 0.6);
  // 1e10 is halfway in log10 between 1e9 and 1e11.
  CHECK(c.at(1e10) == approx(0.4));
  CHECK(c.problems().empty());
  EfficiencyCurve bad;
  bad.knots = {{1e9, 0.2}, {1e8, 0.6}};
  CHECK(bad.problems().size() == 1);
  const EfficiencyCurve flat = 0.7;
  CHECK(flat.is_constant());
  CHECK(flat.at(123) == 0.7);
}

TEST_CASE("Parallel plans: TP must divide the heads, PP splits layers with the remainder first") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  CHECK(validate_plan(m, {8, 1}).empty());
  const auto problems = validate_plan(m, {3, 1});
  REQUIRE(problems.size() >= 1);
  CHECK(problems[0] ==
        "tensor parallelism 3 does not divide the 64 attention heads of "
        "llama-3.1-70b (choose one of 1, 2, 4, 8, 16, 32, 64)");
  // A model whose layers hold MoE blocks or no feed-forward block at all (Nemotron-3 Nano) has no
  // dense MLP for TP to divide: an odd intermediate width does not matter; with a dense layer it does.
  ModelSpec hybrid = *model_preset("nemotron-3-nano-30b-a3b");
  hybrid.intermediate = 1855;
  ParallelPlan two;
  two.tp = two.ep = 2;
  CHECK(validate_plan(hybrid, two).empty());
  hybrid.ffn_pattern[0] = 'D';
  CHECK(validate_plan(hybrid, two).size() == 1);
  // 80 layers over 3 stages: 27, 27, 26.
  const ParallelPlan p{1, 3};
  CHECK(p.stage_layers(m, 0) == 27);
  CHECK(p.stage_layers(m, 1) == 27);
  CHECK(p.stage_layers(m, 2) == 26);
  CHECK(p.stage_first_layer(m, 2) == 54);
  // 8 KV heads over TP 16: each chip holds one (replicated), as vLLM does.
  CHECK(ParallelPlan{16, 1}.kv_heads_per_chip(m) == 1);
  CHECK(ParallelPlan{4, 1}.kv_heads_per_chip(m) == 2);
}

TEST_CASE("Parallel plans: the MoE split must cover the tp x dp chips and divide the experts") {
  const ModelSpec ds = *model_preset("deepseek-v3");
  ParallelPlan p;
  p.tp = 1;
  p.dp = 8;
  p.ep = 8;
  p.moe_tp = 1;
  CHECK(validate_plan(ds, p).empty());
  p.moe_tp = 2;  // 2 x 8 = 16 != 8
  REQUIRE(validate_plan(ds, p).size() == 1);
  CHECK(validate_plan(ds, p)[0] ==
        "the MoE layers are split moe_tp x ep over the tp x dp = 8 chips of a stage, but moe_tp 2 x "
        "ep 8 = 16; set moe_tp to 1");
  p.ep = 3;
  p.moe_tp = 1;
  p.dp = 3;
  const auto problems = validate_plan(ds, p);
  REQUIRE(problems.size() >= 1);
  CHECK(problems.back() ==
        "expert parallelism ep 3 does not divide the 256 experts of deepseek-v3 "
        "(choose one of 1, 2)");
  CHECK(default_moe_tp(8, 1, 1) == 8);
  CHECK(default_moe_tp(2, 4, 4) == 2);
  // A dense model has no experts to split.
  ParallelPlan dense{2, 1};
  dense.ep = 2;
  CHECK(validate_plan(*model_preset("llama-3.1-8b"), dense)[0] ==
        "expert parallelism ep 2 needs a MoE model; llama-3.1-8b has no experts (remove ep)");
  // Rank layout: tp fastest, then dp, cp, pp.
  ParallelPlan all;
  all.tp = 2;
  all.dp = 4;
  all.cp = 2;
  all.pp = 2;
  CHECK(all.chips() == 32);
  CHECK(all.group(Group::kDp).stride == 2);
  CHECK(all.group(Group::kCp).stride == 8);
  CHECK(all.group(Group::kPp).stride == 16);
}

TEST_CASE("Models: Qwen3.5-397B-A17B has 396.3e9 parameters in 45 Gated DeltaNet and 15 attention layers") {
  const ModelSpec m = *model_preset("qwen3.5-397b-a17b");
  REQUIRE(validate_model(m).empty());
  // Pattern LLLF over 60 layers: 45 linear, 15 full.
  const LayerCounts c = m.count_layers(0, m.layers);
  CHECK(c.linear == 45);
  CHECK(c.full() == 15);
  CHECK(m.is_linear_layer(0));
  CHECK_FALSE(m.is_linear_layer(3));
  // A GDN layer (h = 4096, 16 key heads, 64 value heads of 128 x 128, conv 4):
  //   norms 2 x 4096 = 8,192; in_proj_qkvz 4096 x (2 x 16 x 128 + 2 x 64 x 128) = 83,886,080;
  //   in_proj_ba 4096 x 128 = 524,288; conv1d (2 x 2048 + 8192) x 4 = 49,152; dt_bias, A_log 128;
  //   norm 128; out_proj 8192 x 4096 = 33,554,432                          -> 118,022,400
  CHECK(m.linear_attention_params() == 118'022'400);
  // Gated attention (32 / 2 heads of 256, q_proj doubled for the gate, QK-norm):
  //   8,192 + 3 x 4096 x 8192 (q, gate, o) + 2 x 4096 x 512 (k, v) + 512 = 104,866,304.
  CHECK(m.attention_params() == 104'866'304);
  // MoE per layer: 512 x 3 x 4096 x 1024 + a shared 3 x 4096 x 1024 + router 4096 x 512
  // = 6,457,131,008. 45 x (118,022,400 + MoE) + 15 x (104,866,304 + MoE) + 2 x 248,320 x 4096
  // + 4096 = 396,346,104,576 (Qwen: "397B total" with the vision tower, not modelled).
  CHECK(m.total_params() == 396'346'104'576);
  // Active: 10 of 512 experts: 17.35e9 ("17B activated").
  CHECK(m.active_params_per_token() == 396'346'104'576 - 60LL * 502 * 12'582'912);
  // Only the 15 full layers cache KV: 2 x 2 heads x 256 x 2 bytes x 15 = 30,720 bytes per token.
  CHECK(m.kv_bytes_per_token() == 30'720);
  // Each GDN layer keeps per sequence 64 x 128 x 128 fp32 = 4,194,304 bytes of state and
  // 3 x 12,288 bf16 convolution inputs = 73,728: 4,268,032.
  CHECK(m.linear_state_bytes_per_layer() == 4'268'032.0);
  // A handed-off sequence of 1,000 tokens: its KV and all 45 states.
  CHECK(m.kv_transfer_bytes(1000) == 1000.0 * 30'720 + 45.0 * 4'268'032);
}

TEST_CASE("Models: the new families' presets match their published totals") {
  // DeepSeek-V3.2: DeepSeek-V3 (671,026,419,200) + the DSA indexer in 61 layers, each
  // wq_b 1536 x 64 x 128 + wk 7168 x 128 + its LayerNorm 256 + weights_proj 7168 x 64
  // = 13,959,424: 671,877,944,064.
  const ModelSpec v32 = *model_preset("deepseek-v3.2");
  CHECK(v32.total_params() == 671'026'419'200 + 61LL * 13'959'424);
  CHECK(v32.dsa.index_heads == 64);
  CHECK(v32.dsa.top_k == 2048);
  // Kimi-K2.5: Kimi-K2's text model; int4 experts with a bf16 scale per 32 (0.5625 bytes), the
  // rest bf16.
  const ModelSpec k25 = *model_preset("kimi-k2.5");
  CHECK(k25.total_params() == model_preset("kimi-k2")->total_params());
  CHECK(k25.formats.experts == Format::kW4A16);
  CHECK(k25.formats.weights == Format::kBf16);
  CHECK(k25.expert_bytes_per_element() == approx(0.5625));
  // MiniMax-M2.5: 62 x (attention 3072 x (48 + 2 x 8) x 128 + 48 x 128 x 3072 + QK-norm + norms
  // = 44,046,592; 256 experts of 3 x 3072 x 1536 + router 3072 x 256 + 256) + 2 x 200,064 x 3072
  // + 3072 = 228.7e9 ("230B total").
  CHECK(model_preset("minimax-m2.5")->total_params() == 228'689'336'320);
  CHECK(model_preset("minimax-m2.5")->attention_params() == 44'046'592);
  // Qwen3.5 family: 122B-A10B, 35B-A3B and the dense 27B (text models; the vision towers of
  // about 0.4e9 are not modelled).
  CHECK(model_preset("qwen3.5-122b-a10b")->total_params() == 122'111'379'456);
  CHECK(model_preset("qwen3.5-35b-a3b")->total_params() == 34'660'528'768);
  CHECK(model_preset("qwen3.5-27b")->total_params() == 26'895'998'464);
  for (const char* n :
       {"deepseek-v3.2", "kimi-k2.5", "minimax-m2.5", "qwen3.5-122b-a10b", "qwen3.5-35b-a3b", "qwen3.5-27b"}) {
    CAPTURE(n);
    CHECK(validate_model(*model_preset(n)).empty());
  }
}

TEST_CASE("Models: a linear-attention pattern is checked") {
  ModelSpec m = *model_preset("qwen3.5-35b-a3b");
  m.linear.pattern = "LLXF";
  CHECK(validate_model(m).size() == 1);
  m.linear.pattern = "LLLF";
  m.linear.key_heads = 5;  // 32 value heads are not groups of 5
  CHECK(validate_model(m).size() == 1);
  m.linear.key_heads = 16;
  m.window = {128, "S", 0, 0};  // linear layers beside sliding windows are not modelled
  CHECK(validate_model(m).size() == 1);
  m.window = {};
  // Tensor parallelism must split the value heads evenly.
  ParallelPlan p;
  p.tp = 64;
  p.moe_tp = 64;
  const auto problems = validate_plan(*model_preset("qwen3.5-35b-a3b"), p, 72);
  bool named = false;
  for (const auto& s : problems) named = named || s.find("linear-attention value heads") != std::string::npos;
  CHECK(named);
}
