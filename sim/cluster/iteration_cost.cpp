#include "sim/cluster/iteration_cost.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <variant>

#include "core/check.h"

namespace servesim::cluster {
namespace {
// Costs are non-negative: round half up without the libm call (this runs every iteration). Kept as (x + 0.5):
// std::llround differs at x = 0.49999999999999994 and at odd x >= 2^52, and reports must not move.
// NOLINTNEXTLINE(bugprone-incorrect-roundings)
std::int64_t to_ps(double seconds) { return static_cast<std::int64_t>(seconds * 1e12 + 0.5); }
constexpr std::size_t idx(models::OpKind k) { return static_cast<std::size_t>(k); }
}  // namespace

models::Operator IterationCostModel::AffineOp::at(const models::BatchShape& b) const {
  models::Operator op = base;
  for (int i = 0; i < n_terms; ++i) {
    const Term& t = terms[static_cast<std::size_t>(i)];
    add_term(op, t, models::batch_field(b, t.field));
  }
  return op;
}

inline double IterationCostModel::AffineOp::seconds(const models::BatchShape& b, const models::CostModel& cm) const {
  return linear ? linear_seconds(b) : cm.seconds(at(b));
}

inline double IterationCostModel::AffineOp::seconds(const models::BatchShape& b, const models::CostModel& cm,
                                                    models::ContextBinding& binding) const {
  return linear ? linear_seconds(b) : cm.bound_seconds(at(b), binding);
}

void IterationCostModel::AffineOp::bind(const models::BatchShape& b, const models::CostModel& cm,
                                        models::ContextBinding& binding) const {
  binding = models::ContextBinding{};
  if (linear) return;
  constexpr int kContext = 3;  // models::kBatchFieldMembers: &BatchShape::decode_kv_tokens
  static_assert(models::kBatchFieldMembers[kContext] == &models::BatchShape::decode_kv_tokens);
  for (int i = 0; i < n_terms; ++i) {
    const Term& t = terms[static_cast<std::size_t>(i)];
    if (t.field == kContext && (t.m != 0 || t.batch != 0)) return;
  }
  cm.bind_context(at(b), binding);
}

inline double IterationCostModel::AffineOp::linear_seconds(const models::BatchShape& b) const {
  using models::batch_field;
  const double flops = base.flops + flop_coef[0] * batch_field(b, flop_field[0]) +
                       flop_coef[1] * batch_field(b, flop_field[1]) + flop_coef[2] * batch_field(b, flop_field[2]);
  const double bytes = base.bytes + byte_coef[0] * batch_field(b, byte_field[0]) +
                       byte_coef[1] * batch_field(b, byte_field[1]) + byte_coef[2] * batch_field(b, byte_field[2]);
  return base.kernels * form.overhead_s + std::max(flops * form.s_per_flop, bytes * form.s_per_byte);
}

double IterationCostModel::AffineComm::bytes(const models::BatchShape& b) const {
  double v = base.bytes;
  for (int i = 0; i < n_terms; ++i) {
    const auto& [field, c] = terms[static_cast<std::size_t>(i)];
    v += c * models::batch_field(b, field);
  }
  return v;
}

template <class MakeOp>
IterationCostModel::AffineOp IterationCostModel::affine(MakeOp make_op) const {
  // The operators are affine in the batch sums, so evaluating them at the origin and at each unit
  // vector gives the coefficients exactly; only the non-zero ones are kept.
  models::BatchShape zero;
  AffineOp a;
  a.base = make_op(zero);
  int n_flops = 0, n_bytes = 0;
  for (int f = 0; f < models::kBatchFields; ++f) {
    models::BatchShape unit;
    models::set_batch_field(unit, f, 1.0);
    const models::Operator e = make_op(unit);
    // Operators that launch only when there is work (the LM head) count their kernels then.
    a.base.kernels = std::max(a.base.kernels, e.kernels);
    AffineOp::Term t;
    t.field = f;
    t.flops = e.flops - a.base.flops;
    t.bytes = e.bytes - a.base.bytes;
    t.m = e.m - a.base.m;
    t.batch = e.batch - a.base.batch;
    t.context = e.context - a.base.context;
    t.quant_elements = e.quant_elements - a.base.quant_elements;
    if (t.flops != 0 || t.bytes != 0 || t.m != 0 || t.batch != 0 || t.context != 0 || t.quant_elements != 0) {
      a.terms[static_cast<std::size_t>(a.n_terms++)] = t;
    }
    if (t.flops != 0) {
      if (n_flops < 3) {
        a.flop_field[static_cast<std::size_t>(n_flops)] = f;
        a.flop_coef[static_cast<std::size_t>(n_flops)] = t.flops;
      }
      ++n_flops;
    }
    if (t.bytes != 0) {
      if (n_bytes < 3) {
        a.byte_field[static_cast<std::size_t>(n_bytes)] = f;
        a.byte_coef[static_cast<std::size_t>(n_bytes)] = t.bytes;
      }
      ++n_bytes;
    }
  }
  // The inline form needs the roofline's linear form and at most three terms of each.
  const auto form = cost_model_->linear_form(a.base.kind, a.base.rate);
  a.linear = form.has_value() && n_flops <= 3 && n_bytes <= 3;
  if (form) a.form = *form;
  return a;
}

template <class MakeComm>
IterationCostModel::AffineComm IterationCostModel::affine_comm(MakeComm make_comm) {
  models::BatchShape zero;
  AffineComm a;
  a.base = make_comm(zero);
  for (int f = 0; f < models::kBatchFields; ++f) {
    models::BatchShape unit;
    models::set_batch_field(unit, f, 1.0);
    const double c = make_comm(unit).bytes - a.base.bytes;
    if (c != 0) a.terms[static_cast<std::size_t>(a.n_terms++)] = {f, c};
  }
  return a;
}

IterationCostModel::IterationCostModel(const models::ModelSpec& model, const models::ChipSpec& chip,
                                       const models::ParallelPlan& plan, const models::MoeRouting& routing,
                                       const models::CostModelConfig& cost_model, std::int64_t max_tokens)
    : model_(model),
      chip_(chip),
      plan_(plan),
      cost_model_(models::make_cost_model(cost_model, chip)),
      comm_(chip),
      load_(model, plan, routing),
      linear_(static_cast<std::size_t>(max_tokens) + 1) {
  rates_ = chip.rates();
  if (std::holds_alternative<models::TableConfig>(cost_model)) {
    verify_roofline_ = std::make_unique<models::RooflineCostModel>(chip);
  }
  const int domain = chip.scale_up_domain;
  tp_span_ = group_span(plan, models::Group::kTp, domain);
  moe_span_ = group_span(plan, models::Group::kMoe, domain);
  cp_span_ = group_span(plan, models::Group::kCp, domain);
  a2a_on_nics_ = moe_span_.leaves_domain && moe_span_.outside_fraction > 0 && model.moe.experts > 0 && plan.ep > 1;
  set_dispatch_routing();
  for (int s = 0; s < plan.pp; ++s) {
    const models::LayerCounts c = model.count_layers(plan.stage_first_layer(model, s), plan.stage_layers(model, s));
    StageLayers l;
    l.layers = c.layers;
    l.dense = c.dense();
    l.moe = c.moe;
    l.no_ffn = c.no_ffn;
    // A DSA model's dense-attention layers run the window operators (models::layer_batch_ops).
    l.full = c.full() - c.dense_attention;
    l.window = c.window + c.dense_attention;
    l.linear = c.linear;
    l.shared_indexer = model.dsa.enabled() ? c.layers - c.indexer : 0;
    stage_layers_.push_back(l);
    total_.layers += l.layers;
    total_.dense += l.dense;
    total_.moe += l.moe;
    total_.no_ffn += l.no_ffn;
    total_.full += l.full;
    total_.window += l.window;
    total_.linear += l.linear;
    total_.shared_indexer += l.shared_indexer;
  }
  using models::BatchShape;
  paths_.dsa_dense_prefill = chip.efficiency.dsa_dense_prefill;
  dsa_dense_ = models::dense_short_chunks(model, paths_);
  auto ops = [&](const BatchShape& b) { return models::layer_batch_ops(model, plan, b, paths_); };
  prefill_full_ = affine([&](const BatchShape& b) { return ops(b).prefill_full; });
  if (dsa_dense_) prefill_dense_ = affine([&](const BatchShape& b) { return ops(b).prefill_dense; });
  prefill_window_ = affine([&](const BatchShape& b) { return ops(b).prefill_window; });
  decode_full_ = affine([&](const BatchShape& b) { return ops(b).decode_full; });
  decode_window_ = affine([&](const BatchShape& b) { return ops(b).decode_window; });
  up_projection_ = affine([&](const BatchShape& b) { return ops(b).prefill_up_projection; });
  absorb_ = affine([&](const BatchShape& b) { return ops(b).decode_absorb; });
  indexer_prefill_ = affine([&](const BatchShape& b) { return ops(b).indexer_prefill; });
  indexer_decode_ = affine([&](const BatchShape& b) { return ops(b).indexer_decode; });
  linear_prefill_ = affine([&](const BatchShape& b) { return ops(b).linear_prefill; });
  linear_decode_ = affine([&](const BatchShape& b) { return ops(b).linear_decode; });
  cp_prefill_ = affine_comm([&](const BatchShape& b) { return ops(b).cp_prefill; });
  cp_prefill_q_ = affine_comm([&](const BatchShape& b) { return ops(b).cp_prefill_q; });
  cp_decode_ = affine_comm([&](const BatchShape& b) { return ops(b).cp_decode; });
  lm_head_ =
      affine([&](const BatchShape& b) { return models::lm_head_op(model, plan, static_cast<double>(b.logits)); });
  absorb_in_prefill_ = model.dsa.enabled();
  has_window_ = model.window.enabled() || model.has_dense_attention_layers();
  // MLA's absorbed W_UK / W_UV, DeepSeek-V4's grouped wo_a: per-token bf16 batched GEMMs
  // (models::LayerBatchOps::decode_absorb).
  has_absorb_ = model.attention == models::AttentionKind::kMla || model.compress.enabled();
  has_dsa_ = model.dsa.enabled();
  has_linear_ = total_.linear > 0;
  emulated_ = model.formats.emulate;
  for (int s = 0; s + 1 < plan.pp; ++s) {
    // p2p time = alpha + bytes / (bandwidth x efficiency), bytes linear in the token count: the
    // times of one and two tokens give both terms.
    GroupSpan hop;
    hop.ranks = 2;
    hop.leaves_domain = pp_hop_leaves_domain(plan, s, domain);
    const double one = comm_.seconds(models::Collective::kP2p, hop, models::hidden_state_bytes(model, 1));
    const double two = comm_.seconds(models::Collective::kP2p, hop, models::hidden_state_bytes(model, 2));
    send_s_per_token_.push_back(two - one);
    send_alpha_s_.push_back(one - (two - one));
  }
}

void IterationCostModel::set_placed_groups(PlacedGroups groups) {
  placed_ = std::make_unique<PlacedGroups>(std::move(groups));
  if (!placed_->tp.layouts.empty()) tp_span_ = placed_span(placed_->tp);
  if (!placed_->moe.layouts.empty()) moe_span_ = placed_span(placed_->moe);
  if (!placed_->cp.layouts.empty()) cp_span_ = placed_span(placed_->cp);
  a2a_on_nics_ = moe_span_.leaves_domain && moe_span_.outside_fraction > 0 && model_.moe.experts > 0 && plan_.ep > 1;
  set_dispatch_routing();
  hop_spans_.clear();
  bool hops = placed_->pp_hops.size() + 1 == static_cast<std::size_t>(plan_.pp);
  for (const PlacedGroup& h : placed_->pp_hops) hops = hops && !h.layouts.empty();
  if (hops) {
    for (const PlacedGroup& h : placed_->pp_hops) hop_spans_.push_back(placed_span(h));
  }
  hidden_bytes_per_token_ = models::hidden_state_bytes(model_, 1);
  for (TokenLinear& e : linear_) e = TokenLinear{};
  std::fill(draft_tokens_ps_.begin(), draft_tokens_ps_.end(), -1);
}

void IterationCostModel::set_dispatch_routing() {
  int per_domain = chip_.scale_up_domain;
  if (moe_span_.placed != nullptr) {
    per_domain = 0;
    for (const PlacedGroup::Layout& l : moe_span_.placed->layouts)
      per_domain = std::max(per_domain, l.layout.ranks_per_domain);
  }
  load_.set_dispatch(per_domain, kernel_);
}

void IterationCostModel::set_dispatch_kernel(models::DispatchKernel kernel) {
  kernel_ = kernel;
  set_dispatch_routing();
  for (TokenLinear& e : linear_) e = TokenLinear{};
  std::fill(draft_tokens_ps_.begin(), draft_tokens_ps_.end(), -1);
}

const IterationCostModel::TokenLinear& IterationCostModel::linear(std::int64_t tokens) {
  SERVESIM_CHECK_MSG(tokens >= 0 && static_cast<std::size_t>(tokens) < linear_.size(),
                     "batch of " + std::to_string(tokens) + " tokens exceeds the token budget");
  TokenLinear& e = linear_[static_cast<std::size_t>(tokens)];
  if (e.per_layer >= 0) return e;
  const models::LayerTokenOps o = models::layer_token_ops(model_, plan_, load_, static_cast<double>(tokens), rates_);
  const models::CostModel& cm = *cost_model_;
  auto ps = [&](const models::Operator& op) { return to_ps(cm.seconds(op)); };
  auto comm = [&](const models::CommOp& c, const GroupSpan& span) { return to_ps(comm_.seconds(c, span)); };
  const std::int64_t qkv = ps(o.qkv), out = ps(o.out), dq_attention = ps(o.dequant_attention);
  const std::int64_t attention_reduce = comm(o.attention_reduce, tp_span_);
  const std::int64_t dense_mlp = ps(o.dense_mlp), dense_ew = ps(o.dense_elementwise);
  const std::int64_t dq_dense = ps(o.dequant_dense), dense_reduce = comm(o.dense_reduce, tp_span_);
  const std::int64_t experts = ps(o.router) + ps(o.moe_experts), shared = ps(o.shared_mlp);
  const std::int64_t moe_ew = ps(o.moe_elementwise), dq_moe = ps(o.dequant_moe);
  const std::int64_t moe_reduce = comm(o.moe_reduce, tp_span_);
  const std::int64_t dispatch = comm(o.moe_dispatch, moe_span_), combine = comm(o.moe_combine, moe_span_);
  const std::int64_t mhc = ps(o.mhc);
  e.per_layer = qkv + out + dq_attention + attention_reduce + mhc;
  const std::int64_t linear_qkv = ps(o.linear_qkv) - qkv, linear_out = ps(o.linear_out) - out;
  const std::int64_t linear_dq = ps(o.dequant_linear) - dq_attention, linear_norm = ps(o.linear_norm);
  if (total_.linear > 0) e.per_linear = linear_qkv + linear_out + linear_dq + linear_norm;
  e.per_dense = dense_mlp + dense_ew + dq_dense + dense_reduce;
  const std::int64_t mixer_ew = total_.no_ffn > 0 ? ps(o.mixer_elementwise) : 0;
  e.per_mixer_only = mixer_ew;
  e.per_moe = experts + shared + moe_ew + dq_moe + moe_reduce + dispatch + combine;
  e.per_moe_a2a = dispatch + combine;
  if (a2a_on_nics_) {
    e.dispatch_op = o.moe_dispatch;
    e.combine_op = o.moe_combine;
    e.a2a_nic = total_.moe * (to_ps(comm_.nic_seconds(o.moe_dispatch, moe_span_)) +
                              to_ps(comm_.nic_seconds(o.moe_combine, moe_span_)));
  }
  e.embedding_reduce = attention_reduce;  // the same hidden-state all-reduce
  const StageLayers& n = total_;
  e.qkv = n.layers * qkv;
  e.out = n.layers * out;
  e.mlp = n.dense * dense_mlp + n.moe * shared;
  e.moe = n.moe * experts;
  e.elementwise = n.dense * dense_ew + n.moe * moe_ew + n.no_ffn * mixer_ew + n.layers * mhc;
  e.dequantize = n.layers * dq_attention + n.dense * dq_dense + n.moe * dq_moe;
  if (n.window > 0 && model_.window_shape_differs()) {
    const models::LayerTokenOps w =
        models::layer_token_ops(model_.window_layer_spec(), plan_, load_, static_cast<double>(tokens), rates_);
    const std::int64_t qkv_delta = ps(w.qkv) - qkv, out_delta = ps(w.out) - out;
    const std::int64_t dq_delta = ps(w.dequant_attention) - dq_attention;
    e.per_window = qkv_delta + out_delta + dq_delta;
    e.qkv += n.window * qkv_delta;
    e.out += n.window * out_delta;
    e.dequantize += n.window * dq_delta;
  }
  if (n.shared_indexer > 0) {
    const std::int64_t qkv_delta = ps(o.qkv_without_indexer) - qkv;
    const std::int64_t dq_delta = ps(o.dequant_attention_without_indexer) - dq_attention;
    e.per_shared_indexer = qkv_delta + dq_delta;
    e.qkv += n.shared_indexer * qkv_delta;
    e.dequantize += n.shared_indexer * dq_delta;
  }
  if (n.linear > 0) {
    e.qkv += n.linear * linear_qkv;
    e.out += n.linear * linear_out;
    e.elementwise += n.linear * linear_norm;
    e.dequantize += n.linear * linear_dq;
  }
  e.all_reduce = n.layers * attention_reduce + n.dense * dense_reduce + n.moe * moe_reduce + e.embedding_reduce;
  e.dispatch = n.moe * dispatch;
  e.combine = n.moe * combine;
  return e;
}

void IterationCostModel::set_speculative(int draft_tokens, std::int64_t max_sequences) {
  SERVESIM_CHECK(draft_tokens >= 0 && max_sequences >= 0);
  verify_width_ = draft_tokens + 1;
  linear_.resize(linear_.size() + static_cast<std::size_t>(draft_tokens * max_sequences));
  draft_tokens_ps_.assign(static_cast<std::size_t>(max_sequences) + 1, -1);
}

std::int64_t IterationCostModel::draft_ps(const models::BatchShape& verify) {
  // One draft step: every decode sequence puts one token through the MTP module, attending over
  // its context (the verification's, which includes the token it drafts from).
  const double n = verify.decode_seqs / verify_width_;
  const auto sequences = static_cast<std::int64_t>(n);
  SERVESIM_CHECK(sequences >= 0 && static_cast<std::size_t>(sequences) < draft_tokens_ps_.size());
  models::BatchShape d;
  d.tokens = d.logits = d.decode_seqs = n;
  std::int64_t& token_ps = draft_tokens_ps_[static_cast<std::size_t>(sequences)];
  if (token_ps < 0) {
    const models::MtpDraftOps o = models::mtp_draft_ops(model_, plan_, load_, d, rates_, paths_);
    const models::CostModel& cm = *cost_model_;
    auto ps = [&](const models::Operator& op) { return to_ps(cm.seconds(op)); };
    auto comm = [&](const models::CommOp& c, const GroupSpan& span) { return to_ps(comm_.seconds(c, span)); };
    const models::LayerTokenOps& l = o.layer;
    token_ps = ps(o.eh_proj) + ps(l.qkv) + ps(l.out) + ps(l.dequant_attention) + ps(l.mhc) +
               comm(l.attention_reduce, tp_span_) + ps(o.lm_head);
    if (o.moe_layer) {
      token_ps += ps(l.router) + ps(l.moe_experts) + ps(l.shared_mlp) + ps(l.moe_elementwise) + ps(l.dequant_moe) +
                  comm(l.moe_reduce, tp_span_) + comm(l.moe_dispatch, moe_span_) + comm(l.moe_combine, moe_span_);
    } else {
      token_ps += ps(l.dense_mlp) + ps(l.dense_elementwise) + ps(l.dequant_dense) + comm(l.dense_reduce, tp_span_);
    }
  }
  // Its attention: full (or DSA-sparse) over the context, as the model's decode attention.
  d.decode_kv_tokens = verify.decode_kv_tokens;
  d.decode_kv_topk = verify.decode_kv_topk;
  const models::CostModel& cm = *cost_model_;
  std::int64_t attention = to_ps(decode_full_.seconds(d, cm));
  if (has_absorb_) attention += to_ps(absorb_.seconds(d, cm));
  if (has_dsa_) attention += to_ps(indexer_decode_.seconds(d, cm));
  if (plan_.cp > 1) attention += to_ps(comm_.seconds(cp_decode_.base.collective, cp_span_, cp_decode_.bytes(d)));
  return (verify_width_ - 1) * (token_ps + attention);
}

// The pieces of an iteration that cost() and decode_step() share: one formula for both.

std::int64_t IterationCostModel::host_ps(std::int64_t sequences) const {
  // With attention data parallelism every dp rank schedules its own share of the sequences, in
  // parallel (SGLang / DeepSeek dp-attention: one scheduler process per rank).
  const std::int64_t rank_sequences = (sequences + plan_.dp - 1) / plan_.dp;
  return (chip_.efficiency.iteration_overhead + chip_.efficiency.sequence_overhead * rank_sequences).ps();
}

std::int64_t IterationCostModel::lm_head_ps(double logits) const {
  // The LM head's operator depends on the logits only (lm_head_op).
  if (logits <= 0) return 0;
  models::BatchShape b;
  b.logits = logits;
  return to_ps(lm_head_.seconds(b, *cost_model_));
}

inline std::int64_t IterationCostModel::stage_gpu_ps(const StageLayers& l, const TokenLinear& lin, const LayerTerms& x,
                                                     double tokens, std::int64_t contention,
                                                     std::int64_t& hidden) const {
  const std::int64_t shared_indexer = l.shared_indexer * (lin.per_shared_indexer + x.per_shared_indexer);
  std::int64_t t = l.layers * x.per_layer + l.dense * lin.per_dense + l.moe * (lin.per_moe + contention) +
                   l.no_ffn * lin.per_mixer_only + l.full * x.per_full + l.window * x.per_window +
                   l.linear * (lin.per_linear + x.per_linear) + shared_indexer + l.window * lin.per_window;
  hidden = 0;
  const std::int64_t a2a_layer = lin.per_moe_a2a + contention;
  if (tbo_ && l.moe > 0 && tokens >= 2 && a2a_layer > 0) [[unlikely]] {
    // Two-batch overlap (header): per MoE layer max(C, A) instead of C + A, and half of
    // min(C, A) exposed once per stage.
    const std::int64_t attention = (l.full * x.per_full + l.window * (lin.per_window + x.per_window) +
                                    l.linear * (lin.per_linear + x.per_linear) + shared_indexer) /
                                   l.layers;
    const std::int64_t compute = x.per_layer + attention + lin.per_moe - lin.per_moe_a2a;
    const std::int64_t overlap = std::min(compute, a2a_layer);
    hidden = l.moe * overlap - overlap / 2;
    t -= hidden;
  }
  return t;
}

inline std::int64_t IterationCostModel::first_stage_ps(std::int64_t gpu, const TokenLinear& lin, std::int64_t host,
                                                       std::int64_t& exposed_host) const {
  // Host work precedes the first stage; the vocabulary-parallel embedding ends in one more
  // all-reduce. With host overlap the host prepares this iteration while the GPU runs the
  // previous one: only the host time beyond the first stage's GPU time shows.
  gpu += lin.embedding_reduce;
  const std::int64_t t = chip_.efficiency.host_overlap ? std::max(gpu, host) : gpu + host;
  exposed_host = t - gpu;
  return t;
}

inline void IterationCostModel::add_token_components(const TokenLinear& lin, std::int64_t hidden_a2a,
                                                     std::int64_t stretch, ComponentTimes& c) {
  using models::OpKind;
  c[idx(OpKind::kGemmQkv)] += lin.qkv;
  c[idx(OpKind::kGemmOut)] += lin.out;
  c[idx(OpKind::kGemmMlp)] += lin.mlp;
  c[idx(OpKind::kMoeExperts)] += lin.moe;
  c[idx(OpKind::kElementwise)] += lin.elementwise;
  c[idx(OpKind::kDequantize)] += lin.dequantize;
  c[idx(OpKind::kTpAllReduce)] += lin.all_reduce;
  c[idx(OpKind::kEpDispatch)] += lin.dispatch;
  c[idx(OpKind::kEpCombine)] += lin.combine;
  c[idx(OpKind::kA2aKvContention)] += stretch;
  if (hidden_a2a > 0) {
    // What two-batch overlap hid comes off the all-to-all, in proportion: what is left is exposed.
    const double a2a = static_cast<double>(lin.dispatch + lin.combine + stretch);
    const double hidden = static_cast<double>(hidden_a2a);
    // Rounded half up as to_ps is, for the same reason (the shares are >= 0).
    // NOLINTBEGIN(bugprone-incorrect-roundings)
    const auto from_dispatch = static_cast<std::int64_t>(hidden * static_cast<double>(lin.dispatch) / a2a + 0.5);
    const auto from_stretch = static_cast<std::int64_t>(hidden * static_cast<double>(stretch) / a2a + 0.5);
    // NOLINTEND(bugprone-incorrect-roundings)
    c[idx(OpKind::kEpDispatch)] -= from_dispatch;
    c[idx(OpKind::kA2aKvContention)] -= from_stretch;
    c[idx(OpKind::kEpCombine)] -= hidden_a2a - from_dispatch - from_stretch;
  }
}

void IterationCostModel::cost(const models::BatchShape& b, std::int64_t sequences, std::int64_t* stage_ps,
                              ComponentTimes& c, const models::BatchShape* busiest, double nic_share,
                              const models::BatchShape* cp_part) {
  using models::OpKind;
  const TokenLinear& lin = linear(static_cast<std::int64_t>(b.tokens));
  const models::CostModel& cm = *cost_model_;
  const bool prefill = b.prefill_tokens > 0, decode = b.decode_seqs > 0;
  // An operator with nothing to do launches no kernel.
  auto run = [&](const AffineOp& op) { return to_ps(op.seconds(b, cm)); };
  // Decode attention: with speculative decoding each sequence's KV is read once for its w queries
  // (header): w times the FLOPs of one query.
  const bool verify = decode && verify_width_ > 1;
  auto run_decode_at = [&](const AffineOp& op, const models::BatchShape& shape) {
    if (!verify) [[likely]]
      return to_ps(op.seconds(shape, cm));
    models::Operator o = op.at(shape);
    o.batch /= verify_width_;
    if (verify_roofline_) {
      // The tables measured one query per sequence and answer by shape, not FLOPs: the w queries'
      // extra FLOPs over the KV read once come on top, as the roofline's compute side gives them
      // (MLA's 128 heads turn its decode kernel compute-bound at w = 2: FlashMLA, DeepSeek's own
      // README, 580-660 TFLOP/s compute-bound on H800 against 3,000 GB/s memory-bound).
      const double one = cm.seconds(o);
      const double memory = verify_roofline_->memory_seconds(o);
      const double before = std::max(verify_roofline_->compute_seconds(o), memory);
      o.flops *= verify_width_;
      return to_ps(one + std::max(verify_roofline_->compute_seconds(o), memory) - before);
    }
    o.flops *= verify_width_;
    return to_ps(cm.seconds(o));
  };
  auto run_decode = [&](const AffineOp& op) { return run_decode_at(op, b); };
  // A DSA model whose engine runs the short chunks densely (models::EnginePaths): the sparse
  // kernels (attention, indexer, absorption) launch for the other chunks, the dense ones
  // (attention, up-projection) for the short ones.
  const models::PrefillLaunch launch = models::prefill_launch(dsa_dense_, b);
  const bool sparse_prefill = launch.sparse, dense_prefill = launch.dense;
  const std::int64_t attn_prefill_full =
      (sparse_prefill ? run(prefill_full_) : 0) + (dense_prefill ? run(prefill_dense_) : 0);
  const std::int64_t attn_decode_full = decode ? run_decode(decode_full_) : 0;
  std::int64_t attn_prefill_window = 0, attn_decode_window = 0;
  if (has_window_) {
    attn_prefill_window = prefill ? run(prefill_window_) : 0;
    attn_decode_window = decode ? run_decode(decode_window_) : 0;
  }
  std::int64_t up_projection = 0, absorb = 0, indexer = 0;
  if (has_absorb_) {
    up_projection = (prefill && !has_dsa_) || dense_prefill ? run(up_projection_) : 0;
    absorb = decode || (sparse_prefill && absorb_in_prefill_) ? run(absorb_) : 0;
  }
  if (has_dsa_) indexer = (sparse_prefill ? run(indexer_prefill_) : 0) + (decode ? run_decode(indexer_decode_) : 0);
  std::int64_t linear_prefill = 0, linear_decode = 0;
  if (has_linear_) {
    linear_prefill = prefill ? run(linear_prefill_) : 0;
    linear_decode = decode ? run_decode(linear_decode_) : 0;
  }
  std::int64_t cp = 0;
  if (plan_.cp > 1) {
    const models::BatchShape& split = cp_part != nullptr ? *cp_part : b;
    if (prefill && split.prefill_tokens > 0) {
      // Pass-KV or pass-Q, whichever moves less.
      const double kv = cp_prefill_.bytes(split), q = cp_prefill_q_.bytes(split);
      cp += to_ps(comm_.seconds(models::Collective::kP2p, cp_span_, std::min(kv, q)));
    }
    if (decode) cp += to_ps(comm_.seconds(cp_decode_.base.collective, cp_span_, cp_decode_.bytes(b)));
  }
  // Attention-DP imbalance: the busiest rank's decode attention kernels beyond the even split's,
  // per full layer, per window layer, per layer (absorption, CP exchange) and per indexer layer.
  std::int64_t excess_full = 0, excess_window = 0, excess_layer = 0, excess_linear = 0, excess_indexer = 0;
  if (busiest != nullptr && decode) [[unlikely]] {
    const models::BatchShape& w = *busiest;
    excess_full = run_decode_at(decode_full_, w) - attn_decode_full;
    if (has_linear_) excess_linear = run_decode_at(linear_decode_, w) - linear_decode;
    if (has_window_) excess_window = run_decode_at(decode_window_, w) - attn_decode_window;
    if (has_absorb_) {
      // The absorption runs on the attention layers only: not on linear-attention ones (Kimi-K3).
      const std::int64_t excess_absorb = to_ps(absorb_.seconds(w, cm)) - absorb;
      excess_layer += excess_absorb;
      excess_linear -= excess_absorb;
    }
    if (has_dsa_) excess_indexer = run_decode_at(indexer_decode_, w) - run_decode(indexer_decode_);
    if (plan_.cp > 1) {
      excess_layer += to_ps(comm_.seconds(cp_decode_.base.collective, cp_span_, cp_decode_.bytes(w))) -
                      to_ps(comm_.seconds(cp_decode_.base.collective, cp_span_, cp_decode_.bytes(b)));
    }
  }
  LayerTerms x;
  x.per_layer = lin.per_layer + up_projection + absorb + indexer + cp;
  x.per_full = attn_prefill_full + attn_decode_full;
  x.per_window = attn_prefill_window + attn_decode_window;
  // A linear-attention layer runs neither MLA's up-projection nor its absorption (per_layer has them).
  x.per_linear = linear_prefill + linear_decode - (up_projection + absorb);
  x.per_shared_indexer = -indexer;
  const std::int64_t host = host_ps(sequences);
  const std::int64_t lm_head = lm_head_ps(b.logits);
  const std::int64_t draft = verify ? draft_ps(b) : 0;
  const double chip_tokens = models::tokens_per_chip(plan_, b.tokens);
  // KV flows on the NICs: every MoE layer's all-to-all gets nic_share of them (header).
  std::int64_t contention = 0;
  if (nic_share < 1.0 && a2a_on_nics_) {
    contention = to_ps(comm_.seconds(lin.dispatch_op, moe_span_, nic_share)) +
                 to_ps(comm_.seconds(lin.combine_op, moe_span_, nic_share)) - lin.per_moe_a2a;
  }

  c.fill(0);
  std::int64_t sends = 0, exposed_host = 0, hidden_a2a = 0;
  for (int s = 0; s < plan_.pp; ++s) {
    const StageLayers& l = stage_layers_[static_cast<std::size_t>(s)];
    std::int64_t hidden = 0;
    std::int64_t t = stage_gpu_ps(l, lin, x, b.tokens, contention, hidden) + l.full * excess_full +
                     l.window * excess_window + l.layers * excess_layer + l.linear * excess_linear +
                     (l.layers - l.shared_indexer) * excess_indexer;
    hidden_a2a += hidden;
    if (s == 0) t = first_stage_ps(t, lin, host, exposed_host);
    // The last stage runs the LM head; the others send activations on.
    if (s == plan_.pp - 1) {
      t += lm_head + draft;
    } else {
      const auto hop = static_cast<std::size_t>(s);
      const std::int64_t send =
          b.tokens <= 0 ? 0
          : hop_spans_.empty()
              ? to_ps(send_alpha_s_[hop] + send_s_per_token_[hop] * chip_tokens)
              : to_ps(comm_.seconds(models::Collective::kP2p, hop_spans_[hop], hidden_bytes_per_token_ * chip_tokens));
      t += send;
      sends += send;
    }
    stage_ps[s] = t;
  }
  const StageLayers& n = total_;
  add_token_components(lin, hidden_a2a, n.moe * contention, c);
  c[idx(OpKind::kScheduling)] = exposed_host;
  c[idx(OpKind::kLmHead)] = lm_head;
  c[idx(OpKind::kMtpDraft)] = draft;
  c[idx(OpKind::kImbalance)] = n.full * excess_full + n.window * excess_window + n.layers * excess_layer +
                               n.linear * excess_linear + (n.layers - n.shared_indexer) * excess_indexer;
  c[idx(OpKind::kPpSend)] = sends;
  c[idx(OpKind::kGemmQkv)] += (n.layers - n.linear) * up_projection;
  c[idx(OpKind::kGemmOut)] += (n.layers - n.linear) * absorb;
  c[idx(OpKind::kCpExchange)] = n.layers * cp;
  c[idx(OpKind::kIndexer)] = (n.layers - n.shared_indexer) * indexer;
  c[idx(OpKind::kAttentionPrefill)] =
      n.full * attn_prefill_full + n.window * attn_prefill_window + n.linear * linear_prefill;
  c[idx(OpKind::kAttentionDecode)] =
      n.full * attn_decode_full + n.window * attn_decode_window + n.linear * linear_decode;
}

IterationCostModel::DecodeSteps IterationCostModel::decode_steps(std::int64_t sequences) {
  // No all-to-all stretch (nic_share): decode runs are off for a pool whose all-to-all shares
  // the NICs with the flows (DecodeRuns: every such step is an event with its own stretch), so a
  // run's steps are cost() with nic_share = 1. DecodeRuns checks it when it enables runs.
  SERVESIM_CHECK(plan_.pp == 1 && verify_width_ == 1 && sequences > 0);
  DecodeSteps d;
  d.lin = linear(sequences);
  d.lm_head = lm_head_ps(static_cast<double>(sequences));  // one logit per sequence
  d.host = host_ps(sequences);
  return d;
}

void IterationCostModel::bind_decode(const models::BatchShape& b, DecodeBindings& out) const {
  const models::CostModel& cm = *cost_model_;
  decode_full_.bind(b, cm, out.full);
  if (has_window_) decode_window_.bind(b, cm, out.window);
  if (has_absorb_) absorb_.bind(b, cm, out.absorb);
  if (has_dsa_) indexer_decode_.bind(b, cm, out.indexer);
  if (has_linear_) linear_decode_.bind(b, cm, out.linear);
}

std::int64_t IterationCostModel::decode_step(const DecodeSteps& d, const models::BatchShape& b, DecodeStepParts& p,
                                             DecodeBindings* bound) const {
  // cost() for a decode-only batch on one stage: its context terms, then the same stage formula
  // (no prefill, no drafts, no busiest rank, no sends, no all-to-all stretch).
  const models::CostModel& cm = *cost_model_;
  auto seconds = [&](const AffineOp& op, models::ContextBinding DecodeBindings::*binding) {
    return bound != nullptr ? op.seconds(b, cm, bound->*binding) : op.seconds(b, cm);
  };
  p.attention_full = to_ps(seconds(decode_full_, &DecodeBindings::full));
  p.attention_window = has_window_ ? to_ps(seconds(decode_window_, &DecodeBindings::window)) : 0;
  p.absorb = has_absorb_ ? to_ps(seconds(absorb_, &DecodeBindings::absorb)) : 0;
  p.indexer = has_dsa_ ? to_ps(seconds(indexer_decode_, &DecodeBindings::indexer)) : 0;
  p.cp = plan_.cp > 1 ? to_ps(comm_.seconds(cp_decode_.base.collective, cp_span_, cp_decode_.bytes(b))) : 0;
  p.linear = has_linear_ ? to_ps(seconds(linear_decode_, &DecodeBindings::linear)) : 0;
  LayerTerms x;
  x.per_layer = d.lin.per_layer + p.absorb + p.indexer + p.cp;
  x.per_full = p.attention_full;
  x.per_window = p.attention_window;
  x.per_linear = p.linear - p.absorb;
  x.per_shared_indexer = -p.indexer;
  const std::int64_t gpu = stage_gpu_ps(total_, d.lin, x, b.tokens, 0, p.hidden_a2a);
  return first_stage_ps(gpu, d.lin, d.host, p.exposed_host) + d.lm_head;
}

bool ContextProgression::read(double base, const std::array<int, 3>& field, const std::array<double, 3>& coef,
                              const models::BatchShape& b) {
  constexpr int kContext = 3;  // models::kBatchFieldMembers: &BatchShape::decode_kv_tokens
  static_assert(models::kBatchFieldMembers[kContext] == &models::BatchShape::decode_kv_tokens);
  int context = -1;
  for (int i = 0; i < 3; ++i) {
    if (field[static_cast<std::size_t>(i)] != kContext) continue;
    if (context >= 0) return false;
    context = i;
  }
  pre = base;
  c = 0;
  after[0] = after[1] = 0;
  int k = 0;
  for (int i = 0; i < 3; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const double term = coef[u] * models::batch_field(b, field[u]);
    if (i == context) {
      c = coef[u];
    } else if (context < 0 || i < context) {
      pre += term;
    } else {
      after[k++] = term;
    }
  }
  return true;
}

// A decode run's attention costed through the cost model's binding to the run
// (AffineOp::bind()), each step's operator built as AffineOp::at() builds it: only
// decode_kv_tokens moves along a run, so each field's sum over the terms before the one on it,
// and the products of the terms after it, are read once and added per step in at()'s order (the
// same doubles). Where more than one term reads decode_kv_tokens, at() itself.
class IterationCostModel::BoundSteps {
 public:
  BoundSteps(const AffineOp& a, const models::BatchShape& b, const models::CostModel& cm) : a_(a), cm_(cm) {
    a.bind(b, cm, binding_);
    constexpr int kContext = 3;  // models::kBatchFieldMembers: &BatchShape::decode_kv_tokens
    static_assert(models::kBatchFieldMembers[kContext] == &models::BatchShape::decode_kv_tokens);
    for (int i = 0; i < a.n_terms; ++i) {
      if (a.terms[static_cast<std::size_t>(i)].field != kContext) continue;
      if (context_ >= 0) {
        per_step_at_ = true;
        return;
      }
      context_ = i;
    }
    op_ = a.base;
    for (int i = 0; i < a.n_terms; ++i) {
      const AffineOp::Term& t = a.terms[static_cast<std::size_t>(i)];
      const double x = models::batch_field(b, t.field);
      if (i == context_) {
        c_ = t;
        pre_ = {op_.flops, op_.bytes, op_.m, op_.batch, op_.context, op_.quant_elements};
      } else if (i < context_ || context_ < 0) {
        AffineOp::add_term(op_, t, x);
      } else {
        after_[static_cast<std::size_t>(n_after_++)] = {t.flops * x, t.bytes * x,   t.m * x,
                                                        t.batch * x, t.context * x, t.quant_elements * x};
      }
    }
  }
  std::int64_t operator()(const models::BatchShape& s) {
    if (per_step_at_) [[unlikely]]
      return to_ps(cm_.bound_seconds(a_.at(s), binding_));
    if (context_ >= 0) {
      const double x = s.decode_kv_tokens;
      std::array<double, 6> v{pre_[0] + c_.flops * x, pre_[1] + c_.bytes * x,   pre_[2] + c_.m * x,
                              pre_[3] + c_.batch * x, pre_[4] + c_.context * x, pre_[5] + c_.quant_elements * x};
      for (int k = 0; k < n_after_; ++k) {
        const std::array<double, 6>& p = after_[static_cast<std::size_t>(k)];
        for (std::size_t f = 0; f < v.size(); ++f) v[f] += p[f];
      }
      op_.flops = v[0];
      op_.bytes = v[1];
      op_.m = v[2];
      op_.batch = v[3];
      op_.context = v[4];
      op_.quant_elements = v[5];
    }
    return to_ps(cm_.bound_seconds(op_, binding_));
  }

