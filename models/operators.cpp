#include "models/operators.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace servesim::models {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kGemmQkv: return "gemm_qkv";
    case OpKind::kGemmOut: return "gemm_out";
    case OpKind::kGemmMlp: return "gemm_mlp";
    case OpKind::kMoeExperts: return "moe_experts";
    case OpKind::kAttentionPrefill: return "attention_prefill";
    case OpKind::kAttentionDecode: return "attention_decode";
    case OpKind::kIndexer: return "dsa_indexer";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kLmHead: return "lm_head";
    case OpKind::kDequantize: return "dequantize";
    case OpKind::kTpAllReduce: return "tp_all_reduce";
    case OpKind::kEpDispatch: return "ep_dispatch";
    case OpKind::kEpCombine: return "ep_combine";
    case OpKind::kCpExchange: return "cp_exchange";
    case OpKind::kPpSend: return "pp_send";
    case OpKind::kScheduling: return "scheduling";
    case OpKind::kSwap: return "swap";
    case OpKind::kMtpDraft: return "mtp_draft";
    case OpKind::kImbalance: return "imbalance";
    case OpKind::kA2aKvContention: return "a2a_kv_contention";
    case OpKind::kCount: break;
  }
  return "?";
}

bool is_communication(OpKind k) {
  return k == OpKind::kTpAllReduce || k == OpKind::kEpDispatch || k == OpKind::kEpCombine || k == OpKind::kCpExchange ||
         k == OpKind::kPpSend || k == OpKind::kA2aKvContention;
}

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kP2p: return "p2p";
  }
  return "?";
}

void add_chunk(BatchShape& b, const ModelSpec& m, std::int64_t cached, std::int64_t new_tokens, bool samples) {
  const std::int64_t kv = cached + new_tokens;
  const double c = static_cast<double>(new_tokens);
  b.tokens += c;
  b.prefill_tokens += c;
  b.prefill_chunks += 1;
  b.prefill_kv_tokens += static_cast<double>(kv);
  add_chunk_pairs(b, cached, new_tokens, m.window_cap(), m.dsa.enabled() ? m.topk_cap() : 0);
  if (samples) b.logits += 1;
}

void add_decode(BatchShape& b, const ModelSpec& m, std::int64_t context) {
  b.tokens += 1;
  b.logits += 1;
  b.decode_seqs += 1;
  b.decode_kv_tokens += static_cast<double>(context);
  if (m.window_cap() > 0) {
    b.decode_kv_window += static_cast<double>(std::min<std::int64_t>(context, m.window_cap()));
  }
  if (m.dsa.enabled()) {
    b.decode_kv_topk += static_cast<double>(std::min(context, m.topk_cap()));
  }
}

namespace {

constexpr double kAct = 2.0;  // bf16 activations in and out of every kernel unless quantised

// How a GEMM family's weights are read and at which rate it runs on this chip.
struct GemmFormat {
  Format format = Format::kBf16;
  ComputeRate rate = ComputeRate::kBf16;
  double weight_bytes = 2;  // per element, as the GEMM reads it
  double act_in = kAct;     // per element of its input
  double stored = 2;        // per element in memory
  bool emulated = false;
};

GemmFormat gemm_format(Format f, const std::array<bool, kComputeRates>& rates) {
  GemmFormat g;
  g.format = f;
  g.stored = bytes_per_element(f);
  g.rate = gemm_rate(f, rates);
  g.emulated = g.rate != compute_rate(f);
  // Emulated (weight-only kernels such as Marlin: W8A16, W4A16): the weights stream at their
  // stored width and are dequantised in registers; activations stay bf16 and the math runs at
  // the bf16 rate.
  g.weight_bytes = g.stored;
  g.act_in = g.emulated ? kAct : activation_bytes_per_element(f);
  return g;
}

// A [tokens x k] x [k x n] GEMM: 2 FLOPs per multiply-add; reads the weight once and the input,
// writes the output (bf16).
Operator gemm(OpKind kind, const GemmFormat& f, double tokens, double k, double n) {
  Operator op;
  op.kind = kind;
  op.rate = f.rate;
  op.flops = 2.0 * tokens * k * n;
  op.bytes = f.weight_bytes * k * n + (f.act_in == kAct ? kAct * tokens * (k + n) : tokens * (f.act_in * k + kAct * n));
  op.kernels = 1;
  op.m = tokens;
  op.n = n;
  op.k = k;
  op.format = f.format;
  // The kernel reads quantised activations: a quantisation pass over its input runs first (a
  // kernel of its own in the engines' fp8 / block-fp8 / NVFP4 linear layers; its cost is the
  // format's Efficiency::gemm_formats entry, fitted to the measured GEMMs).
  if (!f.emulated && f.act_in < kAct) op.quant_elements = tokens * k;
  op.gemms[0] = {n, k, 1};
  op.gemm_count = 1;
  return op;
}

// Runs `part` (GEMMs of the same rows) after `into`, in one Operator: FLOPs, bytes, kernels and
// the GEMM list add up.
void absorb(Operator& into, const Operator& part) {
  into.flops += part.flops;
  into.bytes += part.bytes;
  into.kernels += part.kernels;
  into.quant_elements += part.quant_elements;
  for (int i = 0; i < part.gemm_count; ++i) {
    SERVESIM_CHECK_MSG(into.gemm_count < Operator::kMaxGemms, "an operator lists at most kMaxGemms GEMMs");
    into.gemms[static_cast<std::size_t>(into.gemm_count++)] = part.gemms[static_cast<std::size_t>(i)];
  }
}

// The dequantisation work of an emulated GEMM family: 2 vector operations (convert, scale) per
// weight element per call, fused into the GEMM (no kernel of its own); costed at the chip's vector
// rate (cost_model.cpp).
Operator dequant(const GemmFormat& f, double weight_elements, int kernels) {
  Operator op;
  op.kind = OpKind::kDequantize;
  op.kernels = f.emulated && kernels > 0 ? 1 : 0;
  op.flops = f.emulated ? 2.0 * weight_elements : 0.0;
  op.m = weight_elements;
  return op;
}

CommOp comm(OpKind kind, Collective c, Group g, double bytes) {
  CommOp op;
  op.kind = kind;
  op.collective = c;
  op.group = g;
  op.bytes = bytes;
  return op;
}

// Query/key elements that get the rotary embedding and KV elements appended, per token per chip.
struct AttentionShape {
  double rotary = 0;    // q and k elements rotated
  double kv_write = 0;  // KV-cache elements written
  double norms = 0;     // extra elements (MLA q_a / kv_a RMSNorms, an attention output gate)
};

AttentionShape attention_shape(const ModelSpec& m, const ParallelPlan& p) {
  AttentionShape a;
  const double hq = p.heads_per_chip(m);
  if (m.attention == AttentionKind::kMla) {
    a.rotary = hq * m.mla.qk_rope_dim + m.mla.qk_rope_dim;
    a.kv_write = m.mla.kv_lora_rank + m.mla.qk_rope_dim + (m.dsa.enabled() ? m.dsa.index_dim : 0);
    a.norms = 2.0 * (m.mla.q_lora_rank + m.mla.kv_lora_rank);
    if (m.attention_output_gate) a.norms += 3 * hq * m.mla.v_dim;  // sigmoid(gate) x o
  } else if (m.compress.enabled()) {
    // DeepSeek-V4: rotary on the last rope_dim dims of every query head and of the entry; the
    // window's entry appended (the compressed entries, 1 / ratio of it, not counted); the q
    // latent's and the entry's RMSNorms. mHC: LayerTokenOps::mhc.
    const CompressSpec& c = m.compress;
    a.rotary = (hq + 1) * c.rope_dim;
    a.kv_write = m.head_dim;
    a.norms = 2.0 * (c.q_lora_rank + m.head_dim);
  } else {
    const double hkv = p.kv_heads_per_chip(m), hd = m.head_dim;
    a.rotary = (hq + hkv) * hd;
    a.kv_write = hkv * (hd + m.value_dim());
    if (m.attention_output_gate) a.norms = 3 * hq * hd;  // sigmoid(gate) x o: read both, write
  }
  return a;
}

}  // namespace

double kv_bytes_per_token_layer_chip(const ModelSpec& m, const ParallelPlan& p) {
  // MLA's latent and compressed attention's entries: one per token, whole on every chip.
  if (m.attention == AttentionKind::kMla || m.compress.enabled()) return m.kv_bytes_per_token_layer();
  return static_cast<double>(p.kv_heads_per_chip(m)) * (m.head_dim + m.value_dim()) *
         bytes_per_element(m.formats.kv_cache);
}

ComputeRate gemm_rate(Format f, const std::array<bool, kComputeRates>& chip_rates) {
  const ComputeRate r = compute_rate(f);
  return chip_rates[static_cast<std::size_t>(r)] ? r : ComputeRate::kBf16;
}

Operator gemm_op(OpKind kind, Format f, double tokens, double k, double n,
                 const std::array<bool, kComputeRates>& chip_rates) {
  return gemm(kind, gemm_format(f, chip_rates), tokens, k, n);
}

