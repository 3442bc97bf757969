// The operators of one iteration on one chip, as FLOPs and bytes moved, plus the communication
// each layer needs, for a batch given in aggregate form.
//
// A batch mixes prefill chunks (c new tokens after p cached ones) and decode tokens (one new token
// per sequence, attending to its whole context). Every quantity an operator needs is a sum over
// the batch, so BatchShape carries the sums and building it never loops over sequences in the hot
// path. Operators come in three families:
//   token operators   depend only on the batch's new-token count T (projections, MLPs, experts,
//                     norms, the collectives after them): LayerTokenOps, costed once per T;
//   batch operators   attention and what scales with context (MLA up-projection of cached
//                     latents, the DSA indexer, context-parallel exchange), affine in the sums:
//                     LayerBatchOps;
//   once per stage    the LM head (last stage), the embedding all-reduce (first), the pipeline send.
// Per chip: the instance's batch splits evenly over dp x cp ranks for attention and the dense
// parts (tokens per chip T / (dp cp)); MoE layers see the dp groups' tokens together (T / cp per
// MoE group) and the busiest EP rank sets the time (MoeLoad). Formulas and their derivation:
// models/README.md. Units: FLOPs and bytes per chip.
//
// Ignored: sampling, logits all-gather, the embedding lookup's own time, attention kernels'
// split-K reductions, top-k selection in the router, attention sinks, biases, QK-norms.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "models/formats.h"
#include "models/model_spec.h"
#include "models/parallel_plan.h"

namespace servesim::models {

// Components of an iteration's time, for costs and attribution. Communication kinds come after
// compute kinds; kScheduling is host time between iterations.
enum class OpKind : std::uint8_t {
  kGemmQkv,     // attention input projections (QKV; MLA q/kv down and up; DSA indexer)
  kGemmOut,     // attention output projection (MLA: with the absorbed value up-projection)
  kGemmMlp,     // dense MLPs and shared experts
  kMoeExperts,  // router and routed-expert grouped GEMMs on the busiest rank
  kAttentionPrefill,
  kAttentionDecode,
  kIndexer,  // DSA indexer scores
  kElementwise,
  kLmHead,
  kDequantize,  // emulated formats: weights dequantised to bf16 before their GEMMs
  kTpAllReduce,
  kEpDispatch,
  kEpCombine,
  kCpExchange,  // context parallelism: ring KV passes (prefill), partial attention (decode)
  kPpSend,
  kScheduling,
  kSwap,             // KV copied to / from host memory for swap preemption (sim/cluster)
  kMtpDraft,         // speculative decoding: the MTP module's draft steps (sim/cluster)
  kImbalance,        // attention-DP: the busiest rank's decode attention beyond the mean (sim/cluster)
  kA2aKvContention,  // the expert all-to-all's NIC part stretched by KV flows on its NICs (sim/cluster)
  kCount
};
constexpr std::size_t kOpKinds = static_cast<std::size_t>(OpKind::kCount);
std::string_view op_kind_name(OpKind k);
bool is_communication(OpKind k);

enum class Collective : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kP2p };
std::string_view collective_name(Collective c);