 private:
  const AffineOp& a_;
  const models::CostModel& cm_;
  models::ContextBinding binding_;
  models::Operator op_;
  int context_ = -1;  // the term on decode_kv_tokens; -1: none (the operator does not move)
  bool per_step_at_ = false;
  AffineOp::Term c_;
  std::array<double, 6> pre_{};  // flops, bytes, m, batch, context, quant_elements
  std::array<std::array<double, 6>, models::kBatchFields> after_{};
  int n_after_ = 0;
};

struct IterationCostModel::RunBindings::State {  // what the run's first chunk bound, if it did
  std::optional<DecodeBindings> decode;
  std::optional<BoundSteps> attention;
};

IterationCostModel::RunBindings::RunBindings() = default;
IterationCostModel::RunBindings::~RunBindings() = default;
IterationCostModel::RunBindings::RunBindings(RunBindings&&) noexcept = default;
IterationCostModel::RunBindings& IterationCostModel::RunBindings::operator=(RunBindings&&) noexcept = default;

void IterationCostModel::RunBindings::start() {
  if (!state_) {
    state_ = std::make_unique<State>();
    return;
  }
  state_->decode.reset();
  state_->attention.reset();
}

SimTime IterationCostModel::decode_run(const DecodeSteps& d, models::BatchShape b, std::size_t n, SimTime t,
                                       SimTime* ends, DecodeStepParts* parts, RunBindings* keep) const {
  // The KV token sums are integers below 2^53, so adding decode_seqs in doubles gives exactly the
  // shape the lane would (static_cast<double>(sum of contexts) + decodes).
  const double grow = b.decode_seqs;
  // The steps' formula is decode_step()'s without window, absorption, indexer, linear attention or
  // CP exchange terms, and without two-batch overlap to hide all-to-all (plain_decode_runs() less
  // its condition on the attention's cost).
  const bool full_only =
      !has_window_ && !has_absorb_ && !has_dsa_ && !has_linear_ && plan_.cp == 1 && !(tbo_ && total_.moe > 0);
  RunBindings::State* kept = keep != nullptr ? keep->state_.get() : nullptr;
  if (!full_only) {
    std::optional<DecodeBindings> local;
    std::optional<DecodeBindings>& bound = kept != nullptr ? kept->decode : local;
    if (!bound) bind_decode(b, bound.emplace());
    for (std::size_t j = 0; j < n; ++j, b.decode_kv_tokens += grow) {
      t = t + Duration::picoseconds(decode_step(d, b, parts[j], &*bound));
      ends[j] = t;
    }
    return t;
  }
  // decode_step() with the terms that are zero here left out (no window, absorption, indexer or
  // CP exchange, and no two-batch overlap to hide all-to-all), and what the steps share in locals
  // (which the stores to `parts` cannot alias), so that the loop reloads nothing.
  const AffineOp& attention = decode_full_;
  const StageLayers layers = total_;
  const TokenLinear lin = d.lin;
  const std::int64_t host = d.host, lm_head = d.lm_head;
  LayerTerms x;
  x.per_layer = lin.per_layer;
  // The steps, each with its attention time from `attention_ps(b)` (the loop is instantiated
  // once per way of computing it).
  auto walk = [&](auto attention_ps) {
    for (std::size_t j = 0; j < n; ++j, b.decode_kv_tokens += grow) {
      x.per_full = attention_ps(b);
      std::int64_t hidden = 0, exposed = 0;
      const std::int64_t gpu = stage_gpu_ps(layers, lin, x, b.tokens, 0, hidden);
      t = t + Duration::picoseconds(first_stage_ps(gpu, lin, host, exposed) + lm_head);
      ends[j] = t;
      DecodeStepParts& p = parts[j];
      p = DecodeStepParts{};
      p.attention_full = x.per_full;
      p.exposed_host = exposed;
      p.hidden_a2a = hidden;
    }
    return t;
  };
  if (!attention.linear) {
    if (kept == nullptr) return walk(BoundSteps(attention, b, *cost_model_));
    if (!kept->attention) kept->attention.emplace(attention, b, *cost_model_);
    return walk(std::ref(*kept->attention));
  }
  // The attention's FLOPs and bytes as the steps' context sum moves: linear_seconds() term by
  // term, with the terms on other fields read once. Where a sum has more than one term on the
  // contexts, linear_seconds() itself.
  ContextProgression flops, bytes;
  if (!flops.read(attention.base.flops, attention.flop_field, attention.flop_coef, b) ||
      !bytes.read(attention.base.bytes, attention.byte_field, attention.byte_coef, b)) [[unlikely]] {
    return walk([&](const models::BatchShape& s) { return to_ps(attention.linear_seconds(s)); });
  }
  const double overhead_s = attention.base.kernels * attention.form.overhead_s;
  const double s_per_flop = attention.form.s_per_flop, s_per_byte = attention.form.s_per_byte;
  return walk([&](const models::BatchShape& s) {
    return to_ps(overhead_s +
                 std::max(flops.at(s.decode_kv_tokens) * s_per_flop, bytes.at(s.decode_kv_tokens) * s_per_byte));
  });
}

void IterationCostModel::step_components(const DecodeSteps& d, const DecodeStepParts& p, ComponentTimes& c) const {
  c.fill(0);
  add_step_components(d, p, c);
}

void IterationCostModel::add_step_components(const DecodeSteps& d, const DecodeStepParts& p, ComponentTimes& c) const {
  // cost()'s components of a decode-only batch on one stage, added to c.
  using models::OpKind;
  const StageLayers& n = total_;
  add_token_components(d.lin, p.hidden_a2a, 0, c);
  c[idx(OpKind::kScheduling)] += p.exposed_host;
  c[idx(OpKind::kLmHead)] += d.lm_head;
  c[idx(OpKind::kGemmOut)] += (n.layers - n.linear) * p.absorb;
  c[idx(OpKind::kCpExchange)] += n.layers * p.cp;
  c[idx(OpKind::kIndexer)] += (n.layers - n.shared_indexer) * p.indexer;
  c[idx(OpKind::kAttentionDecode)] += n.full * p.attention_full + n.window * p.attention_window + n.linear * p.linear;
}

void IterationCostModel::add_steps_components(const DecodeSteps& d, const DecodeStepParts* parts, std::size_t count,
                                              ComponentTimes& c) const {
  if (count == 0) return;
  // Every component of add_step_components() is a shared factor times a step's own term, so the
  // steps together are one step of the summed terms and the shared ones times count (integers:
  // the same totals). Not where two-batch overlap hid all-to-all: that split depends on each
  // step's hidden time, so those go step by step.
  DecodeStepParts sum;
  for (std::size_t k = 0; k < count; ++k) {
    const DecodeStepParts& p = parts[k];
    if (p.hidden_a2a > 0) [[unlikely]] {
      for (std::size_t i = 0; i < count; ++i) add_step_components(d, parts[i], c);
      return;
    }
    sum.attention_full += p.attention_full;
    sum.attention_window += p.attention_window;
    sum.absorb += p.absorb;
    sum.indexer += p.indexer;
    sum.cp += p.cp;
    sum.linear += p.linear;
    sum.exposed_host += p.exposed_host;
  }
  const auto steps = static_cast<std::int64_t>(count);
  DecodeSteps all = d;
  for (std::int64_t* v :
       {&all.lin.qkv, &all.lin.out, &all.lin.mlp, &all.lin.moe, &all.lin.elementwise, &all.lin.dequantize,
        &all.lin.all_reduce, &all.lin.dispatch, &all.lin.combine, &all.lm_head}) {
    *v *= steps;
  }
  add_step_components(all, sum, c);
}

}  // namespace servesim::cluster
