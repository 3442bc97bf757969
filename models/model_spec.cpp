#include "models/model_spec.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace servesim::models {

namespace {
// The letter of a repeating per-layer pattern for a layer ('\0' when there is no pattern).
char layer_letter(const std::string& pattern, int layer) {
  return pattern.empty() ? '\0' : pattern[static_cast<std::size_t>(layer) % pattern.size()];
}
}  // namespace

bool ModelSpec::is_moe_layer(int layer) const {
  if (!ffn_pattern.empty()) return moe.enabled() && layer_letter(ffn_pattern, layer) == 'E';
  // DeepSeek's rule (modeling_deepseek.py): MoE from first_k_dense_replace on, every
  // moe_layer_freq-th layer.
  return moe.enabled() && layer >= moe.first_dense_layers && layer % std::max(1, moe.layer_frequency) == 0;
}

bool ModelSpec::has_ffn(int layer) const { return layer_letter(ffn_pattern, layer) != 'N'; }

bool ModelSpec::is_window_layer(int layer) const {
  if (!window.enabled()) return false;
  if (window.pattern.empty()) return true;
  return layer_letter(window.pattern, layer) == 'S';
}

bool ModelSpec::is_linear_layer(int layer) const {
  return linear.enabled() && layer_letter(linear.pattern, layer) == 'L';
}

bool ModelSpec::is_indexer_layer(int layer) const {
  if (!dsa.enabled()) return false;
  return dsa.pattern.empty() || layer_letter(dsa.pattern, layer) == 'F';
}

bool ModelSpec::is_dense_attention_layer(int layer) const {
  return dsa.enabled() && layer_letter(dsa.pattern, layer) == 'D';
}

bool ModelSpec::has_dense_attention_layers() const {
  return dsa.enabled() && dsa.pattern.find('D') != std::string::npos;
}

bool ModelSpec::window_shape_differs() const {
  if (!window.enabled()) return false;
  return k_eq_v || (window.kv_heads > 0 && window.kv_heads != kv_heads) ||
         (window.head_dim > 0 && window.head_dim != head_dim);
}

ModelSpec ModelSpec::window_layer_spec() const {
  ModelSpec w = *this;
  if (window.kv_heads > 0) w.kv_heads = window.kv_heads;
  // The value head follows the new head dim unless the model gives its own (value_head_dim:
  // MiMo-V2-Flash's 128 on both kinds of layer).
  if (window.head_dim > 0) w.head_dim = window.head_dim;
  w.k_eq_v = false;
  return w;
}

LayerCounts ModelSpec::count_layers(int first, int n) const {
  LayerCounts c;
  c.layers = n;
  for (int l = first; l < first + n; ++l) {
    c.moe += is_moe_layer(l) ? 1 : 0;
    c.no_ffn += has_ffn(l) ? 0 : 1;
    c.window += is_window_layer(l) ? 1 : 0;
    c.linear += is_linear_layer(l) ? 1 : 0;
    c.indexer += is_indexer_layer(l) ? 1 : 0;
    c.dense_attention += is_dense_attention_layer(l) ? 1 : 0;
  }
  return c;
}

std::int64_t ModelSpec::attention_params() const {
  const std::int64_t h = hidden, nh = heads;
  std::int64_t p = 2 * h;  // input and post-attention RMSNorms
  if (attention == AttentionKind::kMla) {
    const std::int64_t ql = mla.q_lora_rank, kl = mla.kv_lora_rank;
    const std::int64_t qk = mla.qk_nope_dim + mla.qk_rope_dim;
    // q: h -> q_lora (+ its RMSNorm) -> heads x (nope + rope), or h -> heads x (nope + rope).
    p += ql > 0 ? h * ql + ql + ql * nh * qk : h * nh * qk;
    // kv_a: h -> kv_lora + rope (+ the latent's RMSNorm); kv_b: kv_lora -> heads x (nope + v).
    p += h * (kl + mla.qk_rope_dim) + kl + kl * nh * (mla.qk_nope_dim + mla.v_dim);
    p += nh * mla.v_dim * h;                             // o_proj
    if (attention_output_gate) p += h * nh * mla.v_dim;  // the gate projection
    p += indexer_params();
  } else if (compress.enabled()) {
    // DeepSeek-V4 (a CSA layer; HCA layers hold indexer_params() less): wq_a h -> q_lora, its
    // RMSNorm, wq_b q_lora -> heads x head_dim, wkv h -> head_dim and its RMSNorm, wo_a (the heads'
    // outputs -> o_lora per group: heads x head_dim x o_lora in all), wo_b o_groups x o_lora -> h;
    // an HCA layer's compressor: wkv and wgate h -> head_dim, the positional bias ape (dense_ratio x
    // head_dim) and the entries' RMSNorm.
    const std::int64_t ql = compress.q_lora_rank, hd = head_dim, ol = compress.o_lora_rank;
    p += h * ql + ql + ql * nh * hd + h * hd + hd + nh * hd * ol + std::int64_t{compress.o_groups} * ol * h;
    p += 2 * h * hd + std::int64_t{compress.dense_ratio} * hd + hd;
    p += indexer_params();
  } else {
    const std::int64_t hd = head_dim, vd = k_eq_v ? 0 : value_dim(), kv = kv_heads;
    p += h * nh * hd + h * kv * (hd + vd) + nh * value_dim() * h;
    if (attention_output_gate) p += h * nh * hd;  // the gate half of q_proj
    if (qkv_bias) p += nh * hd + kv * (hd + vd);
    if (o_bias) p += h;
    if (qk_norm) p += 2 * hd;
    p += indexer_params();
  }
  if (attention_sinks) p += nh;
  return p;
}

std::int64_t ModelSpec::indexer_params() const {
  if (!dsa.enabled()) return 0;
  const std::int64_t h = hidden, ql = mla.q_lora_rank, ih = dsa.index_heads, id = dsa.index_dim;
  if (compress.enabled()) {
    // A CSA layer's over an HCA layer's: its compressor pools overlapping windows (wkv and wgate
    // h -> 2 head_dim, ape sparse_ratio x 2 head_dim, against h -> head_dim and dense_ratio x
    // head_dim), and the indexer: wq_b q_lora -> index_heads x index_dim, weights_proj h ->
    // index_heads, and its own compressor of the index keys (h -> 2 index_dim twice, ape
    // sparse_ratio x 2 index_dim, a norm).
    const std::int64_t hd = head_dim, rs = compress.sparse_ratio, rd = compress.dense_ratio;
    const std::int64_t compressor = 2 * h * hd + (2 * rs - rd) * hd;
    return compressor + std::int64_t{compress.q_lora_rank} * ih * id + h * ih + 4 * h * id + 2 * rs * id + id;
  }
  // Block sparse attention (MiniMax-M3 index_q_proj h -> index_heads x index_dim, index_k_proj
  // h -> index_dim).
  if (dsa.block_scored()) return h * ih * id + h * id;
  // Indexer (DeepSeek-V3.2 / GLM-5): wq_b q_lora -> index_heads x index_dim, wk h -> index_dim, a
  // LayerNorm on the key (weight and bias), weights_proj h -> index_heads.
  return (ql > 0 ? ql : h) * ih * id + h * id + 2 * id + h * ih;
}

std::int64_t ModelSpec::linear_attention_params() const {
  // Qwen3-Next / Qwen3.5 Qwen3NextGatedDeltaNet: in_proj_qkvz h -> q, k (key heads x key_dim each),
  // v and the output gate z (value heads x value_dim each); in_proj_ba h -> beta and the decay's
  // input per value head; the depthwise conv1d over q, k, v (conv_kernel taps, no bias); dt_bias
  // and A_log per value head; the gated RMSNorm over value_dim; out_proj back to h; and the
  // layer's two RMSNorms.
  // Nemotron-H NemotronHMamba2Mixer: in_proj h -> z and x (heads x head_dim each), B and C (groups
  // x state size each) and dt per head; the conv1d over x, B, C with a bias; dt_bias, A_log and D
  // per head; the gated RMSNorm over all heads' channels; out_proj back to h; and the two blocks'
  // RMSNorms (a layer without a feed-forward block has one, layer_params).
  // Whole integers below 2^53 throughout: the double sum is exact.
  return std::llround(linear_mixer_elements(linear.key_heads, linear.value_heads));
}