// All sums are doubles (integers below 2^53 are exact), so that the hot path reads any of them
// through one member-pointer table without conversions.
struct BatchShape {
  double tokens = 0;  // new tokens: decode sequences + prefill chunk tokens
  double logits = 0;  // sequences that sample a token (decodes + finishing prefills)
  double decode_seqs = 0;
  double decode_kv_tokens = 0;  // sum of decode context lengths, new token included
  double prefill_tokens = 0;
  double prefill_pairs = 0;      // sum over chunks of c (p + c): q-k pairs the kernel computes
  double prefill_kv_tokens = 0;  // sum over chunks of p + c: keys/values each chunk reads
  double prefill_chunks = 0;
  // Capped sums for sliding-window layers (cap W = the window) and DSA (cap K = top_k); zero when
  // the model has neither. Decodes: sum of min(context, cap). Chunks: pairs c min(p + c, cap),
  // keys read min(p + c, cap + c).
  double decode_kv_window = 0;
  double prefill_pairs_window = 0;
  double prefill_kv_window = 0;
  double decode_kv_topk = 0;
  double prefill_pairs_topk = 0;
  double prefill_kv_topk = 0;
  // DSA: the chunks whose context (p + c) fits in the cap K, which an engine may run densely
  // (EnginePaths::dsa_dense_prefill): their new tokens, q-k pairs c (p + c), keys p + c and count.
  double prefill_tokens_short = 0;
  double prefill_pairs_short = 0;
  double prefill_kv_short = 0;
  double prefill_chunks_short = 0;
  // DSA: the q-k pairs under the causal mask, c p + c (c + 1) / 2 a chunk (the indexer's scoring
  // kernel skips the masked ones), of all chunks and of the short ones.
  double prefill_pairs_causal = 0;
  double prefill_pairs_causal_short = 0;
};
// BatchShape as a vector of numbers, for deriving affine coefficients (iteration_cost).
constexpr int kBatchFields = 20;
inline constexpr double BatchShape::*kBatchFieldMembers[kBatchFields] = {&BatchShape::tokens,
                                                                         &BatchShape::logits,
                                                                         &BatchShape::decode_seqs,
                                                                         &BatchShape::decode_kv_tokens,
                                                                         &BatchShape::prefill_tokens,
                                                                         &BatchShape::prefill_pairs,
                                                                         &BatchShape::prefill_kv_tokens,
                                                                         &BatchShape::prefill_chunks,
                                                                         &BatchShape::decode_kv_window,
                                                                         &BatchShape::prefill_pairs_window,
                                                                         &BatchShape::prefill_kv_window,
                                                                         &BatchShape::decode_kv_topk,
                                                                         &BatchShape::prefill_pairs_topk,
                                                                         &BatchShape::prefill_kv_topk,
                                                                         &BatchShape::prefill_tokens_short,
                                                                         &BatchShape::prefill_pairs_short,
                                                                         &BatchShape::prefill_kv_short,
                                                                         &BatchShape::prefill_chunks_short,
                                                                         &BatchShape::prefill_pairs_causal,
                                                                         &BatchShape::prefill_pairs_causal_short};
inline double batch_field(const BatchShape& b, int i) { return b.*kBatchFieldMembers[i]; }
inline void set_batch_field(BatchShape& b, int i, double v) { b.*kBatchFieldMembers[i] = v; }
// The pair and capped sums of one prefill chunk of `new_tokens` after `cached`: prefill_pairs, the
// window sums (window > 0: the model's window_cap) and the DSA sums (top_k > 0: its topk_cap).
// The caller counts the tokens, chunks, keys and logits. Shared by add_chunk and the simulator's
// batches (cluster::Lane::shape), inline for the latter's loop over chunks.
inline void add_chunk_pairs(BatchShape& b, std::int64_t cached, std::int64_t new_tokens, std::int64_t window,
                            std::int64_t top_k) {
  const std::int64_t kv = cached + new_tokens;
  const double c = static_cast<double>(new_tokens);
  b.prefill_pairs += c * static_cast<double>(kv);
  if (window > 0) {
    b.prefill_pairs_window += c * static_cast<double>(std::min(kv, window));
    b.prefill_kv_window += static_cast<double>(std::min(kv, window + new_tokens));
  }
  if (top_k > 0) {
    b.prefill_pairs_topk += c * static_cast<double>(std::min(kv, top_k));
    b.prefill_kv_topk += static_cast<double>(std::min(kv, top_k + new_tokens));
    const double causal = c * static_cast<double>(cached) + c * (c + 1) / 2;
    b.prefill_pairs_causal += causal;
    if (kv <= top_k) {
      b.prefill_tokens_short += c;
      b.prefill_pairs_short += c * static_cast<double>(kv);
      b.prefill_kv_short += static_cast<double>(kv);
      b.prefill_chunks_short += 1;
      b.prefill_pairs_causal_short += causal;
    }
  }
}
// Adds one chunk / one decode to the sums (tests and tools; the simulator keeps them in aggregate).
void add_chunk(BatchShape& b, const ModelSpec& m, std::int64_t cached, std::int64_t new_tokens, bool samples);
void add_decode(BatchShape& b, const ModelSpec& m, std::int64_t context);