double hidden_state_bytes(const ModelSpec& m, double tokens) {
  return static_cast<double>(m.activation_bytes) * tokens * m.hidden;
}

MoeLoad::MoeLoad(const ModelSpec& m, const ParallelPlan& p, const MoeRouting& r)
    : top_k_(m.moe.top_k), ep_(std::max(1, p.ep)), moe_tp_(std::max(1, p.moe_tp)) {
  const int e = m.moe.experts;
  if (e <= 0) return;
  popularity_.assign(static_cast<std::size_t>(e), 1.0 / e);
  if (r.distribution == MoeRouting::Distribution::kPowerLaw) {
    double h = 0;
    for (int j = 1; j <= e; ++j) h += std::pow(static_cast<double>(j), -r.alpha);
    for (int j = 1; j <= e; ++j) {
      popularity_[static_cast<std::size_t>(j - 1)] = std::pow(static_cast<double>(j), -r.alpha) / h;
    }
  }
  // Water-filling: a token picks k distinct experts, so an expert's share of the T k picks is at
  // most 1 / k. Cap the hottest at 1 / k and spread the overflow over the rest in proportion.
  const double cap = 1.0 / std::max(1, top_k_);
  for (int round = 0; round < e; ++round) {
    double excess = 0, free_mass = 0;
    for (double& q : popularity_) {
      if (q > cap) {
        excess += q - cap;
        q = cap;
      } else if (q < cap) {
        free_mass += q;
      }
    }
    if (excess <= 1e-15 || free_mass <= 0) break;
    for (double& q : popularity_) {
      if (q < cap) q += excess * q / free_mass;
    }
  }
}

double MoeLoad::busiest_pairs(double tokens) const {
  double share = 0;
  for (std::size_t j = 0; j < popularity_.size(); j += static_cast<std::size_t>(ep_)) {
    share += popularity_[j];
  }
  return tokens * top_k_ * share;
}

double MoeLoad::hit(std::size_t j, double tokens) const {
  // Expert j is hit by a token with probability k p_j; by at least one of T tokens with
  // 1 - (1 - k p_j)^T.
  const double q = std::min(1.0, top_k_ * popularity_[j]);
  return q >= 1.0 ? 1.0 : 1.0 - std::pow(1.0 - q, tokens);
}

double MoeLoad::busiest_active_experts(double tokens) const {
  double active = 0;
  for (std::size_t j = 0; j < popularity_.size(); j += static_cast<std::size_t>(ep_)) active += hit(j, tokens);
  return tokens > 0 ? active : 0.0;
}

double moe_tile_rows(double mean_rows) {
  double tile = 16;
  while (tile < 128 && tile < mean_rows - 1e-9) tile *= 2;
  return tile;
}

MoeRankLoad MoeLoad::busiest(double tokens) const {
  MoeRankLoad r;
  if (!(tokens > 0)) return r;
  r.tokens = tokens;
  r.pairs = busiest_pairs(tokens);
  // The rank's experts' hit probabilities, once: their sum is the active experts, and each
  // weights its expert's padded rows.
  std::vector<double> hits;
  for (std::size_t j = 0; j < popularity_.size(); j += static_cast<std::size_t>(ep_)) {
    hits.push_back(hit(j, tokens));
    r.active += hits.back();
  }
  if (!(r.active > 0)) return r;
  const double tile = moe_tile_rows(r.pairs / r.active);
  for (std::size_t i = 0; i < hits.size(); ++i) {
    if (!(hits[i] > 0)) continue;
    const double q = std::min(1.0, top_k_ * popularity_[i * static_cast<std::size_t>(ep_)]);
    const double rows = tokens * q / hits[i];  // its expected rows, given that it is hit
    r.padded_rows += hits[i] * std::ceil(rows / tile - 1e-9) * tile;
  }
  return r;
}

void MoeLoad::set_dispatch(int chips_per_domain, DispatchKernel kernel) {
  kernel_ = kernel;
  fanout_ = DispatchFanout{};
  fanout_.known = true;
  const int chips = ep_ * moe_tp_;
  if (popularity_.empty() || chips <= 1) return;
  const int per = chips_per_domain > 0 ? std::min(chips_per_domain, chips) : chips;
  const int domains = (chips + per - 1) / per;
  // Popularity held by each chip (its EP rank's experts) and by each domain (its ranks', once).
  std::vector<double> chip_mass(static_cast<std::size_t>(chips), 0.0),
      domain_mass(static_cast<std::size_t>(domains), 0.0);
  // Indices in size_t: rank < ep_, i < moe_tp_ (both >= 1) and per >= 1, so every index is below
  // chips = ep_ x moe_tp_ (an int) and equals the int expression it replaced.
  const auto tp = static_cast<std::size_t>(moe_tp_);
  for (std::size_t j = 0; j < popularity_.size(); ++j) {
    const std::size_t rank = j % static_cast<std::size_t>(ep_);
    for (std::size_t i = 0; i < tp; ++i) chip_mass[rank * tp + i] += popularity_[j];
    domain_mass[rank * tp / static_cast<std::size_t>(per)] += popularity_[j];
  }
  const double k = top_k_, e = static_cast<double>(popularity_.size());
  // P(a token's k distinct experts miss a set of popularity P) = prod_i (1 - P E / (E - i)).
  auto hit = [&](double mass) {
    double miss = 1.0;
    for (int i = 0; i < top_k_; ++i) miss *= std::max(0.0, 1.0 - mass * e / (e - i));
    return 1.0 - miss;
  };
  for (int s = 0; s < chips; ++s) {
    const int home = s / per, local = s % per;
    for (int c = 0; c < chips; ++c) {
      if (c == s) continue;
      const int d = c / per;
      const double mass = chip_mass[static_cast<std::size_t>(c)];
      if (kernel == DispatchKernel::kPerExpert) {
        (d == home ? fanout_.up : fanout_.nic) += k * mass;
      } else if (d == home || c - d * per != local) {
        fanout_.up += hit(mass);  // in s's domain, or forwarded by s's relay in domain d
      }
    }
    if (kernel == DispatchKernel::kPerRank) {
      for (int d = 0; d < domains; ++d) {
        if (d != home) fanout_.nic += hit(domain_mass[static_cast<std::size_t>(d)]);
      }
    }
  }
  fanout_.nic /= chips;
  fanout_.up /= chips;
}

LayerTokenOps layer_token_ops(const ModelSpec& m, const ParallelPlan& p, const MoeLoad& load, double tokens_total,
                              const std::array<bool, kComputeRates>& rates) {
  MoeRankLoad rank;
  if (m.moe.enabled()) {
    rank = load.busiest(tokens_total / p.cp);
    // With attention DP the tokens reach the experts' ranks by all-to-all, and a rank's module
    // sees only those routed to it: at most one per pair. Without, every chip of the MoE group
    // holds all the group's tokens (what AIConfigurator's single-GPU rows time).
    if (p.dp > 1) rank.tokens = std::min(rank.tokens, rank.pairs);
    rank.fanout = load.dispatch_fanout();
    rank.kernel = load.dispatch_kernel();
  }
  return layer_token_ops(m, p, rank, tokens_total, rates);
}

