// What one batch iteration of an instance costs, per pipeline stage and per component.
//
// Stage k of an instance, with L_k layers of which D_k have a dense MLP, M_k a MoE block, F_k full
// and W_k sliding-window attention, takes
//   L_k x (attention projections + the all-reduce after attention + MLA/DSA per-layer extras
//          + context-parallel exchange)
//   + D_k x (dense MLP + elementwise + its all-reduce)
//   + M_k x (router + experts on the busiest EP rank + shared experts + elementwise
//            + dispatch / combine or all-reduce)
//   + F_k x full attention + W_k x window attention (prefill and decode parts)
//   + on the first stage: host time (per iteration + per sequence) and the embedding all-reduce
//   + on the last stage: the LM head; on the others: the send of activations to the next stage.
// Operators come from models/operators.h, are costed by the pool's cost model
// (models/cost_model.h) and the collectives by CommCost (comm_cost.h). Everything that depends
// only on the token count (GEMMs, experts, elementwise, the collectives after them) is memoised
// per token count in a table shared by all instances of the pool, filled on first use. The
// batch operators (attention, MLA up-projection and absorption, DSA indexer, CP exchange, LM head)
// are affine in the batch's sums (models::BatchShape), so their FLOPs, bytes and shape are kept as
// coefficients read off the operator definitions once at construction; each iteration evaluates
// them and asks the cost model for their time (a handful of calls). Costing an iteration is
// O(pipeline stages), whatever the batch size, and allocates nothing.
//
// Two-batch overlap (set_two_batch_overlap; DeepSeek-V3 technical report, arXiv 2412.19437,
// section 3.4, and DeepSeek's open-infra "profile-data" release: the batch is split into two
// micro-batches and one's MoE dispatch / combine runs while the other computes): a MoE layer's
// compute C (attention projections and their all-reduce, its share of the attention kernels, the
// MoE block less its all-to-all) and all-to-all A (dispatch + combine) take max(C, A) instead of
// C + A in the steady state, plus half of min(C, A) once per stage that cannot overlap (the
// first micro-batch's first phase, before the other has anything to hide behind). The hidden
// time comes off the ep_dispatch / ep_combine components, so the breakdown shows the exposed
// all-to-all. Each micro-batch is costed as half of the batch (no loss of GEMM efficiency from
// halving is modelled); a batch of one token does not split.
//
// Speculative decoding with MTP (set_speculative; DeepSeek-V3 report sections 2.2 and 5.4.3):
// the lane hands a verification batch, each decode sequence with w = k + 1 query tokens
// (BatchShape::decode_seqs and tokens count query tokens: the GEMMs, the MLA absorption, the LM
// head and the query bytes see w n tokens). Decode attention and the DSA decode indexer read each
// sequence's KV once for its w queries: their FLOPs are w times those of one query, their KV bytes
// unchanged (FlashMLA-style kernels with several queries per sequence; the causal extra of the
// drafts among themselves, k (k + 1) / 2 pairs per sequence, is ignored). Then the MTP module
// drafts the next k tokens in k sequential steps of one token per sequence: per step the
// operators of models::mtp_draft_ops (eh_proj, one decoder layer like the last, its attention
// over the context, the shared LM head), token operators memoised per sequence count. The draft
// time runs on the last stage after the LM head and is the component `mtp_draft`; two-batch
// overlap does not hide it. Prefill chunks draft nothing.
//
// Expert dispatch (models::MoeLoad::set_dispatch): the MoE group's chips per scale-up domain come
// from its span (the chip's domain for contiguous placement, the placed layouts' most ranks in one
// domain otherwise); the kernel from the pool (set_dispatch_kernel: DeepEP's normal kernels, one
// copy per destination rank and one per destination domain across the NICs, or the low-latency
// ones, one per selected expert).
// All-to-all and KV flows on the same NICs (sim/cluster/README.md): when the expert group leaves
// the scale-up domain, its out-of-domain bytes cross every chip's NIC. cost(..., nic_share)
// prices an iteration during which KV (or embedding) flows cross the instance's NICs: while the
// all-to-all runs it gets `nic_share` of each NIC (comm_cost.h, a2a_nic_share: from the flows
// there), so its NIC part S_out / (B_out x eff) takes 1 / nic_share as long; the extra is the
// component `a2a_kv_contention` (two-batch overlap hides it like the rest of the all-to-all).
// a2a_nic_ps gives the NIC part at the whole NIC, which Simulation books as the all-to-all's duty
// cycle on the NICs for the KV flows.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/time.h"
#include "models/chip_spec.h"
#include "models/cost_model.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/parallel_plan.h"
#include "sim/cluster/comm_cost.h"