// The recurrent core of a linear-attention layer an operator is (none for every other).
enum class Recurrence : std::uint8_t { kNone, kGatedDeltaNet, kMamba2 };

struct Operator {
  OpKind kind = OpKind::kGemmQkv;
  ComputeRate rate = ComputeRate::kBf16;  // the tensor-core rate its FLOPs run at
  int kernels = 1;
  double flops = 0;
  double bytes = 0;
  // Shape, for measured tables. GEMM / MoE: m tokens through a k -> n matrix (per chip; MoE: m =
  // token-expert pairs on the busiest rank, n = expert columns per chip, k = hidden). Attention:
  // m = query tokens, batch = sequences, context = sum of their context lengths, n = query
  // heads per chip, k = head dim.
  double m = 0, n = 0, k = 0, batch = 0, context = 0;
  // Attention only (0 / false elsewhere), for measured attention tables: KV heads per chip, bytes
  // per KV element, the window of a sliding-window operator (0 = full attention), and whether the
  // kernel is MLA's (latent KV). DSA's sparse kernels leave them unset: no table describes them.
  double kv_heads = 0, kv_bytes = 0, window = 0;
  bool latent = false;
  // A sparse MLA prefill kernel (DSA, DeepSeek-V4's compressed attention): costed by
  // Efficiency::attention_sparse where a profile has it.
  bool sparse = false;
  // DeepSeek-V4's manifold-constrained hyper-connections (LayerTokenOps::mhc): costed by
  // Efficiency::mhc where a profile has it.
  bool mhc = false;
  // The DSA indexer's ragged prefill scoring kernel (DeepGEMM's fp8_mqa_logits: blocks of 128
  // query-heads, i.e. 128 / n of the m queries, on a persistent grid of one block per SM): its
  // FLOPs run in whole waves of blocks over the chip's SMs (models::query_wave_factor).
  bool query_blocks = false;
  // The DSA indexer's operators (kIndexer): the top-k selection over the logits it writes runs
  // after it, one row per query (m rows), over flops / (2 n k) logits of 4 bytes; costed with it
  // (models::selection_seconds). False for the scoring kernel alone (calibration tables).
  bool selects = false;
  // Gated DeltaNet's recurrent core (chunked in prefill, one step per token in decode), costed as
  // the layer's attention: m = tokens, batch = sequences, n = value heads per chip, kv_heads = key
  // heads per chip, k = key dim; measured tables of it match only it (calibrate/linear_table.h).
  Recurrence recurrent = Recurrence::kNone;
  // GEMM kinds only: the weights' format (measured GEMM tables and Efficiency::gemm_formats are
  // per format: fp8 and block fp8 run at one rate through different kernels), and the input
  // activation elements quantised before the GEMMs (formats whose kernels read quantised
  // activations, not emulated; 0 otherwise): m x k per kernel.
  Format format = Format::kBf16;
  double quant_elements = 0;
  // Routed experts only (kMoeExperts): SwiGLU experts (gate, up, down) or plain ones (up, down:
  // ModelSpec::gated_mlp false). Measured MoE tables time SwiGLU experts and answer only those.
  bool gated = true;
  // Routed experts only (0 elsewhere), for the grouped-GEMM model (models::moe_experts_seconds):
  // tokens through the MoE module on the chip (routing, permutation and finalize touch every one),
  // and m with each expert's rows rounded up to whole tiles (MoeRankLoad::padded_rows).
  double tokens = 0, padded_m = 0;
  // The dense GEMMs the operator runs (none for attention, elementwise and the routed experts),
  // each of m rows (the operator's m) through k -> n, in `groups` independent products of that
  // shape launched as one batched kernel (MLA's absorbed per-head matmuls: groups = query heads
  // per chip). An operator that runs several lists each (gate|up then down; MLA's q and kv
  // projections), and a measured table costs each at its own shape, one launch each
  // (models::TableCostModel); n and k above are the first one's.
  struct Gemm {
    double n = 0, k = 0, groups = 1;
  };
  static constexpr int kMaxGemms = 4;
  std::array<Gemm, kMaxGemms> gemms{};
  int gemm_count = 0;
};