LayerTokenOps layer_token_ops(const ModelSpec& m, const ParallelPlan& p, const MoeRankLoad& rank, double tokens_total,
                              const std::array<bool, kComputeRates>& rates) {
  LayerTokenOps o;
  const double t = tokens_per_chip(p, tokens_total);
  const double h = m.hidden;
  const double hq = p.heads_per_chip(m);
  const GemmFormat wf = gemm_format(m.formats.weights, rates);
  const AttentionShape as = attention_shape(m, p);

  // --- attention projections ---
  double attention_weights = 0;  // elements per chip, for the dequantisation pass
  double attention_weights_without_indexer = 0;
  if (m.attention == AttentionKind::kMla) {
    const MlaSpec& a = m.mla;
    const double qk = a.qk_nope_dim + a.qk_rope_dim;
    // vLLM's fused_qkv_a_proj (replicated): h -> q_lora + kv_lora + rope; then q_b column-parallel.
    if (a.q_lora_rank > 0) {
      o.qkv = gemm(OpKind::kGemmQkv, wf, t, h, a.q_lora_rank + a.kv_lora_rank + a.qk_rope_dim);
      absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, a.q_lora_rank, hq * qk));
      attention_weights += h * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_dim) + a.q_lora_rank * hq * qk;
    } else {
      o.qkv = gemm(OpKind::kGemmQkv, wf, t, h, hq * qk);
      absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, h, a.kv_lora_rank + a.qk_rope_dim));
      attention_weights += h * hq * qk + h * (a.kv_lora_rank + a.qk_rope_dim);
    }
    o.qkv_without_indexer = o.qkv;
    attention_weights_without_indexer = attention_weights;
    if (m.dsa.enabled()) {
      // Indexer projections (replicated): wq_b from the q latent, wk and weights_proj from h.
      const double src = a.q_lora_rank > 0 ? a.q_lora_rank : h;
      const double ih = m.dsa.index_heads, id = m.dsa.index_dim;
      absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, src, ih * id));
      absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, h, id + ih));
      attention_weights += src * ih * id + h * (id + ih);
    }
    o.out = gemm(OpKind::kGemmOut, wf, t, hq * a.v_dim, h);
    attention_weights += hq * a.v_dim * h;
    attention_weights_without_indexer += hq * a.v_dim * h;
    if (m.attention_output_gate) {
      // Kimi-K3's MLA output gate: a gate projection h -> heads x v_dim (column-parallel), then
      // sigmoid(gate) x o (ModelSpec::attention_output_gate; the product with the norms).
      absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, h, hq * a.v_dim));
      attention_weights += h * hq * a.v_dim;
    }
  } else if (m.compress.enabled()) {
    // DeepSeek-V4 (ModelSpec::CompressSpec; the shapes of AIConfigurator's dsv4.rs roofline).
    // Replicated on every TP rank, from h: wq_a and wkv (q_lora + head_dim) with the compressor's
    // wkv and wgate (2 head_dim; 4 on a CSA layer, whose windows overlap) and, on a CSA layer, the
    // indexer's compressor (4 index_dim) and weights_proj (index_heads). Column-parallel from the
    // q latent: wq_b (heads x head_dim) and the indexer's wq_b (index_heads x index_dim). The
    // output: wo_a (in bf16, a batched GEMM over the groups: layer_batch_ops' decode_absorb), then
    // wo_b, g = max(1, o_groups / tp) groups x o_lora -> h (row-parallel). HCA layers run the
    // projections without the indexer's (qkv_without_indexer, as a DSA model's layers that reuse
    // a top-k).
    const CompressSpec& c = m.compress;
    const double ql = c.q_lora_rank, hd = m.head_dim, ol = c.o_lora_rank;
    const double ih = m.dsa.index_heads, id = m.dsa.index_dim;
    const double groups = c.groups_per_chip(p.tp);
    o.qkv_without_indexer = gemm(OpKind::kGemmQkv, wf, t, h, ql + 3 * hd);
    absorb(o.qkv_without_indexer, gemm(OpKind::kGemmQkv, wf, t, ql, hq * hd));
    o.qkv = gemm(OpKind::kGemmQkv, wf, t, h, ql + 5 * hd + 4 * id + ih);
    absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, ql, hq * hd));
    absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, ql, ih * id));
    o.out = gemm(OpKind::kGemmOut, wf, t, groups * ol, h);  // wo_b; wo_a: layer_batch_ops' decode_absorb
    const double out_weights = groups * ol * h;
    attention_weights = h * (ql + 5 * hd + 4 * id + ih) + ql * (hq * hd + ih * id) + out_weights;
    attention_weights_without_indexer = h * (ql + 3 * hd) + ql * hq * hd + out_weights;
  } else {
    // Q and K of head_dim, V of value_dim (none where V is K's projection, k_eq_v).
    const double hd = m.head_dim, vd = m.value_dim(), hkv = p.kv_heads_per_chip(m);
    const double qkv_columns = (hq + hkv) * hd + (m.k_eq_v ? 0.0 : hkv * vd);
    o.qkv = gemm(OpKind::kGemmQkv, wf, t, h, qkv_columns);
    o.out = gemm(OpKind::kGemmOut, wf, t, hq * vd, h);
    attention_weights += h * qkv_columns + hq * vd * h;
    if (m.dsa.enabled()) {
      // Block sparse attention's index projections (replicated): q h -> index_heads x index_dim
      // and k h -> index_dim (ModelSpec::indexer_params).
      o.qkv_without_indexer = o.qkv;
      attention_weights_without_indexer = attention_weights;
      const double ih = m.dsa.index_heads, id = m.dsa.index_dim;
      absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, h, ih * id + id));
      attention_weights += h * (ih * id + id);
    }
  }
  o.dequant_attention = dequant(wf, attention_weights, o.qkv.kernels + o.out.kernels);
  if (m.dsa.enabled()) {
    o.dequant_attention_without_indexer =
        dequant(wf, attention_weights_without_indexer, o.qkv_without_indexer.kernels + o.out.kernels);
  }
  if (m.attention_output_gate && m.attention == AttentionKind::kGqa) {
    // Qwen3.5's gated attention: q_proj's second half is a per-channel gate on the attention
    // output (Qwen3NextAttention: attn_output * sigmoid(gate)).
    absorb(o.qkv, gemm(OpKind::kGemmQkv, wf, t, h, hq * m.head_dim));
    o.qkv.kernels -= 1;  // one fused q_proj (q and gate) with k and v
    if (m.dsa.enabled()) {
      absorb(o.qkv_without_indexer, gemm(OpKind::kGemmQkv, wf, t, h, hq * m.head_dim));
      o.qkv_without_indexer.kernels -= 1;
    }
    o.dequant_attention.flops += wf.emulated ? 2.0 * h * hq * m.head_dim : 0.0;
  }

  // --- linear-attention (Gated DeltaNet, Mamba-2) layers: their own projections, split over tp by
  // heads (vLLM and SGLang Qwen3NextGatedDeltaNet: in_proj_qkvz and in_proj_ba column-parallel,
  // out_proj row-parallel; Mamba-2's in_proj likewise, its groups as key heads), and the gated
  // RMSNorm of the output (norm(o) x SiLU(z): reads o and z, writes the product). Key heads are
  // replicated when tp exceeds them. ---
  if (m.linear.enabled()) {
    const LinearAttentionSpec& l = m.linear;
    const double hk = std::max(1.0, static_cast<double>(l.key_heads) / p.tp);
    const double hv = static_cast<double>(l.value_heads) / p.tp;
    const double head_columns = l.head_columns(hv);
    // KDA's forget gate, second stage (f_b: key_dim -> hv x key_dim, column-parallel; AIConfigurator's
    // kimi_k3.py kda_fb_gemm), after the low-rank first stage that head_columns holds.
    const double forget = l.forget_gate_columns(hv);
    if (l.kind == LinearKind::kMamba2) {
      // Nemotron-H's in_proj: z, x, B, C and dt in one GEMM.
      o.linear_qkv = gemm(OpKind::kGemmQkv, wf, t, h, 2 * hk * l.key_dim + 2 * hv * l.value_dim + head_columns);
    } else {
      o.linear_qkv = gemm(OpKind::kGemmQkv, wf, t, h, 2 * hk * l.key_dim + 2 * hv * l.value_dim);
      absorb(o.linear_qkv, gemm(OpKind::kGemmQkv, wf, t, h, head_columns));
      if (forget > 0) absorb(o.linear_qkv, gemm(OpKind::kGemmQkv, wf, t, l.key_dim, forget));
    }
    o.linear_out = gemm(OpKind::kGemmOut, wf, t, hv * l.value_dim, h);
    double linear_weights = h * (2 * hk * l.key_dim + 2 * hv * l.value_dim + head_columns) + hv * l.value_dim * h;
    if (forget > 0) linear_weights += l.key_dim * forget;
    o.dequant_linear = dequant(wf, linear_weights, o.linear_qkv.kernels + o.linear_out.kernels);
    o.linear_norm.kind = OpKind::kElementwise;
    o.linear_norm.bytes = m.activation_bytes * t * 3.0 * hv * l.value_dim;
    o.linear_norm.kernels = 1;
    o.linear_norm.m = t;
  } else {
    o.linear_qkv.kind = OpKind::kGemmQkv;
    o.linear_out.kind = OpKind::kGemmOut;
    o.linear_norm.kind = OpKind::kElementwise;
    o.linear_qkv.kernels = o.linear_out.kernels = o.linear_norm.kernels = 0;
    o.dequant_linear = dequant(wf, 0, 0);
  }

  // --- dense MLP: gate and up fused into one [h x 2 ffn] GEMM (a plain MLP: up [h x ffn]), then
  // down [ffn x h] ---
  const double ffn = static_cast<double>(m.intermediate) / p.tp;
  const double mats = m.gated_mlp ? 3.0 : 2.0;  // weight matrices of an MLP or expert
  // In the MLP format where the checkpoint has one (ModelFormats::mlp).
  const GemmFormat mf = m.formats.mlp ? gemm_format(*m.formats.mlp, rates) : wf;
  o.dense_mlp = gemm(OpKind::kGemmMlp, mf, t, h, (mats - 1) * ffn);
  absorb(o.dense_mlp, gemm(OpKind::kGemmMlp, mf, t, ffn, h));
  o.dequant_dense = dequant(mf, mats * h * ffn, 2);
  // Elementwise kernels, each reading and writing activations once (bytes per token). The
  // residual add runs inside the RMSNorm that follows it, one fused add + norm kernel per norm:
  // vLLM's and SGLang's RMSNorm(x, residual) run fused_add_rms_norm / fused_add_rmsnorm, in place
  // (vllm/model_executor/layers/layernorm.py, python/sglang/srt/layers/layernorm.py);
  // TensorRT-LLM's decoder layers call RMSNorm(x, residual) or fold the add and the norm into the
  // all-reduce (AllReduceFusionOp.RESIDUAL_RMS_NORM, tensorrt_llm/_torch/models/
  // modeling_gpt_oss.py); AIConfigurator's TensorRT-LLM model charges two "add_norm" elementwise
  // operators per layer (aiconfigurator sdk/models/moe.py: generation_add_norm_1 / _2).
  //   2 fused add + RMSNorm: read x and the residual, write both   -> 8 h    2 kernels
  //   rotary on q and k: read and write                            -> 2 rotary  1
  //   KV-cache append: write                                       -> kv_write  1
  //   SiLU(gate) * up: read 2 ffn, write ffn                       -> 3 ffn     1
  //     (a plain MLP's activation: read ffn, write ffn             -> 2 ffn)
  //   (MLA: RMSNorms of the q and kv latents                       -> norms)
  // A layer without a feed-forward block has the mixer's share: one fused add + norm, rotary and
  // the KV append (mixer_elementwise, 3 kernels).
  // mHC (ModelSpec::CompressSpec::streams > 1), two hyper-connections a layer (attention, feed-
  // forward), each a pre and a post over the s streams (bf16): pre, two kernels, reads them to
  // compute the mixing weights (the normed streams through s h -> (s + 2) s, a small GEMM), then
  // runs the Sinkhorn steps and mixes the streams into the block's input, which it also
  // RMS-normalises (SGLang's hc_pre takes the block's norm): 2 s h + h; post, one kernel, reads
  // the block's output and the streams and writes the streams (2 s h + h), the residual update.
  // Pre's fixed time is about twice post's (SGLang, B200, both sites, 1-128 tokens: 18.9 / 8.4 us). They take the place
  // of the fused add + norm kernels (8 h, 2 kernels; a mixer-only layer's 4 h, 1). Measured (AIConfigurator's SGLang
  // mHC module, B200, h 4096, both sites): pre 3.35 ms and post 2.81 ms at 131,072 tokens, about the same traffic each.
  // The mixing GEMM's FLOPs are not costed (its fixed time is the mhc curve's overhead where a profile fitted one).
  const bool mhc = m.compress.enabled() && m.compress.streams > 1;
  const double add_norm = mhc ? 0.0 : 1.0;
  o.mhc.kind = OpKind::kElementwise;
  o.mhc.mhc = true;
  o.mhc.kernels = mhc ? 6 : 0;
  o.mhc.bytes = mhc ? m.activation_bytes * t * 4.0 * (2.0 * m.compress.streams + 1.0) * h : 0.0;
  o.mhc.m = t;
  o.dense_elementwise.kind = OpKind::kElementwise;
  o.dense_elementwise.flops = 0;
  o.dense_elementwise.bytes =
      m.activation_bytes * t * (add_norm * 8 * h + 2 * as.rotary + mats * ffn + as.kv_write + as.norms);
  o.dense_elementwise.kernels = mhc ? 3 : 5;
  o.dense_elementwise.m = t;
  o.mixer_elementwise = o.dense_elementwise;
  o.mixer_elementwise.bytes = m.activation_bytes * t * (add_norm * 4 * h + 2 * as.rotary + as.kv_write + as.norms);
  o.mixer_elementwise.kernels = mhc ? 2 : 3;

  // --- MoE: router, routed experts on the busiest rank, shared experts ---
  if (m.moe.enabled()) {
    const GemmFormat ef = gemm_format(m.moe.experts > 0 ? m.formats.experts : m.formats.weights, rates);
    const double pairs = rank.pairs;
    const double active = rank.active;
    const double fe = static_cast<double>(m.moe.expert_intermediate) / p.moe_tp;
    const double he = m.moe.expert_width(m.hidden);  // the experts' rows: hidden, or the latent width
    // Router: [t x h] x [h x E] in bf16 (replicated; every chip routes its own tokens).
    GemmFormat router_format;
    o.router = gemm(OpKind::kMoeExperts, router_format, t, h, m.moe.experts);
    // Grouped GEMMs over the busiest rank's token-expert pairs: gate|up h -> 2 fe, then down
    // fe -> h (6 pairs h fe FLOPs); weights of the experts that got a token; activations in and
    // out of both GEMMs plus the SiLU x up pass (3 fe). Plain experts (two matrices): up h -> fe,
    // 4 pairs h fe FLOPs, an activation pass of 2 fe.
    Operator experts;
    experts.kind = OpKind::kMoeExperts;
    experts.rate = ef.rate;
    experts.gated = m.gated_mlp;
    experts.flops = 2.0 * mats * pairs * he * fe;
    experts.bytes = active * mats * he * fe * ef.weight_bytes +
                    pairs * (ef.act_in * (he + fe) + kAct * ((mats - 1) * fe + he) + kAct * mats * fe);
    experts.kernels = 3;
    o.moe_experts = experts;
    o.moe_experts.m = pairs;
    o.moe_experts.n = fe;
    o.moe_experts.k = he;
    // For measured MoE tables (models::TableCostModel): batch = the experts with a token on the
    // busiest rank, kv_bytes = bytes per stored expert weight element (the MoE grids' format key;
    // the router GEMM, kind kMoeExperts too, keeps batch and kv_bytes 0 and matches none).
    o.moe_experts.batch = active;
    o.moe_experts.kv_bytes = ef.weight_bytes;
    o.moe_experts.tokens = rank.tokens;
    o.moe_experts.padded_m = rank.padded_rows;
    const double shared = static_cast<double>(m.moe.shared_intermediate) / p.tp;
    if (shared > 0) {
      o.shared_mlp = gemm(OpKind::kGemmMlp, wf, t, h, (mats - 1) * shared);
      absorb(o.shared_mlp, gemm(OpKind::kGemmMlp, wf, t, shared, h));
    } else {
      o.shared_mlp.kind = OpKind::kGemmMlp;
      o.shared_mlp.kernels = 0;
    }
    // Latent MoE: fc1_latent_proj (h -> latent, column-parallel) before the dispatch and
    // fc2_latent_proj (latent -> h, row-parallel) after the combine, costed with the shared
    // experts' GEMMs (the mlp component).
    const double latent = static_cast<double>(m.moe.latent) / p.tp;
    if (latent > 0) {
      Operator proj = gemm(OpKind::kGemmMlp, wf, t, h, latent);
      absorb(proj, gemm(OpKind::kGemmMlp, wf, t, latent, h));
      if (shared > 0) {
        absorb(o.shared_mlp, proj);
      } else {
        o.shared_mlp = proj;
      }
    }
    Operator dq = dequant(ef, active * mats * he * fe, 2);
    const Operator dqs = dequant(wf, mats * h * shared + 2 * h * latent, shared > 0 || latent > 0 ? 2 : 0);
    dq.flops += dqs.flops;
    dq.kernels = std::max(dq.kernels, dqs.kernels);
    o.dequant_moe = dq;
    // Fused add + norms, rotary and KV append as above (4 kernels), and the shared experts'
    // SiLU x up (3 shared, one more kernel when there are shared experts). Routing (top-k),
    // the permutation of the token copies to their experts, the experts' activation and the
    // weighted unpermute run inside the fused MoE module (TensorRT-LLM fused_moe, vLLM FusedMoE,
    // SGLang fused_moe), which is what moe_experts costs: AIConfigurator times
    // moe.forward(hidden_states, router_logits) whole (collector/trtllm/collect_moe.py), and the
    // profiles' MoE family is fitted to those rows (calibrate/operator_fit.cpp).
    o.moe_elementwise.kind = OpKind::kElementwise;
    o.moe_elementwise.bytes =
        m.activation_bytes * t * (add_norm * 8 * h + 2 * as.rotary + mats * shared + as.kv_write + as.norms);
    o.moe_elementwise.kernels = (shared > 0 ? 5 : 4) - (mhc ? 2 : 0);
    o.moe_elementwise.m = t;

    // Communication of a MoE layer. Without attention DP the tokens are replicated on the TP
    // group, every chip runs its experts' share, and one all-reduce sums the partial outputs
    // (routed and shared). With dp > 1 each chip dispatches its slice of the tokens (t / tp) to the
    // experts' ranks (top_k copies, moe_tp columns each) and combines the results back (DeepEP
    // style all-to-all over the tp x dp chips); the dp group then all-reduces the shared experts'
    // partial sums and re-gathers its tokens when tp > 1.
    // The copies: per selected expert spread evenly over the peers, or where the routing is
    // known (MoeLoad::set_dispatch) as the kernel sends them, with the part over the NIC.
    const double n = static_cast<double>(p.tp) * p.dp;
    if (p.dp > 1) {
      const double sent = t / p.tp;  // token rows each chip dispatches
      const DispatchFanout& f = rank.fanout;
      const double copies = f.known ? sent * (f.nic + f.up) : sent * m.moe.top_k * p.moe_tp * (n - 1) / n;
      const double dispatch_bytes = std::max(1.0, activation_bytes_per_element(m.formats.experts));
      o.moe_dispatch = comm(OpKind::kEpDispatch, Collective::kAllToAll, Group::kMoe, copies * he * dispatch_bytes);
      o.moe_combine = comm(OpKind::kEpCombine, Collective::kAllToAll, Group::kMoe, copies * he * kAct);
      if (f.known) {
        o.moe_dispatch.nic_bytes = sent * f.nic * he * dispatch_bytes;
        o.moe_combine.nic_bytes = sent * f.nic * he * kAct;
        o.moe_dispatch.low_latency = o.moe_combine.low_latency = rank.kernel == DispatchKernel::kPerExpert;
      }
    } else {
      o.moe_dispatch = comm(OpKind::kEpDispatch, Collective::kAllToAll, Group::kMoe, 0);
      o.moe_combine = comm(OpKind::kEpCombine, Collective::kAllToAll, Group::kMoe, 0);
    }
    o.moe_reduce =
        comm(OpKind::kTpAllReduce, Collective::kAllReduce, Group::kTp, p.tp > 1 ? hidden_state_bytes(m, t) : 0.0);
  } else {
    o.router.kind = o.moe_experts.kind = OpKind::kMoeExperts;
    o.router.kernels = o.moe_experts.kernels = 0;
    o.shared_mlp.kind = OpKind::kGemmMlp;
    o.shared_mlp.kernels = 0;
    o.moe_elementwise.kind = OpKind::kElementwise;
    o.moe_elementwise.kernels = 0;
    o.dequant_moe = dequant(wf, 0, 0);
    o.moe_dispatch = comm(OpKind::kEpDispatch, Collective::kAllToAll, Group::kMoe, 0);
    o.moe_combine = comm(OpKind::kEpCombine, Collective::kAllToAll, Group::kMoe, 0);
    o.moe_reduce = comm(OpKind::kTpAllReduce, Collective::kAllReduce, Group::kTp, 0);
  }
  // Two all-reduces per dense layer (after attention and after the MLP), as Megatron.
  o.attention_reduce = comm(OpKind::kTpAllReduce, Collective::kAllReduce, Group::kTp, hidden_state_bytes(m, t));
  o.dense_reduce = o.attention_reduce;
  return o;
}