namespace servesim::cluster {

using ComponentTimes = std::array<std::int64_t, models::kOpKinds>;  // picoseconds

// One sum of an affine operator's FLOPs or bytes, base + c0 x f0 + c1 x f1 + c2 x f2 (added
// left to right, as IterationCostModel's AffineOp::linear_seconds adds them), over decode steps
// in which only the context sum f = decode_kv_tokens moves and at most one term reads it:
// ((pre + c x f) + after[0]) + after[1], where `pre` is base plus the terms before the context
// term, added in the same order, and after[0], after[1] the terms after it (0 where there are
// fewer: adding 0 changes no positive sum). The same double per step, bit for bit, with the
// terms on other fields read once (IterationCostModel::decode_run).
struct ContextProgression {
  double pre = 0, c = 0, after[2] = {0, 0};
  // From the sum's base, fields and coefficients at shape b; false when more than one term
  // reads the context sum.
  bool read(double base, const std::array<int, 3>& field, const std::array<double, 3>& coef,
            const models::BatchShape& b);
  double at(double f) const { return ((pre + c * f) + after[0]) + after[1]; }
};

class IterationCostModel {
 public:
  // For one token count, picoseconds: the token operators per layer of each kind, and their
  // totals over all layers by component (what every iteration of that size starts from).
  // per_layer < 0 marks "not computed yet".
  struct TokenLinear {
    std::int64_t per_layer = -1;             // attention projections, dequantisation, attention all-reduce, mHC
    std::int64_t per_dense = 0;              // dense MLP, elementwise, dequantisation, MLP all-reduce
    std::int64_t per_mixer_only = 0;         // a layer without a feed-forward block: its elementwise
    std::int64_t per_moe = 0;                // router and experts, shared experts, elementwise, collectives
    std::int64_t per_moe_a2a = 0;            // of per_moe: the dispatch and combine all-to-all
    std::int64_t a2a_nic = 0;                // NIC-busy time of the all-to-all, all MoE layers (a2a_nic_ps)
    models::CommOp dispatch_op, combine_op;  // one MoE layer's, for their cost at a share of the NIC
    std::int64_t embedding_reduce = 0;       // once, on the first stage
    // A linear-attention layer's projections, gated norm and dequantisation less the attention
    // projections per_layer counts for every layer (it may be negative).
    std::int64_t per_linear = 0;
    // A DSA layer that reuses another layer's top-k: its projections and dequantisation without the
    // indexer's, less those per_layer counts (<= 0).
    std::int64_t per_shared_indexer = 0;
    // A sliding-window layer of its own attention shape (ModelSpec::window_layer_spec): its
    // projections and dequantisation less those per_layer counts.
    std::int64_t per_window = 0;
    // Totals over every layer of the instance, by component.
    std::int64_t qkv = 0, out = 0, mlp = 0, moe = 0, elementwise = 0, dequantize = 0;
    std::int64_t all_reduce = 0, dispatch = 0, combine = 0;
  };

  IterationCostModel(const models::ModelSpec& model, const models::ChipSpec& chip, const models::ParallelPlan& plan,
                     const models::MoeRouting& routing, const models::CostModelConfig& cost_model,
                     std::int64_t max_tokens);

  // Writes the time of each stage to stage_ps[0 .. pp) and the time per component, summed over
  // stages, to components. `sequences` counts the batch's sequences (for host overhead).
  // `busiest` (attention-DP per-rank batches, Lane::busiest_rank_shape): the batch's decode part
  // as its busiest rank sees it; the decode attention kernels of every layer (attention, MLA
  // absorption, DSA indexer, CP exchange) then take that rank's time, and the excess over the
  // even split is the component `imbalance` (the other ranks wait for it before the MoE
  // dispatch). Token operators and the all-to-all stay as for the whole batch.
  // `nic_share`: the share of each NIC the all-to-all gets while it runs (KV flows cross the
  // instance's NICs during the iteration; header), 1 when none do.
  // `cp_part` (context parallelism only for long prompts, PoolConfig::cp_min_tokens): the prefill
  // chunks that the CP ranks split, as a shape of their prefill_tokens and prefill_kv_tokens; the
  // prefill CP exchange moves only their queries or KV. The other chunks' prompts are each on one
  // CP rank (the ranks prefill separate short prompts in parallel), so their attention work per
  // chip is the same share of the batch's and they exchange nothing. Null: every chunk is split.
  void cost(const models::BatchShape& batch, std::int64_t sequences, std::int64_t* stage_ps, ComponentTimes& components,
            const models::BatchShape* busiest = nullptr, double nic_share = 1.0,
            const models::BatchShape* cp_part = nullptr);