// Query heads per chip as FlashMLA's sparse kernels run them: h_q of 64 or 128 (vLLM pads the
// heads of its sparse MLA backend to 64 or 128, flashmla_sparse.py), whole tiles of 64 beyond.
double sparse_kernel_heads(double heads);

struct CommOp {
  OpKind kind = OpKind::kTpAllReduce;
  Collective collective = Collective::kAllReduce;
  Group group = Group::kTp;
  double bytes = 0;  // per rank: the buffer each rank contributes (all-reduce: its whole buffer)
  // Expert dispatch / combine whose routing is known (MoeLoad::set_dispatch): of `bytes`, those
  // that cross the rank's NIC to other scale-up domains (the rest stays on the scale-up links),
  // and whether the low-latency kernels run it. nic_bytes < 0: unknown, the bytes spread evenly
  // over the peers (sim/cluster/comm_cost.h).
  double nic_bytes = -1;
  bool low_latency = false;
};

// How an expert-parallel dispatch sends a token to the ranks of its top-k experts (the combine
// brings the results back the same way), after DeepEP (deepseek-ai/DeepEP, README), which the
// serving engines run:
//   kPerRank    the normal (high-throughput, prefill) kernels: once per destination rank inside
//               the sender's scale-up domain; across it, once per destination domain, to the
//               peer with the sender's local index, which forwards it over its scale-up links to
//               the domain's other destination ranks;
//   kPerExpert  the low-latency (decode) kernels: once per selected expert, straight to its rank.
enum class DispatchKernel : std::uint8_t { kPerRank, kPerExpert };
// Copies of one token a chip sends, averaged over the group's chips: over its NIC, and over the
// scale-up links (to its own domain, and forwarded by the relays of the others).
struct DispatchFanout {
  double nic = 0, up = 0;
  bool known = false;  // false: no domain size given; the per-expert count spread evenly
};

// Token-to-expert skew. Balanced: every expert gets T k / E of T tokens. Power law: expert
// popularity p_j proportional to j^-alpha (j = 1..E by rank); derivation in models/README.md.
struct MoeRouting {
  enum class Distribution : std::uint8_t { kBalanced, kPowerLaw };
  Distribution distribution = Distribution::kBalanced;
  double alpha = 1.2;
};

// Rows of one tile of the grouped expert GEMMs when their active experts average `mean_rows`
// rows each: the power of two at or above it, between 16 and 128. Each expert's rows are computed
// in whole tiles, and the kernels pick the tile height by the rows an expert gets (Triton's MoE
// matmul by the tokens per expert; TensorRT-LLM's CUTLASS MoE GEMMs by profiling tactics per token
// count, tiles of 64 or 128 rows on Hopper); [assumed] the same rule for every kernel. On H200's
// MoE rows it held out as well as a fixed 128-row tile for bf16 / fp8 / fp8_block and better for
// W4A16, whose decode steps a fixed tile makes infeasible (calibrate/README.md).
double moe_tile_rows(double mean_rows);