double sparse_kernel_heads(double heads) { return std::max(64.0, std::ceil(heads / 64.0) * 64.0); }

LayerBatchOps layer_batch_ops(const ModelSpec& m, const ParallelPlan& p, const BatchShape& b,
                              const EnginePaths& paths) {
  LayerBatchOps o;
  o.prefill_dense.kind = OpKind::kAttentionPrefill;
  o.prefill_dense.kernels = 0;
  const double ranks = static_cast<double>(p.dp) * p.cp;  // attention work splits over these
  const double hq = p.heads_per_chip(m);
  const double kvb = bytes_per_element(m.formats.kv_cache);
  const double act = m.activation_bytes;
  // Queries per chip: prefill tokens are split over cp ranks (ring attention); decode queries are
  // all-gathered, so every cp rank attends for all of its dp group's decodes over its KV share.
  const double prefill_q = static_cast<double>(b.prefill_tokens) / ranks;
  const double decode_q = static_cast<double>(b.decode_seqs) / p.dp;
  const double chunks = static_cast<double>(b.prefill_chunks) / ranks;
  // A DSA (MLA) model's chunks that the engine runs densely (EnginePaths::dsa_dense_prefill), as
  // sums over the instance: the sparse kernel and the indexer take the other chunks.
  const bool dense_short = dense_short_chunks(m, paths);
  const double short_tokens = dense_short ? b.prefill_tokens_short : 0.0;
  const double short_pairs = dense_short ? b.prefill_pairs_short : 0.0;
  const double short_kv = dense_short ? b.prefill_kv_short : 0.0;
  const double short_chunks = dense_short ? b.prefill_chunks_short : 0.0;

  auto attention = [&](OpKind kind, double flops, double bytes, double q, double batch, double context, double heads,
                       double dim) {
    Operator op;
    op.kind = kind;
    op.flops = flops;
    op.bytes = bytes;
    op.kernels = 1;
    op.m = q;
    op.batch = batch;
    op.context = context;
    op.n = heads;
    op.k = dim;
    return op;
  };

  // Indexer: every query scores every cached token (compressed attention: every CSA entry,
  // `per_token` of a token each) with index_heads x index_dim fp8 products (2 FLOPs each), reads
  // the cached index keys (index_bytes_per_token_layer: per token) and writes one fp32 logit per
  // scored pair (DeepGEMM's fp8_mqa_logits / fp8_paged_mqa_logits, which the top-k selection
  // then reads).
  auto add_indexer = [&](double per_token) {
    const double ih = m.dsa.index_heads, id = m.dsa.index_dim;
    const double ib = m.index_bytes_per_token_layer();
    constexpr double kLogitBytes = 4;
    Operator ip;
    ip.kind = OpKind::kIndexer;
    ip.rate = ComputeRate::kFp8;
    const double q = prefill_q - short_tokens / ranks;
    const double short_causal = dense_short ? b.prefill_pairs_causal_short : 0.0;
    const double scored = (b.prefill_pairs_causal - short_causal) * per_token / ranks;
    ip.flops = 2.0 * ih * id * scored;
    ip.bytes = (static_cast<double>(b.prefill_kv_tokens) - short_kv) / ranks * ib + q * ih * id + kLogitBytes * scored;
    ip.m = q;
    ip.query_blocks = true;
    ip.selects = true;
    ip.batch = chunks - short_chunks / ranks;
    ip.context = (static_cast<double>(b.prefill_kv_tokens) - short_kv) * per_token / ranks;
    ip.n = ih;
    ip.k = id;
    o.indexer_prefill = ip;
    Operator idec = ip;
    idec.query_blocks = false;  // the paged kernel splits each sequence's keys over the SMs
    const double dkv = static_cast<double>(b.decode_kv_tokens) * per_token / ranks;
    idec.flops = 2.0 * ih * id * dkv;
    idec.bytes = static_cast<double>(b.decode_kv_tokens) / ranks * ib + decode_q * ih * id + kLogitBytes * dkv;
    idec.m = decode_q;
    idec.batch = decode_q;
    idec.context = dkv;
    o.indexer_decode = idec;
  };

  if (m.attention == AttentionKind::kMla) {
    const MlaSpec& a = m.mla;
    const double latent = a.kv_lora_rank + a.qk_rope_dim;
    const double qk = a.qk_nope_dim + a.qk_rope_dim;
    if (m.dsa.enabled()) {
      // DSA: sparse MLA in its absorbed (MQA) form for prefill and decode alike (FlashMLA sparse
      // kernels): per selected pair and head, q.k over the latent + rotary key (latent FLOPs x 2)
      // and the weighted sum of latents (kv_lora x 2). The prefill kernel runs every query over
      // the whole index width (top_k) and the padded heads (sparse_kernel_heads). Where the
      // engine runs the chunks that fit in top_k densely (EnginePaths::dsa_dense_prefill), the
      // sparse kernel and the indexer take only the others, and the short ones run the dense
      // MLA prefill below (up-projected K / V, multi-head attention over their causal pairs).
      const double per_pair = 2.0 * hq * (latent + a.kv_lora_rank);
      const double sparse_q = prefill_q - short_tokens / ranks;
      const double pairs = sparse_q * m.dsa.top_k;
      const double keys = (static_cast<double>(b.prefill_kv_topk) - short_kv) / ranks;
      o.prefill_full =
          attention(OpKind::kAttentionPrefill, 2.0 * sparse_kernel_heads(hq) * (latent + a.kv_lora_rank) * pairs,
                    keys * latent * kvb + act * sparse_q * hq * (latent + a.kv_lora_rank), sparse_q,
                    chunks - short_chunks / ranks, keys, hq, latent);
      o.prefill_full.sparse = true;
      const double dk = static_cast<double>(b.decode_kv_topk) / ranks;
      o.decode_full = attention(OpKind::kAttentionDecode, per_pair * dk,
                                dk * latent * kvb + act * decode_q * hq * (latent + a.kv_lora_rank), decode_q, decode_q,
                                dk, hq, latent);
      add_indexer(1.0);
      o.prefill_up_projection.kind = OpKind::kGemmQkv;
      o.prefill_up_projection.kernels = 0;
      if (dense_short) {
        // The short chunks as a dense MLA prefill, the same operators as the branch below.
        const double q = short_tokens / ranks, dense_keys = short_kv / ranks;
        o.prefill_dense =
            attention(OpKind::kAttentionPrefill, 2.0 * hq * (qk + a.v_dim) * (short_pairs / ranks),
                      act * (q + dense_keys) * hq * (qk + a.v_dim), q, short_chunks / ranks, dense_keys, hq, qk);
        o.prefill_dense.kv_bytes = kvb;
        o.prefill_dense.latent = true;
        o.prefill_dense.kv_heads = hq;
        GemmFormat bf;
        o.prefill_up_projection =
            gemm(OpKind::kGemmQkv, bf, dense_keys, a.kv_lora_rank, hq * (a.qk_nope_dim + a.v_dim));
        o.prefill_up_projection.bytes += dense_keys * latent * kvb;
      }
    } else {
      // Prefill, not absorbed: K and V up-projected from the latents of every cached and new token
      // of the chunks (kv_b, kv_lora -> heads x (nope + v)), then multi-head attention with
      // qk = nope + rope dims and v dims: 2 hq (qk + v) FLOPs per pair.
      const double pairs = b.prefill_pairs / ranks;
      const double keys = static_cast<double>(b.prefill_kv_tokens) / ranks;
      o.prefill_full = attention(OpKind::kAttentionPrefill, 2.0 * hq * (qk + a.v_dim) * pairs,
                                 act * (prefill_q + keys) * hq * (qk + a.v_dim), prefill_q, chunks, keys, hq, qk);
      GemmFormat bf;
      o.prefill_up_projection = gemm(OpKind::kGemmQkv, bf, keys, a.kv_lora_rank, hq * (a.qk_nope_dim + a.v_dim));
      o.prefill_up_projection.bytes += keys * latent * kvb;  // reading the cached latents
      // Decode, absorbed (DeepSeek-V2 paper, section 2.1.2): the query is mapped into latent space
      // and attends over the cached latents like MQA: per context token and head 2 latent FLOPs
      // for q.k and 2 kv_lora for the output.
      const double dk = static_cast<double>(b.decode_kv_tokens) / ranks;
      o.decode_full = attention(OpKind::kAttentionDecode, 2.0 * hq * (latent + a.kv_lora_rank) * dk,
                                dk * latent * kvb + act * decode_q * hq * (latent + a.kv_lora_rank), decode_q, decode_q,
                                dk, hq, latent);
      o.indexer_prefill.kind = o.indexer_decode.kind = OpKind::kIndexer;
      o.indexer_prefill.kernels = o.indexer_decode.kernels = 0;
    }
    // The absorbed path's per-token matrices: W_UK maps q_nope (per head) into the latent, W_UV
    // maps the latent output back to v dims; both slices of kv_b, read once. DSA models absorb
    // for prefill tokens too.
    const double absorbed =
        (static_cast<double>(b.decode_seqs) + (m.dsa.enabled() ? b.prefill_tokens - short_tokens : 0.0)) / ranks;
    Operator ab;
    ab.kind = OpKind::kGemmOut;
    ab.flops = 2.0 * absorbed * hq * a.kv_lora_rank * (a.qk_nope_dim + a.v_dim);
    ab.bytes = a.kv_lora_rank * hq * (a.qk_nope_dim + a.v_dim) * 2.0 +
               act * absorbed * hq * (a.qk_nope_dim + 2.0 * a.kv_lora_rank + a.v_dim);
    ab.kernels = 2;
    ab.m = absorbed;
    ab.n = a.kv_lora_rank;
    ab.k = a.qk_nope_dim;
    // Two batched matmuls over the heads (TensorRT-LLM's mla_gen_pre / mla_gen_post bmm, vLLM's
    // and SGLang's torch.bmm on W_UK / W_UV): q_nope [hq x t x N] x [hq x N x L], then the
    // latent output [hq x t x L] x [hq x L x V].
    ab.gemms[0] = {static_cast<double>(a.kv_lora_rank), static_cast<double>(a.qk_nope_dim), hq};
    ab.gemms[1] = {static_cast<double>(a.v_dim), static_cast<double>(a.kv_lora_rank), hq};
    ab.gemm_count = 2;
    o.decode_absorb = ab;
    if (!m.dsa.enabled()) {
      // Table fields: the prefill kernel is multi-head over up-projected K/V, the decode kernel
      // MQA-like over the latents.
      for (Operator* op : {&o.prefill_full, &o.decode_full}) {
        op->kv_bytes = kvb;
        op->latent = true;
      }
      o.prefill_full.kv_heads = hq;
      o.decode_full.kv_heads = 1;
    }
    o.prefill_window.kind = OpKind::kAttentionPrefill;
    o.decode_window.kind = OpKind::kAttentionDecode;
    o.prefill_window.kernels = o.decode_window.kernels = 0;
  } else if (m.compress.enabled()) {
    // DeepSeek-V4's compressed attention (ModelSpec::CompressSpec), as AIConfigurator's roofline
    // (dsv4.rs) counts it: a query attends to its window's tokens and to compressed entries, each
    // one cached vector of head_dim that is key and value both: 2 head_dim FLOPs per pair and head
    // for q.k and as many for the weighted sum; a decode reads each attended entry once for all
    // its heads (MQA), a chunk its keys once. CSA layers (the full operators) attend to
    // min(context / sparse_ratio, top_k) entries, the capped sums at topk_cap() = top_k x
    // sparse_ratio tokens over the ratio; HCA layers (the window operators, as a DSA model's dense
    // layers) to context / dense_ratio. No measured table describes these kernels: their table
    // fields stay unset.
    // The prefill kernels are FlashMLA's sparse ones (sparse_kernel_heads): a CSA query runs the
    // whole index width, its window and top_k entries; an HCA query its window and entries.
    const double hd = m.head_dim, rs = m.compress.sparse_ratio, rd = m.compress.dense_ratio;
    auto prefill = [&](double pairs, double keys) {
      Operator op = attention(OpKind::kAttentionPrefill, 4.0 * hd * sparse_kernel_heads(hq) * (pairs / ranks),
                              act * prefill_q * hq * 2.0 * hd + kvb * hd * (keys / ranks), prefill_q, chunks,
                              keys / ranks, hq, hd);
      op.sparse = true;
      return op;
    };
    auto decode = [&](double keys) {
      const double k = keys / ranks;
      return attention(OpKind::kAttentionDecode, 4.0 * hd * hq * k, kvb * hd * k + act * decode_q * hq * 2.0 * hd,
                       decode_q, decode_q, k, hq, hd);
    };
    o.prefill_full = prefill(static_cast<double>(b.prefill_tokens) * (m.window_cap() + m.dsa.top_k),
                             b.prefill_kv_window + b.prefill_kv_topk / rs);
    o.decode_full = decode(b.decode_kv_window + b.decode_kv_topk / rs);
    o.prefill_window =
        prefill(b.prefill_pairs_window + b.prefill_pairs / rd, b.prefill_kv_window + b.prefill_kv_tokens / rd);
    o.decode_window = decode(b.decode_kv_window + b.decode_kv_tokens / rd);
    add_indexer(1.0 / rs);
    o.prefill_up_projection.kind = OpKind::kGemmQkv;
    o.prefill_up_projection.kernels = 0;
    // wo_a for every new token: the chip's heads in g = max(1, o_groups / tp) groups, each group's
    // outputs (heads / g x head_dim) -> o_lora, one batched GEMM in bf16 (the checkpoints'
    // converter dequantises wo_a to bf16, and AIConfigurator counts it so: an einsum, not a
    // block-fp8 GEMM); in the absorption's place, which runs for prefill tokens too on a DSA model.
    const double groups = m.compress.groups_per_chip(p.tp);
    const double rows = (static_cast<double>(b.decode_seqs) + static_cast<double>(b.prefill_tokens)) / ranks;
    Operator wo_a = gemm(OpKind::kGemmOut, GemmFormat{}, rows, hq * hd / groups, m.compress.o_lora_rank);
    wo_a.flops *= groups;
    wo_a.bytes *= groups;
    wo_a.gemms[0].groups = groups;
    o.decode_absorb = wo_a;
  } else {
    // Per query-key pair and head: q.k (hd multiply-adds) and the weighted sum of v (vd
    // multiply-adds) = 2 (hd + vd) FLOPs, 4 hd where vd = hd. Pairs are counted over the full
    // c x (p + c) rectangle, not the causal half: measured prefill kernels take as long as the
    // rectangle at a flat efficiency (Vidur A100 attention table: 0.36 of peak on the rectangle,
    // 0.20-0.34 on the causal count; scripts/derive_efficiency.md section 4). Reads Q once, K and
    // V once per chunk, writes O once. Sliding-window layers of their own shape
    // (ModelSpec::window_layer_spec) take their KV heads and dims.
    struct Shape {
      double hd, vd, hkv;
    };
    auto shape_of = [&](const ModelSpec& s) {
      return Shape{static_cast<double>(s.head_dim), static_cast<double>(s.value_dim()),
                   static_cast<double>(p.kv_heads_per_chip(s))};
    };
    const Shape full = shape_of(m);
    const Shape window = m.window_shape_differs() ? shape_of(m.window_layer_spec()) : full;
    auto prefill = [&](const Shape& s, double pairs, double keys) {
      const double dims = s.hd + s.vd;
      return attention(OpKind::kAttentionPrefill, 2.0 * dims * hq * (pairs / ranks),
                       act * prefill_q * hq * dims + kvb * s.hkv * dims * (keys / ranks), prefill_q, chunks,
                       keys / ranks, hq, s.hd);
    };
    // Each decode sequence reads the K and V of its (windowed) context once (memory-bound);
    // 2 (hd + vd) FLOPs per context token and query head.
    auto decode = [&](const Shape& s, double kv) {
      const double k = kv / ranks;
      const double dims = s.hd + s.vd;
      return attention(OpKind::kAttentionDecode, 2.0 * dims * hq * k,
                       kvb * s.hkv * dims * k + act * decode_q * hq * dims, decode_q, decode_q, k, hq, s.hd);
    };
    o.prefill_full = prefill(full, b.prefill_pairs, static_cast<double>(b.prefill_kv_tokens));
    o.decode_full = decode(full, static_cast<double>(b.decode_kv_tokens));
    o.prefill_window = prefill(window, b.prefill_pairs_window, static_cast<double>(b.prefill_kv_window));
    o.decode_window = decode(window, static_cast<double>(b.decode_kv_window));
    const bool dense_layers = m.has_dense_attention_layers();
    if (m.dsa.enabled()) {
      // Block sparse attention (MiniMax Sparse Attention): a sparse layer's query attends to the
      // tokens of its top_k / block selected blocks, a GQA attention over min(context, top_k) keys
      // (the kernel gathers the selected blocks' K and V; tables answer the dense kernel at that
      // context). The layers that attend densely (DsaSpec::pattern 'D') take the window
      // operators' place over the whole context: a DSA model has no sliding window.
      if (dense_layers) {
        o.prefill_window = o.prefill_full;
        o.decode_window = o.decode_full;
      }
      o.prefill_full = prefill(full, b.prefill_pairs_topk, static_cast<double>(b.prefill_kv_topk));
      o.decode_full = decode(full, static_cast<double>(b.decode_kv_topk));
      add_indexer(1.0);
    }
    for (Operator* op : {&o.prefill_full, &o.decode_full}) op->kv_heads = full.hkv;
    for (Operator* op : {&o.prefill_window, &o.decode_window}) op->kv_heads = window.hkv;
    for (Operator* op : {&o.prefill_full, &o.decode_full, &o.prefill_window, &o.decode_window}) op->kv_bytes = kvb;
    o.prefill_window.window = o.decode_window.window = m.window.window;
    // A window operator's FLOPs and bytes count the window's keys; its context stays the
    // sequences' whole context (Operator::context), which the measured windowed kernels still
    // depend on (calibrate/README.md, windowed attention).
    if (!m.dsa.enabled()) {
      o.prefill_window.context = o.prefill_full.context;
      o.decode_window.context = o.decode_full.context;
    }
    o.prefill_up_projection.kind = OpKind::kGemmQkv;
    o.decode_absorb.kind = OpKind::kGemmOut;
    o.prefill_up_projection.kernels = o.decode_absorb.kernels = 0;
    if (!m.dsa.enabled()) {
      o.indexer_prefill.kind = o.indexer_decode.kind = OpKind::kIndexer;
      o.indexer_prefill.kernels = o.indexer_decode.kernels = 0;
    }
    if (!m.window.enabled() && !dense_layers) o.prefill_window.kernels = o.decode_window.kernels = 0;
  }

  // Gated DeltaNet (Yang, Kautz & Hatamizadeh, "Gated Delta Networks", ICLR 2025), per chip with
  // hv = value heads / tp and hk = key heads / tp (at least 1), key and value dims dk, dv, conv
  // kernel K over ch = 2 hk dk + hv dv channels. Prefill runs the chunkwise algorithm (flash-linear-
  // attention chunk_gated_delta_rule, chunks of C = 64 tokens): per token and value head the WY
  // terms w = T (beta k) and u = T (beta v) (2 C dk + 2 C dv), the chunk's causal q k^T and
  // k k^T blocks (2 x 2 C dk), the state's contributions v - w S and q S (2 x 2 dk dv) and the
  // state update S += k^T v (2 dk dv): 6 dk dv + 2 C (3 dk + dv) FLOPs; it reads q, k, v and the
  // convolution's input, writes o and the convolution's output (bf16) and the per-token gate and
  // beta (fp32), and per 64-token chunk writes and reads the chunk's starting state (fp32,
  // hv dk dv), plus each sequence's initial and final state. The causal depthwise convolution
  // adds 2 K ch FLOPs per token. Decode is one recurrent step per sequence (fused_recurrent_gated_
  // delta_rule): decay, S^T k, the rank-1 update and S^T q, about 7 dk dv FLOPs per value head;
  // it reads and writes each sequence's state (memory-bound) and the convolution's state
  // ((K - 1) ch, bf16).
  // Mamba-2 (Dao & Gu 2024, the SSD algorithm; key heads = groups, dk = state size N, dv = head
  // dim P, chunks of C = chunk_size): per token the chunk's C B^T per group (2 C N), its masked
  // product with x per head (2 C P), the chunk state B^T x and the output C S per head (2 x 2 N P):
  // hv (4 N P + 2 C P) + hk 2 C N FLOPs, the same traffic as GDN's. Decode (selective_state_update):
  // the decayed state plus dt x B^T and the output C S, about 5 N P FLOPs per head.
  if (m.linear.enabled()) {
    const LinearAttentionSpec& l = m.linear;
    const double hk = std::max(1.0, static_cast<double>(l.key_heads) / p.tp);
    const double hv = static_cast<double>(l.value_heads) / p.tp;
    const double dk = l.key_dim, dv = l.value_dim, kc = l.conv_kernel;
    const double ch = 2 * hk * dk + hv * dv;
    const double state = hv * dk * dv * l.state_bytes;
    const double chunk = l.chunk;
    const bool mamba = l.kind == LinearKind::kMamba2;
    // The fp32 gate and beta per token: per head (GDN), or KDA's decay per key channel and beta per
    // head. KDA's chunk_kda and fused_recurrent_kda run the gated delta rule of GDN with that decay:
    // costed with GDN's FLOPs, and GDN's measured tables answer for them.
    const double gates = l.kind == LinearKind::kKda ? 4.0 * (hv * dk + hv) : 4.0 * 2 * hv;
    const double dq = static_cast<double>(b.decode_seqs) / ranks;
    Operator pre;
    pre.kind = OpKind::kAttentionPrefill;
    pre.recurrent = mamba ? Recurrence::kMamba2 : Recurrence::kGatedDeltaNet;
    pre.kernels = 2;  // causal_conv1d_fn, chunk_gated_delta_rule (Mamba-2: mamba_chunk_scan_combined)
    const double core = mamba ? hv * (4 * dk * dv + 2 * chunk * dv) + hk * 2 * chunk * dk
                              : hv * (6 * dk * dv + 2 * chunk * (3 * dk + dv));
    pre.flops = prefill_q * (core + 2 * kc * ch);
    pre.bytes = prefill_q * (act * (3 * ch + hv * dv) + gates) + (prefill_q / chunk + chunks) * 2 * state;
    pre.m = prefill_q;
    pre.batch = chunks;
    pre.context = prefill_q;
    pre.n = hv;
    pre.kv_heads = hk;  // the key heads: what a measured table keys on beside the value heads
    pre.k = dk;
    o.linear_prefill = pre;
    Operator dec = pre;
    dec.kind = OpKind::kAttentionDecode;
    dec.kernels = 2;  // causal_conv1d_update, fused_recurrent_gated_delta_rule
    const double step = mamba ? hv * 5 * dk * dv : hv * 7 * dk * dv;
    dec.flops = dq * (step + 2 * kc * ch);
    dec.bytes = dq * (2 * state + act * (2 * (kc - 1) * ch + 2 * ch + hv * dv) + gates);
    dec.m = dec.batch = dec.context = dq;
    o.linear_decode = dec;
  } else {
    o.linear_prefill.kind = OpKind::kAttentionPrefill;
    o.linear_decode.kind = OpKind::kAttentionDecode;
    o.linear_prefill.kernels = o.linear_decode.kernels = 0;
  }

  // Context parallelism. Prefill by ring attention (Liu et al. 2023) in either of two forms
  // (Yang et al., "Context Parallelism for Scalable Million-Token Inference", 2024): pass-KV, each
  // rank passes its KV shard of the chunks round the ring (cp - 1 hops); or pass-Q, each rank
  // passes its queries and gets their partial outputs (with the log-sum-exp) back, the cheaper one
  // when the chunks are short against their cached context. The iteration takes the smaller.
  // Decode: the queries are all-gathered and the partial outputs exchanged, about (cp - 1) / cp of
  // q + o per query per rank.
  const double kv_layer = kv_bytes_per_token_layer_chip(m, p);
  const double cp1 = p.cp - 1.0;
  const double q_dim = m.attention == AttentionKind::kMla
                           ? (m.mla.kv_lora_rank + m.mla.qk_rope_dim) + m.mla.kv_lora_rank + 1.0
                           : 2.0 * m.head_dim + 1.0;
  o.cp_prefill = comm(OpKind::kCpExchange, Collective::kP2p, Group::kCp,
                      cp1 * static_cast<double>(b.prefill_kv_tokens) / ranks * kv_layer);
  o.cp_prefill_q = comm(OpKind::kCpExchange, Collective::kP2p, Group::kCp, cp1 * prefill_q * hq * q_dim * act);
  o.cp_decode = comm(OpKind::kCpExchange, Collective::kAllToAll, Group::kCp,
                     p.cp > 1 ? cp1 / p.cp * decode_q * hq * q_dim * act : 0.0);
  return o;
}

