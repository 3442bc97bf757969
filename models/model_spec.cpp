#include "models/model_spec.h"

#include <array>

namespace servesim::models {

std::int64_t ModelSpec::layer_params() const {
  const std::int64_t h = hidden, hd = head_dim;
  const std::int64_t attn = h * (heads * hd)         // Q
                            + 2 * h * (kv_heads * hd)  // K, V
                            + (heads * hd) * h;        // O
  const std::int64_t mlp = 3 * h * std::int64_t{intermediate};  // gate, up, down
  const std::int64_t norms = 2 * h;
  return attn + mlp + norms;
}

std::int64_t ModelSpec::embedding_params() const { return std::int64_t{vocab} * hidden; }

std::int64_t ModelSpec::total_params() const {
  return layers * layer_params() + embedding_params() * (tied_embeddings ? 1 : 2) + hidden;
}

std::int64_t ModelSpec::kv_bytes_per_token() const {
  return std::int64_t{2} * kv_heads * head_dim * kv_bytes * layers;  // K and V
}

namespace {

ModelSpec make(std::string name, int layers, int hidden, int heads, int kv_heads, int head_dim,
               int intermediate, int vocab, int max_context, std::string source) {
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

const std::array<ModelSpec, 3>& presets() {
  // Figures from each model's Hugging Face config.json (hidden_size, num_hidden_layers,
  // num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
  // max_position_embeddings); head_dim = hidden_size / num_attention_heads.
  static const std::array<ModelSpec, 3> kPresets = {
      // 8.03e9 parameters: 32 x 218,112,000 per layer + 2 x 525,336,576 embedding/LM head.
      make("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, 131072,
           "meta-llama/Llama-3.1-8B config.json"),
      // 70.55e9 parameters.
      make("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, 131072,
           "meta-llama/Llama-3.1-70B config.json"),
      // 68.98e9 parameters; 4,096-token context.
      make("llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, 4096,
           "meta-llama/Llama-2-70b-hf config.json"),
  };
  return kPresets;
}

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
  if (m.heads > 0 && m.kv_heads > 0 && m.heads % m.kv_heads != 0) {
    out.push_back("kv_heads (" + std::to_string(m.kv_heads) + ") must divide heads (" +
                  std::to_string(m.heads) + ")");
  }
  if (m.kv_heads > m.heads) {
    out.push_back("kv_heads (" + std::to_string(m.kv_heads) + ") cannot exceed heads (" +
                  std::to_string(m.heads) + ")");
  }
  return out;
}

}  // namespace servesim::models