// What the busiest expert-parallel rank's routed experts do for one batch: the grouped GEMMs'
// token-expert pairs, the experts that got at least one of them (whose weights it reads), the
// pairs with each expert's rows padded to whole tiles of moe_tile_rows(pairs / active) rows, and
// the tokens through the module (its routing, permutation and finalize kernels read or write
// every one).
struct MoeRankLoad {
  double tokens = 0;
  double pairs = 0;
  double active = 0;
  double padded_rows = 0;
  DispatchFanout fanout;  // how its tokens are dispatched (MoeLoad::set_dispatch)
  DispatchKernel kernel = DispatchKernel::kPerRank;
};

// Expected load of the busiest expert-parallel rank for a model, plan and skew. Experts are placed
// on ranks by popularity, striped (the j-th most popular on rank j mod ep), so rank 0 holds the
// hottest; an expert takes each token at most once and the overflow goes to the others
// (water-filling).
class MoeLoad {
 public:
  MoeLoad() = default;
  MoeLoad(const ModelSpec& m, const ParallelPlan& p, const MoeRouting& r);
  // Token-expert pairs on the busiest rank when `tokens` tokens enter the MoE group.
  double busiest_pairs(double tokens) const;
  // Experts with at least one token on that rank (expected), whose weights it must read.
  double busiest_active_experts(double tokens) const;
  // The busiest rank's load when `tokens` tokens enter the MoE group. Padded rows: expert j's
  // rows given it is hit, T k p_j / hit_j, rounded up to whole tiles of moe_tile_rows(P / A),
  // times hit_j (a deterministic stand-in for the expectation over the binomial count).
  MoeRankLoad busiest(double tokens) const;
  const std::vector<double>& popularity() const { return popularity_; }
  // The dispatch's routing on a placement whose scale-up domains hold `chips_per_domain`
  // consecutive chips of the MoE group (rank order: expert-TP fastest, expert j on EP rank
  // j mod ep, its moe_tp chips in one domain), which layer_token_ops applies. A token misses a set
  // of experts of total popularity P with probability prod_{i < k} (1 - P E / (E - i)): its k
  // distinct experts drawn one by one, each from what is left (exact for balanced routing, the
  // hypergeometric count of topologies::expected_destination_ranks). With hit(set) = 1 - that,
  // kPerRank, for a sender s in domain D:
  //   nic = sum over domains d != D of hit(d)
  //   up  = sum over chips c in D, c != s, of hit(c) + sum over d != D of the hits of d's chips
  //         other than s's relay there (the chip with s's local index);
  // kPerExpert: nic = k x (popularity of the experts outside D) x moe_tp, up = k x (that of the
  // experts on D's other chips) x moe_tp; both averaged over the group's chips.
  void set_dispatch(int chips_per_domain, DispatchKernel kernel);
  const DispatchFanout& dispatch_fanout() const { return fanout_; }
  DispatchKernel dispatch_kernel() const { return kernel_; }

 private:
  // Probability that the j-th most popular expert gets at least one of `tokens` tokens.
  double hit(std::size_t j, double tokens) const;

  std::vector<double> popularity_;  // descending, sums to 1
  int top_k_ = 0, ep_ = 1, moe_tp_ = 1;
  DispatchFanout fanout_;
  DispatchKernel kernel_ = DispatchKernel::kPerRank;
};

