#include "sim/scenario/hf_config.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/input_file.h"
#include "core/units.h"

namespace servesim::scenario {
namespace {

using json = nlohmann::json;

// A character iterator that remembers how far the parser has read, so SAX callbacks know where
// they are (nlohmann_json 3.11 reports positions only for syntax errors).
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator() = default;
  TrackingIterator(const char* p, const char* begin, std::size_t* furthest)
      : p_(p), begin_(begin), furthest_(furthest) {}
  reference operator*() const {
    *furthest_ = std::max(*furthest_, static_cast<std::size_t>(p_ - begin_));
    return *p_;
  }
  TrackingIterator& operator++() {
    ++p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator t = *this;
    ++p_;
    return t;
  }
  bool operator==(const TrackingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_ = nullptr;
  const char* begin_ = nullptr;
  std::size_t* furthest_ = nullptr;
};

struct Position {
  int line = 1, column = 1;
};

class Positions {
 public:
  explicit Positions(std::string_view text) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') line_starts_.push_back(i + 1);
    }
  }
  Position at(std::size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1]) + 1};
  }

 private:
  std::vector<std::size_t> line_starts_;
};

// Records where each key (and each object) starts, by dotted path.
class KeyLocator : public nlohmann::json_sax<json> {
 public:
  KeyLocator(const std::size_t* furthest, const Positions* pos) : furthest_(furthest), pos_(pos) {}
  std::map<std::string, Position> keys;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    const std::string p = path();
    if (!keys.count(p)) keys[p] = here();
    stack_.push_back({false, "", 0});
    return true;
  }
  bool key(string_t& k) override {
    stack_.back().key = k;
    // The parser stands on the key's closing quote: report the opening one (keys without escapes).
    const std::size_t end = *furthest_;
    keys[path()] = pos_->at(end > k.size() ? end - k.size() - 1 : end);
    return true;
  }
  bool end_object() override { return pop(); }
  bool start_array(std::size_t) override {
    stack_.push_back({true, "", 0});
    return true;
  }
  bool end_array() override { return pop(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Level {
    bool array;
    std::string key;
    std::size_t index;
  };
  Position here() const { return pos_->at(*furthest_); }
  std::string path() const {
    std::string p;
    for (const Level& l : stack_) {
      if (l.array) {
        p += "[" + std::to_string(l.index) + "]";
      } else if (!l.key.empty()) {
        p += (p.empty() ? "" : ".") + l.key;
      }
    }
    return p;
  }
  bool value() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
    return true;
  }
  bool pop() {
    stack_.pop_back();
    return value();
  }
  const std::size_t* furthest_;
  const Positions* pos_;
  std::vector<Level> stack_;
};

// Typed reads from one JSON object, reporting problems at the key (or the object when missing).
class ConfigReader {
 public:
  ConfigReader(const json& root, const std::map<std::string, Position>& keys, std::string file,
               std::vector<Diagnostic>& problems)
      : root_(root), keys_(keys), file_(std::move(file)), problems_(problems) {}

  // `prefix` is the object the keys live in ("" = top level, "vision_config", "text_config").
  void set_prefix(std::string prefix) { prefix_ = std::move(prefix); }
  const std::string& prefix() const { return prefix_; }
  bool ok() const { return problems_.size() == before_; }
  void mark() { before_ = problems_.size(); }