  // The pool's groups as placed on the cluster graph (a scenario with `cluster:`; comm_cost.h,
  // PlacedGroup): TP, the MoE group (tp x dp), CP, and one per pipeline hop (rank r of stage s to
  // rank r of s + 1). A kind without layouts keeps the contiguous-placement cost (group_span).
  // Call before the first cost (the memoised tables are cleared).
  struct PlacedGroups {
    PlacedGroup tp, moe, cp;
    std::vector<PlacedGroup> pp_hops;
  };
  void set_placed_groups(PlacedGroups groups);
  const PlacedGroups* placed_groups() const { return placed_.get(); }

  // The kernel of the expert dispatch and combine (header); kPerRank until set. Call before the
  // first cost (the memoised tables are cleared).
  void set_dispatch_kernel(models::DispatchKernel kernel);
  // Whether the expert all-to-all sends bytes over the chips' NICs (its group leaves the domain).
  bool a2a_on_nics() const { return a2a_on_nics_; }
  // Picoseconds the all-to-all of a batch of `tokens` tokens keeps each chip's NIC busy at the
  // whole NIC's rate, over all MoE layers (dispatch and combine).
  std::int64_t a2a_nic_ps(std::int64_t tokens) { return linear(tokens).a2a_nic; }

  // The decode-only steps of a decode run (DecodeRuns::plan): one batch of `sequences`
  // decoding requests whose contexts grow by one token per step (pp = 1, no speculative decoding,
  // no per-rank batches). What the steps share (the token operators, the LM head, the host time)
  // is read once into DecodeSteps; decode_step() then evaluates only the operators that depend on
  // the contexts (decode attention, MLA absorption, DSA indexer, CP exchange) and the terms built
  // on them, and gives the step's time, the picoseconds cost() gives for that shape.
  // step_components() expands a step's parts into cost()'s components, for the steps that are
  // applied (a run cut short never expands the rest). tests/cluster/decode_steps_test.cpp compares
  // them with cost().
  struct DecodeSteps {
    TokenLinear lin;
    std::int64_t lm_head = 0, host = 0;
  };
  struct DecodeStepParts {  // picoseconds per layer of each kind, and the step's own terms
    std::int64_t attention_full = 0, attention_window = 0, absorb = 0, indexer = 0, cp = 0;
    std::int64_t linear = 0;  // a linear-attention layer's recurrent step
    std::int64_t exposed_host = 0, hidden_a2a = 0;
  };
  DecodeSteps decode_steps(std::int64_t sequences);
  // `bound`: the context-dependent operators bound to the shapes of a run (decode_run binds them
  // at its first step, bind_decode(); models::ContextBinding): the same picoseconds, the table
  // lookups without choosing a grid or bracketing the fixed axes again.
  struct DecodeBindings {
    models::ContextBinding full, window, absorb, indexer, linear;
  };
  std::int64_t decode_step(const DecodeSteps& steps, const models::BatchShape& b, DecodeStepParts& parts,
                           DecodeBindings* bound = nullptr) const;
  // Bindings for the steps of a run whose shapes differ from `b` only in decode_kv_tokens.
  void bind_decode(const models::BatchShape& b, DecodeBindings& out) const;
  // decode_step() for `n` consecutive steps whose shapes differ only in their contexts, all
  // uncapped (no window or top-k sums): `b` is the first step's shape, and each step after it has
  // b.decode_seqs more KV tokens (every context grows by one). Step j ends at ends[j] (the steps
  // follow each other from `t`), its parts go to parts[j]; returns the last end. When only the decode
  // attention depends on the contexts and the cost model has a linear form for it (a roofline
  // with constant efficiencies), the terms the steps share are read once; the values are those
  // decode_step gives, picosecond for picosecond.
  // `keep`: where a run costed in chunks keeps what its first chunk bound (the bindings depend on
  // what the run's shapes share, not on their contexts), for its later chunks; start() it at
  // each new run. Null: bound for this call only.
  class RunBindings {
   public:
    RunBindings();
    ~RunBindings();
    RunBindings(RunBindings&&) noexcept;
    RunBindings& operator=(RunBindings&&) noexcept;
    void start();  // a new run: nothing bound

