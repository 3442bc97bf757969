// Operators of a batch: FLOPs, bytes and communication volumes per chip, derived by hand.
#include <doctest/doctest.h>

#include <numeric>

#include "models/chip_spec.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/parallel_plan.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::models;

namespace {

std::array<bool, kComputeRates> rates_of(const char* chip) { return chip_preset(chip)->rates(); }

ParallelPlan plan(int tp, int dp = 1, int ep = 1, int moe_tp = 1, int cp = 1, int pp = 1) {
  ParallelPlan p;
  p.tp = tp;
  p.dp = dp;
  p.ep = ep;
  p.moe_tp = moe_tp;
  p.cp = cp;
  p.pp = pp;
  return p;
}

}  // namespace

TEST_CASE("Operators: GEMM FLOPs and bytes of one Llama-3.1-8B layer") {
  const ModelSpec m = *model_preset("llama-3.1-8b");
  const MoeLoad none;
  const auto h100 = rates_of("h100-sxm");
  const LayerTokenOps ops = layer_token_ops(m, plan(1), none, 1, h100);
  // QKV: 2 x 1 x 4096 x (32 + 2 x 8) x 128 = 50,331,648 FLOPs; bytes 2 x 4096 x 6144 weights +
  // 2 x (4096 + 6144) activations = 50,331,648 + 20,480.
  CHECK(ops.qkv.flops == 50'331'648.0);
  CHECK(ops.qkv.bytes == 50'331'648.0 + 20'480.0);
  // MLP with TP 2: gate|up 2 x 4096 x 14336 and down 2 x 7168 x 4096 per token, 2 FLOPs per MAC.
  const LayerTokenOps tp2 = layer_token_ops(m, plan(2), none, 10, h100);
  CHECK(tp2.dense_mlp.flops == 2.0 * 10 * 4096 * 14336 + 2.0 * 10 * 7168 * 4096);
  CHECK(tp2.dense_mlp.kernels == 2);
  // ... listed as its two GEMMs, for measured tables: 4096 -> 2 x 7168, then 7168 -> 4096.
  REQUIRE(tp2.dense_mlp.gemm_count == 2);
  CHECK(tp2.dense_mlp.gemms[0].n == 14336);
  CHECK(tp2.dense_mlp.gemms[0].k == 4096);
  CHECK(tp2.dense_mlp.gemms[1].n == 4096);
  CHECK(tp2.dense_mlp.gemms[1].k == 7168);
  // After attention and after the MLP: an all-reduce of 10 tokens x 4096 x 2 bytes over tp.
  CHECK(tp2.attention_reduce.bytes == 81'920.0);
  CHECK(tp2.attention_reduce.group == Group::kTp);
  // No MoE, no emulation.
  CHECK(tp2.moe_experts.kernels == 0);
  CHECK(tp2.dequant_attention.kernels == 0);
}

TEST_CASE("Operators: Llama-3.1-70B costs 139.0 GFLOP for one decode token on one chip") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  BatchShape b;
  add_decode(b, m, 1);
  const StageOperators s = stage_operators(m, plan(1), MoeLoad(), b, 0, rates_of("h100-sxm"));
  double flops = 0;
  for (const auto& c : s.compute) flops += c.op.flops * c.count;
  // GEMMs per layer: 2 x (150,994,944 attention + 704,643,072 MLP) = 1,711,276,032 x 80 layers;
  // attention 4 x 128 x 64 x 1 context token = 32,768 x 80; LM head 2 x 8192 x 128,256
  // = 2,101,346,304. Total 139,006,050,304.
  CHECK(flops == 139'006'050'304.0);
  CHECK(s.comm.empty());  // one chip: no collectives
}

TEST_CASE("Operators: decode attention reads each sequence's whole KV once") {
  const ModelSpec m = *model_preset("llama-3.1-70b");
  BatchShape b;
  b.decode_seqs = 4;
  b.decode_kv_tokens = 4 * 1000;
  const Operator op = layer_batch_ops(m, plan(2), b).decode_full;
  // Per layer per chip with TP 2: K and V of 4 KV heads x 128 x 2 bytes = 2,048 bytes per token;
  // 4,000 tokens -> 8,192,000 bytes, plus q and o of 32 heads x 128 x 2 bytes x 4 sequences.
  CHECK(op.bytes == 8'192'000.0 + 2.0 * 2 * 4 * 32 * 128);
  // 4 x 128 x 32 FLOPs per context token.
  CHECK(op.flops == 4.0 * 128 * 32 * 4000);
  CHECK(op.batch == 4);
  CHECK(op.context == 4000);
}

TEST_CASE("Operators: MLA decodes in latent space and prefills with up-projected keys (DeepSeek-V3)") {
  const ModelSpec m = *model_preset("deepseek-v3");
  BatchShape b;
  add_decode(b, m, 1000);
  add_decode(b, m, 3000);
  add_chunk(b, m, 900, 100, false);
  const LayerBatchOps o = layer_batch_ops(m, plan(8, 1, 1, 8), b);
  // TP 8: 16 heads per chip. Absorbed decode, per context token and head: q.k over the 512 + 64
  // latent and the 512-wide output, 2 FLOPs each: 2 x 16 x (576 + 512) = 34,816 x 4,000 tokens.
  CHECK(o.decode_full.flops == 139'264'000.0);
  // It reads the cached latents once (576 x 2 bytes per token, shared by all heads) plus q and o
  // in latent space: 4,000 x 1,152 + 2 sequences x 16 x 1,088 x 2.
  CHECK(o.decode_full.bytes == 4'608'000.0 + 69'632.0);
  // Prefill of 100 tokens after 900: 100 x 1,000 pairs x 2 x 16 x (192 + 128) = 1.024e9 FLOPs.
  CHECK(o.prefill_full.flops == 1'024'000'000.0);
  // ... after kv_b up-projects the 1,000 latents: 2 x 1,000 x 512 x 16 x (128 + 128).
  CHECK(o.prefill_up_projection.flops == 4'194'304'000.0);
  // The absorbed path maps the 2 decode queries through W_UK and W_UV: 2 x 2 x 16 x 512 x 256.
  CHECK(o.decode_absorb.flops == 8'388'608.0);
  // Two batched matmuls over the 16 heads: 128 -> 512 (W_UK), then 512 -> 128 (W_UV), whose
  // FLOPs are the operator's: 2 x 2 x 16 x (512 x 128 + 128 x 512).
  REQUIRE(o.decode_absorb.gemm_count == 2);
  CHECK(o.decode_absorb.kernels == 2);
  double listed = 0;
  for (int i = 0; i < 2; ++i) {
    const Operator::Gemm& g = o.decode_absorb.gemms[static_cast<std::size_t>(i)];
    CHECK(g.groups == 16);
    listed += 2.0 * o.decode_absorb.m * g.groups * g.n * g.k;
  }
  CHECK(listed == o.decode_absorb.flops);
  CHECK(o.decode_absorb.gemms[0].n == 512);
  CHECK(o.decode_absorb.gemms[1].k == 512);
}

TEST_CASE("Operators: DSA attention stops growing with context; its indexer does not (GLM-5)") {
  const ModelSpec m = *model_preset("glm-5");
  BatchShape b;
  add_decode(b, m, 100'000);
  CHECK(b.decode_kv_topk == 2048);
  const LayerBatchOps o = layer_batch_ops(m, plan(8, 1, 1, 8), b);
  // TP 8: 8 heads. Sparse MLA over the top 2,048 tokens: 2 x 8 x (576 + 512) x 2,048 FLOPs and
  // 2,048 latents of 1,152 bytes + q and o in latent space, 8 x (576 + 512) x 2 bytes.
  CHECK(o.decode_full.flops == 35'651'584.0);
  CHECK(o.decode_full.bytes == 2'359'296.0 + 17'408.0);
  // The indexer scores all 100,000 cached tokens: 32 heads x 128 dims x 2 FLOPs each, reading
  // 132 bytes of index key per token + the query's 32 x 128 fp8 values, and writing a 4-byte
  // logit per token.
  CHECK(o.indexer_decode.flops == 819'200'000.0);
  CHECK(o.indexer_decode.bytes == 13'200'000.0 + 4'096.0 + 400'000.0);
  CHECK(o.indexer_decode.rate == ComputeRate::kFp8);
  // A 10x longer context costs the sparse attention nothing more.
  BatchShape longer;
  add_decode(longer, m, 1'000'000);
  CHECK(layer_batch_ops(m, plan(8, 1, 1, 8), longer).decode_full.flops == o.decode_full.flops);
}

TEST_CASE("Operators: sparse prefill kernels run padded heads over the whole index width") {
  // FlashMLA's sparse kernels take h_q of 64 or 128: 16 heads run as 64, 65 as 128.
  CHECK(sparse_kernel_heads(16) == 64);
  CHECK(sparse_kernel_heads(64) == 64);
  CHECK(sparse_kernel_heads(65) == 128);
  CHECK(sparse_kernel_heads(128) == 128);
  // GLM-5 at TP 8 (8 heads per chip), a 100-token prompt: every query runs the top-k width of
  // 2,048 at 64 heads: 100 x 2,048 pairs x 2 x 64 x (576 + 512) FLOPs, though only 100 x 100
  // pairs are causal and valid; the decode keeps its own 8 heads.
  const ModelSpec glm = *model_preset("glm-5");
  BatchShape b;
  add_chunk(b, glm, 0, 100, true);
  const LayerBatchOps o = layer_batch_ops(glm, plan(8, 1, 1, 8), b);
  CHECK(o.prefill_full.sparse);
  CHECK(o.prefill_full.n == 8);
  CHECK(o.prefill_full.flops == 100.0 * 2048 * 2 * 64 * (576 + 512));
  CHECK_FALSE(o.decode_full.sparse);
  // DeepSeek-V4-Pro at TP 8 (16 heads), an 8,192-token prompt: a CSA query runs its window (128)
  // and top_k (1,024) entries, an HCA query its window and 8,192 / 128 entries; 4 x 512 FLOPs a
  // pair and head (q.k and the weighted sum over one 512-wide entry), 64 heads.
  const ModelSpec pro = *model_preset("deepseek-v4-pro");
  BatchShape c;
  add_chunk(c, pro, 0, 8192, true);
  const LayerBatchOps v = layer_batch_ops(pro, plan(8, 1, 1, 8), c);
  CHECK(v.prefill_full.sparse);
  CHECK(v.prefill_window.sparse);
  CHECK(v.prefill_full.flops == 8192.0 * (128 + 1024) * 4 * 512 * 64);
  CHECK(v.prefill_window.flops == 8192.0 * (128 + 8192.0 / 128) * 4 * 512 * 64);
  CHECK_FALSE(v.decode_full.sparse);
}

TEST_CASE("Operators: the DSA indexer scores the causal pairs and writes a logit for each") {
  // GLM-5 (32 index heads of 128, top_k 2,048), one chip: a 1,000-token chunk after 3,000 cached
  // and a 500-token prompt. Under the causal mask the first scores 1,000 x 3,000 + 1,000 x 1,001 /
  // 2 pairs, the second 500 x 501 / 2 (DeepGEMM's fp8_mqa_logits skips the masked ones).
  const ModelSpec m = *model_preset("glm-5");
  BatchShape b;
  add_chunk(b, m, 3000, 1000, true);
  add_chunk(b, m, 0, 500, true);
  const double causal = 1000.0 * 3000 + 1000.0 * 1001 / 2 + 500.0 * 501 / 2;
  CHECK(b.prefill_pairs_causal == causal);
  CHECK(b.prefill_pairs_causal_short == 500.0 * 501 / 2);  // the prompt's context fits in top_k
  const LayerBatchOps o = layer_batch_ops(m, plan(1), b);
  CHECK(o.indexer_prefill.flops == 2.0 * 32 * 128 * causal);
  // The index keys of both chunks' contexts (4,000 and 500, 132 bytes each), the 1,500 queries'
  // 32 x 128 fp8 values and a 4-byte fp32 logit per scored pair.
  CHECK(o.indexer_prefill.bytes == 4500.0 * 132 + 1500.0 * 32 * 128 + 4 * causal);
  // The prefill kernel runs in query blocks (models::query_wave_factor); the paged decode one not.
  CHECK(o.indexer_prefill.query_blocks);
  CHECK(o.indexer_prefill.m == 1500);
  CHECK(o.indexer_prefill.n == 32);
  CHECK_FALSE(o.indexer_decode.query_blocks);
  // Both are followed by the top-k selection over the logits they write (models::selection_seconds).
  CHECK(o.indexer_prefill.selects);
  CHECK(o.indexer_decode.selects);
  // Where the engine runs the short prompt densely, only the first chunk is scored.
  const LayerBatchOps dense = layer_batch_ops(m, plan(1), b, EnginePaths{true});
  CHECK(dense.indexer_prefill.flops == 2.0 * 32 * 128 * (causal - 500.0 * 501 / 2));
}

TEST_CASE("Operators: an engine's dense path runs DSA chunks that fit in top_k as dense MLA, no indexer") {
  // DeepSeek-V3.2 (top_k 2,048; 64 index heads of 128) at TP 8: 16 heads per chip. Two chunks: a
  // 1,000-token prompt (fits in top_k) and a 4,096-token one (does not).
  const ModelSpec m = *model_preset("deepseek-v3.2");
  BatchShape b;
  add_chunk(b, m, 0, 1000, true);
  add_chunk(b, m, 0, 4096, true);
  CHECK(b.prefill_tokens_short == 1000);
  CHECK(b.prefill_pairs_short == 1000.0 * 1000);
  CHECK(b.prefill_kv_short == 1000);
  CHECK(b.prefill_chunks_short == 1);
  const ParallelPlan p = plan(8, 1, 1, 8);
  const LayerBatchOps sparse = layer_batch_ops(m, p, b);
  const LayerBatchOps engine = layer_batch_ops(m, p, b, EnginePaths{true});
  // Without the dense path both chunks' queries run the sparse kernel over the index width
  // (64 kernel heads, 2 x (576 + 512) FLOPs a pair and head), and neither runs dense.
  CHECK(sparse.prefill_full.flops == 5096.0 * 2048 * 2 * 64 * (576 + 512));
  CHECK(sparse.prefill_dense.kernels == 0);
  CHECK(sparse.prefill_up_projection.kernels == 0);
  // With it only the long chunk's do, and the indexer scores only its 4,096 x 4,097 / 2 causal
  // pairs (without it the short chunk's 1,000 x 1,001 / 2 too).
  CHECK(engine.prefill_full.flops == 4096.0 * 2048 * 2 * 64 * (576 + 512));
  CHECK(engine.prefill_full.m == 4096);
  CHECK(engine.prefill_full.batch == 1);
  CHECK(engine.indexer_prefill.flops == 2.0 * 64 * 128 * (4096.0 * 4097 / 2));
  CHECK(sparse.indexer_prefill.flops == 2.0 * 64 * 128 * (4096.0 * 4097 / 2 + 1000.0 * 1001 / 2));
  // The short chunk: multi-head attention over its causal pairs, 2 x 16 x (192 + 128) FLOPs a
  // pair, after kv_b up-projects its 1,000 latents (512 -> 16 x (128 + 128)); its queries are not
  // absorbed (the absorbed W_UK / W_UV take the long chunk's 4,096).
  CHECK(engine.prefill_dense.kernels == 1);
  CHECK_FALSE(engine.prefill_dense.sparse);
  CHECK(engine.prefill_dense.flops == 2.0 * 16 * (192 + 128) * 1000 * 1000);
  CHECK(engine.prefill_dense.m == 1000);
  CHECK(engine.prefill_up_projection.m == 1000);
  CHECK(engine.prefill_up_projection.flops == 2.0 * 1000 * 512 * 16 * 256);
  CHECK(engine.decode_absorb.m == 4096);
  CHECK(sparse.decode_absorb.m == 5096);
  // A chunk fits while its whole context does: 2,048 does, 2,049 (or a 49-token chunk after
  // 2,000 cached) does not.
  BatchShape edge;
  add_chunk(edge, m, 0, 2048, true);
  add_chunk(edge, m, 2000, 49, true);
  CHECK(edge.prefill_tokens_short == 2048);
  CHECK(edge.prefill_chunks_short == 1);
  // The stage launches each path for its chunks only: a batch of short chunks runs no sparse
  // kernel, no indexer and no absorption.
  BatchShape short_only;
  add_chunk(short_only, m, 0, 1000, true);
  const MoeLoad load(m, p, MoeRouting{});
  int dense = 0, sparse_ops = 0, indexer = 0, absorb = 0;
  for (const auto& c : stage_operators(m, p, load, short_only, 0, rates_of("h200-sxm"), EnginePaths{true}).compute) {
    if (c.op.kind == OpKind::kAttentionPrefill) (c.op.sparse ? sparse_ops : dense) += c.count;
    if (c.op.kind == OpKind::kIndexer) indexer += c.count;
    if (c.op.kind == OpKind::kGemmOut && c.op.gemm_count == 2) absorb += c.count;
  }
  CHECK(dense == m.layers);
  CHECK(sparse_ops == 0);
  CHECK(indexer == 0);
  CHECK(absorb == 0);
}

TEST_CASE("Operators: mHC's pre and post kernels take the place of the fused add + norm") {
  // DeepSeek-V4-Flash (4 streams, h 4096) on one chip, 100 tokens: per layer two sites, each a
  // pre (two kernels) and a post (one), 4 x (2 x 4 + 1) x 4096 bf16 elements a token in all.
  const ModelSpec m = *model_preset("deepseek-v4-flash");
  REQUIRE(m.compress.streams == 4);
  const LayerTokenOps o = layer_token_ops(m, plan(1), MoeLoad(), 100, rates_of("b200"));
  CHECK(o.mhc.mhc);
  CHECK(o.mhc.kind == OpKind::kElementwise);
  CHECK(o.mhc.kernels == 6);
  CHECK(o.mhc.bytes == 2.0 * 100 * 4 * 9 * 4096);
  // One stream: no mHC, and the fused add + RMSNorm kernels (8 h a token, 2 kernels) are back.
  ModelSpec plain = m;
  plain.compress.streams = 1;
  const LayerTokenOps p = layer_token_ops(plain, plan(1), MoeLoad(), 100, rates_of("b200"));
  CHECK(p.mhc.kernels == 0);
  CHECK(p.moe_elementwise.kernels == o.moe_elementwise.kernels + 2);
  CHECK(p.moe_elementwise.bytes - o.moe_elementwise.bytes == 2.0 * 100 * 8 * 4096);
}

TEST_CASE("Operators: GLM-5.2's shared layers run neither the indexer nor its projections") {
  const ModelSpec m = *model_preset("glm-5.2");
  BatchShape b;
  for (int i = 0; i < 8; ++i) add_decode(b, m, 4000);
  const ParallelPlan p = plan(8, 1, 1, 8);
  const MoeLoad load(m, p, MoeRouting{});
  const StageOperators s = stage_operators(m, p, load, b, 0, rates_of("h200-sxm"));
  int indexer = 0, with_projections = 0, without = 0;
  const LayerTokenOps t = layer_token_ops(m, p, load, b.tokens, rates_of("h200-sxm"));
  for (const auto& c : s.compute) {
    if (c.op.kind == OpKind::kIndexer) indexer += c.count;
    if (c.op.kind == OpKind::kGemmQkv && c.op.flops == t.qkv.flops) with_projections += c.count;
    if (c.op.kind == OpKind::kGemmQkv && c.op.flops == t.qkv_without_indexer.flops) without += c.count;
  }
  CHECK(indexer == 21);  // indexer_types: 21 full layers of 78
  CHECK(with_projections == 21);
  CHECK(without == 57);
  // The projections left out: wq_b 2048 -> 32 x 128 and wk|weights_proj 6144 -> 128 + 32, 2 FLOPs
  // per multiply-add, for each of the 8 tokens.
  CHECK(t.qkv.flops - t.qkv_without_indexer.flops == 2.0 * 8 * (2048.0 * 4096 + 6144.0 * 160));
}

TEST_CASE("Operators: MiniMax-M3's sparse layers attend to their top blocks, its dense ones to everything") {
  const ModelSpec m = *model_preset("minimax-m3");
  BatchShape b;
  add_decode(b, m, 10'000);
  const LayerBatchOps o = layer_batch_ops(m, plan(1), b);
  // Sparse layers: K and V of 4 heads x (128 + 128) in bf16 for the 16 x 128 = 2,048 selected
  // tokens; the three dense layers (the window operators' place) for all 10,000. Queries and
  // outputs: 64 heads x 256 x 2 bytes.
  CHECK(o.decode_full.bytes == 2048.0 * 4 * 256 * 2 + 2.0 * 64 * 256);
  CHECK(o.decode_window.bytes == 10'000.0 * 4 * 256 * 2 + 2.0 * 64 * 256);
  CHECK(o.decode_window.window == 0);  // full attention, for the tables too
  CHECK(o.decode_full.kernels == 1);
  CHECK(o.decode_window.kernels == 1);
  // The indexer scores the 10,000 tokens with 4 heads x 128 (2 FLOPs each) and reads each one's
  // index key (128 bf16 values), plus the query's 4 x 128, and writes a 4-byte logit each.
  CHECK(o.indexer_decode.flops == 2.0 * 4 * 128 * 10'000);
  CHECK(o.indexer_decode.bytes == 10'000.0 * 256 + 4 * 128 + 4 * 10'000.0);
  // Per stage: the indexer, its projections and the sparse kernel on 57 layers, the dense kernel on 3.
  const ParallelPlan p = plan(1);
  const MoeLoad load(m, p, MoeRouting{});
  const StageOperators s = stage_operators(m, p, load, b, 0, rates_of("b200"));
  const LayerTokenOps t = layer_token_ops(m, p, load, b.tokens, rates_of("b200"));
  int indexer = 0, sparse = 0, dense = 0, with_projections = 0, without = 0;
  for (const auto& c : s.compute) {
    if (c.op.kind == OpKind::kIndexer) indexer += c.count;
    if (c.op.kind == OpKind::kAttentionDecode && c.op.bytes == o.decode_full.bytes) sparse += c.count;
    if (c.op.kind == OpKind::kAttentionDecode && c.op.bytes == o.decode_window.bytes) dense += c.count;
    if (c.op.kind == OpKind::kGemmQkv && c.op.flops == t.qkv.flops) with_projections += c.count;
    if (c.op.kind == OpKind::kGemmQkv && c.op.flops == t.qkv_without_indexer.flops) without += c.count;
  }
  CHECK(indexer == 57);
  CHECK(sparse == 57);
  CHECK(dense == 3);
  CHECK(with_projections == 57);
  CHECK(without == 3);
  // The index projections: q 6144 -> 4 x 128 and k 6144 -> 128, 2 FLOPs per multiply-add, one token.
  CHECK(t.qkv.flops - t.qkv_without_indexer.flops == 2.0 * 6144 * 640);
}

TEST_CASE("Operators: DeepSeek-V4's CSA layers attend to the window and the top entries, HCA to every entry") {
  const ModelSpec m = *model_preset("deepseek-v4-flash");
  BatchShape b;
  add_decode(b, m, 100'000);
  const LayerBatchOps o = layer_batch_ops(m, plan(1), b);
  // CSA: the 128 window tokens and min(100,000 / 4, 512) entries; HCA: the window and 100,000 / 128
  // entries; one fp8 entry of 512 each, read once for the 64 heads. Queries and outputs: 64 heads x
  // 512 x 2 (bf16, in and out). FLOPs: 4 x 512 per entry and head.
  const double query = 2.0 * 64 * 512 * 2;
  CHECK(o.decode_full.bytes == (128 + 512) * 512.0 + query);
  CHECK(o.decode_full.flops == 4.0 * 512 * 64 * (128 + 512));
  CHECK(o.decode_window.bytes == (128 + 100'000 / 128.0) * 512 + query);
  CHECK(o.decode_full.kv_heads == 0);  // no measured table describes these kernels
  // The indexer scores the 25,000 CSA entries with 64 heads x 128 and reads their fp4 keys (16
  // bytes per token), plus the query's 64 x 128, and writes a 4-byte logit per entry.
  CHECK(o.indexer_decode.flops == 2.0 * 64 * 128 * 25'000);
  CHECK(o.indexer_decode.bytes == 100'000.0 * 16 + 64 * 128 + 4 * 25'000.0);
  // Projections, one token, tp 1: an HCA layer from h 4096 -> q_lora 1024 + the entry 512 + the
  // compressor 2 x 512, and q_lora -> 64 x 512; a CSA layer adds the compressor's second window (2
  // x 512), the indexer's compressor (4 x 128) and weights (64) from h, and its queries 1024 -> 64 x
  // 128. The output: wo_a 8 groups of 8 heads x 512 -> 1024, then wo_b 8 x 1024 -> 4096.
  const ParallelPlan p = plan(1);
  const MoeLoad load(m, p, MoeRouting{});
  const LayerTokenOps t = layer_token_ops(m, p, load, b.tokens, rates_of("b200"));
  CHECK(t.qkv_without_indexer.flops == 2.0 * (4096.0 * 2560 + 1024.0 * 32'768));
  CHECK(t.qkv.flops - t.qkv_without_indexer.flops == 2.0 * (4096.0 * (1024 + 512 + 64) + 1024.0 * 8192));
  // wo_a in bf16, a batched GEMM (the absorption's slot, every new token); wo_b in the weights' format.
  CHECK(o.decode_absorb.flops == 2.0 * 64 * 512 * 1024);
  CHECK(o.decode_absorb.gemms[0].groups == 8);
  CHECK(o.decode_absorb.format == Format::kBf16);
  CHECK(t.out.flops == 2.0 * 8192 * 4096);
  CHECK(t.out.format == Format::kFp8Block);
  // At tp 8 each chip holds one group: wo_a 8 heads x 512 -> 1024, wo_b 1024 -> 4096.
  const LayerTokenOps t8 = layer_token_ops(m, plan(8), load, b.tokens, rates_of("b200"));
  CHECK(t8.out.flops == 2.0 * 1024 * 4096);
  CHECK(layer_batch_ops(m, plan(8), b).decode_absorb.flops == 2.0 * 8 * 512 * 1024);
  // Per stage: the indexer and its projections on the 21 CSA layers, the dense kernel on 22.
  const StageOperators s = stage_operators(m, p, load, b, 0, rates_of("b200"));
  int indexer = 0, csa = 0, hca = 0;
  for (const auto& c : s.compute) {
    if (c.op.kind == OpKind::kIndexer) indexer += c.count;
    if (c.op.kind == OpKind::kAttentionDecode && c.op.bytes == o.decode_full.bytes) csa += c.count;
    if (c.op.kind == OpKind::kAttentionDecode && c.op.bytes == o.decode_window.bytes) hca += c.count;
  }
  CHECK(indexer == 21);
  CHECK(csa == 21);
  CHECK(hca == 22);
}

TEST_CASE("Operators: Kimi-K3's KDA layers project a per-channel forget gate; MLA's absorption skips them") {
  const ModelSpec m = *model_preset("kimi-k3");
  BatchShape b;
  add_decode(b, m, 5000);
  const ParallelPlan p = plan(8);
  const MoeLoad load(m, p, MoeRouting{});
  const LayerTokenOps t = layer_token_ops(m, p, load, b.tokens, rates_of("gb200"));
  // Per chip (12 of the 96 heads), one token: q, k, v and the gate 7168 -> 4 x 12 x 128; beta and
  // the forget gate's first stage 7168 -> 12 + 128; its second stage 128 -> 12 x 128; 2 FLOPs per
  // multiply-add.
  CHECK(t.linear_qkv.flops == 2.0 * (7168.0 * 6144 + 7168.0 * 140 + 128.0 * 1536));
  CHECK(t.linear_qkv.kernels == 3);
  const StageOperators s = stage_operators(m, p, load, b, 0, rates_of("gb200"));
  const LayerBatchOps a = layer_batch_ops(m, p, b);
  int absorb = 0, mla = 0, kda = 0;
  for (const auto& c : s.compute) {
    if (c.op.kind == OpKind::kGemmOut && c.op.flops == a.decode_absorb.flops) absorb += c.count;
    if (c.op.kind == OpKind::kAttentionDecode) (c.op.recurrent != Recurrence::kNone ? kda : mla) += c.count;
  }
  CHECK(absorb == 24);
  CHECK(mla == 24);
  CHECK(kda == 69);
}

TEST_CASE("Operators: window layers of their own shape attend and project with it (Gemma-4)") {
  const ModelSpec m = *model_preset("gemma-4-26b-a4b");
  BatchShape b;
  add_decode(b, m, 10'000);
  const LayerBatchOps o = layer_batch_ops(m, plan(1), b);
  // Full layers: 2 KV heads of 512, K and V cached (2 bytes each); window layers: 8 KV heads of
  // 256 over the 1,024-token window. Queries and outputs: 16 heads x (512 + 512) or (256 + 256).
  CHECK(o.decode_full.bytes == 10'000.0 * 2 * 1024 * 2 + 2.0 * 16 * 1024);
  CHECK(o.decode_window.bytes == 1024.0 * 8 * 512 * 2 + 2.0 * 16 * 512);
  CHECK(o.decode_full.kv_heads == 2);
  CHECK(o.decode_window.kv_heads == 8);
  // Projections: the full layers' q (16 x 512) and k (2 x 512) without v; the window layers' q
  // (16 x 256), k and v (2 x 8 x 256).
  const MoeLoad load(m, plan(1), MoeRouting{});
  const LayerTokenOps full = layer_token_ops(m, plan(1), load, 1, rates_of("h200-sxm"));
  const LayerTokenOps window = layer_token_ops(m.window_layer_spec(), plan(1), load, 1, rates_of("h200-sxm"));
  CHECK(full.qkv.flops == 2.0 * 2816 * (16 * 512 + 2 * 512));
  CHECK(window.qkv.flops == 2.0 * 2816 * (16 * 256 + 2 * 8 * 256));
}

TEST_CASE("Operators: dense MLPs in a format of their own run at its rate (Gemma-4-31B-IT-NVFP4)") {
  ModelSpec m = *model_preset("gemma-4-31b");
  m.formats.mlp = Format::kNvfp4;
  const LayerTokenOps o = layer_token_ops(m, plan(1), MoeLoad(), 64, rates_of("b200"));
  CHECK(o.dense_mlp.rate == ComputeRate::kFp4);
  CHECK(o.qkv.rate == ComputeRate::kBf16);
  // The MLP weights read at 0.5625 bytes: 3 x 5376 x 21504 of them.
  const LayerTokenOps bf16 = layer_token_ops(*model_preset("gemma-4-31b"), plan(1), MoeLoad(), 64, rates_of("b200"));
  CHECK(bf16.dense_mlp.bytes - o.dense_mlp.bytes > 3.0 * 5376 * 21504 * (2.0 - 0.5625) * 0.99);
}

TEST_CASE("Operators: sliding-window layers read at most the window (gpt-oss)") {
  const ModelSpec m = *model_preset("gpt-oss-120b");
  BatchShape b;
  add_decode(b, m, 10'000);
  CHECK(b.decode_kv_window == 128);
  const LayerBatchOps o = layer_batch_ops(m, plan(1), b);
  // K and V of 8 heads x 64 x 2 bytes = 2,048 bytes per token; q, o 2 x 64 heads x 64 x 2 bytes.
  CHECK(o.decode_window.bytes == 128.0 * 2048 + 16'384.0);
  CHECK(o.decode_full.bytes == 10'000.0 * 2048 + 16'384.0);
  // A chunk of 512 after 4,096 cached tokens: window pairs 512 x min(4,608, 128); keys read
  // min(4,608, 128 + 512) = 640.
  BatchShape p;
  add_chunk(p, m, 4096, 512, true);
  CHECK(p.prefill_pairs_window == 512.0 * 128);
  CHECK(p.prefill_kv_window == 640);
}

TEST_CASE("Operators: residual adds fuse into the norms; permutes stay inside the MoE module") {
  const auto h200 = rates_of("h200-sxm");
  // gpt-oss-120b, TP 1, 4 decode tokens: h 2880, 64 query and 8 KV heads of 64. Per token:
  // 2 fused add + RMSNorm 8 h = 23,040; rotary on q and k 2 x (64 + 8) x 64 = 9,216; KV append
  // 2 x 8 x 64 = 1,024; no shared experts. 2 bytes x 4 tokens x 33,280 = 266,240 bytes in 4
  // kernels (2 add + norm, rotary, KV append). Routing and the permutes belong to moe_experts
  // (3 kernels), not to the elementwise operator.
  const ModelSpec oss = *model_preset("gpt-oss-120b");
  const MoeLoad load(oss, plan(1), MoeRouting{});
  const LayerTokenOps o = layer_token_ops(oss, plan(1), load, 4, h200);
  CHECK(o.moe_elementwise.kernels == 4);
  CHECK(o.moe_elementwise.bytes == 266'240.0);
  CHECK(o.moe_experts.kernels == 3);
  // A dense layer (Llama-3.1-8B, TP 1, one token): 8 x 4096 + 2 x (32 + 8) x 128 + 3 x 14,336
  // (SiLU x up) + 2 x 8 x 128 = 88,064 elements, 176,128 bytes, in 5 kernels (2 add + norm,
  // rotary, KV append, SiLU x up).
  const ModelSpec llama = *model_preset("llama-3.1-8b");
  const LayerTokenOps d = layer_token_ops(llama, plan(1), MoeLoad{}, 1, h200);
  CHECK(d.dense_elementwise.kernels == 5);
  CHECK(d.dense_elementwise.bytes == 176'128.0);
}

TEST_CASE("MoE load: balanced routing spreads T k pairs evenly; a power law loads the hottest rank") {
  const ModelSpec m = *model_preset("deepseek-v3");
  const ParallelPlan ep8 = plan(1, 8, 8, 1);
  const MoeLoad balanced(m, ep8, MoeRouting{});
  // 1,024 tokens x 8 experts / 8 ranks = 1,024 pairs on every rank.
  CHECK(balanced.busiest_pairs(1024) == approx(1024));
  // One token touches 8 of 256 experts: 8 / 8 ranks = 1 expert on the busiest rank (expected).
  CHECK(balanced.busiest_active_experts(1) == approx(1.0));
  // 1,024 tokens touch every one of the rank's 32 experts: 32 x (1 - (248/256)^1024) = 32.
  CHECK(balanced.busiest_active_experts(1024) == approx(32.0));
  MoeRouting skew;
  skew.distribution = MoeRouting::Distribution::kPowerLaw;
  skew.alpha = 1.2;
  const MoeLoad power(m, ep8, skew);
  const auto& p = power.popularity();
  CHECK(std::accumulate(p.begin(), p.end(), 0.0) == approx(1.0));
  // The hottest expert takes every token at most once: share 1 / 8 of the 8 picks per token.
  CHECK(p.front() == approx(1.0 / 8));
  CHECK(power.busiest_pairs(1024) > 1.3 * balanced.busiest_pairs(1024));
}

TEST_CASE(
    "MoE dispatch: DeepEP's normal kernels send a token once per destination node, the low-latency ones once per "
    "expert") {
  // DeepSeek-V3 at EP32 over 4 nodes of 8 chips, balanced: 8 experts per chip, 64 per node.
  const ModelSpec m = *model_preset("deepseek-v3");
  const ParallelPlan ep32 = plan(1, 32, 32, 1);
  MoeLoad load(m, ep32, MoeRouting{});
  load.set_dispatch(8, DispatchKernel::kPerRank);
  // A token's 8 distinct experts miss a node's 64 with probability prod_{i<8} (192 - i) / (256 - i)
  // = 0.09645, a chip's 8 with prod (248 - i) / (256 - i) = 0.77291: it reaches a given other
  // node with 0.90355, a given chip with 0.22709. Over the NIC: 3 x 0.90355 = 2.7107 copies
  // (6 per selected expert: 8 x 24 / 32); over NVLink: the 7 other chips of its node and, forwarded
  // by the relay in each other node, that node's 7 non-relay chips: 28 x 0.22709 = 6.3584.
  CHECK(load.dispatch_fanout().nic == approx(2.71066).epsilon(1e-5));
  CHECK(load.dispatch_fanout().up == approx(6.35845).epsilon(1e-5));
  load.set_dispatch(8, DispatchKernel::kPerExpert);
  CHECK(load.dispatch_fanout().nic == approx(8.0 * 24 / 32));
  CHECK(load.dispatch_fanout().up == approx(8.0 * 7 / 32));
  // The operators carry it: each chip dispatches its t = 100 tokens (tp 1) as fp8 with block
  // scales, 1 + 4 / 128 bytes per element; the combine returns bf16.
  load.set_dispatch(8, DispatchKernel::kPerRank);
  const auto rates = rates_of("h800-sxm");
  const LayerTokenOps o = layer_token_ops(m, ep32, load, 32 * 100, rates);
  CHECK(o.moe_dispatch.bytes == approx(100 * (2.71066 + 6.35845) * 7168 * 1.03125).epsilon(1e-5));
  CHECK(o.moe_dispatch.nic_bytes == approx(100 * 2.71066 * 7168 * 1.03125).epsilon(1e-5));
  CHECK(o.moe_combine.nic_bytes == approx(100 * 2.71066 * 7168 * 2).epsilon(1e-5));
  CHECK_FALSE(o.moe_dispatch.low_latency);
  // EP8 in one node: nothing crosses a NIC; a token goes once to each other chip it reaches,
  // 32 experts each: 7 x (1 - prod_{i<8} (224 - i) / (256 - i)) = 7 x 0.66183 = 4.6328 copies.
  MoeLoad node(m, plan(1, 8, 8, 1), MoeRouting{});
  node.set_dispatch(8, DispatchKernel::kPerRank);
  CHECK(node.dispatch_fanout().nic == 0.0);
  CHECK(node.dispatch_fanout().up == approx(4.63282).epsilon(1e-5));
}

TEST_CASE("Operators: routed experts run on the busiest rank; attention DP dispatches tokens") {
  const ModelSpec m = *model_preset("deepseek-v3");
  const auto h200 = rates_of("h200-sxm");
  // One chip, 1 token: 8 token-expert pairs x 6 x 7168 x 2048 = 2 FLOPs per parameter of the 8
  // active experts (at the fp8 rate); the router 2 x 7168 x 256 apart, in bf16.
  const ParallelPlan one = plan(1);
  const LayerTokenOps o1 = layer_token_ops(m, one, MoeLoad(m, one, {}), 1, h200);
  CHECK(o1.moe_experts.flops == approx(6.0 * 8 * 7168 * 2048));
  CHECK(o1.router.flops == 2.0 * 7168 * 256);
  CHECK(o1.router.rate == ComputeRate::kBf16);
  CHECK(o1.moe_experts.rate == ComputeRate::kFp8);
  // DP 8 x EP 8, 8 tokens (one per chip): each chip sends its token to 8 experts, 7/8 of them
  // elsewhere: 7 copies x 7168 x 1.03125 bytes (fp8 with a scale per 128) to dispatch, bf16 back.
  const ParallelPlan dp8 = plan(1, 8, 8, 1);
  const LayerTokenOps o8 = layer_token_ops(m, dp8, MoeLoad(m, dp8, {}), 8, h200);
  CHECK(o8.moe_dispatch.bytes == approx(7.0 * 7168 * 1.03125));
  CHECK(o8.moe_combine.bytes == approx(7.0 * 7168 * 2));
  CHECK(o8.moe_dispatch.collective == Collective::kAllToAll);
  CHECK(o8.moe_reduce.bytes == 0.0);  // tp = 1: nothing to all-reduce
}

TEST_CASE("Operators: an emulated format runs at bf16 and pays for dequantising its weights") {
  ModelSpec m = *model_preset("deepseek-v3");
  m.formats.emulate = true;
  const ParallelPlan tp8 = plan(8, 1, 1, 8);
  const LayerTokenOps o = layer_token_ops(m, tp8, MoeLoad(m, tp8, {}), 16, rates_of("a100-80g"));
  CHECK(o.qkv.rate == ComputeRate::kBf16);
  // Weight-only kernel: the weights stream at their stored 1.000244 bytes, activations are bf16.
  // Attention weights per chip (tp 8, 16 heads): fused q_a|kv_a 7168 x (1536 + 512 + 64)
  // = 15,138,816 + q_b 1536 x 16 x 192 = 4,718,592 + o 16 x 128 x 7168 = 14,680,064
  // = 34,537,472 elements, 2 vector operations each to dequantise.
  CHECK(o.dequant_attention.flops == 2.0 * 34'537'472);
  CHECK(o.dequant_attention.kernels == 1);
  const double q_a = 7168.0 * 2112;
  CHECK(o.qkv.bytes ==
        approx((q_a + 1536.0 * 16 * 192) * (1 + 4.0 / 16384) + 2.0 * 16 * (7168 + 2112) + 2.0 * 16 * (1536 + 3072)));
  // On H100 the same format is native: fp8 weights and fp8 (block-scaled) activations.
  const LayerTokenOps native = layer_token_ops(m, tp8, MoeLoad(m, tp8, {}), 16, rates_of("h100-sxm"));
  CHECK(native.qkv.rate == ComputeRate::kFp8);
  CHECK(native.dequant_attention.kernels == 0);
}

TEST_CASE("Operators: context parallelism passes KV shards round the ring and splits the work") {
  const ModelSpec m = *model_preset("llama-3.1-8b");
  BatchShape b;
  add_chunk(b, m, 0, 1000, true);
  const LayerBatchOps cp4 = layer_batch_ops(m, plan(1, 1, 1, 1, 4), b);
  const LayerBatchOps cp1 = layer_batch_ops(m, plan(1), b);
  CHECK(cp4.prefill_full.flops == cp1.prefill_full.flops / 4);
  // Each rank holds 1,000 / 4 tokens of K and V (8 heads x 128 x 2 x 2 bytes = 4,096 bytes per
  // token and layer) and passes them on 3 times.
  CHECK(cp4.cp_prefill.bytes == 3.0 * 250 * 4096);
  CHECK(cp4.cp_prefill.group == Group::kCp);
  CHECK(cp1.cp_prefill.bytes == 0.0);
  // Pass-Q instead: 250 queries per rank x 32 heads x (128 q + 128 o + 1 lse) x 2 bytes, 3 hops.
  CHECK(cp4.cp_prefill_q.bytes == 3.0 * 250 * 32 * 257 * 2);
  // A short chunk after a long cache passes the queries: 64 new tokens after 100,000.
  BatchShape late;
  add_chunk(late, m, 100'000, 64, false);
  const StageOperators s = stage_operators(m, plan(1, 1, 1, 1, 4), MoeLoad(), late, 0, rates_of("h100-sxm"));
  double cp_bytes = 0;
  for (const auto& c : s.comm) {
    if (c.op.kind == OpKind::kCpExchange) cp_bytes = c.op.bytes;
  }
  CHECK(cp_bytes == 3.0 * 16 * 32 * 257 * 2);  // pass-Q: 16 queries per rank
}

TEST_CASE("Operators: the stage list names every collective with its group and volume") {
  const ModelSpec m = *model_preset("qwen3-235b-a22b");
  BatchShape b;
  for (int i = 0; i < 64; ++i) add_decode(b, m, 2000);
  ParallelPlan p = plan(4, 2, 8, 1, 1, 2);  // tp 4 x dp 2, ep 8, two stages
  const StageOperators s0 = stage_operators(m, p, MoeLoad(m, p, {}), b, 0, rates_of("h200-sxm"));
  bool dispatch = false, send = false, reduce = false;
  for (const auto& c : s0.comm) {
    dispatch |= c.op.kind == OpKind::kEpDispatch && c.count == 47;
    send |= c.op.kind == OpKind::kPpSend && c.op.collective == Collective::kP2p;
    reduce |= c.op.kind == OpKind::kTpAllReduce && c.op.group == Group::kTp;
  }
  CHECK(dispatch);  // 94 layers over 2 stages: 47 MoE layers on stage 0
  CHECK(send);
  CHECK(reduce);
  bool lm_head = false;
  for (const auto& c : s0.compute) lm_head |= c.op.kind == OpKind::kLmHead;
  CHECK_FALSE(lm_head);  // on the last stage only
}

TEST_CASE("Vision: the encoder's FLOPs for one 1280 x 720 image") {
  const VisionSpec v = *model_preset("qwen2.5-vl-7b")->vision;
  std::vector<Operator> ops;
  vision_encoder_ops(v, {v.resize(1280, 720).patches}, 1, ops);
  double gemm = 0, attention = 0;
  for (const Operator& o : ops) (o.kind == OpKind::kAttentionPrefill ? attention : gemm) += o.flops;
  // 4,784 patches. Per block: QKV 2 x 4784 x 1280 x 3840 + O 2 x 4784 x 1280^2 + MLP
  // 2 x 4784 x 3 x 1280 x 3420 = 47.0 + 15.7 + 125.7 GFLOP; 32 blocks; + patch embedding
  // 2 x 4784 x 1176 x 1280 and the merger 2 x 1196 x 5120 x (5120 + 3584).
  const double block = 2.0 * 4784 * 1280 * 3840 + 2.0 * 4784 * 1280 * 1280 + 2.0 * 4784 * 3 * 1280 * 3420;
  const double expected = 32 * block + 2.0 * 4784 * 1176 * 1280 + 2.0 * 1196 * 5120 * (5120 + 3584);
  CHECK(gemm == approx(expected));
  // Attention: 4 global blocks over all 4,784^2 pairs, 28 windowed ones over 8 x 8 = 64-patch
  // windows (4,784 x 64 pairs), 4 x 1280 FLOPs per pair.
  CHECK(attention == approx(4.0 * 1280 * (4.0 * 4784.0 * 4784 + 28.0 * 4784 * 64)));
}

TEST_CASE("Operators: one MTP draft step of DeepSeek-V3 is eh_proj, a MoE layer and the LM head") {
  const ModelSpec m = *model_preset("deepseek-v3");
  const ParallelPlan one = plan(1);
  BatchShape b;
  add_decode(b, m, 1000);
  const MtpDraftOps d = mtp_draft_ops(m, one, MoeLoad(m, one, {}), b, rates_of("h200-sxm"));
  // eh_proj: 2 x 1 token x (2 x 7168) x 7168; the LM head 2 x 7168 x 129,280.
  CHECK(d.eh_proj.flops == 2.0 * 2 * 7168 * 7168);
  CHECK(d.lm_head.flops == 2.0 * 7168 * 129280);
  CHECK(d.moe_layer);
  // The layer's experts: 8 pairs x 6 x 7168 x 2048 (as any MoE layer's).
  CHECK(d.layer.moe_experts.flops == approx(6.0 * 8 * 7168 * 2048));
  CHECK(d.attention.decode_full.flops > 0);
}

TEST_CASE("Operators: Gated DeltaNet reads and writes each sequence's state per decode step (Qwen3.5-397B-A17B)") {
  const ModelSpec m = *model_preset("qwen3.5-397b-a17b");
  const ParallelPlan p = plan(8, 1, 8, 1);
  // TP 8: hv = 8 value heads, hk = 2 key heads of 128, conv over ch = 2 x 2 x 128 + 8 x 128 =
  // 1,536 channels with 4 taps; the state is 8 x 128 x 128 x 4 = 524,288 bytes per sequence.
  BatchShape d;
  for (int i = 0; i < 4; ++i) add_decode(d, m, 1000);
  const LayerBatchOps dec = layer_batch_ops(m, p, d);
  // 4 x (8 x 7 x 128^2 + 2 x 4 x 1,536) = 4 x 929,792 FLOPs.
  CHECK(dec.linear_decode.flops == 4.0 * 929'792);
  // 4 x (2 x 524,288 state + 2 x (2 x 3 x 1,536 conv state + 2 x 1,536 q, k, v + 1,024 out)
  // + 8 fp32 gates x 2) = 4 x 1,075,264 bytes: independent of the contexts.
  CHECK(dec.linear_decode.bytes == 4.0 * 1'075'264);
  CHECK(dec.linear_decode.kind == OpKind::kAttentionDecode);
  CHECK(dec.linear_decode.recurrent == Recurrence::kGatedDeltaNet);
  BatchShape longer;
  for (int i = 0; i < 4; ++i) add_decode(longer, m, 100'000);
  CHECK(layer_batch_ops(m, p, longer).linear_decode.bytes == dec.linear_decode.bytes);
  // Prefill of one 1,000-token prompt: 1,000 x (8 x (6 x 128^2 + 2 x 64 x (3 x 128 + 128)) +
  // 2 x 4 x 1,536) = 1,323,008,000 FLOPs; bytes 1,000 x (2 x (3 x 1,536 + 1,024) + 64) +
  // (1,000 / 64 + 1) chunk states x 2 x 524,288 = 11,328,000 + 17,432,576.
  BatchShape pre;
  add_chunk(pre, m, 0, 1000, true);
  const LayerBatchOps pf = layer_batch_ops(m, p, pre);
  CHECK(pf.linear_prefill.flops == 1'323'008'000.0);
  CHECK(pf.linear_prefill.bytes == approx(11'328'000.0 + 17'432'576.0));
  // The stage: 45 linear layers run it, the 15 full ones the attention.
  const StageOperators s = stage_operators(m, p, MoeLoad(m, p, MoeRouting{}), d, 0, rates_of("h200-sxm"));
  int linear = 0, full = 0;
  for (const auto& c : s.compute) {
    if (c.op.kind != OpKind::kAttentionDecode) continue;
    (c.op.recurrent != Recurrence::kNone ? linear : full) += c.count;
  }
  CHECK(linear == 45);
  CHECK(full == 15);
}

TEST_CASE("Operators: Nemotron-H runs Mamba-2 layers, plain MLPs and layers without a feed-forward block") {
  const ModelSpec m = *model_preset("nemotron-3-nano-30b-a3b");
  const ParallelPlan p = plan(2);
  // TP 2: hv = 32 Mamba-2 heads of 64, hk = 4 groups with a 128-wide state, conv over ch = 2 x 4
  // x 128 + 32 x 64 = 3,072 channels with 4 taps; the state is 32 x 128 x 64 x 4 bytes.
  BatchShape d;
  for (int i = 0; i < 3; ++i) add_decode(d, m, 1000);
  const LayerBatchOps dec = layer_batch_ops(m, p, d);
  CHECK(dec.linear_decode.recurrent == Recurrence::kMamba2);
  // 3 x (32 x 5 x 128 x 64 + 2 x 4 x 3,072) = 3 x 1,335,296 FLOPs.
  CHECK(dec.linear_decode.flops == 3.0 * 1'335'296);
  // Prefill of one 1,000-token prompt (chunks of 128): 1,000 x (32 x (4 x 128 x 64 + 2 x 128 x 64)
  // + 4 x 2 x 128 x 128 + 2 x 4 x 3,072) = 1,000 x 1,728,512 FLOPs.
  BatchShape pre;
  add_chunk(pre, m, 0, 1000, true);
  CHECK(layer_batch_ops(m, p, pre).linear_prefill.flops == 1'728'512'000.0);
  // One in_proj GEMM: 2688 -> 2 x 4 x 128 + 2 x 32 x 64 + 32 = 5,152 columns per chip.
  const LayerTokenOps t = layer_token_ops(m, p, MoeLoad(m, p, MoeRouting{}), 1.0, rates_of("h200-sxm"));
  CHECK(t.linear_qkv.flops == 2.0 * 2688 * 5152);
  // Plain experts: 6 pairs x 2 x (2 x 2688 x 1856) FLOPs (up and down), the shared expert's
  // up is 3,712 / 2 columns wide, not twice that.
  CHECK(t.moe_experts.flops == approx(6.0 * 2 * 2 * 2688 * 1856));
  CHECK_FALSE(t.moe_experts.gated);
  CHECK(t.shared_mlp.flops == approx(2.0 * 2 * 2688 * 1856));
  // The stage: 23 Mamba-2 and 6 attention layers, 23 MoE blocks, 6 layers with their mixer's
  // elementwise share only and no MLP.
  const StageOperators s = stage_operators(m, p, MoeLoad(m, p, MoeRouting{}), d, 0, rates_of("h200-sxm"));
  const LayerTokenOps t3 = layer_token_ops(m, p, MoeLoad(m, p, MoeRouting{}), 3.0, rates_of("h200-sxm"));
  REQUIRE(t3.mixer_elementwise.bytes < t3.moe_elementwise.bytes);
  int linear = 0, full = 0, mixer_only = 0, experts = 0, dense = 0;
  for (const auto& c : s.compute) {
    if (c.op.kind == OpKind::kAttentionDecode) (c.op.recurrent != Recurrence::kNone ? linear : full) += c.count;
    if (c.op.kind == OpKind::kMoeExperts && c.op.batch > 0) experts += c.count;
    if (c.op.kind == OpKind::kGemmMlp && c.op.flops == t3.dense_mlp.flops) dense += c.count;
    if (c.op.kind == OpKind::kElementwise && c.op.bytes == t3.mixer_elementwise.bytes) mixer_only += c.count;
  }
  CHECK(linear == 23);
  CHECK(full == 6);
  CHECK(experts == 23);
  CHECK(dense == 0);
  CHECK(mixer_only == 6);
}

TEST_CASE("Operators: a latent MoE runs its experts and all-to-all in the latent width (Nemotron-3 Super)") {
  const ModelSpec m = *model_preset("nemotron-3-super-120b-a12b");
  // TP 4 with attention DP 2, EP 8: the experts take 1,024-wide rows (the latent), and the
  // dispatch moves latent rows; fc1 / fc2 (4096 <-> 1,024 / 4 per chip) run with the shared
  // expert's GEMMs.
  const ParallelPlan p = plan(4, 2, 8);
  const LayerTokenOps t = layer_token_ops(m, p, MoeLoad(m, p, MoeRouting{}), 64.0, rates_of("h200-sxm"));
  CHECK(t.moe_experts.k == 1024);
  CHECK_FALSE(t.moe_experts.gated);
  // The shared expert (up 4096 -> 5,376 / 4 = 1,344 and down) and the two projections (4096 ->
  // 1,024 / 4 = 256 and back), each over the chip's token rows: 2 rows x 4096 x (1,344 + 1,344 +
  // 256 + 256) FLOPs.
  const double rows = t.shared_mlp.m;
  CHECK(t.shared_mlp.gemm_count == 4);
  CHECK(t.shared_mlp.flops == approx(2.0 * rows * 4096 * (1344 + 1344 + 256 + 256)));
  // The same plan on a model whose experts take the hidden state moves 4x the bytes per copy.
  ModelSpec wide = m;
  wide.moe.latent = 0;
  const LayerTokenOps w = layer_token_ops(wide, p, MoeLoad(wide, p, MoeRouting{}), 64.0, rates_of("h200-sxm"));
  REQUIRE(t.moe_dispatch.bytes > 0);
  CHECK(w.moe_dispatch.bytes == approx(4.0 * t.moe_dispatch.bytes));
}