// Token operators of one layer of each kind, per chip, for `tokens` new tokens in the instance.
struct LayerTokenOps {
  Operator qkv, out;   // every layer
  Operator dense_mlp;  // layers with a dense MLP
  Operator dense_elementwise;
  Operator mixer_elementwise;  // a layer without a feed-forward block: its norm, rotary and KV append
  Operator router;             // MoE layers: the gate GEMM (bf16, replicated)
  Operator moe_experts;        // routed experts on the busiest rank
  Operator shared_mlp;
  Operator moe_elementwise;
  Operator linear_qkv;         // linear-attention layers: in_proj_qkvz and in_proj_ba
  Operator linear_out;         // linear-attention layers: out_proj
  Operator linear_norm;        // linear-attention layers: the gated RMSNorm of the output
  Operator mhc;                // every layer of a model with mHC streams: its pre and post kernels
  Operator dequant_attention;  // emulated formats only (kernels 0 otherwise)
  Operator dequant_linear;
  Operator dequant_dense;
  Operator dequant_moe;
  // DSA layers that reuse another layer's top-k (DsaSpec::pattern 'S'): their attention
  // projections and dequantisation without the indexer's wq_b, wk and weights_proj.
  Operator qkv_without_indexer, dequant_attention_without_indexer;
  CommOp attention_reduce;           // after attention (tp > 1)
  CommOp dense_reduce;               // after a dense MLP (tp > 1)
  CommOp moe_dispatch, moe_combine;  // MoE layers with attention DP (dp > 1)
  CommOp moe_reduce;                 // MoE layers: partial sums of experts / shared experts (tp > 1)
};
LayerTokenOps layer_token_ops(const ModelSpec& m, const ParallelPlan& p, const MoeLoad& load, double tokens,
                              const std::array<bool, kComputeRates>& chip_rates);
// The same with the busiest rank's MoE load given rather than derived from a skew (calibration:
// the load a benchmark's own routing put on the rank it timed).
LayerTokenOps layer_token_ops(const ModelSpec& m, const ParallelPlan& p, const MoeRankLoad& rank, double tokens,
                              const std::array<bool, kComputeRates>& chip_rates);

// Which of its kernel paths the serving engine takes where it has several for one operator.
//   dsa_dense_prefill  a DSA (MLA) model's prefill chunk whose context fits in top_k runs dense
//                      multi-head attention over up-projected K / V, without the indexer, instead
//                      of the sparse kernel over the whole index width: SGLang's NSA backend
//                      (MHA_ONE_SHOT; nsa_backend.py set_nsa_prefill_impl, on SM90 and SM100:
//                      AIConfigurator's dsa_context_module tables time kernel_source
//                      sglang_dsa_dense_mha_fa3 / _trtllm_ragged up to 2,048 tokens, the sparse
//                      path above). The engine decides per batch (the batch's longest context);
//                      here each chunk by its own.
struct EnginePaths {
  bool dsa_dense_prefill = false;
};
// Whether a model's short DSA chunks run densely on an engine with these paths (DSA MLA models).
inline bool dense_short_chunks(const ModelSpec& m, const EnginePaths& paths) {
  return paths.dsa_dense_prefill && m.dsa.enabled() && m.attention == AttentionKind::kMla;
}
// Which prefill paths a batch launches: the sparse kernels (attention, indexer, absorption) for
// the chunks that do not run densely, the dense ones for those that do (`dense_short`:
// dense_short_chunks).
struct PrefillLaunch {
  bool sparse = false, dense = false;
};
inline PrefillLaunch prefill_launch(bool dense_short, const BatchShape& b) {
  const bool prefill = b.prefill_tokens > 0;
  return {prefill && !(dense_short && b.prefill_tokens_short >= b.prefill_tokens),
          dense_short && b.prefill_tokens_short > 0};
}

// Batch operators of one layer, per chip. Gated: prefill ones launch only with prefill tokens,
// decode ones only with decodes.
struct LayerBatchOps {
  Operator prefill_full;    // attention of full (or DSA-sparse) layers over the chunks
  Operator prefill_dense;   // DSA with EnginePaths::dsa_dense_prefill: the short chunks' attention
  Operator prefill_window;  // sliding-window layers
  Operator decode_full;
  Operator decode_window;
  Operator prefill_up_projection;  // MLA: kv_b over the chunks' cached and new latents (DSA: short)
  Operator decode_absorb;          // MLA: W_UK and W_UV on decode queries (DSA: all); DeepSeek-V4: wo_a
  Operator indexer_prefill;        // DSA
  Operator indexer_decode;
  Operator linear_prefill;  // Gated DeltaNet: conv1d + chunked delta rule over the chunks
  Operator linear_decode;   // conv1d update + one recurrent step per decode
  CommOp cp_prefill;        // ring attention passing KV shards (pass-KV)
  CommOp cp_prefill_q;      // ring attention passing queries and partial outputs (pass-Q)
  CommOp cp_decode;         // query all-gather and partial-output exchange
};
LayerBatchOps layer_batch_ops(const ModelSpec& m, const ParallelPlan& p, const BatchShape& b,
                              const EnginePaths& paths = {});