   private:
    friend class IterationCostModel;
    struct State;  // iteration_cost.cpp
    std::unique_ptr<State> state_;
  };
  SimTime decode_run(const DecodeSteps& steps, models::BatchShape b, std::size_t n, SimTime t, SimTime* ends,
                     DecodeStepParts* parts, RunBindings* keep = nullptr) const;
  // Whether decode_run() takes that short way (else it calls decode_step() per step).
  bool plain_decode_runs() const {
    return decode_full_.linear && !has_window_ && !has_absorb_ && !has_dsa_ && !has_linear_ && plan_.cp == 1 &&
           !(tbo_ && total_.moe > 0);
  }
  void step_components(const DecodeSteps& steps, const DecodeStepParts& parts, ComponentTimes& components) const;
  // Adds a step's components to `sum` (a decode run's applied steps, recorded together).
  void add_step_components(const DecodeSteps& steps, const DecodeStepParts& parts, ComponentTimes& sum) const;
  // add_step_components() of parts[0 .. n), the same sums: the terms the steps share are added
  // once, times n (integer sums, exact), unless two-batch overlap hid all-to-all in some step.
  void add_steps_components(const DecodeSteps& steps, const DecodeStepParts* parts, std::size_t n,
                            ComponentTimes& sum) const;

  int stages() const { return plan_.pp; }
  void set_two_batch_overlap(bool on) { tbo_ = on; }
  // Verification of `draft_tokens` drafts per decode sequence and the MTP draft steps (header);
  // max_sequences bounds the decode sequences of a batch (the token table grows by
  // draft_tokens x max_sequences).
  void set_speculative(int draft_tokens, std::int64_t max_sequences);
  int verify_width() const { return verify_width_; }
  const models::CostModel& cost_model() const { return *cost_model_; }

 private:
  const TokenLinear& linear(std::int64_t tokens);

  // An operator whose FLOPs, bytes and shape are affine in the batch sums. When the cost model
  // has a linear form for it (the constant-efficiency roofline), only FLOPs and bytes are
  // evaluated and the form applied inline; otherwise the whole operator is rebuilt and costed.
  struct AffineOp {
    models::Operator base;  // at the origin
    struct Term {
      int field = 0;
      double flops = 0, bytes = 0, m = 0, batch = 0, context = 0, quant_elements = 0;
    };
    std::array<Term, models::kBatchFields> terms{};
    int n_terms = 0;
    // FLOPs and bytes as base + three terms (unused ones have coefficient 0 on field 0): enough
    // for every operator of models::LayerBatchOps.
    std::array<int, 3> flop_field{}, byte_field{};
    std::array<double, 3> flop_coef{}, byte_coef{};
    bool linear = false;
    models::CostModel::LinearForm form;
    models::Operator at(const models::BatchShape& b) const;
    // Adds term t at field value x to op's shape fields, in the order at() adds them.
    static void add_term(models::Operator& op, const Term& t, double x) {
      op.flops += t.flops * x;
      op.bytes += t.bytes * x;
      op.m += t.m * x;
      op.batch += t.batch * x;
      op.context += t.context * x;
      op.quant_elements += t.quant_elements * x;
    }
    inline double seconds(const models::BatchShape& b, const models::CostModel& cm) const;
    // seconds() through the cost model's binding to the shapes of a decode run (bind()).
    inline double seconds(const models::BatchShape& b, const models::CostModel& cm,
                          models::ContextBinding& binding) const;
    // Binds `binding` (models::ContextBinding) to this operator at shapes that differ from `b`
    // only in decode_kv_tokens, where that moves only its context, FLOPs, bytes and quantised
    // elements; otherwise leaves it unbound.
    void bind(const models::BatchShape& b, const models::CostModel& cm, models::ContextBinding& binding) const;
    inline double linear_seconds(const models::BatchShape& b) const;  // `form` applied
  };
  template <class MakeOp>
  AffineOp affine(MakeOp make_op) const;
  class BoundSteps;  // decode_run()'s attention through a binding (iteration_cost.cpp)
  struct AffineComm {
    models::CommOp base;
    std::array<std::pair<int, double>, models::kBatchFields> terms{};
    int n_terms = 0;
    double bytes(const models::BatchShape& b) const;
  };
  template <class MakeComm>
  static AffineComm affine_comm(MakeComm make_comm);

