// Transformer architectures as data: the figures that set what one iteration costs and what fits
// in memory.
//
// Modelled: decoder-only transformers with RMSNorm, rotary embeddings, SwiGLU MLPs (three
// matrices) or plain ones (two: squared ReLU) and untied or tied embeddings, with
//   attention   GQA (MHA when kv_heads == heads, MQA when kv_heads == 1), or MLA (DeepSeek-V2/V3:
//               queries through a q_lora_rank bottleneck, keys and values from a kv_lora_rank
//               latent that is what the KV cache holds, plus a shared qk_rope_dim rotary key);
//   DSA         DeepSeek sparse attention on top of MLA (DeepSeek-V3.2, GLM-5): a lightweight
//               indexer (index_heads x index_dim) scores every cached token and the attention
//               reads only the top_k best;
//   compressed  DeepSeek-V4's attention (CompressSpec): MQA over entries that pool 4 tokens (CSA:
//               an indexer selects the top_k) or 128 (HCA), beside a 128-token window on every
//               layer; a grouped low-rank output projection; mHC residual streams;
//   windows     sliding-window layers (gpt-oss alternates 128-token windows with full layers),
//               given as a repeating pattern of 'S' (sliding) and 'F' (full) over the layers;
//   linear      Gated DeltaNet linear-attention layers (Qwen3-Next, Qwen3.5: Yang, Kautz &
//               Hatamizadeh, "Gated Delta Networks", ICLR 2025) or Mamba-2 state-space layers
//               (Nemotron-H) interleaved with full-attention ones by a repeating pattern of 'L'
//               (linear) and 'F' (full): each value head keeps a key_dim x value_dim recurrent
//               state (and a short causal-convolution state) per sequence instead of a KV cache
//               that grows with the context;
//   hybrids     layers without a feed-forward block (ffn_pattern: Nemotron-H's mixer blocks
//               without an MLP after them);
//   MoE         routed experts (top_k of `experts`, each expert_intermediate wide), shared experts,
//               dense leading layers (first_dense_layers) and a layer frequency; latent MoE
//               (experts in a projected width, Nemotron-3 Super / Ultra);
//   MTP         multi-token-prediction layers (DeepSeek-V3, GLM): one extra decoder layer each
//               plus a 2h -> h projection, sharing the embedding and LM head;
//   vision      an optional ViT encoder (models/vision.h);
//   formats     dense and expert weights, KV cache (models/formats.h).
// Biases, QK-norms and attention sinks are counted in the parameters; their cost is ignored.
//   output gate a sigmoid gate on the attention output from a second query-width projection
//               (Qwen3.5's attn_output_gate).
// Ignored: learned positional embeddings, encoder-decoder models, linear-attention layers other
// than Gated DeltaNet and Mamba-2, partial rotary embeddings and attention without any (Nemotron-H:
// the rotary pass is costed over the whole head anyway), Mamba-2's grouped RMSNorm groups (costed
// as one norm over the heads).
// Invariants (checked by validate_model): every count positive where the architecture needs it,
// kv_heads divides heads, MoE top_k <= experts, MLA/DSA figures complete, a window pattern of
// 'S'/'F' only, a linear-attention pattern of 'L'/'F' only on a GQA model without windows, a
// feed-forward pattern of 'D'/'E'/'N' only ('E' only on a MoE model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/formats.h"
#include "models/vision.h"

