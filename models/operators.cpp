#include "models/operators.h"

namespace servesim::models {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kGemmQkv: return "gemm_qkv";
    case OpKind::kGemmOut: return "gemm_out";
    case OpKind::kGemmMlp: return "gemm_mlp";
    case OpKind::kAttentionPrefill: return "attention_prefill";
    case OpKind::kAttentionDecode: return "attention_decode";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kLmHead: return "lm_head";
    case OpKind::kTpAllReduce: return "tp_all_reduce";
    case OpKind::kPpSend: return "pp_send";
    case OpKind::kScheduling: return "scheduling";
    case OpKind::kCount: break;
  }
  return "?";
}

bool is_communication(OpKind k) { return k == OpKind::kTpAllReduce || k == OpKind::kPpSend; }

namespace {
// A [tokens x k] x [k x n] GEMM: 2 FLOPs per multiply-add; reads the weight once and the input,
// writes the output.
Operator gemm(OpKind kind, const ModelSpec& m, double tokens, double k, double n) {
  Operator op;
  op.kind = kind;
  op.flops = 2.0 * tokens * k * n;
  op.bytes = m.weight_bytes * k * n + m.activation_bytes * tokens * (k + n);
  op.kernels = 1;
  return op;
}
}  // namespace

std::array<Operator, 4> linear_layer_ops(const ModelSpec& m, const ParallelPlan& p,
                                         std::int64_t tokens_i) {
  const double t = static_cast<double>(tokens_i);
  const double h = m.hidden, hd = m.head_dim;
  const double hq = p.heads_per_chip(m), hkv = p.kv_heads_per_chip(m);
  const double ffn = static_cast<double>(m.intermediate) / p.tp;
  std::array<Operator, 4> ops;
  ops[0] = gemm(OpKind::kGemmQkv, m, t, h, (hq + 2 * hkv) * hd);
  ops[1] = gemm(OpKind::kGemmOut, m, t, hq * hd, h);
  // Gate and up fused into one [h x 2 ffn] GEMM, then down [ffn x h]: two kernels.
  Operator up = gemm(OpKind::kGemmMlp, m, t, h, 2 * ffn);
  const Operator down = gemm(OpKind::kGemmMlp, m, t, ffn, h);
  up.flops += down.flops;
  up.bytes += down.bytes;
  up.kernels = 2;
  ops[2] = up;
  // Elementwise kernels, each reading and writing activations once (bytes per token):
  //   2 RMSNorms: read h, write h                       -> 4 h
  //   2 residual adds: read 2 h, write h                -> 6 h
  //   rotary on q and k: read and write (hq + hkv) hd   -> 2 (hq + hkv) hd
  //   SiLU(gate) * up: read 2 ffn, write ffn            -> 3 ffn
  //   KV-cache append: write 2 hkv hd                   -> 2 hkv hd
  Operator ew;
  ew.kind = OpKind::kElementwise;
  ew.flops = 0;
  ew.bytes = m.activation_bytes * t * (10 * h + 2 * (hq + hkv) * hd + 3 * ffn + 2 * hkv * hd);
  ew.kernels = 6;
  ops[3] = ew;
  return ops;
}

Operator attention_prefill_op(const ModelSpec& m, const ParallelPlan& p, const BatchShape& b) {
  // Per query-key pair and head: q.k (hd multiply-adds) and the weighted sum of v (hd
  // multiply-adds) = 4 hd FLOPs. Pairs are counted over the full c x (p + c) rectangle, not the
  // causal half: measured prefill kernels take as long as the rectangle at a flat efficiency
  // (Vidur A100 attention table: 0.36 of peak on the rectangle, 0.20-0.34 on the causal count;
  // scripts/derive_efficiency.md section 4). Reads Q once, K and V once per chunk, writes O once.
  const double hd = m.head_dim;
  const double hq = p.heads_per_chip(m), hkv = p.kv_heads_per_chip(m);
  Operator op;
  op.kind = OpKind::kAttentionPrefill;
  op.flops = 4.0 * hd * hq * b.prefill_pairs;
  op.bytes = m.activation_bytes * 2.0 * static_cast<double>(b.prefill_tokens) * hq * hd +
             m.kv_bytes * 2.0 * hkv * hd * static_cast<double>(b.prefill_kv_tokens);
  op.kernels = b.prefill_tokens > 0 ? 1 : 0;
  return op;
}

Operator attention_decode_op(const ModelSpec& m, const ParallelPlan& p, const BatchShape& b) {
  // Each decode sequence reads the K and V of its whole context once (memory-bound); 4 hd FLOPs
  // per context token and query head.
  const double hd = m.head_dim;
  const double hq = p.heads_per_chip(m), hkv = p.kv_heads_per_chip(m);
  const double kv = static_cast<double>(b.decode_kv_tokens);
  Operator op;
  op.kind = OpKind::kAttentionDecode;
  op.flops = 4.0 * hd * hq * kv;
  op.bytes = m.kv_bytes * 2.0 * hkv * hd * kv +
             m.activation_bytes * 2.0 * static_cast<double>(b.decode_seqs) * hq * hd;
  op.kernels = b.decode_seqs > 0 ? 1 : 0;
  return op;
}

Operator lm_head_op(const ModelSpec& m, const ParallelPlan& p, std::int64_t logits) {
  // Vocabulary-parallel LM head: [logits x h] x [h x vocab/tp], only for sequences that sample.
  Operator op = gemm(OpKind::kLmHead, m, static_cast<double>(logits), m.hidden,
                     static_cast<double>(m.vocab) / p.tp);
  op.kernels = logits > 0 ? 1 : 0;
  return op;
}

double hidden_state_bytes(const ModelSpec& m, std::int64_t tokens) {
  return static_cast<double>(m.activation_bytes) * static_cast<double>(tokens) * m.hidden;
}

double kv_bytes_per_token_per_chip(const ModelSpec& m, const ParallelPlan& p, int stage) {
  return 2.0 * p.kv_heads_per_chip(m) * m.head_dim * m.kv_bytes * p.stage_layers(m, stage);
}

}  // namespace servesim::models