// Once per iteration: the vocabulary-parallel LM head on the last stage, for `logits` sampling
// sequences of the instance.
Operator lm_head_op(const ModelSpec& m, const ParallelPlan& p, double logits);
// Bytes of one hidden-state tensor of `tokens` tokens (TP all-reduce, pipeline send).
double hidden_state_bytes(const ModelSpec& m, double tokens);
// KV-cache bytes one token occupies in one layer on one chip (K and V of its KV heads, or the MLA
// latent and rotary key).
double kv_bytes_per_token_layer_chip(const ModelSpec& m, const ParallelPlan& p);
// New tokens one chip computes in its attention and dense parts: T / (dp cp).
inline double tokens_per_chip(const ParallelPlan& p, double tokens) {
  return tokens / (static_cast<double>(p.dp) * p.cp);
}

// One draft step of an MTP module (DeepSeek-V3 / GLM), per chip, for the batch's tokens: eh_proj
// (the concatenated embedding and hidden state, 2h -> h, replicated), one decoder layer like the
// model's last one (its token operators and its attention over the batch) and the shared LM head.
// The speculative-decoding issue multiplies it by the draft depth and adds the acceptance model.
struct MtpDraftOps {
  Operator eh_proj;
  LayerTokenOps layer;
  bool moe_layer = false;  // which of layer's MLP operators apply
  LayerBatchOps attention;
  Operator lm_head;
};
MtpDraftOps mtp_draft_ops(const ModelSpec& m, const ParallelPlan& p, const MoeLoad& load, const BatchShape& b,
                          const std::array<bool, kComputeRates>& chip_rates, const EnginePaths& paths = {});

// The whole per-chip operator list of one pipeline stage for a batch: each operator with the
// number of times it runs in the iteration (layers of its kind on the stage, or 1).
struct StageOperators {
  struct Compute {
    Operator op;
    int count = 1;
  };
  struct Comm {
    CommOp op;
    int count = 1;
  };
  std::vector<Compute> compute;
  std::vector<Comm> comm;
};
StageOperators stage_operators(const ModelSpec& m, const ParallelPlan& p, const MoeLoad& load, const BatchShape& b,
                               int stage, const std::array<bool, kComputeRates>& chip_rates,
                               const EnginePaths& paths = {});

// The rate a GEMM in format f runs at on a chip with these rates: its own, or bf16 when the chip
// lacks it (emulation; the caller checks that emulation was asked for).
ComputeRate gemm_rate(Format f, const std::array<bool, kComputeRates>& chip_rates);
// One GEMM of `tokens` rows through a k -> n matrix of weights in format f (tools, calibration):
// 2 tokens k n FLOPs; reads the weights and the input, writes the bf16 output.
Operator gemm_op(OpKind kind, Format f, double tokens, double k, double n,
                 const std::array<bool, kComputeRates>& chip_rates);

// Vision encoder operators for a batch of images (each given as its resized patch count), per
// chip with the encoder split over `tp` chips: patch embedding, per block QKV, attention (window
// or global), output projection, MLP, norms, and the merger. Appended to `out`.
void vision_encoder_ops(const VisionSpec& v, const std::vector<std::int64_t>& image_patches, int tp,
                        std::vector<Operator>& out);

}  // namespace servesim::models