  struct StageLayers {
    std::int64_t layers = 0, dense = 0, moe = 0, no_ffn = 0, full = 0, window = 0, linear = 0;
    std::int64_t shared_indexer = 0;  // DSA layers that reuse another layer's top-k (DsaSpec::pattern)
  };
  // The pieces of an iteration that cost() and decode_step() share (one formula for both).
  struct LayerTerms {  // picoseconds: per layer, per full attention, window and linear layer
    std::int64_t per_layer = 0, per_full = 0, per_window = 0, per_linear = 0;
    std::int64_t per_shared_indexer = 0;  // a layer without the indexer: less its kernels (<= 0)
  };
  // A stage's GPU time before host, embedding, LM head and send: its layers, with the all-to-all
  // stretched by `contention` per MoE layer and two-batch overlap's hidden time (in `hidden`)
  // taken off.
  std::int64_t stage_gpu_ps(const StageLayers& l, const TokenLinear& lin, const LayerTerms& x, double tokens,
                            std::int64_t contention, std::int64_t& hidden) const;
  // The first stage's time from its GPU time: the embedding all-reduce, then the host time
  // (overlapped or not); the host time that shows goes to `exposed_host`.
  std::int64_t first_stage_ps(std::int64_t gpu, const TokenLinear& lin, std::int64_t host,
                              std::int64_t& exposed_host) const;
  std::int64_t host_ps(std::int64_t sequences) const;
  std::int64_t lm_head_ps(double logits) const;
  // Adds the token operators' components, the all-to-all `stretch` and takes two-batch overlap's
  // hidden time off the all-to-all.
  static void add_token_components(const TokenLinear& lin, std::int64_t hidden_a2a, std::int64_t stretch,
                                   ComponentTimes& c);

  models::ModelSpec model_;
  models::ChipSpec chip_;
  models::ParallelPlan plan_;
  std::unique_ptr<models::CostModel> cost_model_;
  CommCost comm_;
  models::MoeLoad load_;
  std::array<bool, models::kComputeRates> rates_{};
  GroupSpan tp_span_, moe_span_, cp_span_;
  std::vector<StageLayers> stage_layers_;
  StageLayers total_;                // over all stages
  std::vector<TokenLinear> linear_;  // by token count
  // Batch operators of one layer (models::LayerBatchOps), and the LM head.
  AffineOp prefill_full_, prefill_dense_, prefill_window_, decode_full_, decode_window_;
  AffineOp up_projection_, absorb_, indexer_prefill_, indexer_decode_;
  AffineOp linear_prefill_, linear_decode_;
  AffineOp lm_head_;
  AffineComm cp_prefill_, cp_prefill_q_, cp_decode_;
  bool absorb_in_prefill_ = false;  // DSA models absorb prefill queries too
  models::EnginePaths paths_;       // from the chip's efficiency (dsa_dense_prefill)
  bool dsa_dense_ = false;          // a DSA model whose short chunks run dense (paths_)
  bool has_window_ = false, has_absorb_ = false, has_dsa_ = false, has_linear_ = false, emulated_ = false;
  bool tbo_ = false;
  bool a2a_on_nics_ = false;
  models::DispatchKernel kernel_ = models::DispatchKernel::kPerRank;
  // The MoE group's chips per scale-up domain (header), and the dispatch routing from it.
  void set_dispatch_routing();
  // Speculative decoding: query tokens per decode sequence (1: off), and the token operators of
  // one MTP draft step by sequence count (ps, -1: not computed yet).
  int verify_width_ = 1;
  // Where the pool's cost model has tables: the roofline that carries a measured one-query decode
  // attention time to w queries per sequence (cost()).
  std::unique_ptr<models::RooflineCostModel> verify_roofline_;
  std::vector<std::int64_t> draft_tokens_ps_;
  std::int64_t draft_ps(const models::BatchShape& verify);
  std::vector<double> send_alpha_s_, send_s_per_token_;  // per pipeline hop
  std::unique_ptr<PlacedGroups> placed_;
  std::vector<GroupSpan> hop_spans_;  // placed pipeline hops (empty: send_alpha_s_ and the slope)
  double hidden_bytes_per_token_ = 0;
};

}  // namespace servesim::cluster