namespace servesim::models {

enum class AttentionKind : std::uint8_t { kGqa, kMla };

struct MlaSpec {
  int q_lora_rank = 0;   // 0: queries projected straight from the hidden state
  int kv_lora_rank = 0;  // the latent the KV cache stores
  int qk_nope_dim = 0;   // per-head query/key dims without rotary embedding
  int qk_rope_dim = 0;   // rotary part, one key shared by all heads (cached)
  int v_dim = 0;         // per-head value dim
};

struct DsaSpec {
  int index_heads = 0;
  int index_dim = 0;
  int top_k = 0;  // tokens each query attends to; 0 = no sparse attention
  // Which layers run the indexer, repeating over the layers: 'F' computes it (and holds its weights
  // and index keys), 'S' attends over the top-k of the last 'F' layer before it (GLM-5.2
  // config.json indexer_types full / shared), 'D' attends densely over the whole context with no
  // indexer (MiniMax-M3's first three layers: sparse_attention_freq 0). Empty: every layer 'F'.
  std::string pattern;
  // Tokens per selected block. 1: DSA, the query attends to the top_k best tokens. Above 1, block
  // sparse attention (MiniMax Sparse Attention, MiniMax-M3's sparse_block_size 128) on GQA: the
  // query attends to the tokens of the top_k / block best blocks, a block's score the best of its
  // tokens' (sparse_score_type max). Either way the indexer scores every cached token against one
  // index key: DSA's in fp8 with a scale, block sparse attention's in bf16 (2 x index_dim bytes,
  // what the measured MSA modules' growth with sequences x context reads: about 38 ps per cached
  // token and layer on B200 under SGLang and vLLM, docs/notes/2026-12-04-validate-coverage.md);
  // its projections q (h -> index_heads x index_dim) and k (h -> index_dim), no weights
  // projection.
  int block = 1;
  bool enabled() const { return top_k > 0; }
  bool block_scored() const { return block > 1; }
};

// DeepSeek-V4's compressed attention (DeepSeek-V4 config.json: sliding_window, compress_ratios,
// q_lora_rank, o_groups, o_lora_rank, hc_mult; AIConfigurator's deepseek_v4.py and its roofline,
// dsv4.rs): an MQA of `heads` query heads over one cached vector of head_dim per entry that is key
// and value both, whose queries come through a q_lora_rank bottleneck. Every layer attends to the
// last `window` tokens uncompressed, and beside them to compressed entries, each pooling `ratio`
// consecutive tokens (a learned gated sum: the compressor, h -> 2 head_dim per token, twice over
// overlapping windows at the sparse ratio):
//   CSA layers (DsaSpec::pattern 'F')  entries of sparse_ratio (4) tokens, of which the indexer
//                                      (the DsaSpec's heads and dim, over the compressed entries
//                                      with keys in fp4) selects the top_k best;
//   HCA layers ('D')                   entries of dense_ratio (128) tokens, all attended to.
// The layers with no compressed entries (compress ratio 0: DeepSeek-V4-Flash's first two) are
// taken as HCA layers, as AIConfigurator's model takes them (their entries add context / 128 keys).
// The output projection is grouped and low-rank: the heads in o_groups groups, each group's
// outputs -> o_lora_rank, then o_groups x o_lora_rank -> h. Manifold-constrained hyper-connections
// (mHC, `streams` = hc_mult residual streams) around attention and the feed-forward block: each
// mixes the streams into the block's input (pre) and the block's output back into them (post).
struct CompressSpec {
  int window = 0;         // tokens every layer attends to uncompressed; 0 = no compressed attention
  int sparse_ratio = 4;   // tokens per entry of the CSA layers
  int dense_ratio = 128;  // tokens per entry of the HCA layers
  int q_lora_rank = 0;
  int o_groups = 1;
  int o_lora_rank = 0;
  int streams = 1;    // mHC residual streams (hc_mult); 1 = a plain residual
  int rope_dim = 64;  // rotary dims of each query head and entry (qk_rope_head_dim)
  bool enabled() const { return window > 0; }
  // Output groups a chip holds under tensor parallelism tp (wo_a's batch, wo_b's o_lora blocks).
  int groups_per_chip(int tp) const { return o_groups / tp > 1 ? o_groups / tp : 1; }
};

struct MoeSpec {
  int experts = 0;              // routed experts; 0 = dense model
  int top_k = 0;                // experts per token
  int expert_intermediate = 0;  // width of one routed expert
  int shared_experts = 0;       // always-active experts, fused into one MLP of shared_intermediate
  int shared_intermediate = 0;  // total width of the shared experts (n_shared x width)
  int first_dense_layers = 0;   // leading layers with a dense MLP
  int layer_frequency = 1;      // after those, layer l is MoE when l % layer_frequency == 0
  bool expert_bias = false;     // biases in the expert GEMMs (gpt-oss)
  bool router_bias = false;     // a per-expert routing bias (DeepSeek e_score_correction_bias)
  // Latent MoE (Nemotron-3 Super and Ultra, moe_latent_size): the routed experts run in this
  // width; fc1_latent_proj (hidden -> latent) before the dispatch and fc2_latent_proj (latent ->
  // hidden) after the combine, so the all-to-all moves latent rows. 0: the model's width. The
  // router and the shared experts stay on the hidden state.
  int latent = 0;
  bool enabled() const { return experts > 0; }
  int expert_width(int hidden) const { return latent > 0 ? latent : hidden; }
};

struct WindowSpec {
  int window = 0;       // tokens a sliding-window layer attends to; 0 = none
  std::string pattern;  // repeating over the layers: 'S' sliding, 'F' full ("SF" = gpt-oss)
  // The sliding-window layers' own KV heads and head dim where they differ from the full layers'
  // (Gemma-4: 8 x 256 against 2 x 512; MiMo-V2-Flash: 8 against 4); 0 = the model's.
  int kv_heads = 0;
  int head_dim = 0;
  bool enabled() const { return window > 0; }
};

// Linear-attention mixers with a fixed recurrent state per sequence, of two kinds:
//   Gated DeltaNet (Qwen3-Next / Qwen3.5 config.json: linear_num_key_heads, linear_num_value_heads,
//     linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim, layer_types). The value
//     heads share the key heads in groups (value_heads / key_heads each).
//   Mamba-2 (Dao & Gu, "Transformers are SSMs", ICML 2024; Nemotron-H config.json): the same
//     fields with key_heads = n_groups (B and C are per group), key_dim = ssm_state_size,
//     value_heads = mamba_num_heads, value_dim = mamba_head_dim (x is per head), conv_kernel; the
//     state of a head is value_dim x ssm_state_size.
enum class LinearKind : std::uint8_t { kGatedDeltaNet, kMamba2, kKda };

struct LinearAttentionSpec {
  int key_heads = 0;
  int value_heads = 0;  // 0 = no linear-attention layers
  int key_dim = 0;
  int value_dim = 0;
  int conv_kernel = 0;  // causal depthwise convolution over q, k and v
  std::string pattern;  // repeating over the layers: 'L' linear, 'F' full ("LLLF" = Qwen3.5)
  int state_bytes = 4;  // bytes per recurrent-state element (mamba_ssm_dtype float32)
  LinearKind kind = LinearKind::kGatedDeltaNet;
  int chunk = 64;  // tokens per chunk of the chunked prefill (GDN: flash-linear-attention's 64; Mamba-2: chunk_size)
  bool enabled() const { return value_heads > 0; }
  // Projection outputs beside q, k, v and the gate, for hv value heads: GDN's beta and decay input
  // per head (2 hv), Mamba-2's dt (hv), KDA's beta per head and the forget gate's low-rank input
  // (hv + key_dim; its second stage, key_dim -> hv x key_dim, is forget_gate_columns).
  double head_columns(double hv) const {
    if (kind == LinearKind::kMamba2) return hv;
    if (kind == LinearKind::kKda) return hv + key_dim;
    return 2 * hv;
  }
  // KDA's (Kimi Delta Attention) per-channel forget gate: f_b, key_dim -> value heads x key_dim.
  double forget_gate_columns(double hv) const { return kind == LinearKind::kKda ? hv * key_dim : 0.0; }
  // q, k and v channels (what the convolution and its state span).
  std::int64_t conv_channels() const { return 2LL * key_heads * key_dim + std::int64_t{value_heads} * value_dim; }
};

struct ModelFormats {
  Format weights = Format::kBf16;  // attention, dense MLPs, shared experts
  Format experts = Format::kBf16;  // routed experts
  Format kv_cache = Format::kBf16;
  // A format the chip has no tensor-core rate for runs as a weight-only kernel (W8A16 / W4A16,
  // as Marlin does): weights stored and read at their width, dequantised in registers, math at
  // the bf16 rate plus the dequantisation work (the `dequantize` component), instead of being an
  // error.
  bool emulate = false;
  // Dense MLPs in a format of their own (ModelOpt mixed precision: nvidia/Gemma-4-31B-IT-NVFP4's
  // NVFP4 MLPs beside bf16 attention); none: `weights`.
  std::optional<Format> mlp;
};

struct LayerCounts {
  int layers = 0;
  int moe = 0;              // layers with a MoE block
  int no_ffn = 0;           // layers with a mixer only (ModelSpec::ffn_pattern 'N'); the rest have a dense MLP
  int window = 0;           // sliding-window attention layers
  int linear = 0;           // linear-attention layers (the rest attend over the full context)
  int indexer = 0;          // layers that run the DSA indexer (the other DSA layers reuse its top-k)
  int dense_attention = 0;  // DSA layers attending over the whole context (DsaSpec::pattern 'D')
  int dense() const { return layers - moe - no_ffn; }
  int full() const { return layers - window - linear; }
};

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;          // model width (d_model)
  int heads = 0;           // query heads
  int kv_heads = 0;        // key/value heads (GQA groups); MLA: equal to heads
  int head_dim = 0;        // GQA head dim (queries and keys)
  int value_head_dim = 0;  // GQA value head dim; 0 = head_dim (MiMo-V2-Flash: 192 / 128)
  // Full-attention layers project no V: V is the key projection's output (Gemma-4
  // attention_k_eq_v; the cache still holds K and V). Sliding-window layers project both.
  bool k_eq_v = false;
  int intermediate = 0;  // dense MLP width (each of gate, up; down maps it back)
  // SwiGLU MLPs (gate, up, down) or, false, a plain activation between up and down (Nemotron-H's
  // squared ReLU, mlp_hidden_act relu2): dense MLPs, routed and shared experts alike.
  bool gated_mlp = true;
  // Which feed-forward block each layer has, repeating over the layers: 'D' a dense MLP, 'E' a MoE
  // block, 'N' none (a mixer-only layer). Empty: the MoE spec's rule (first_dense_layers,
  // layer_frequency). Nemotron-H's blocks (hybrid_override_pattern) hold one mixer or one
  // feed-forward each; a layer here is a mixer block and the feed-forward block after it, if any.
  std::string ffn_pattern;
  int vocab = 0;
  int max_context = 0;  // max_position_embeddings
  bool tied_embeddings = false;
  AttentionKind attention = AttentionKind::kGqa;
  MlaSpec mla;
  DsaSpec dsa;
  CompressSpec compress;
  MoeSpec moe;
  WindowSpec window;
  LinearAttentionSpec linear;
  int mtp_layers = 0;
  bool qkv_bias = false;         // biases on Q, K, V (Qwen2, GLM-4.5, gpt-oss)
  bool o_bias = false;           // bias on the output projection (gpt-oss)
  bool qk_norm = false;          // RMSNorm on each query and key head (Qwen3, GLM-4.5)
  bool attention_sinks = false;  // one learned sink logit per head (gpt-oss)
  // A per-channel gate on the attention output: q_proj gives it too (Qwen3.5, GQA), or a gate
  // projection h -> heads x v_dim of its own (MLA: Kimi-K3's mla_use_output_gate).
  bool attention_output_gate = false;
  std::optional<VisionSpec> vision;
  ModelFormats formats;
  int activation_bytes = 2;  // the residual stream and attention inputs (bf16)
  std::string source;        // where the figures come from