Operator lm_head_op(const ModelSpec& m, const ParallelPlan& p, double logits) {
  // Vocabulary-parallel LM head: [logits x h] x [h x vocab/tp] in bf16, only for sequences that
  // sample.
  GemmFormat bf;
  const double l = tokens_per_chip(p, logits);
  Operator op = gemm(OpKind::kLmHead, bf, l, m.hidden, static_cast<double>(m.vocab) / p.tp);
  op.kernels = logits > 0 ? 1 : 0;
  return op;
}

MtpDraftOps mtp_draft_ops(const ModelSpec& m, const ParallelPlan& p, const MoeLoad& load, const BatchShape& b,
                          const std::array<bool, kComputeRates>& rates, const EnginePaths& paths) {
  MtpDraftOps d;
  const double t = tokens_per_chip(p, static_cast<double>(b.tokens));
  d.eh_proj = gemm(OpKind::kGemmQkv, gemm_format(m.formats.weights, rates), t, 2.0 * m.hidden, m.hidden);
  d.layer = layer_token_ops(m, p, load, static_cast<double>(b.tokens), rates);
  d.moe_layer = m.is_moe_layer(m.layers - 1);
  d.attention = layer_batch_ops(m, p, b, paths);
  d.lm_head = lm_head_op(m, p, static_cast<double>(b.logits));
  return d;
}