double ModelSpec::linear_mixer_elements(double hk, double hv) const {
  const double h = hidden, dk = linear.key_dim, dv = linear.value_dim;
  const double ch = 2 * hk * dk + hv * dv;
  double e = 2 * h + h * (2 * hk * dk + 2 * hv * dv + linear.head_columns(hv)) + ch * linear.conv_kernel;
  if (linear.kind == LinearKind::kMamba2) {
    e = e + ch + 3 * hv + hv * dv;  // conv bias; dt_bias, A_log, D; the norm over all heads
  } else if (linear.kind == LinearKind::kKda) {
    // Kimi Linear KimiDeltaAttention: f_b (key_dim -> heads x key_dim); A_log per head, dt_bias per
    // key channel; the gated RMSNorm over one head's value_dim.
    e = e + dk * linear.forget_gate_columns(hv) + hv + hv * dk + dv;
  } else {
    e = e + 2 * hv + dv;  // dt_bias, A_log; the norm over one head's value_dim
  }
  return e + hv * dv * h;
}

std::int64_t ModelSpec::dense_mlp_params() const {
  return (gated_mlp ? 3 : 2) * std::int64_t{hidden} * intermediate;  // (gate,) up, down
}

std::int64_t ModelSpec::expert_params() const {
  const std::int64_t h = moe.expert_width(hidden), f = moe.expert_intermediate;
  return (gated_mlp ? 3 : 2) * h * f + (moe.expert_bias ? 2 * f + h : 0);
}

std::int64_t ModelSpec::shared_expert_params() const {
  return (gated_mlp ? 3 : 2) * std::int64_t{hidden} * moe.shared_intermediate;
}

std::int64_t ModelSpec::latent_projection_params() const { return 2 * std::int64_t{hidden} * moe.latent; }

std::int64_t ModelSpec::router_params() const {
  return std::int64_t{hidden} * moe.experts + (moe.router_bias ? moe.experts : 0);
}

std::int64_t ModelSpec::layer_params(int layer) const {
  std::int64_t p = is_linear_layer(layer) ? linear_attention_params() : attention_params();
  if (is_window_layer(layer) && window_shape_differs()) p = window_layer_spec().attention_params();
  if (dsa.enabled() && !is_indexer_layer(layer)) p -= indexer_params();  // it reuses another layer's top-k
  p += mhc_params();
  if (!has_ffn(layer)) {
    p -= hidden;  // the feed-forward block's RMSNorm, counted in the mixer's two
  } else if (is_moe_layer(layer)) {
    p += moe.experts * expert_params() + shared_expert_params() + router_params() + latent_projection_params();
  } else {
    p += dense_mlp_params();
  }
  return p;
}

std::int64_t ModelSpec::mhc_params() const {
  // DeepSeek-V4 hc_attn_* and hc_ffn_*: each a mixing function s h -> (s + 2) s (the pre and post
  // weights of the s streams and the s x s residual mixing), its bias and three scales.
  const std::int64_t s = compress.streams;
  if (s <= 1) return 0;
  const std::int64_t mix = (s + 2) * s;
  return 2 * (mix * s * hidden + mix + 3);
}

std::int64_t ModelSpec::embedding_params() const { return std::int64_t{vocab} * hidden; }

std::int64_t ModelSpec::mtp_layer_params() const {
  // DeepSeek-V3 / GLM MTP module: a decoder layer like the last one, eh_proj (2h -> h) and three
  // RMSNorms (enorm, hnorm, shared_head.norm); embedding and LM head are the main model's. It runs
  // its own DSA indexer where the last layer shares one (GLM-5.2-FP8 config.json lists
  // model.layers.78.self_attn.indexer.k_norm).
  const std::int64_t h = hidden;
  const std::int64_t indexer = dsa.enabled() && !is_indexer_layer(layers - 1) ? indexer_params() : 0;
  return layer_params(layers - 1) + indexer + 2 * h * h + 3 * h;
}

std::int64_t ModelSpec::total_params() const {
  std::int64_t p = embedding_params() * (tied_embeddings ? 1 : 2) + hidden;  // + final norm
  for (int l = 0; l < layers; ++l) p += layer_params(l);
  // mHC's head: the streams mixed into one before the final norm (hc_head_fn s h -> s, bias, scale).
  const std::int64_t s = compress.streams;
  if (s > 1) p += s * s * hidden + s + 1;
  return p;
}

std::int64_t ModelSpec::active_params_per_token() const {
  std::int64_t p = total_params();
  for (int l = 0; l < layers; ++l) {
    if (is_moe_layer(l)) p -= static_cast<std::int64_t>(moe.experts - moe.top_k) * expert_params();
  }
  return p;
}

double ModelSpec::kv_bytes_per_token_layer() const {
  const double b = bytes_per_element(formats.kv_cache);
  if (attention == AttentionKind::kMla) return (mla.kv_lora_rank + mla.qk_rope_dim) * b;
  if (compress.enabled()) return head_dim * b / compress.sparse_ratio;
  return static_cast<double>(kv_heads) * (head_dim + value_dim()) * b;
}

double ModelSpec::index_bytes_per_token_layer() const {
  // vLLM DeepseekV32IndexerCache: index_dim fp8 values + one fp32 scale per 128 of them. Block
  // sparse attention: index_dim bf16 values (DsaSpec::block).
  if (!dsa.enabled()) return 0;
  if (dsa.block_scored()) return 2.0 * dsa.index_dim;
  // DeepSeek-V4's indexer cache: fp4 keys, one per CSA entry (AIConfigurator's
  // deepseek_v4_indexer_cache_entry_bytes).
  if (compress.enabled()) return 0.5 * dsa.index_dim / compress.sparse_ratio;
  return dsa.index_dim + 4.0 * std::ceil(dsa.index_dim / 128.0);
}

std::int64_t ModelSpec::kv_bytes_per_token() const {
  // Index keys only where the indexer runs (DsaSpec::pattern); a DSA model has full layers only.
  const LayerCounts n = count_layers(0, layers);
  const double window_layer =
      window_shape_differs() ? window_layer_spec().kv_bytes_per_token_layer() : kv_bytes_per_token_layer();
  return std::llround(kv_bytes_per_token_layer() * full_kv_layers(n) + index_bytes_per_token_layer() * n.indexer +
                      window_layer * n.window);
}

double ModelSpec::compressed_state_bytes(const LayerCounts& n) const {
  if (!compress.enabled()) return 0;
  const double hd = head_dim, id = dsa.index_dim, rs = compress.sparse_ratio, rd = compress.dense_ratio;
  const double window_tokens =
      n.layers * static_cast<double>(compress.window) * hd * bytes_per_element(formats.kv_cache);
  const double csa = 4.0 * (2 * rs * 2 * hd + 2 * rs * 2 * id);
  const double hca = 4.0 * (2 * rd * hd);
  return window_tokens + csa * n.indexer + hca * (n.layers - n.indexer);
}

double ModelSpec::kv_transfer_bytes(std::int64_t tokens) const {
  const LayerCounts n = count_layers(0, layers);
  return static_cast<double>(tokens) * static_cast<double>(kv_bytes_per_token()) +
         linear_state_bytes_per_layer() * n.linear + compressed_state_bytes(n);
}

double ModelSpec::linear_state_bytes_per_layer() const {
  if (!linear.enabled()) return 0;
  return static_cast<double>(linear.value_heads) * linear.key_dim * linear.value_dim * linear.state_bytes +
         static_cast<double>(linear.conv_kernel - 1) * static_cast<double>(linear.conv_channels()) * activation_bytes;
}