  bool is_moe_layer(int layer) const;
  bool has_ffn(int layer) const;  // false: a mixer-only layer
  bool is_window_layer(int layer) const;
  bool is_linear_layer(int layer) const;
  bool is_indexer_layer(int layer) const;          // runs the DSA indexer (DsaSpec::pattern)
  bool is_dense_attention_layer(int layer) const;  // a DSA model's layer without sparse attention ('D')
  bool has_dense_attention_layers() const;         // any such layer
  int value_dim() const { return value_head_dim > 0 ? value_head_dim : head_dim; }
  // The caps of the batch's capped context sums (models::BatchShape): the sliding window or the
  // compressed attention's window, and the DSA top-k in tokens (CSA: top_k entries of
  // sparse_ratio tokens each). 0: none.
  int window_cap() const { return compress.enabled() ? compress.window : window.window; }
  std::int64_t topk_cap() const {
    return compress.enabled() ? std::int64_t{dsa.top_k} * compress.sparse_ratio : dsa.top_k;
  }
  // A dense-attention layer's KV per token against a full layer's: HCA entries pool dense_ratio
  // tokens where CSA's pool sparse_ratio; 1 otherwise (MiniMax-M3's dense layers cache every token).
  double dense_attention_kv_share() const {
    return compress.enabled() ? static_cast<double>(compress.sparse_ratio) / compress.dense_ratio : 1.0;
  }
  // Full layers of `n` in units of a full layer's KV per token: the dense-attention layers count
  // dense_attention_kv_share() each.
  double full_kv_layers(const LayerCounts& n) const {
    return n.full() - n.dense_attention + n.dense_attention * dense_attention_kv_share();
  }
  // Whether sliding-window layers attend with another shape than full ones (WindowSpec::kv_heads,
  // head_dim; k_eq_v), and that shape: the spec with the window layers' KV heads and head dim.
  bool window_shape_differs() const;
  ModelSpec window_layer_spec() const;
  // Counts over layers [first, first + n).
  LayerCounts count_layers(int first, int n) const;