StageOperators stage_operators(const ModelSpec& m, const ParallelPlan& p, const MoeLoad& load, const BatchShape& b,
                               int stage, const std::array<bool, kComputeRates>& rates, const EnginePaths& paths) {
  StageOperators s;
  const LayerCounts c = m.count_layers(p.stage_first_layer(m, stage), p.stage_layers(m, stage));
  const LayerTokenOps t = layer_token_ops(m, p, load, static_cast<double>(b.tokens), rates);
  const LayerBatchOps a = layer_batch_ops(m, p, b, paths);
  auto add = [&](const Operator& op, int count) {
    if (op.kernels > 0 && count > 0 && (op.flops > 0 || op.bytes > 0)) s.compute.push_back({op, count});
  };
  auto add_comm = [&](const CommOp& op, int count, int ranks) {
    if (ranks > 1 && count > 0 && op.bytes > 0) s.comm.push_back({op, count});
  };
  const int attention_layers = c.layers - c.linear;
  // DSA layers that reuse another layer's top-k run no indexer projections (DsaSpec::pattern);
  // sliding-window layers of their own shape have their own projections.
  const int shared_indexer = m.dsa.enabled() ? c.layers - c.indexer : 0;
  const int own_window = m.window_shape_differs() ? c.window : 0;
  add(t.qkv, attention_layers - shared_indexer - own_window);
  add(t.qkv_without_indexer, shared_indexer);
  add(t.out, attention_layers - own_window);
  add(t.dequant_attention, attention_layers - shared_indexer - own_window);
  add(t.dequant_attention_without_indexer, shared_indexer);
  if (own_window > 0) {
    const LayerTokenOps w = layer_token_ops(m.window_layer_spec(), p, load, static_cast<double>(b.tokens), rates);
    add(w.qkv, own_window);
    add(w.out, own_window);
    add(w.dequant_attention, own_window);
  }
  add(t.linear_qkv, c.linear);
  add(t.linear_out, c.linear);
  add(t.linear_norm, c.linear);
  add(t.dequant_linear, c.linear);
  add(t.mhc, c.layers);
  add(t.dense_mlp, c.dense());
  add(t.dense_elementwise, c.dense());
  add(t.mixer_elementwise, c.no_ffn);
  add(t.dequant_dense, c.dense());
  add(t.router, c.moe);
  add(t.moe_experts, c.moe);
  add(t.shared_mlp, c.moe);
  add(t.moe_elementwise, c.moe);
  add(t.dequant_moe, c.moe);
  const bool prefill = b.prefill_tokens > 0, decode = b.decode_seqs > 0;
  const PrefillLaunch launch = prefill_launch(dense_short_chunks(m, paths), b);
  const bool sparse_prefill = launch.sparse, dense_prefill = launch.dense;
  // A DSA model's dense-attention layers run the window operators (layer_batch_ops).
  const int full = c.full() - c.dense_attention, window = c.window + c.dense_attention;
  if (prefill) {
    if (sparse_prefill) add(a.prefill_full, full);
    if (dense_prefill) add(a.prefill_dense, full);
    add(a.prefill_window, window);
    add(a.linear_prefill, c.linear);
    add(a.prefill_up_projection, c.layers - c.linear);
    if (sparse_prefill) add(a.indexer_prefill, c.indexer);
  }
  if (decode) {
    add(a.decode_full, full);
    add(a.decode_window, window);
    add(a.linear_decode, c.linear);
    add(a.indexer_decode, c.indexer);
  }
  if (decode || (sparse_prefill && m.dsa.enabled())) add(a.decode_absorb, c.layers - c.linear);
  add_comm(t.attention_reduce, c.layers, p.tp);
  add_comm(t.dense_reduce, c.dense(), p.tp);
  add_comm(t.moe_reduce, c.moe, p.tp);
  add_comm(t.moe_dispatch, c.moe, p.tp * p.dp);
  add_comm(t.moe_combine, c.moe, p.tp * p.dp);
  if (prefill) {
    add_comm(a.cp_prefill.bytes <= a.cp_prefill_q.bytes ? a.cp_prefill : a.cp_prefill_q, c.layers, p.cp);
  }
  if (decode) add_comm(a.cp_decode, c.layers, p.cp);
  const double t_chip = tokens_per_chip(p, static_cast<double>(b.tokens));
  if (stage == 0) {
    add_comm(comm(OpKind::kTpAllReduce, Collective::kAllReduce, Group::kTp, hidden_state_bytes(m, t_chip)), 1, p.tp);
  }
  if (stage == p.pp - 1) {
    add(lm_head_op(m, p, static_cast<double>(b.logits)), 1);
  } else {
    add_comm(comm(OpKind::kPpSend, Collective::kP2p, Group::kPp, hidden_state_bytes(m, t_chip)), 1, p.pp);
  }
  return s;
}

