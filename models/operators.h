// The operators of one iteration on one chip, as FLOPs and bytes moved, for a batch given in
// aggregate form.
//
// A batch mixes prefill chunks (c new tokens after p cached ones) and decode tokens (one new token
// per sequence, attending to its whole context). Every quantity an operator needs is a sum over
// the batch, so BatchShape carries the sums and building it never loops over sequences in the hot
// path. Formulas and their derivation: models/README.md. Units: FLOPs and bytes per chip.
//
// Ignored: sampling, logits all-gather, the embedding lookup's own time (a gather of tokens x
// hidden elements, below the kernel floor at serving batch sizes), attention kernels' split-K
// reductions.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "models/model_spec.h"
#include "models/parallel_plan.h"

namespace servesim::models {

// Components of an iteration's time, for costs and attribution. Communication kinds come after
// compute kinds; kScheduling is host time between iterations.
enum class OpKind : std::uint8_t {
  kGemmQkv,
  kGemmOut,
  kGemmMlp,
  kAttentionPrefill,
  kAttentionDecode,
  kElementwise,
  kLmHead,
  kTpAllReduce,
  kPpSend,
  kScheduling,
  kCount
};
constexpr std::size_t kOpKinds = static_cast<std::size_t>(OpKind::kCount);
std::string_view op_kind_name(OpKind k);
bool is_communication(OpKind k);

struct BatchShape {
  std::int64_t tokens = 0;          // new tokens: decode sequences + prefill chunk tokens
  std::int64_t logits = 0;          // sequences that sample a token (decodes + finishing prefills)
  std::int64_t decode_seqs = 0;
  std::int64_t decode_kv_tokens = 0;   // sum of decode context lengths, new token included
  std::int64_t prefill_tokens = 0;
  double prefill_pairs = 0;            // sum over chunks of c * (p + c): q-k pairs the kernel computes
  std::int64_t prefill_kv_tokens = 0;  // sum over chunks of p + c: keys/values each chunk reads
};

struct Operator {
  OpKind kind = OpKind::kGemmQkv;
  double flops = 0;
  double bytes = 0;
  int kernels = 1;
};

// Token-linear operators of one layer for `tokens` new tokens: QKV, O and MLP GEMMs and the
// elementwise kernels. Written to out[0..3].
std::array<Operator, 4> linear_layer_ops(const ModelSpec& m, const ParallelPlan& p,
                                         std::int64_t tokens);
Operator attention_prefill_op(const ModelSpec& m, const ParallelPlan& p, const BatchShape& b);
Operator attention_decode_op(const ModelSpec& m, const ParallelPlan& p, const BatchShape& b);
Operator lm_head_op(const ModelSpec& m, const ParallelPlan& p, std::int64_t logits);

// Bytes of one TP all-reduce of the hidden states (two per layer, after O and after the MLP,
// plus one after the vocabulary-parallel embedding), and of one pipeline send between stages.
double hidden_state_bytes(const ModelSpec& m, std::int64_t tokens);

// KV-cache bytes one token occupies on one chip of pipeline stage `stage`.
double kv_bytes_per_token_per_chip(const ModelSpec& m, const ParallelPlan& p, int stage);

}  // namespace servesim::models