  // Parameter counts (elements, not bytes).
  std::int64_t attention_params() const;         // per layer, norms of the attention block (and a DSA indexer) included
  std::int64_t indexer_params() const;           // one layer's DSA indexer (0 without)
  std::int64_t linear_attention_params() const;  // one linear-attention layer's mixer, norms included
  // The same with hk key and hv value heads (a chip's share under tensor parallelism: models/memory).
  double linear_mixer_elements(double hk, double hv) const;
  std::int64_t dense_mlp_params() const;
  std::int64_t expert_params() const;  // one routed expert
  std::int64_t shared_expert_params() const;
  std::int64_t router_params() const;
  std::int64_t latent_projection_params() const;  // a latent MoE layer's fc1 and fc2 (0 without)
  std::int64_t layer_params(int layer) const;     // attention + MLP or MoE + the two layer norms
  std::int64_t layer_params() const { return layer_params(layers - 1); }
  std::int64_t embedding_params() const;         // input embedding; the LM head is as big unless tied
  std::int64_t mtp_layer_params() const;         // one MTP layer, embedding and LM head shared
  std::int64_t total_params() const;             // without MTP layers and the vision encoder
  std::int64_t active_params_per_token() const;  // top_k experts instead of all

  // KV-cache bytes one token occupies per layer of each kind, all heads (before any split).
  // K and V, or the MLA latent + rotary key (full layers); compressed attention: a CSA layer's
  // entry (head_dim) per sparse_ratio tokens.
  double kv_bytes_per_token_layer() const;
  // DSA indexer keys (fp8 + an fp32 scale per 128); compressed attention: fp4 per CSA entry.
  double index_bytes_per_token_layer() const;
  // Compressed attention: what one sequence holds beside its entries in the layers `n` counts
  // (CSA: n.indexer, HCA: the rest): the window's last `window` tokens uncompressed (head_dim
  // each) and the compressors' fp32 running state (kv and score, ratio x head_dim each, twice over at the sparse ratio;
  // CSA layers also the indexer compressor's, ratio x 2 index_dim each), after AIConfigurator's
  // get_kvcache_bytes_per_sequence. 0 without compressed attention.
  double compressed_state_bytes(const LayerCounts& n) const;
  std::int64_t mhc_params() const;  // one layer's two hyper-connections (0 without mHC)
  // Across all layers of the whole model, window layers included as if they cached everything;
  // linear-attention layers keep a state per sequence instead (linear_state_bytes_per_layer).
  std::int64_t kv_bytes_per_token() const;
  // Recurrent state one sequence holds per linear-attention layer, all heads: the fp32 (state_bytes)
  // key_dim x value_dim matrix of every value head and the last conv_kernel - 1 inputs of the
  // convolution (activation bytes).
  double linear_state_bytes_per_layer() const;
  // What a disaggregated prefill hands to decode for a sequence of `tokens` cached tokens: their
  // KV (kv_bytes_per_token) and the recurrent state of every linear-attention layer.
  double kv_transfer_bytes(std::int64_t tokens) const;
  double weight_bytes_per_element() const { return bytes_per_element(formats.weights); }
  Format mlp_format() const { return formats.mlp.value_or(formats.weights); }
  double expert_bytes_per_element() const { return bytes_per_element(formats.experts); }
};

// ModelSpec::kv_transfer_bytes with its two terms read once: the same double per call, without
// walking the layers (the simulation asks it for every chunk and transfer).
struct KvTransferSize {
  explicit KvTransferSize(const ModelSpec& m)
      : per_token(static_cast<double>(m.kv_bytes_per_token())), states(m.kv_transfer_bytes(0)) {}
  double operator()(std::int64_t tokens) const { return static_cast<double>(tokens) * per_token + states; }
  double per_token;  // ModelSpec::kv_bytes_per_token
  double states;     // the linear-attention states (kv_transfer_bytes(0))
};

// Shipped presets, by lower-case name ("llama-3.1-70b").
std::optional<ModelSpec> model_preset(std::string_view name);
std::vector<std::string_view> model_preset_names();

// Structural problems of a spec as sentences (empty when valid); the loader attaches locations.
std::vector<std::string> validate_model(const ModelSpec& m);

}  // namespace servesim::models