void vision_encoder_ops(const VisionSpec& v, const std::vector<std::int64_t>& image_patches, int tp,
                        std::vector<Operator>& out) {
  // Qwen2.5-VL vision tower (models/vision.h), bf16, heads and MLP columns split over tp.
  double patches = 0, global_pairs = 0, window_pairs = 0, windows = 0;
  const double per_window = v.window > 0 ? std::pow(static_cast<double>(v.window) / v.patch, 2) : 0;
  for (const std::int64_t n : image_patches) {
    const double p = static_cast<double>(n);
    patches += p;
    global_pairs += p * p;  // every patch attends to every patch of its image
    window_pairs += per_window > 0 ? p * std::min(p, per_window) : p * p;
    windows += per_window > 0 ? std::ceil(p / per_window) : 1;
  }
  const double h = v.hidden, f = static_cast<double>(v.intermediate) / tp;
  const double hs = h / tp;  // this chip's share of the heads' width
  GemmFormat bf;
  Operator embed =
      gemm(OpKind::kGemmQkv, bf, patches, static_cast<double>(v.in_channels) * v.temporal_patch * v.patch * v.patch, h);
  out.push_back(embed);
  for (int l = 0; l < v.depth; ++l) {
    out.push_back(gemm(OpKind::kGemmQkv, bf, patches, h, 3 * hs));
    const bool global = v.window == 0 || std::find(v.full_attention_layers.begin(), v.full_attention_layers.end(), l) !=
                                             v.full_attention_layers.end();
    const double pairs = global ? global_pairs : window_pairs;
    Operator at;
    at.kind = OpKind::kAttentionPrefill;
    at.flops = 4.0 * hs * pairs;           // 4 head_dim FLOPs per pair and head
    at.bytes = kAct * 4.0 * patches * hs;  // q, k, v in, o out
    at.kernels = 1;
    // Table fields (models::TableCostModel): the kernel is a variable-length attention whose
    // sequences are the images (global blocks) or the windows (Qwen2.5-VL passes the windows as
    // cu_window_seqlens to flash-attention's varlen kernel), each attending to itself alone: no
    // prefix, and no KV cache (kv_bytes 0, which is what tells it from a causal prefill).
    at.m = patches;
    at.batch = global ? static_cast<double>(image_patches.size()) : windows;
    at.context = patches;
    at.n = static_cast<double>(v.heads) / tp;
    at.kv_heads = at.n;
    at.k = v.heads > 0 ? h / v.heads : 0;
    out.push_back(at);
    out.push_back(gemm(OpKind::kGemmOut, bf, patches, hs, h));
    Operator mlp = gemm(OpKind::kGemmMlp, bf, patches, h, 2 * f);
    absorb(mlp, gemm(OpKind::kGemmMlp, bf, patches, f, h));
    out.push_back(mlp);
    Operator ew;
    ew.kind = OpKind::kElementwise;
    ew.bytes = kAct * patches * (10 * h + 2 * 2 * hs + 3 * f);
    ew.kernels = 5;
    ew.m = patches;
    out.push_back(ew);
  }
  // Merger: merge^2 patches concatenated (m h), Linear(m h -> m h), GELU, Linear(m h -> out).
  const double groups = patches / (static_cast<double>(v.spatial_merge) * v.spatial_merge);
  const double mh = h * v.spatial_merge * v.spatial_merge;
  Operator merger = gemm(OpKind::kGemmMlp, bf, groups, mh, mh);
  absorb(merger, gemm(OpKind::kGemmMlp, bf, groups, mh, v.out_hidden));
  out.push_back(merger);
}

}  // namespace servesim::models