  const json* find(const std::string& key) const {
    const json* obj = object();
    if (!obj) return nullptr;
    const auto it = obj->find(key);
    if (it == obj->end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  std::optional<int> integer(const std::string& key, const char* what, std::optional<int> fallback = std::nullopt,
                             int min = 1) {
    const json* v = find(key);
    if (!v) {
      if (!fallback) report_missing(key, what);
      return fallback;
    }
    if (!v->is_number_integer()) {
      report(key, "expected an integer (" + std::string(what) + "), got " + describe(*v));
      return std::nullopt;
    }
    const auto n = v->get<std::int64_t>();
    if (n < min || n > 100'000'000) {
      report(key, std::string(what) + " must be between " + std::to_string(min) + " and 100,000,000, got " +
                      std::to_string(n));
      return std::nullopt;
    }
    return static_cast<int>(n);
  }
  std::optional<bool> boolean(const std::string& key, bool fallback) {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) {
      report(key, "expected true or false, got " + describe(*v));
      return std::nullopt;
    }
    return v->get<bool>();
  }
  std::optional<std::string> text(const std::string& key) {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) {
      report(key, "expected a string, got " + describe(*v));
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  void report(const std::string& key, std::string message) {
    const std::string path = full(key);
    Position p{1, 1};
    if (auto it = keys_.find(path); it != keys_.end()) {
      p = it->second;
    } else if (auto obj = keys_.find(prefix_); obj != keys_.end()) {
      p = obj->second;
    }
    problems_.push_back(Diagnostic{file_, p.line, p.column, path, std::move(message)});
  }
  void report_missing(const std::string& key, const char* what) {
    report(key, "missing key '" + key + "' (" + what + ")");
  }

 private:
  const json* object() const {
    if (prefix_.empty()) return &root_;
    const auto it = root_.find(prefix_);
    return it != root_.end() && it->is_object() ? &*it : nullptr;
  }
  std::string full(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  static std::string describe(const json& v) {
    if (v.is_string()) return "the text '" + v.get<std::string>() + "'";
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number()) return "the number " + v.dump();
    if (v.is_array()) return "a list";
    if (v.is_object()) return "an object";
    return v.dump();
  }

  const json& root_;
  const std::map<std::string, Position>& keys_;
  std::string file_;
  std::vector<Diagnostic>& problems_;
  std::string prefix_;
  std::size_t before_ = 0;
};

const std::vector<std::string_view> kTypes = {"llama",       "mistral",    "qwen2",      "qwen3",       "qwen3_moe",
                                              "deepseek_v3", "kimi_k2",    "glm4_moe",   "glm_moe_dsa", "gpt_oss",
                                              "qwen2_5_vl",  "nemotron_h", "minimax_m3", "deepseek_v4"};

// Keys that change what the model computes, by feature. A config that has one (not null, not
// empty, not switched off) whose family's importer does not read it is refused with the reason,
// never imported without it: a Mistral config relabelled `llama` keeps its sliding window, a
// Mixtral one relabelled `llama` is refused instead of losing its experts.
struct FeatureKey {
  const char* key;
  const char* feature;
  std::vector<std::string_view> families;  // the model_types whose importer reads it
};
const std::vector<FeatureKey>& feature_keys() {
  static const std::vector<FeatureKey> keys = {
      {"sliding_window",
       "sliding-window attention",
       {"llama", "mistral", "gpt_oss", "qwen2", "qwen3", "qwen3_moe", "qwen2_5_vl", "deepseek_v4"}},
      {"layer_types", "per-layer attention kinds", {"gpt_oss"}},
      {"num_local_experts", "routed experts (MoE)", {"gpt_oss", "minimax_m3"}},
      {"num_experts", "routed experts (MoE)", {"qwen3_moe"}},
      {"n_routed_experts",
       "routed experts (MoE)",
       {"deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa", "nemotron_h", "deepseek_v4"}},
      {"moe_latent_size", "latent MoE (experts in a projected width)", {"nemotron_h"}},
      {"q_lora_rank", "a query latent (MLA, DeepSeek-V4)", {"deepseek_v3", "kimi_k2", "glm_moe_dsa", "deepseek_v4"}},
      {"kv_lora_rank", "multi-head latent attention (MLA)", {"deepseek_v3", "kimi_k2", "glm_moe_dsa"}},
      {"index_n_heads", "sparse attention's indexer (DSA)", {"glm_moe_dsa", "deepseek_v4"}},
      {"compress_ratios", "compressed attention (DeepSeek-V4 CSA / HCA)", {"deepseek_v4"}},
      {"hc_mult", "hyper-connections (mHC)", {"deepseek_v4"}},
      {"indexer_types", "layers that share another layer's sparse-attention indexer", {"glm_moe_dsa"}},
      {"num_nextn_predict_layers",
       "multi-token prediction layers (MTP)",
       {"deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa", "nemotron_h", "minimax_m3", "deepseek_v4"}},
      {"sparse_attention_config", "block sparse attention (MiniMax Sparse Attention)", {"minimax_m3"}},
      {"vision_config", "a vision encoder", {"qwen2_5_vl"}},
  };
  return keys;
}

// A key that is present and says something: not null, not false, not 0, not an empty list or object.
bool says_something(const json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0;
  if (v->is_array() || v->is_object()) return !v->empty();
  return true;
}

// A per-layer list of kinds (names, or 0 / 1 flags) as one letter per layer (`letters` maps each
// kind); empty when it is not a list of `layers` known kinds.
std::string layer_letters(const json& types, const std::map<json, char>& letters, int layers) {
  if (!types.is_array() || static_cast<int>(types.size()) != layers) return {};
  std::string pattern;
  for (const auto& e : types) {
    const auto it = e.is_string() || e.is_number_integer() ? letters.find(e) : letters.end();
    if (it == letters.end()) return {};
    pattern += it->second;
  }
  return pattern;
}

// The shortest unit that repeats to give `pattern` (the patterns of ModelSpec repeat over the layers).
std::string repeating_unit(const std::string& pattern) {
  for (std::size_t p = 1; p < pattern.size(); ++p) {
    bool periodic = pattern.size() % p == 0;
    for (std::size_t i = p; periodic && i < pattern.size(); ++i) periodic = pattern[i] == pattern[i - p];
    if (periodic) return pattern.substr(0, p);
  }
  return pattern;
}

// The GQA keys every supported family shares (num_hidden_layers unless `layers` is false: Nemotron-H
// counts its layers from the block pattern).
void read_gqa(ConfigReader& r, models::ModelSpec& m, bool layers = true) {
  auto take = [](std::optional<int> v, int& out) {
    if (v) out = *v;
  };
  take(r.integer("hidden_size", "the model width"), m.hidden);
  if (layers) take(r.integer("num_hidden_layers", "the decoder layers"), m.layers);
  take(r.integer("num_attention_heads", "the query heads"), m.heads);
  take(r.integer("num_key_value_heads", "the KV heads", m.heads > 0 ? std::optional<int>(m.heads) : std::nullopt),
       m.kv_heads);
  // head_dim defaults to hidden / heads; when those were reported already, do not report it too.
  const std::optional<int> derived = m.hidden > 0 && m.heads > 0 ? std::optional<int>(m.hidden / m.heads)
                                     : r.has("hidden_size") && r.has("num_attention_heads") ? std::optional<int>(1)
                                                                                            : std::nullopt;
  take(r.integer("head_dim", "the per-head width", derived), m.head_dim);
  take(r.integer("vocab_size", "the vocabulary"), m.vocab);
  take(r.integer("max_position_embeddings", "the context length"), m.max_context);
  if (auto t = r.boolean("tie_word_embeddings", false)) m.tied_embeddings = *t;
}

void read_dense_width(ConfigReader& r, models::ModelSpec& m) {
  if (auto v = r.integer("intermediate_size", "the dense MLP width")) m.intermediate = *v;
}

void read_quantization(ConfigReader& r, models::ModelSpec& m) {
  const json* q = r.find("quantization_config");
  if (!q || !q->is_object()) return;
  const auto method = q->find("quant_method");
  if (method == q->end() || !method->is_string()) return;
  const std::string name = method->get<std::string>();
  if (name == "fp8") {
    const auto block = q->find("weight_block_size");
    const models::Format f = block != q->end() && block->is_array() ? models::Format::kFp8Block : models::Format::kFp8;
    m.formats.weights = m.formats.experts = f;
  } else if (name == "mxfp4") {
    m.formats.experts = models::Format::kMxfp4;  // gpt-oss: experts only (modules_to_not_convert)
  } else {
    r.report("quantization_config.quant_method",
             "quantization '" + name + "' is not read from config.json; set model.formats instead");
  }
}

// DeepSeek-style MoE keys (deepseek_v3, kimi_k2, glm4_moe, glm_moe_dsa).
void read_deepseek_moe(ConfigReader& r, models::ModelSpec& m, bool router_bias) {
  auto take = [](std::optional<int> v, int& out) {
    if (v) out = *v;
  };
  take(r.integer("n_routed_experts", "the routed experts"), m.moe.experts);
  take(r.integer("num_experts_per_tok", "experts per token"), m.moe.top_k);
  take(r.integer("moe_intermediate_size", "the expert width"), m.moe.expert_intermediate);
  take(r.integer("n_shared_experts", "shared experts", 0, 0), m.moe.shared_experts);
  take(r.integer("first_k_dense_replace", "dense leading layers", 0, 0), m.moe.first_dense_layers);
  take(r.integer("moe_layer_freq", "the MoE layer frequency", 1), m.moe.layer_frequency);
  take(r.integer("num_nextn_predict_layers", "MTP layers", 0, 0), m.mtp_layers);
  m.moe.shared_intermediate = m.moe.shared_experts * m.moe.expert_intermediate;
  // noaux_tc routing carries a per-expert score-correction bias.
  const auto method = r.text("topk_method");
  m.moe.router_bias = method ? *method == "noaux_tc" : router_bias;
}

void read_mla(ConfigReader& r, models::ModelSpec& m) {
  m.attention = models::AttentionKind::kMla;
  auto take = [](std::optional<int> v, int& out) {
    if (v) out = *v;
  };
  take(r.integer("q_lora_rank", "the query latent (null: none)", 0, 0), m.mla.q_lora_rank);
  take(r.integer("kv_lora_rank", "the KV latent"), m.mla.kv_lora_rank);
  take(r.integer("qk_nope_head_dim", "the non-rotary query/key dims"), m.mla.qk_nope_dim);
  take(r.integer("qk_rope_head_dim", "the rotary query/key dims"), m.mla.qk_rope_dim);
  take(r.integer("v_head_dim", "the value dims"), m.mla.v_dim);
  m.head_dim = m.mla.qk_nope_dim + m.mla.qk_rope_dim;
  m.kv_heads = m.heads;
}

// MiniMax-M3 (model_type minimax_m3): GQA with per-head QK-norm; dense MLPs of
// dense_intermediate_size where moe_layer_freq is 0 (the leading layers), routed experts of
// moe_intermediate_size with a routing bias (use_routing_bias) and shared experts of
// shared_intermediate_size; MiniMax Sparse Attention from sparse_attention_config: the top
// sparse_topk_blocks blocks of sparse_block_size tokens, scored by sparse_num_index_heads heads of
// sparse_index_dim, on the layers whose sparse_attention_freq is 1 (the others attend densely).
void read_minimax_m3(ConfigReader& r, models::ModelSpec& m) {
  auto take = [](std::optional<int> v, int& out) {
    if (v) out = *v;
  };
  read_gqa(r, m);
  take(r.integer("dense_intermediate_size", "the dense MLP width"), m.intermediate);
  take(r.integer("num_local_experts", "the routed experts"), m.moe.experts);
  take(r.integer("num_experts_per_tok", "experts per token"), m.moe.top_k);
  take(r.integer("moe_intermediate_size", "the expert width"), m.moe.expert_intermediate);
  take(r.integer("n_shared_experts", "shared experts", 0, 0), m.moe.shared_experts);
  int shared_width = 0;
  take(r.integer("shared_intermediate_size", "the shared-expert width", 0, 0), shared_width);
  m.moe.shared_intermediate = m.moe.shared_experts * shared_width;
  if (auto bias = r.boolean("use_routing_bias", false)) m.moe.router_bias = *bias;
  if (auto norm = r.boolean("use_qk_norm", false)) m.qk_norm = *norm;
  if (auto gate = r.boolean("attention_output_gate", false); gate && *gate) {
    r.report("attention_output_gate",
             "MiniMax-M3's attention output gate is not modelled (the published model has none)");
  }
  take(r.integer("num_nextn_predict_layers", "MTP layers", 0, 0), m.mtp_layers);
  // moe_layer_freq: dense (0) leading layers, then MoE (1) on every layer.
  if (const json* freq = r.find("moe_layer_freq")) {
    const std::string moe = m.layers > 0 ? layer_letters(*freq, {{0, 'D'}, {1, 'E'}}, m.layers) : std::string();
    const std::size_t first = moe.find('E');
    if (moe.empty() || first == std::string::npos || moe.find('D', first) != std::string::npos) {
      r.report("moe_layer_freq", "expected 0 (dense) on the leading layers and 1 (MoE) on the rest, one per layer");
    } else {
      m.moe.first_dense_layers = static_cast<int>(first);
    }
  }
  const json* sparse = r.find("sparse_attention_config");
  if (!sparse || !sparse->is_object() || !sparse->value("use_sparse_attention", false)) return;
  r.set_prefix("sparse_attention_config");
  int blocks = 0;
  take(r.integer("sparse_num_index_heads", "the indexer heads"), m.dsa.index_heads);
  take(r.integer("sparse_index_dim", "the indexer head dim"), m.dsa.index_dim);
  take(r.integer("sparse_topk_blocks", "the blocks each query attends to"), blocks);
  take(r.integer("sparse_block_size", "tokens per block"), m.dsa.block);
  m.dsa.top_k = blocks * m.dsa.block;
  if (const json* freq = r.find("sparse_attention_freq")) {
    const std::string pattern = m.layers > 0 ? layer_letters(*freq, {{0, 'D'}, {1, 'F'}}, m.layers) : std::string();
    if (pattern.empty()) {
      r.report("sparse_attention_freq", "expected 0 (dense attention) or 1 (sparse) per layer");
    } else if (pattern.find('D') != std::string::npos) {
      m.dsa.pattern = repeating_unit(pattern);
    }
  }
  r.set_prefix("");
}

// DeepSeek-V4 (model_type deepseek_v4; models::CompressSpec): MQA over one head_dim entry
// (num_key_value_heads 1) with queries through q_lora_rank, the grouped low-rank output (o_groups,
// o_lora_rank), a sliding_window on every layer and compressed entries by compress_ratios (one per
// layer, then the MTP layers'): the smaller nonzero ratio marks the CSA layers (an indexer of
// index_n_heads x index_head_dim selecting index_topk entries), the larger the HCA layers, 0 the
// window-only layers (taken as HCA, as AIConfigurator's deepseek_v4.py takes them); DeepSeek's MoE
// keys, every layer MoE; hc_mult residual streams (mHC); an attention sink per head. Formats: the
// quantization_config's for the weights, fp4 routed experts where expert_dtype says so (a ue8m0
// scale per 32: MXFP4), and the KV cache in fp8 (AIConfigurator's default for the family; the
// config does not say).
void read_deepseek_v4(ConfigReader& r, models::ModelSpec& m) {
  auto take = [](std::optional<int> v, int& out) {
    if (v) out = *v;
  };
  read_gqa(r, m);
  read_deepseek_moe(r, m, true);
  m.intermediate = m.moe.expert_intermediate;  // no dense MLP: every layer MoE
  models::CompressSpec& c = m.compress;
  take(r.integer("sliding_window", "the window every layer attends to"), c.window);
  take(r.integer("q_lora_rank", "the query latent"), c.q_lora_rank);
  take(r.integer("o_groups", "the output projection's groups"), c.o_groups);
  take(r.integer("o_lora_rank", "the output projection's rank"), c.o_lora_rank);
  take(r.integer("hc_mult", "the residual streams (mHC)", 1), c.streams);
  take(r.integer("qk_rope_head_dim", "the rotary dims"), c.rope_dim);
  take(r.integer("index_n_heads", "indexer heads"), m.dsa.index_heads);
  take(r.integer("index_head_dim", "indexer head dim"), m.dsa.index_dim);
  take(r.integer("index_topk", "entries each query selects"), m.dsa.top_k);
  m.attention_sinks = true;
  if (const json* ratios = r.find("compress_ratios")) {
    std::vector<int> per_layer;
    if (ratios->is_array() && m.layers > 0 && static_cast<int>(ratios->size()) >= m.layers) {
      for (int l = 0; l < m.layers; ++l) {
        const json& e = (*ratios)[static_cast<std::size_t>(l)];
        if (!e.is_number_integer() || e.get<int>() < 0) break;
        per_layer.push_back(e.get<int>());
      }
    }
    std::vector<int> kinds;
    for (int v : per_layer) {
      if (v > 0 && std::find(kinds.begin(), kinds.end(), v) == kinds.end()) kinds.push_back(v);
    }
    if (static_cast<int>(per_layer.size()) != m.layers || kinds.size() != 2) {
      r.report("compress_ratios",
               "expected one ratio per layer (and per MTP layer): 0 (window only) and two compressions, the sparse "
               "(CSA) and the dense (HCA) one");
    } else {
      c.sparse_ratio = std::min(kinds[0], kinds[1]);
      c.dense_ratio = std::max(kinds[0], kinds[1]);
      std::string pattern;
      for (int v : per_layer) pattern += v == c.sparse_ratio ? 'F' : 'D';
      m.dsa.pattern = repeating_unit(pattern);
    }
  } else {
    r.report_missing("compress_ratios", "the per-layer compression");
  }
  read_quantization(r, m);
  if (auto dtype = r.text("expert_dtype")) {
    if (*dtype == "fp4") {
      m.formats.experts = models::Format::kMxfp4;
    } else if (*dtype != "fp8" && *dtype != "bf16") {
      r.report("expert_dtype", "expert_dtype '" + *dtype + "' is not read (fp4, fp8 or bf16)");
    }
  }
  m.formats.kv_cache = models::Format::kFp8;
}

void read_vision(ConfigReader& r, models::ModelSpec& m) {
  if (!r.has("vision_config")) {
    r.report_missing("vision_config", "the vision encoder");
    return;
  }
  const std::string saved = r.prefix();
  r.set_prefix("vision_config");
  models::VisionSpec v;
  auto take = [](std::optional<int> x, int& out) {
    if (x) out = *x;
  };
  take(r.integer("depth", "vision blocks"), v.depth);
  take(r.integer("hidden_size", "the vision width"), v.hidden);
  take(r.integer("num_heads", "vision heads"), v.heads);
  take(r.integer("intermediate_size", "the vision MLP width"), v.intermediate);
  take(r.integer("patch_size", "pixels per patch"), v.patch);
  take(r.integer("spatial_merge_size", "patches merged per token side", 2), v.spatial_merge);
  take(r.integer("temporal_patch_size", "frames per temporal patch", 2), v.temporal_patch);
  take(r.integer("in_chans", "image channels", 3), v.in_channels);
  take(r.integer("window_size", "the attention window in pixels", 0, 0), v.window);
  take(r.integer("out_hidden_size", "the language model width"), v.out_hidden);
  if (const json* f = r.find("fullatt_block_indexes")) {
    if (f->is_array()) {
      for (const auto& i : *f) {
        if (i.is_number_integer()) v.full_attention_layers.push_back(i.get<int>());
      }
    } else {
      r.report("fullatt_block_indexes", "expected a list of block indexes");
    }
  }
  m.vision = v;
  r.set_prefix(saved);
}

// The sliding window of the llama family. Mistral (and a Mistral config relabelled llama) slides
// every layer over `sliding_window` tokens (null: none). Qwen configs carry a window that
// `use_sliding_window` switches on, for the layers from `max_window_layers` on in the
// transformers implementation; switched on, it is refused (that per-layer split is not modelled),
// off it is ignored as the engines ignore it.
void read_window(ConfigReader& r, models::ModelSpec& m, const std::string& t) {
  const json* w = r.find("sliding_window");
  if (!says_something(w)) return;
  if (t == "qwen2" || t == "qwen3" || t == "qwen3_moe" || t == "qwen2_5_vl") {
    const json* use = r.find("use_sliding_window");
    if (says_something(use)) {
      r.report("use_sliding_window",
               "use_sliding_window: true (a sliding window on the layers from max_window_layers "
               "on) is not modelled; import the model with it off, or give model.sliding_window "
               "in the scenario");
    }
    return;
  }
  if (auto v = r.integer("sliding_window", "the sliding window", 0, 0)) m.window.window = *v;
  m.window.pattern.clear();  // every layer slides
}

// Nemotron-H (nemotron_h): blocks of one mixer ('M' Mamba-2, '*' attention) or one feed-forward
// block ('-' MLP, 'E' MoE), from hybrid_override_pattern or layers_block_type; a layer of the
// model is a mixer and the feed-forward block after it, if any (models::ModelSpec::ffn_pattern).
// Mamba-2 reads n_groups, ssm_state_size, mamba_num_heads, mamba_head_dim, conv_kernel,
// chunk_size and mamba_ssm_cache_dtype (float32 when absent); MLPs and experts are squared ReLU
// (mlp_hidden_act relu2; anything else is refused); MoE as DeepSeek's keys with a routing bias,
// moe_shared_expert_intermediate_size and moe_latent_size (a latent MoE).
void read_nemotron_h(ConfigReader& r, models::ModelSpec& m) {
  read_gqa(r, m, false);  // num_hidden_layers counts blocks (absent in layers_block_type configs)
  if (r.has("attention_head_dim")) {
    if (auto v = r.integer("attention_head_dim", "the per-head width")) m.head_dim = *v;
  }
  if (r.has("intermediate_size")) read_dense_width(r, m);
  std::string blocks;
  const char* key = r.has("hybrid_override_pattern") ? "hybrid_override_pattern" : "layers_block_type";
  if (const json* p = r.find(key); p && p->is_string()) {
    blocks = p->get<std::string>();
  } else if (p && p->is_array()) {
    for (const auto& e : *p) {
      const std::string b = e.is_string() ? e.get<std::string>() : "";
      blocks += b == "mamba" ? 'M' : b == "attention" ? '*' : b == "mlp" ? '-' : b == "moe" ? 'E' : '?';
    }
  } else {
    r.report_missing("hybrid_override_pattern", "the block pattern (or layers_block_type)");
    return;
  }
  std::string mixers, ffn;
  for (const char b : blocks) {
    if (b == 'M' || b == '*') {
      mixers += b == 'M' ? 'L' : 'F';
      ffn += 'N';
    } else if ((b == '-' || b == 'E') && !ffn.empty() && ffn.back() == 'N') {
      ffn.back() = b == 'E' ? 'E' : 'D';
    } else {
      r.report(key, std::string(
                        "expected mixer blocks (M, *) each followed by at most one feed-forward block (-, E), got '") +
                        blocks + "'");
      return;
    }
  }
  m.layers = static_cast<int>(mixers.size());
  m.ffn_pattern = ffn;
  m.gated_mlp = false;
  if (const auto act = r.text("mlp_hidden_act"); act && *act != "relu2") {
    r.report("mlp_hidden_act", "mlp_hidden_act '" + *act + "' is not modelled (relu2: squared ReLU)");
  }
  auto take = [](std::optional<int> v, int& out) {
    if (v) out = *v;
  };
  models::LinearAttentionSpec& l = m.linear;
  l.kind = models::LinearKind::kMamba2;
  l.pattern = mixers;
  take(r.integer("n_groups", "the Mamba-2 groups"), l.key_heads);
  take(r.integer("ssm_state_size", "the Mamba-2 state size"), l.key_dim);
  take(r.integer("mamba_num_heads", "the Mamba-2 heads"), l.value_heads);
  take(r.integer("mamba_head_dim", "the Mamba-2 head dim"), l.value_dim);
  take(r.integer("conv_kernel", "the convolution taps"), l.conv_kernel);
  take(r.integer("chunk_size", "the SSD chunk"), l.chunk);
  if (const auto dtype = r.text("mamba_ssm_cache_dtype")) {
    if (*dtype == "float32") {
      l.state_bytes = 4;
    } else if (*dtype == "bfloat16" || *dtype == "float16") {
      l.state_bytes = 2;
    } else {
      r.report("mamba_ssm_cache_dtype", "expected float32, bfloat16 or float16, got '" + *dtype + "'");
    }
  }
  if (blocks.find('E') != std::string::npos) {
    take(r.integer("n_routed_experts", "the routed experts"), m.moe.experts);
    take(r.integer("num_experts_per_tok", "experts per token"), m.moe.top_k);
    take(r.integer("moe_intermediate_size", "the expert width"), m.moe.expert_intermediate);
    take(r.integer("n_shared_experts", "shared experts", 0, 0), m.moe.shared_experts);
    take(r.integer("moe_shared_expert_intermediate_size", "the shared-expert width", 0, 0), m.moe.shared_intermediate);
    take(r.integer("moe_latent_size", "the latent MoE width (null: none)", 0, 0), m.moe.latent);
    m.moe.router_bias = true;  // e_score_correction_bias
  }
  // MTP (Nemotron-3 Super, Ultra: an attention + MoE block, mtp_hybrid_override_pattern) is costed
  // as the last layer, as DeepSeek's (models::ModelSpec::mtp_layer_params).
  take(r.integer("num_nextn_predict_layers", "MTP layers", 0, 0), m.mtp_layers);
}

// Refuses a config whose architecture-changing keys its family's importer does not read.
void refuse_unread_features(ConfigReader& r, const std::string& t) {
  for (const FeatureKey& f : feature_keys()) {
    if (std::find(f.families.begin(), f.families.end(), t) != f.families.end()) continue;
    if (!says_something(r.find(f.key))) continue;
    std::string readers;
    for (auto fam : f.families) readers += (readers.empty() ? "" : ", ") + std::string(fam);
    r.report(f.key, std::string(f.key) + " describes " + f.feature + ", which the " + t +
                        " importer does not read: the model would be imported without it. Use the model_type of "
                        "its family (" +
                        readers + ") or give the model's figures in the scenario");
  }
}

}  // namespace

std::vector<std::string_view> hf_model_types() { return kTypes; }

std::optional<models::ModelSpec> parse_hf_config(std::string_view text, const std::string& file,
                                                 std::vector<Diagnostic>& problems) {
  const std::size_t before = problems.size();
  const Positions pos(text);
  json root;
  if (const auto deep = json_too_deep_at(text)) {
    const Position p = pos.at(*deep);
    problems.push_back(
        Diagnostic{file, p.line, p.column, "",
                   "the JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels (limits: README.md)"});
    return std::nullopt;
  }
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    const Position p = pos.at(e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    if (const auto colon = what.rfind(": "); colon != std::string::npos) what = what.substr(colon + 2);
    problems.push_back(Diagnostic{file, p.line, p.column, "", "not valid JSON: " + what});
    return std::nullopt;
  } catch (const json::exception& e) {
    // out_of_range for a number beyond a double (1E999): nlohmann records no position, but its
    // message quotes the literal ("number overflow parsing '1E999'"), so the first match places it.
    const std::string what = e.what();
    const auto open = what.find('\'');
    const auto close = open == std::string::npos ? open : what.find('\'', open + 1);
    std::size_t at = std::string_view::npos;
    if (close != std::string::npos) at = text.find(std::string_view(what).substr(open + 1, close - open - 1));
    const Position p = at == std::string_view::npos ? Position{0, 0} : pos.at(at);
    problems.push_back(Diagnostic{file, p.line, p.column, "", "not valid JSON: " + what});
    return std::nullopt;
  }
  if (!root.is_object()) {
    problems.push_back(Diagnostic{file, 1, 1, "", "a config.json is a JSON object"});
    return std::nullopt;
  }
  std::size_t furthest = 0;
  KeyLocator locator(&furthest, &pos);
  const char* begin = text.data();
  json::sax_parse(TrackingIterator(begin, begin, &furthest), TrackingIterator(begin + text.size(), begin, &furthest),
                  &locator);

  ConfigReader r(root, locator.keys, file, problems);
  r.mark();
  const auto type = r.text("model_type");
  if (!type) {
    if (!r.has("model_type")) r.report_missing("model_type", "which architecture this is");
    return std::nullopt;
  }
  if (std::find(kTypes.begin(), kTypes.end(), *type) == kTypes.end()) {
    std::string list;
    for (auto t : kTypes) list += (list.empty() ? "" : ", ") + std::string(t);
    const std::string_view hint = closest_match(*type, kTypes);
    r.report("model_type", "model_type '" + *type + "' is not supported" +
                               (hint.empty() ? "" : " (did you mean '" + std::string(hint) + "'?)") +
                               "; supported: " + list);
    return std::nullopt;
  }
  models::ModelSpec m;
  m.name = std::filesystem::path(file).parent_path().filename().string();
  if (m.name.empty()) m.name = std::filesystem::path(file).stem().string();
  m.source = file + " (" + *type + ")";
  const std::string& t = *type;
  refuse_unread_features(r, t);

  if (t == "qwen2_5_vl") {
    // Newer configs nest the language model under text_config; older ones keep it at the top.
    if (r.has("text_config") && r.find("text_config")->contains("hidden_size")) r.set_prefix("text_config");
    read_gqa(r, m);
    read_window(r, m, t);
    read_dense_width(r, m);
    m.qkv_bias = true;
    r.set_prefix("");
    if (auto tie = r.boolean("tie_word_embeddings", m.tied_embeddings)) m.tied_embeddings = *tie;
    read_vision(r, m);
  } else if (t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" || t == "qwen3_moe") {
    read_gqa(r, m);
    read_window(r, m, t);
    if (t == "qwen3_moe") {
      if (auto v = r.integer("num_experts", "the routed experts")) m.moe.experts = *v;
      if (auto v = r.integer("num_experts_per_tok", "experts per token")) m.moe.top_k = *v;
      if (auto v = r.integer("moe_intermediate_size", "the expert width")) m.moe.expert_intermediate = *v;
      if (auto step = r.integer("decoder_sparse_step", "the MoE layer step", 1); step && *step != 1) {
        r.report("decoder_sparse_step",
                 "decoder_sparse_step " + std::to_string(*step) + " is not modelled (only every layer MoE, 1)");
      }
      if (const json* only = r.find("mlp_only_layers"); only && (!only->is_array() || !only->empty())) {
        r.report("mlp_only_layers", "dense layers among MoE ones (mlp_only_layers) are not modelled");
      }
      if (auto s = r.integer("shared_expert_intermediate_size", "the shared-expert width", 0, 0)) {
        m.moe.shared_intermediate = *s;
        m.moe.shared_experts = *s > 0 ? 1 : 0;
      }
      if (r.has("intermediate_size")) read_dense_width(r, m);
    } else {
      read_dense_width(r, m);
    }
    if (auto bias = r.boolean("attention_bias", false)) m.qkv_bias = m.o_bias = *bias;
    if (t == "qwen2") {
      m.qkv_bias = true;
      m.o_bias = false;
    }
    m.qk_norm = t == "qwen3" || t == "qwen3_moe";
  } else if (t == "deepseek_v3" || t == "kimi_k2" || t == "glm_moe_dsa") {
    read_gqa(r, m);
    read_dense_width(r, m);
    read_mla(r, m);
    read_deepseek_moe(r, m, true);
    if (t == "glm_moe_dsa") {
      if (auto v = r.integer("index_n_heads", "indexer heads")) m.dsa.index_heads = *v;
      if (auto v = r.integer("index_head_dim", "indexer head dim")) m.dsa.index_dim = *v;
      if (auto v = r.integer("index_topk", "tokens each query attends to")) m.dsa.top_k = *v;
      // GLM-5.2: "full" layers run the indexer, "shared" ones reuse the last full layer's top-k.
      if (const json* types = r.find("indexer_types")) {
        const std::string pattern = layer_letters(*types, {{"full", 'F'}, {"shared", 'S'}}, m.layers);
        if (pattern.empty() || pattern.front() != 'F') {
          r.report("indexer_types", "expected one of full / shared per layer, the first full");
        } else if (pattern.find('S') != std::string::npos) {
          m.dsa.pattern = repeating_unit(pattern);
        }
      }
    }
    read_quantization(r, m);
  } else if (t == "nemotron_h") {
    read_nemotron_h(r, m);
  } else if (t == "minimax_m3") {
    read_minimax_m3(r, m);
  } else if (t == "deepseek_v4") {
    read_deepseek_v4(r, m);
  } else if (t == "glm4_moe") {
    read_gqa(r, m);
    read_dense_width(r, m);
    read_deepseek_moe(r, m, true);
    if (auto bias = r.boolean("attention_bias", false)) m.qkv_bias = *bias;
    if (auto norm = r.boolean("use_qk_norm", false)) m.qk_norm = *norm;
    read_quantization(r, m);
  } else if (t == "gpt_oss") {
    read_gqa(r, m);
    if (auto v = r.integer("num_local_experts", "the experts")) m.moe.experts = *v;
    const char* topk_key = r.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
    if (auto v = r.integer(topk_key, "experts per token")) m.moe.top_k = *v;
    if (auto v = r.integer("intermediate_size", "the expert width")) {
      m.moe.expert_intermediate = m.intermediate = *v;
    }
    m.moe.expert_bias = m.moe.router_bias = true;
    m.attention_sinks = true;
    if (auto bias = r.boolean("attention_bias", true)) m.qkv_bias = m.o_bias = *bias;
    if (auto w = r.integer("sliding_window", "the sliding window", 0, 0)) m.window.window = *w;
    if (const json* types = r.find("layer_types")) {
      const std::string pattern =
          layer_letters(*types, {{"sliding_attention", 'S'}, {"full_attention", 'F'}}, m.layers);
      if (pattern.empty()) {
        r.report("layer_types", "expected one of sliding_attention / full_attention per layer");
      } else {
        m.window.pattern = repeating_unit(pattern);  // "SF" for gpt-oss
      }
    } else if (m.window.enabled()) {
      m.window.pattern = "SF";  // gpt-oss alternates, sliding first
    }
    read_quantization(r, m);
  }
  if (problems.size() != before) return std::nullopt;
  for (const std::string& p : models::validate_model(m)) {
    problems.push_back(Diagnostic{file, 1, 1, "", p});
  }
  if (problems.size() != before) return std::nullopt;
  return m;
}

std::optional<models::ModelSpec> read_hf_config(const std::string& path, std::vector<Diagnostic>& problems) {
  std::string text;
  try {
    text = read_input_file(InputSource{path, "config.json file", ""}, kMaxJsonFileBytes);
  } catch (const InputError& e) {
    problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
    return std::nullopt;
  }
  return parse_hf_config(text, path, problems);
}

}  // namespace servesim::scenario