namespace {

ModelSpec dense(std::string name, int layers, int hidden, int heads, int kv_heads, int head_dim, int intermediate,
                int vocab, int max_context, std::string source) {
  ModelSpec m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.intermediate = intermediate;
  m.vocab = vocab;
  m.max_context = max_context;
  m.source = std::move(source);
  return m;
}

MoeSpec moe(int experts, int top_k, int expert_intermediate, int shared, int first_dense, bool router_bias) {
  MoeSpec s;
  s.experts = experts;
  s.top_k = top_k;
  s.expert_intermediate = expert_intermediate;
  s.shared_experts = shared;
  s.shared_intermediate = shared * expert_intermediate;
  s.first_dense_layers = first_dense;
  s.router_bias = router_bias;
  return s;
}

ModelSpec deepseek_v3(std::string name, std::string source) {
  // deepseek-ai/DeepSeek-V3 (and -R1, same architecture) config.json: 61 layers, hidden 7168,
  // 128 heads, MLA q_lora_rank 1536 / kv_lora_rank 512 / qk_nope 128 / qk_rope 64 / v 128,
  // dense intermediate 18432 in the first 3 layers, 256 routed experts top-8 of 2048 + 1 shared,
  // e_score_correction_bias, 1 MTP layer, vocab 129280, 163840 positions, fp8 weights in
  // 128 x 128 blocks (quantization_config). 671.0e9 parameters without the MTP layer.
  ModelSpec m = dense(std::move(name), 61, 7168, 128, 128, 192, 18432, 129280, 163840, std::move(source));
  m.attention = AttentionKind::kMla;
  m.mla = {1536, 512, 128, 64, 128};
  m.moe = moe(256, 8, 2048, 1, 3, true);
  m.mtp_layers = 1;
  m.formats.weights = m.formats.experts = Format::kFp8Block;
  return m;
}

std::vector<ModelSpec> build_presets() {
  std::vector<ModelSpec> p;
  // Llama: figures from each model's Hugging Face config.json (hidden_size, num_hidden_layers,
  // num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
  // max_position_embeddings); head_dim = hidden_size / num_attention_heads.
  // 8.03e9 parameters: 32 x 218,112,000 per layer + 2 x 525,336,576 embedding/LM head.
  p.push_back(
      dense("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, 131072, "meta-llama/Llama-3.1-8B config.json"));
  p.push_back(dense("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, 131072,
                    "meta-llama/Llama-3.1-70B config.json"));  // 70.55e9 parameters
  p.push_back(dense("llama-3.1-405b", 126, 16384, 128, 8, 128, 53248, 128256, 131072,
                    "meta-llama/Meta-Llama-3.1-405B config.json"));  // 405.85e9 parameters
  // mistralai/Mixtral-8x{7,22}B-v0.1 config.json (mixtral): Llama attention (GQA, head_dim =
  // hidden / heads = 128, no sliding window) and in every layer 8 SwiGLU experts, top-2, of the
  // config's intermediate_size, no shared expert, no routing bias; vocab 32000. 46.70e9 and
  // 140.6e9 parameters.
  ModelSpec mix7 =
      dense("mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, 32768, "mistralai/Mixtral-8x7B-v0.1 config.json");
  mix7.moe = moe(8, 2, 14336, 0, 0, false);
  p.push_back(mix7);
  ModelSpec mix22 =
      dense("mixtral-8x22b", 56, 6144, 48, 8, 128, 16384, 32000, 65536, "mistralai/Mixtral-8x22B-v0.1 config.json");
  mix22.moe = moe(8, 2, 16384, 0, 0, false);
  p.push_back(mix22);
  p.push_back(dense("llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, 4096,
                    "meta-llama/Llama-2-70b-hf config.json"));  // 68.98e9; 4,096-token context

  // Qwen/Qwen3-32B config.json: head_dim 128 given explicitly, q_norm/k_norm. 32.76e9 parameters.
  ModelSpec q32 = dense("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, 40960, "Qwen/Qwen3-32B config.json");
  q32.qk_norm = true;
  p.push_back(q32);

  // The smaller Qwen3 models, Qwen/Qwen3-{0.6B,1.7B,8B} config.json: head_dim 128, QK-norm, vocab
  // 151936, 40960 positions; the two smallest tie the LM head to the embedding
  // (tie_word_embeddings). 0.596e9, 1.72e9 and 8.19e9 parameters (model cards: 0.6B and 1.7B, of
  // which 0.44B and 1.4B are not the embedding; 8.2B).
  auto qwen3 = [&](std::string name, int layers, int hidden, int heads, int kv_heads, int intermediate,
                   std::string source) {
    ModelSpec q =
        dense(std::move(name), layers, hidden, heads, kv_heads, 128, intermediate, 151936, 40960, std::move(source));
    q.qk_norm = true;
    return q;
  };
  ModelSpec q06 = qwen3("qwen3-0.6b", 28, 1024, 16, 8, 3072, "Qwen/Qwen3-0.6B config.json");
  q06.tied_embeddings = true;
  p.push_back(q06);
  ModelSpec q17 = qwen3("qwen3-1.7b", 28, 2048, 16, 8, 6144, "Qwen/Qwen3-1.7B config.json");
  q17.tied_embeddings = true;
  p.push_back(q17);
  // Qwen/Qwen3-4B config.json: 36 layers, hidden 2560, 32 / 8 heads, MLP 9728, tied embeddings.
  // 4.02e9 parameters (model card: 4.0B, 3.6B without the embedding).
  ModelSpec q4 = qwen3("qwen3-4b", 36, 2560, 32, 8, 9728, "Qwen/Qwen3-4B config.json");
  q4.tied_embeddings = true;
  p.push_back(q4);
  p.push_back(qwen3("qwen3-8b", 36, 4096, 32, 8, 12288, "Qwen/Qwen3-8B config.json"));
  // Qwen/Qwen3-30B-A3B config.json (qwen3_moe): 48 layers, hidden 2048, 32 / 4 heads, 128 experts
  // top-8 of 768 in every layer, no shared expert. 30.53e9 parameters.
  ModelSpec q30 = qwen3("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, "Qwen/Qwen3-30B-A3B config.json");
  q30.moe = moe(128, 8, 768, 0, 0, false);
  p.push_back(q30);
  // Qwen/Qwen3-Coder-480B-A35B-Instruct config.json (qwen3_moe): 62 layers, hidden 6144, 96 / 8
  // heads, 160 experts top-8 of 2560, no shared expert, 262144 positions. 480.2e9 parameters.
  ModelSpec q480 =
      qwen3("qwen3-coder-480b-a35b", 62, 6144, 96, 8, 8192, "Qwen/Qwen3-Coder-480B-A35B-Instruct config.json");
  q480.max_context = 262144;
  q480.moe = moe(160, 8, 2560, 0, 0, false);
  p.push_back(q480);

  // XiaomiMiMo/MiMo-7B-Base config.json (MiMoForCausalLM, Qwen2's architecture): 36 layers, hidden
  // 4096, 32 / 8 heads of 128 with biases on q, k and v (attention_bias), MLP 11008, vocab 151680,
  // 32768 positions, untied embeddings, one MTP layer (num_nextn_predict_layers); no sliding
  // window (use_sliding_window false). 7.62e9 parameters without the MTP layer.
  ModelSpec mimo = dense("mimo-7b", 36, 4096, 32, 8, 128, 11008, 151680, 32768, "XiaomiMiMo/MiMo-7B-Base config.json");
  mimo.qkv_bias = true;
  mimo.mtp_layers = 1;
  p.push_back(mimo);

  // Qwen/Qwen3-235B-A22B config.json: 94 layers, 128 experts top-8 of 1536, no shared experts,
  // every layer MoE (decoder_sparse_step 1, mlp_only_layers []). 235.1e9 parameters.
  ModelSpec q235 =
      dense("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 12288, 151936, 40960, "Qwen/Qwen3-235B-A22B config.json");
  q235.qk_norm = true;
  q235.moe = moe(128, 8, 1536, 0, 0, false);
  p.push_back(q235);

  p.push_back(deepseek_v3("deepseek-v3", "deepseek-ai/DeepSeek-V3 config.json"));
  p.push_back(deepseek_v3("deepseek-r1",
                          "deepseek-ai/DeepSeek-R1 config.json (DeepSeek-V3 "
                          "architecture)"));

  // moonshotai/Kimi-K2-Instruct config.json (model_type kimi_k2, DeepSeek-V3 architecture):
  // 64 heads, 384 routed experts top-8 + 1 shared, 1 dense layer, vocab 163840, 131072
  // positions, no MTP layer, fp8 block-scaled weights. 1.026e12 parameters.
  ModelSpec kimi =
      dense("kimi-k2", 61, 7168, 64, 64, 192, 18432, 163840, 131072, "moonshotai/Kimi-K2-Instruct config.json");
  kimi.attention = AttentionKind::kMla;
  kimi.mla = {1536, 512, 128, 64, 128};
  kimi.moe = moe(384, 8, 2048, 1, 1, true);
  kimi.formats.weights = kimi.formats.experts = Format::kFp8Block;
  p.push_back(kimi);

  // moonshotai/Kimi-K2.5 config.json text_config (model_type kimi_k2, DeepseekV3ForCausalLM): the
  // Kimi-K2 text model with 262144 positions; its quantization_config (compressed-tensors
  // pack-quantized, int4 weights with a bf16 scale per group of 32) covers the routed experts only
  // (ignore: lm_head, self_attn, shared_experts and the dense MLP of layer 0), so experts w4a16,
  // everything else bf16. The MoonViT vision tower (27 blocks of 1152) is not modelled: text only.
  ModelSpec kimi25 = kimi;
  kimi25.name = "kimi-k2.5";
  kimi25.max_context = 262144;
  kimi25.formats.weights = Format::kBf16;
  kimi25.formats.experts = Format::kW4A16;
  kimi25.source = "moonshotai/Kimi-K2.5 config.json (text_config; vision tower not modelled)";
  p.push_back(kimi25);
  // moonshotai/Kimi-K3 config.json text_config (kimi_linear; AIConfigurator's kimi_k3.py for the
  // projections): 93 layers, hidden 7168; Kimi Delta Attention (KDA) on 69 (linear_attn_config
  // kda_layers: three of every four, 96 heads of 128, short convolution of 4, a full-rank forget
  // gate) and MLA on the other 24 (full_attn_layers 4, 8, ..., 92, 93 counted from 1: 96 heads, q_lora
  // 1536, kv_lora 512, qk_nope 128, qk_rope 64, v 128, with an output gate: mla_use_output_gate); a
  // dense MLP of 33792 in layer 0, then a latent MoE of 896 experts top-16 of 3072 in a 3584
  // latent (routed_expert_hidden_size) with a routing bias (noaux_tc) and 2 shared experts of 3072
  // in the hidden width; vocab 163840, 1048576 positions, untied embeddings. quantization_config:
  // the routed experts MXFP4 (mxfp4-pack-quantized, a scale per 32), the rest (self_attn, shared
  // experts, the dense MLP, lm_head) bf16. Not modelled: its attention residuals (AttnRes, an
  // elementwise mix), the SiTU activation's own cost, the DSPARK draft model, the vision tower.
  // 2.78e12 parameters (AIConfigurator's kimi_k3.py: "2.8T").
  ModelSpec k3 =
      dense("kimi-k3", 93, 7168, 96, 96, 128, 33792, 163840, 1048576, "moonshotai/Kimi-K3 config.json (text_config)");
  k3.attention = AttentionKind::kMla;
  k3.mla = {1536, 512, 128, 64, 128};
  k3.attention_output_gate = true;
  std::string k3_layers;
  for (int l = 0; l < 92; ++l) k3_layers += l % 4 == 3 ? 'F' : 'L';
  k3.linear = {96, 96, 128, 128, 4, k3_layers + "F", 4};
  k3.linear.kind = LinearKind::kKda;
  k3.moe = moe(896, 16, 3072, 2, 1, true);
  k3.moe.latent = 3584;
  k3.formats.experts = Format::kMxfp4;
  p.push_back(k3);

  // deepseek-ai/DeepSeek-V3.2 config.json (DeepseekV32ForCausalLM): DeepSeek-V3's architecture with
  // the DSA indexer, index_n_heads 64 x index_head_dim 128 selecting index_topk 2048 tokens; fp8
  // weights in 128 x 128 blocks (quantization_config, scale_fmt ue8m0).
  ModelSpec v32 = deepseek_v3("deepseek-v3.2", "deepseek-ai/DeepSeek-V3.2 config.json (deepseek_v32)");
  v32.dsa = {64, 128, 2048, {}};
  p.push_back(v32);

  // MiniMaxAI/MiniMax-M2.5 config.json (MiniMaxM2ForCausalLM): 62 layers, hidden 3072, GQA 48 / 8
  // heads of 128 with QK-norm (qk_norm_type per_layer: one RMSNorm over all query heads and one
  // over all key heads), rotary on 64 of the 128 dims, every layer MoE with 256 experts top-8 of
  // 1536 (intermediate_size), no shared experts, a routing bias (use_routing_bias), vocab 200064,
  // 196608 positions, fp8 weights in 128 x 128 blocks (quantization_config; gate, routing bias and
  // lm_head excluded). Its 3 MTP modules (num_mtp_modules) are not loaded by the serving engines
  // by default and are not modelled. 228.7e9 parameters (MiniMax: "230B total").
  ModelSpec mm =
      dense("minimax-m2.5", 62, 3072, 48, 8, 128, 1536, 200064, 196608, "MiniMaxAI/MiniMax-M2.5 config.json");
  mm.qk_norm = true;
  mm.moe = moe(256, 8, 1536, 0, 0, true);
  mm.formats.weights = mm.formats.experts = Format::kFp8Block;
  p.push_back(mm);
  // MiniMaxAI/MiniMax-M2.7 config.json: MiniMax-M2.5's architecture and formats with 204800
  // positions.
  ModelSpec mm27 = mm;
  mm27.name = "minimax-m2.7";
  mm27.max_context = 204800;
  mm27.source = "MiniMaxAI/MiniMax-M2.7 config.json";
  p.push_back(mm27);
  // MiniMaxAI/MiniMax-M3 config.json (minimax_m3, the text decoder of the multimodal checkpoint): 60
  // layers, hidden 6144, GQA 64 / 4 heads of 128 with per-head QK-norm, MiniMax Sparse Attention
  // (sparse_attention_config: 4 index heads of 128, the top 16 blocks of 128 tokens, on every layer
  // but the first three: sparse_attention_freq 0, 0, 0, 1, ...), a dense MLP of 12288
  // (dense_intermediate_size) in the first three layers (moe_layer_freq), then 128 experts top-4 of
  // 3072 with a routing bias and one shared expert of 3072, vocab 200064, 1048576 positions, untied
  // embeddings, bf16, one MTP layer (num_nextn_predict_layers). 426.2e9 parameters without the MTP
  // layer and the vision tower (MiniMax: "428B total, 23B active" with the tower).
  ModelSpec mm3 = dense("minimax-m3", 60, 6144, 64, 4, 128, 12288, 200064, 1048576, "MiniMaxAI/MiniMax-M3 config.json");
  mm3.qk_norm = true;
  mm3.moe = moe(128, 4, 3072, 1, 3, true);
  mm3.dsa = {4, 128, 16 * 128, "DDD" + std::string(57, 'F'), 128};
  mm3.mtp_layers = 1;
  p.push_back(mm3);

  // DeepSeek-V4 (deepseek-ai/DeepSeek-V4-*/config.json, model_type deepseek_v4; ModelSpec::
  // CompressSpec): MQA over one 512-wide entry that is key and value both (head_dim, num_key_value_
  // heads 1; rotary on its last 64 dims), a 128-token window on every layer (sliding_window), CSA
  // (entries of 4 tokens, an indexer of 64 heads x 128 selecting index_topk of them) and HCA
  // (entries of 128 tokens) by compress_ratios, whose last entry is the MTP layer's; the layers of
  // ratio 0 (window only) taken as HCA. Every layer MoE with a routing bias (noaux_tc; the first
  // num_hash_layers 3 route by a hash of the token id, costed as routed) and one shared expert;
  // attention sinks; mHC with 4 streams (hc_mult); vocab 129280, 1048576 positions, one MTP layer.
  // Weights fp8 in 128 x 128 blocks (quantization_config), routed experts fp4 (expert_dtype; a
  // ue8m0 scale per 32: MXFP4), the KV cache fp8 (AIConfigurator's default for it).
  auto deepseek_v4 = [&](std::string name, int layers, int hidden, int heads, int q_lora, int o_groups, int top_k,
                         int experts, int expert_intermediate, std::string source) {
    ModelSpec v =
        dense(std::move(name), layers, hidden, heads, 1, 512, expert_intermediate, 129280, 1048576, std::move(source));
    v.compress = {128, 4, 128, q_lora, o_groups, 1024, 4};
    std::string pattern = "DD";
    while (static_cast<int>(pattern.size()) < layers) pattern += pattern.size() % 2 == 0 ? 'F' : 'D';
    v.dsa = {64, 128, top_k, pattern, 1};
    v.attention_sinks = true;
    v.moe = moe(experts, 6, expert_intermediate, 1, 0, true);
    v.mtp_layers = 1;
    v.formats.weights = Format::kFp8Block;
    v.formats.experts = Format::kMxfp4;
    v.formats.kv_cache = Format::kFp8;
    return v;
  };
  // DeepSeek-V4-Flash: 43 layers, hidden 4096, 64 heads, q_lora 1024, 8 output groups, top 512
  // entries, 256 experts of 2048; compress_ratios 0, 0, then 4 and 128 alternating from layer 2.
  // 284.3e9 parameters (DeepSeek: "284B total, 13B activated").
  p.push_back(deepseek_v4("deepseek-v4-flash", 43, 4096, 64, 1024, 8, 512, 256, 2048,
                          "deepseek-ai/DeepSeek-V4-Flash config.json"));
  // DeepSeek-V4-Pro: 61 layers, hidden 7168, 128 heads, q_lora 1536, 16 output groups, top 1024
  // entries, 384 experts of 3072; compress_ratios 128, 128, then 4 and 128 alternating. 1.573e12
  // parameters (DeepSeek: "1.6T total, 49B activated").
  p.push_back(deepseek_v4("deepseek-v4-pro", 61, 7168, 128, 1536, 16, 1024, 384, 3072,
                          "deepseek-ai/DeepSeek-V4-Pro config.json"));

  // Qwen3.5 (Qwen/Qwen3.5-*/config.json text_config, model_type qwen3_5_moe_text / qwen3_5_text):
  // hybrid layers, three Gated DeltaNet layers then one full-attention layer (layer_types,
  // full_attention_interval 4); GDN with 16 key heads and value heads of 128 x 128 (fp32 state,
  // mamba_ssm_dtype), conv kernel 4; full attention GQA of head_dim 256 with QK-norm and an output
  // gate (attn_output_gate, q_proj twice as wide), rotary on a quarter of the dims
  // (partial_rotary_factor 0.25, not costed apart); MoE in every layer with one shared expert of
  // shared_expert_intermediate_size (its sigmoid gate, h weights, not counted); vocab 248320,
  // 262144 positions, 1 MTP layer (not modelled, as for MiniMax), untied embeddings. The vision
  // tower is not modelled: text only.
  auto qwen35 = [&](std::string name, int layers, int hidden, int heads, int kv_heads, int value_heads,
                    int intermediate, std::string source) {
    ModelSpec q =
        dense(std::move(name), layers, hidden, heads, kv_heads, 256, intermediate, 248320, 262144, std::move(source));
    q.qk_norm = true;
    q.attention_output_gate = true;
    q.linear = {16, value_heads, 128, 128, 4, "LLLF", 4};
    return q;
  };
  // Qwen/Qwen3.5-397B-A17B: 60 layers, hidden 4096, 32 / 2 heads, 64 GDN value heads, 512 experts
  // top-10 of 1024 + a shared one of 1024 (Qwen: "397B total, 17B activated").
  ModelSpec q397 =
      qwen35("qwen3.5-397b-a17b", 60, 4096, 32, 2, 64, 1024, "Qwen/Qwen3.5-397B-A17B config.json (text_config)");
  q397.moe = moe(512, 10, 1024, 1, 0, false);
  p.push_back(q397);
  // Qwen/Qwen3.5-122B-A10B: 48 layers, hidden 3072, 32 / 2 heads, 64 GDN value heads, 256 experts
  // top-8 of 1024 + a shared one of 1024.
  ModelSpec q122 =
      qwen35("qwen3.5-122b-a10b", 48, 3072, 32, 2, 64, 1024, "Qwen/Qwen3.5-122B-A10B config.json (text_config)");
  q122.moe = moe(256, 8, 1024, 1, 0, false);
  p.push_back(q122);
  // Qwen/Qwen3.5-35B-A3B: 40 layers, hidden 2048, 16 / 2 heads, 32 GDN value heads, 256 experts
  // top-8 of 512 + a shared one of 512.
  ModelSpec q35 = qwen35("qwen3.5-35b-a3b", 40, 2048, 16, 2, 32, 512, "Qwen/Qwen3.5-35B-A3B config.json (text_config)");
  q35.moe = moe(256, 8, 512, 1, 0, false);
  p.push_back(q35);
  // Qwen/Qwen3.5-27B (dense): 64 layers, hidden 5120, 24 / 4 heads, 48 GDN value heads, MLP 17408.
  p.push_back(qwen35("qwen3.5-27b", 64, 5120, 24, 4, 48, 17408, "Qwen/Qwen3.5-27B config.json (text_config)"));

  // Nemotron-H (NemotronHForCausalLM, model_type nemotron_h): blocks of one mixer (Mamba-2 'M' or
  // attention '*') or one feed-forward block (a squared-ReLU MLP '-' or a MoE 'E'),
  // hybrid_override_pattern; here a layer is a mixer block and the feed-forward block after it,
  // if any (ffn_pattern N where none follows). Mamba-2: n_groups 8 (key heads), ssm_state_size
  // (key dim), mamba_num_heads x mamba_head_dim, conv kernel 4, chunk_size 128, fp32 state
  // (mamba_ssm_cache_dtype). Attention without rotary embeddings (costed with them), no biases.
  auto nemotron_h = [&](std::string name, int layers, int hidden, int heads, int kv_heads, int intermediate,
                        LinearAttentionSpec mamba, std::string ffn_pattern, int max_context, std::string source) {
    ModelSpec n = dense(std::move(name), layers, hidden, heads, kv_heads, 128, intermediate, 131072, max_context,
                        std::move(source));
    n.gated_mlp = false;
    mamba.conv_kernel = 4;
    mamba.state_bytes = 4;
    mamba.kind = LinearKind::kMamba2;
    mamba.chunk = 128;
    n.linear = std::move(mamba);
    n.ffn_pattern = std::move(ffn_pattern);
    return n;
  };
  // Their MoE: routed experts with a routing bias, one shared expert of its own width
  // (moe_shared_expert_intermediate_size), and a latent width where there is one.
  auto nemotron_moe = [&](int experts, int top_k, int width, int shared_width, int latent) {
    MoeSpec e = moe(experts, top_k, width, 1, 0, true);
    e.shared_intermediate = shared_width;
    e.latent = latent;
    return e;
  };
  // nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json: 52 blocks
  // "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME" (23 Mamba-2, 6 attention, 23 MoE), hidden
  // 2688, 32 / 2 heads of 128, Mamba-2 64 heads of 64 with state 128, 128 experts top-6 of 1856 +
  // one shared of 3712 with a routing bias, vocab 131072, 262144 positions. NVIDIA's model card:
  // 31.6B total, 3.6B active with embeddings.
  ModelSpec nano =
      nemotron_h("nemotron-3-nano-30b-a3b", 29, 2688, 32, 2, 1856, {8, 64, 128, 64, 0, "LLLFLLLFLLLFLLLFLLLFLLLLFLLLL"},
                 "EENEEENEEENEEENEEENEEEENEEEEE", 262144, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json");
  nano.moe = nemotron_moe(128, 6, 1856, 3712, 0);
  p.push_back(nano);
  // Nemotron-3 Super and Ultra: latent MoE (moe_latent_size: fc1 / fc2 latent projections around
  // the routed experts), 512 experts top-22, one MTP block (mtp_hybrid_override_pattern "*E",
  // costed as the last layer). nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 config.json: 88 blocks
  // (40 Mamba-2, 8 attention, 40 MoE), hidden 4096, 32 / 2 heads of 128, Mamba-2 128 heads of 64
  // with state 128, experts of 2688 in a 1024 latent + a shared one of 5376; NVIDIA: 120B total,
  // 12B active.
  ModelSpec super = nemotron_h("nemotron-3-super-120b-a12b", 48, 4096, 32, 2, 2688,
                               {8, 128, 128, 64, 0, "LLLLFLLLLFLLLLFLLLLLFLLLLLFLLLLLFLLLLLFLLLLFLLLL"},
                               "EEENEEEENEEEENEEEEENEEEEENEEEEENEEEEENEEEENEEEEE", 262144,
                               "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 config.json");
  super.moe = nemotron_moe(512, 22, 2688, 5376, 1024);
  super.mtp_layers = 1;
  p.push_back(super);
  // nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16 config.json: 108 blocks (48 Mamba-2, 12
  // attention, 48 MoE), hidden 8192, 64 / 2 heads of 128, Mamba-2 256 heads of 64 with state 128,
  // experts of 5120 in a 2048 latent + a shared one of 10240; NVIDIA: 550B total, 55B active.
  ModelSpec ultra = nemotron_h("nemotron-3-ultra-550b-a55b", 60, 8192, 64, 2, 5120,
                               {8, 256, 128, 64, 0, "LLLLFLLLFLLLLFLLLLFLLLFLLLLFLLLLFLLLFLLLLFLLLLFLLLFLLLLFLLLL"},
                               "EEENEEENEEEENEEEENEEENEEEENEEEENEEENEEEENEEEENEEENEEEENEEEEE", 262144,
                               "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16 config.json");
  ultra.moe = nemotron_moe(512, 22, 5120, 10240, 2048);
  ultra.mtp_layers = 1;
  p.push_back(ultra);
  // nvidia/Nemotron-H-56B-Base-8K config.json: 118 blocks (54 Mamba-2, 10 attention, 54 MLPs),
  // hidden 8192, 64 / 8 heads of 128, MLP 32768, Mamba-2 256 heads of 64 with state 256, 8192
  // positions. Nemotron-H report (arXiv 2504.03624): 56B.
  p.push_back(nemotron_h("nemotron-h-56b", 64, 8192, 64, 8, 32768,
                         {8, 256, 256, 64, 0, "LLLLFLLLLLFLLLLLFLLLLLFLLLLLFLLLLLFLLLLLFLLLLLFLLLLLFLLLLLFLLLLL"},
                         "DDDNDDDDDNDDDDDNDDDDDNDDDDDNDDDDDNDDDDDNDDDDDNDDDDDNDDDDDNDDDDDD", 8192,
                         "nvidia/Nemotron-H-56B-Base-8K config.json; arXiv 2504.03624"));

  // zai-org/GLM-4.5 config.json (Glm4MoeForCausalLM): 92 layers (3 dense), hidden 5120, GQA
  // 96 / 8 heads of 128 with QKV bias and QK-norm, 160 experts top-8 of 1536 + 1 shared, 1 MTP
  // layer, vocab 151552, 131072 positions. GLM-4.5 report (arXiv 2508.06471) table 1: 355B total.
  ModelSpec glm45 = dense("glm-4.5", 92, 5120, 96, 8, 128, 12288, 151552, 131072,
                          "zai-org/GLM-4.5 config.json; arXiv 2508.06471 table 1");
  glm45.qkv_bias = glm45.qk_norm = true;
  glm45.moe = moe(160, 8, 1536, 1, 3, true);
  glm45.mtp_layers = 1;
  p.push_back(glm45);

  // zai-org/GLM-4.5-Air config.json: 46 layers (1 dense), hidden 4096, 96 / 8 heads of 128 with
  // QKV bias, no QK-norm, 128 experts top-8 of 1408 + 1 shared, 1 MTP layer. 106.9e9 parameters.
  ModelSpec air = dense("glm-4.5-air", 46, 4096, 96, 8, 128, 10944, 151552, 131072, "zai-org/GLM-4.5-Air config.json");
  air.qkv_bias = true;
  air.moe = moe(128, 8, 1408, 1, 1, true);
  air.mtp_layers = 1;
  p.push_back(air);

  // zai-org/GLM-5 config.json (glm_moe_dsa): 78 layers (3 dense), hidden 6144, MLA with 64 heads
  // (q_lora 2048, kv_lora 512, qk_nope 192, qk_rope 64, v 256), DSA indexer 32 heads x 128
  // selecting the top 2048 tokens, dense intermediate 12288, 256 experts top-8 of 2048 + 1
  // shared, 1 MTP layer, vocab 154880, 202752 positions. 743.9e9 parameters, 753.9e9 with the
  // MTP layer (the checkpoint's tensor count).
  ModelSpec glm5 =
      dense("glm-5", 78, 6144, 64, 64, 256, 12288, 154880, 202752, "zai-org/GLM-5 config.json (glm_moe_dsa)");
  glm5.attention = AttentionKind::kMla;
  glm5.mla = {2048, 512, 192, 64, 256};
  glm5.dsa = {32, 128, 2048, {}};
  glm5.moe = moe(256, 8, 2048, 1, 3, true);
  glm5.mtp_layers = 1;
  p.push_back(glm5);
  // zai-org/GLM-5.2 config.json: GLM-5's architecture with 1048576 positions and the DSA indexer
  // on 21 of the 78 layers (indexer_types: "full" on layers 0-2 and every fourth from 6, "shared"
  // on the rest, which attend over the last full layer's top-k; SGLang's dsa_layer_skips_topk with
  // index_topk_freq 4 and index_skip_topk_offset 3 gives the same layers). The shared layers hold
  // no indexer: GLM-5.2-FP8's modules_to_not_convert lists indexer.k_norm on the full layers and
  // the MTP layer (78) only.
  ModelSpec glm52 = glm5;
  glm52.name = "glm-5.2";
  glm52.max_context = 1048576;
  glm52.source = "zai-org/GLM-5.2 config.json (glm_moe_dsa, indexer_types)";
  for (int l = 0; l < glm52.layers; ++l) glm52.dsa.pattern += std::max(l - 3 + 1, 0) % 4 == 0 ? 'F' : 'S';
  p.push_back(glm52);

  // stepfun-ai/Step-3.7-Flash config.json (step3p7): 45 layers, hidden 4096, GQA 64 / 8 heads of 128
  // on every layer; full attention on every fourth layer from the first and a 512-token sliding
  // window on the others (layer_types "full_attention", "sliding_attention" x 3, ...); a dense MLP
  // of 11264 in the first 3 layers (first_k_dense_replace), then 288 experts top-8 of 1280 with a
  // routing bias (use_moe_router_bias) and one shared expert of 1280 (share_expert_dim); vocab
  // 128896, 65536 positions, 3 MTP layers (num_nextn_predict_layers), no tie_word_embeddings key
  // (untied). AIConfigurator's copy of the config (the one this preset reads) gives every layer the
  // same heads. 195.8e9 parameters (StepFun: "196B total, 11B active" for Step-3.5-Flash).
  ModelSpec step =
      dense("step-3.7-flash", 45, 4096, 64, 8, 128, 11264, 128896, 65536, "stepfun-ai/Step-3.7-Flash config.json");
  step.moe = moe(288, 8, 1280, 1, 3, true);
  step.window = {512, "FSSS", 0, 0};
  step.mtp_layers = 3;
  p.push_back(step);

  // Gemma-4 (google/gemma-4-26B-A4B and nvidia/Gemma-4-31B-IT-NVFP4 config.json text_config,
  // gemma4_text): five sliding-window layers (1024 tokens; KV heads of head_dim 256) then one full
  // layer (num_global_key_value_heads of global_head_dim 512, V from the key projection:
  // attention_k_eq_v; AIConfigurator's gemma4.py: no v_proj on those layers, K and V both cached),
  // QK-norm, gated GELU MLPs, tied embeddings, vocab and positions 262144. The 26B-A4B runs a dense
  // MLP of intermediate_size beside 128 routed experts top-8 of moe_intermediate_size in every
  // layer (enable_moe_block; the outputs summed: a shared expert). The vision tower is not
  // modelled, nor the two extra norms per layer (pre- and post-feed-forward, 2 h).
  auto gemma4 = [&](std::string name, int layers, int hidden, int heads, int global_kv, int window_kv, int intermediate,
                    std::string source) {
    ModelSpec g =
        dense(std::move(name), layers, hidden, heads, global_kv, 512, intermediate, 262144, 262144, std::move(source));
    g.tied_embeddings = true;
    g.qk_norm = true;
    g.k_eq_v = true;
    g.window = {1024, "SSSSSF", window_kv, 256};
    return g;
  };
  ModelSpec g26 =
      gemma4("gemma-4-26b-a4b", 30, 2816, 16, 2, 8, 2112, "google/gemma-4-26B-A4B config.json (text_config)");
  g26.moe = moe(128, 8, 704, 1, 0, false);
  g26.moe.shared_intermediate = 2112;
  p.push_back(g26);
  p.push_back(
      gemma4("gemma-4-31b", 60, 5376, 32, 4, 16, 21504, "nvidia/Gemma-4-31B-IT-NVFP4 config.json (text_config)"));

  // XiaomiMiMo/MiMo-V2-Flash config.json (mimo_v2_flash): 48 layers, hidden 4096, 64 query heads
  // of head_dim 192 with value heads of 128 (v_head_dim); full attention (4 KV heads) on the
  // layers hybrid_layer_pattern marks 0 (layers 0, 5, 11, ..., 47) and a 128-token sliding
  // window (8 KV heads, swa_num_key_value_heads) on the others; the first layer a dense MLP of
  // 16384 (moe_layer_freq), then 256 experts top-8 of 2048 with a routing bias (noaux_tc), no
  // shared expert; vocab 152576, 262144 positions, untied, fp8 weights in 128 x 128 blocks. The
  // sliding layers' attention sinks (64 per layer) are not counted.
  ModelSpec mimo2 = dense("mimo-v2-flash", 48, 4096, 64, 4, 192, 16384, 152576, 262144,
                          "XiaomiMiMo/MiMo-V2-Flash config.json (mimo_v2_flash)");
  mimo2.value_head_dim = 128;
  mimo2.window = {128, "FSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSF", 8, 0};
  mimo2.moe = moe(256, 8, 2048, 0, 1, true);
  mimo2.formats.weights = mimo2.formats.experts = Format::kFp8Block;
  p.push_back(mimo2);

  // openai/gpt-oss-120b config.json: 36 layers alternating 128-token sliding-window and full
  // attention (layer_types, sliding first), hidden 2880, 64 query / 8 KV heads of 64 with biases
  // and attention sinks, 128 experts top-4 of 2880 with biases, a biased router, MXFP4 experts
  // (quantization_config; attention, router, embedding and LM head stay bf16), vocab 201088,
  // 131072 positions. 116.8e9 parameters.
  ModelSpec oss = dense("gpt-oss-120b", 36, 2880, 64, 8, 64, 2880, 201088, 131072, "openai/gpt-oss-120b config.json");
  oss.window = {128, "SF", 0, 0};
  oss.moe = moe(128, 4, 2880, 0, 0, true);
  oss.moe.expert_bias = true;
  oss.qkv_bias = oss.o_bias = oss.attention_sinks = true;
  oss.formats.experts = Format::kMxfp4;
  p.push_back(oss);
  // openai/gpt-oss-20b config.json: gpt-oss-120b's layer with 24 layers and 32 experts top-4.
  // 20.9e9 parameters.
  ModelSpec oss20 = oss;
  oss20.name = "gpt-oss-20b";
  oss20.layers = 24;
  oss20.moe.experts = 32;
  oss20.source = "openai/gpt-oss-20b config.json";
  p.push_back(oss20);

  // meta-llama/Llama-4-{Scout-17B-16E,Maverick-17B-128E}-Instruct config.json text_config
  // (llama4_text): 48 layers, hidden 5120, 40 query / 8 KV heads of 128, vocab 202048, untied.
  // MoE layers hold top-1 of the routed experts (num_local_experts, intermediate_size 8192) and one
  // shared expert of 8192; Scout's every layer (interleave_moe_layer_step 1, 16 experts),
  // Maverick's every second (step 2, 128 experts), its other layers a dense MLP of
  // intermediate_size_mlp 16384 (here layer l is MoE when l % 2 == 0, the config's (l + 1) % 2 ==
  // 0: the same count, 24). Attention: three of every four layers attend within chunks of
  // attention_chunk_size 8192 tokens with rotary embeddings, the fourth (no_rope_layers' default)
  // attends to everything without them; costed as an 8192-token sliding window on pattern
  // "SSSF", which is exact up to 8192 tokens of context and beyond that over-counts a chunked
  // layer's reads (a chunk attends to 1-8192 tokens, 4096 on average; the window 8192) and bounds
  // its KV alike (one chunk). Ignored: Scout's weightless L2 QK-norm, the vision encoder (text
  // prompts). Parameters (text model): Scout 107,769,861,120 (48 x (62,914,560 attention +
  // 16 x 125,829,120 routed + 125,829,120 shared + 81,920 router + 10,240 norms) + 2 x
  // 1,034,485,760 embedding / LM head + 5,120), the model card's "109B" with its vision encoder;
  // Maverick 400,711,848,960 (48 x (62,914,560 + 10,240) + 24 x (128 x 125,829,120 + 125,829,120 +
  // 655,360) + 24 x 251,658,240 dense MLP + 2 x 1,034,485,760 + 5,120), the card's "400B".
  ModelSpec scout = dense("llama-4-scout", 48, 5120, 40, 8, 128, 16384, 202048, 10485760,
                          "meta-llama/Llama-4-Scout-17B-16E-Instruct config.json");
  scout.window = {8192, "SSSF", 0, 0};
  scout.moe = moe(16, 1, 8192, 1, 0, false);
  p.push_back(scout);
  ModelSpec maverick = scout;
  maverick.name = "llama-4-maverick";
  maverick.max_context = 1048576;
  maverick.moe.experts = 128;
  maverick.moe.layer_frequency = 2;
  maverick.source = "meta-llama/Llama-4-Maverick-17B-128E-Instruct config.json";
  p.push_back(maverick);

  // Qwen/Qwen2.5-VL-7B-Instruct config.json: a Qwen2 language model (28 layers, hidden 3584,
  // 28 / 4 heads with QKV bias, intermediate 18944, vocab 152064, 128000 positions) and
  // vision_config (32 blocks of 1280 with 16 heads and a 3420 SwiGLU, patch 14, 2 x 2 merge,
  // temporal patch 2, 112-pixel windows with global attention in blocks 7, 15, 23, 31, merger to
  // 3584); preprocessor_config.json min_pixels 3136, max_pixels 12845056 (the model card
  // suggests 1280 x 28 x 28 = 1,003,520 for serving, the default here).
  ModelSpec vl =
      dense("qwen2.5-vl-7b", 28, 3584, 28, 4, 128, 18944, 152064, 128000, "Qwen/Qwen2.5-VL-7B-Instruct config.json");
  vl.qkv_bias = true;
  VisionSpec v;
  v.depth = 32;
  v.hidden = 1280;
  v.heads = 16;
  v.intermediate = 3420;
  v.full_attention_layers = {7, 15, 23, 31};
  v.out_hidden = 3584;
  vl.vision = v;
  p.push_back(vl);
  return p;
}

const std::vector<ModelSpec>& presets() {
  static const std::vector<ModelSpec> kPresets = build_presets();
  return kPresets;
}

std::string str(int v) { return std::to_string(v); }

}  // namespace

std::optional<ModelSpec> model_preset(std::string_view name) {
  for (const auto& m : presets()) {
    if (m.name == name) return m;
  }
  return std::nullopt;
}

std::vector<std::string_view> model_preset_names() {
  std::vector<std::string_view> out;
  for (const auto& m : presets()) out.push_back(m.name);
  return out;
}

std::vector<std::string> validate_model(const ModelSpec& m) {
  std::vector<std::string> out;
  if (m.attention == AttentionKind::kGqa) {
    if (m.heads > 0 && m.kv_heads > 0 && m.heads % m.kv_heads != 0) {
      out.push_back("kv_heads (" + str(m.kv_heads) + ") must divide heads (" + str(m.heads) + ")");
    }
    if (m.kv_heads > m.heads) {
      out.push_back("kv_heads (" + str(m.kv_heads) + ") cannot exceed heads (" + str(m.heads) + ")");
    }
  } else {
    const MlaSpec& a = m.mla;
    if (a.kv_lora_rank < 1 || a.qk_nope_dim < 0 || a.qk_rope_dim < 1 || a.v_dim < 1 || a.q_lora_rank < 0) {
      out.emplace_back(
          "MLA needs kv_lora_rank, qk_rope_dim and v_dim >= 1 (and qk_nope_dim, "
          "q_lora_rank >= 0)");
    }
  }
  if (m.dsa.enabled()) {
    if (m.attention != AttentionKind::kMla && !m.dsa.block_scored() && !m.compress.enabled()) {
      out.emplace_back(
          "DSA sparse attention is modelled on top of MLA; set attention: mla (or dsa.block > 1: block sparse on GQA)");
    }
    if (m.attention == AttentionKind::kMla && m.dsa.block_scored()) {
      out.emplace_back("block-scored sparse attention (dsa.block > 1) is modelled on GQA attention only");
    }
    if (m.dsa.index_heads < 1 || m.dsa.index_dim < 1) {
      out.emplace_back("DSA needs index_heads and index_dim >= 1");
    }
    if (m.dsa.block < 1) out.push_back("DSA block (" + str(m.dsa.block) + ") must be >= 1");
    const std::size_t first_sparse = m.dsa.pattern.find_first_not_of('D');
    if (!m.dsa.pattern.empty() && (m.dsa.pattern.find_first_not_of("FSD") != std::string::npos ||
                                   first_sparse == std::string::npos || m.dsa.pattern[first_sparse] != 'F')) {
      out.push_back("DSA indexer pattern '" + m.dsa.pattern +
                    "' must hold F (runs the indexer), S (reuses the last F layer's top-k) and D (dense attention, "
                    "no indexer) only, its first sparse layer an F");
    }
    if (m.has_dense_attention_layers() && m.window.enabled()) {
      out.emplace_back("DSA dense-attention layers (pattern D) with sliding-window layers are not modelled");
    }
  }
  if (m.compress.enabled()) {
    const CompressSpec& c = m.compress;
    if (m.attention != AttentionKind::kGqa || m.kv_heads != 1) {
      out.emplace_back("compressed attention is modelled on MQA (attention: gqa, kv_heads: 1)");
    }
    if (!m.dsa.enabled() || m.dsa.block_scored()) {
      out.emplace_back("compressed attention needs its CSA indexer (dsa: index_heads, index_dim, top_k; block 1)");
    }
    if (c.sparse_ratio < 1 || c.dense_ratio < 1 || c.q_lora_rank < 1 || c.o_lora_rank < 1 || c.streams < 1) {
      out.emplace_back(
          "compressed attention needs sparse_ratio, dense_ratio, q_lora_rank, o_lora_rank and streams >= 1");
    }
    if (c.o_groups < 1 || (m.heads > 0 && m.heads % c.o_groups != 0)) {
      out.push_back("compressed attention o_groups (" + str(c.o_groups) + ") must divide the " + str(m.heads) +
                    " heads");
    }
    if (m.window.enabled() || m.linear.enabled()) {
      out.emplace_back(
          "compressed attention has its own window; no sliding-window or linear-attention layers beside it");
    }
  }
  if (m.moe.enabled()) {
    if (m.moe.top_k < 1 || m.moe.top_k > m.moe.experts) {
      out.push_back("MoE top_k (" + str(m.moe.top_k) + ") must be between 1 and the " + str(m.moe.experts) +
                    " experts");
    }
    if (m.moe.expert_intermediate < 1) out.emplace_back("MoE expert_intermediate must be >= 1");
    if (m.moe.layer_frequency < 1) out.emplace_back("MoE layer_frequency must be >= 1");
    if (m.moe.shared_intermediate < 0 || m.moe.shared_experts < 0) {
      out.emplace_back("MoE shared experts cannot be negative");
    }
    if (m.moe.latent < 0) out.emplace_back("MoE latent width cannot be negative");
    if (m.moe.first_dense_layers > m.layers) {
      out.push_back("MoE first_dense_layers (" + str(m.moe.first_dense_layers) + ") exceeds the " + str(m.layers) +
                    " layers");
    }
  }
  if (m.value_head_dim < 0) out.emplace_back("value_head_dim cannot be negative");
  if (m.k_eq_v && m.attention != AttentionKind::kGqa) {
    out.emplace_back("k_eq_v (V from the key projection) is modelled on GQA attention only");
  }
  if (m.window.kv_heads < 0 || m.window.head_dim < 0) {
    out.emplace_back("sliding-window kv_heads and head_dim cannot be negative");
  } else if (m.window.kv_heads > 0 && m.heads % m.window.kv_heads != 0) {
    out.push_back("sliding-window kv_heads (" + str(m.window.kv_heads) + ") must divide the " + str(m.heads) +
                  " query heads");
  }
  if (m.window.enabled()) {
    for (char c : m.window.pattern) {
      if (c != 'S' && c != 'F') {
        out.push_back("sliding-window pattern '" + m.window.pattern + "' may hold only S (sliding) and F (full)");
        break;
      }
    }
  }
  if (m.linear.enabled()) {
    const LinearAttentionSpec& l = m.linear;
    if (l.key_heads < 1 || l.key_dim < 1 || l.value_dim < 1 || l.conv_kernel < 1 || l.state_bytes < 1) {
      out.emplace_back("linear attention needs key_heads, key_dim, value_dim, conv_kernel and state_bytes >= 1");
    } else if (l.value_heads % l.key_heads != 0) {
      out.push_back("linear attention key_heads (" + str(l.key_heads) + ") must divide value_heads (" +
                    str(l.value_heads) + ")");
    }
    if (l.pattern.empty() || l.pattern.find_first_not_of("LF") != std::string::npos) {
      out.push_back("linear-attention pattern '" + l.pattern + "' must hold L (linear) and F (full) only");
    }
    if (m.window.enabled() || m.dsa.enabled()) {
      out.emplace_back(
          "linear-attention layers are modelled beside GQA or MLA full attention only (no sliding "
          "windows, no sparse attention)");
    }
  }
  if (!m.ffn_pattern.empty()) {
    if (m.ffn_pattern.find_first_not_of("DEN") != std::string::npos) {
      out.push_back("feed-forward pattern '" + m.ffn_pattern + "' may hold only D (dense), E (MoE) and N (none)");
    } else if (m.ffn_pattern.find('E') != std::string::npos && !m.moe.enabled()) {
      out.push_back("feed-forward pattern '" + m.ffn_pattern + "' has MoE layers (E) but the model has no experts");
    }
  }
  if (m.mtp_layers < 0) out.emplace_back("mtp_layers cannot be negative");
  if (m.vision) {
    for (auto& p : validate_vision(*m.vision)) out.push_back(p);
  }
  if (!is_kv_format(m.formats.kv_cache)) {
    out.push_back("KV-cache format " + std::string(format_name(m.formats.kv_cache)) +
                  " is not supported (bf16, fp8 or int8)");
  }
  return out;
}

}  // namespace servesim::models
