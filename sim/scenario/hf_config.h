// Importing a model from its Hugging Face config.json.
//
// Supported model_type values and the keys read (each mapped onto models::ModelSpec):
//   llama, qwen2, qwen3          hidden_size, num_hidden_layers, num_attention_heads,
//                                num_key_value_heads, head_dim, intermediate_size, vocab_size,
//                                max_position_embeddings, tie_word_embeddings, attention_bias
//                                (qwen2: QKV biases always; qwen3: QK-norm always)
//   qwen3_moe                    + num_experts, num_experts_per_tok, moe_intermediate_size,
//                                decoder_sparse_step (1 only), mlp_only_layers (empty only)
//   deepseek_v3, kimi_k2         MLA (q_lora_rank, kv_lora_rank, qk_nope_head_dim,
//                                qk_rope_head_dim, v_head_dim), n_routed_experts,
//                                num_experts_per_tok, moe_intermediate_size, n_shared_experts,
//                                first_k_dense_replace, moe_layer_freq, num_nextn_predict_layers,
//                                topk_method, quantization_config (fp8, block-scaled or not)
//   glm4_moe                     GQA keys + head_dim, use_qk_norm, the DeepSeek MoE keys
//   glm_moe_dsa                  the DeepSeek keys + index_n_heads, index_head_dim, index_topk
//   gpt_oss                      GQA keys, num_local_experts, num_experts_per_tok,
//                                intermediate_size (expert width), sliding_window, layer_types,
//                                quantization_config (mxfp4 experts)
//   qwen2_5_vl                   the Qwen2 keys (top level or text_config) + vision_config
// Unknown model_type values, missing keys and values of the wrong type are problems with the
// file, line, column and key path ("vision_config.depth"); every problem is collected. Keys the
// simulator does not need are ignored. Positions come from a SAX pass over the text (the key's
// closing quote), values from nlohmann_json's DOM.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "models/model_spec.h"

namespace servesim::scenario {

// Problems are appended to `problems`; nullopt when there was any.
std::optional<models::ModelSpec> parse_hf_config(std::string_view json, const std::string& file,
                                                 std::vector<Diagnostic>& problems);
std::optional<models::ModelSpec> read_hf_config(const std::string& path, std::vector<Diagnostic>& problems);
std::vector<std::string_view> hf_model_types();

}  // namespace servesim::scenario
