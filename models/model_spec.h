// Transformer architectures: the figures that set what one iteration costs and what fits in memory.
//
// Modelled: decoder-only dense transformers with grouped-query attention (MHA when kv_heads ==
// heads, MQA when kv_heads == 1), RMSNorm, rotary embeddings and a SwiGLU MLP (three matrices),
// as in the Llama family. Weights and KV cache are 16-bit (bf16/fp16).
// Not yet modelled (the models issue): MoE, MLA, sparse and sliding-window attention, quantized
// formats, vision encoders.
// Invariants (checked by validate_model): every count is positive, kv_heads divides heads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::models {

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;        // model width (d_model)
  int heads = 0;         // query heads
  int kv_heads = 0;      // key/value heads (GQA groups)
  int head_dim = 0;
  int intermediate = 0;  // MLP width (each of gate, up; down maps it back)
  int vocab = 0;
  int max_context = 0;   // max_position_embeddings
  bool tied_embeddings = false;
  int weight_bytes = 2;  // bytes per weight element (bf16)
  int kv_bytes = 2;      // bytes per KV-cache element (bf16)
  int activation_bytes = 2;
  std::string source;    // where the figures come from

  // Parameter counts (elements, not bytes).
  std::int64_t layer_params() const;
  std::int64_t embedding_params() const;  // input embedding; the LM head is as big unless tied
  std::int64_t total_params() const;
  // KV-cache bytes one token occupies across all layers of the whole model (all chips together).
  std::int64_t kv_bytes_per_token() const;
};

// Shipped presets, by lower-case name ("llama-3.1-70b").
std::optional<ModelSpec> model_preset(std::string_view name);
std::vector<std::string_view> model_preset_names();

// Structural problems of a spec as sentences (empty when valid); the loader attaches locations.
std::vector<std::string> validate_model(const ModelSpec& m);

}  // namespace servesim::models
