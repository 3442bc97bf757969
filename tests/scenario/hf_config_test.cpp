// Importing Hugging Face config.json files: every shipped fixture gives exactly its preset, and
// bad files are reported with file, line, column and key.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/model_spec.h"
#include "sim/scenario/hf_config.h"
#include "sim/scenario/scenario.h"

using namespace servesim;
using servesim::scenario::parse_hf_config;
using servesim::scenario::read_hf_config;

namespace {

const std::string kDir = std::string(SERVESIM_SOURCE_DIR) + "/tests/scenario";

// The workload section every scenario below shares.
const std::string kWorkload = R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)";

// Every figure of a spec but its source, as text, so that a mismatch shows which one differs.
std::string figures(const models::ModelSpec& m) {
  std::ostringstream s;
  s << "name=" << m.name << " layers=" << m.layers << " hidden=" << m.hidden << " heads=" << m.heads
    << " kv_heads=" << m.kv_heads << " head_dim=" << m.head_dim << " intermediate=" << m.intermediate
    << " vocab=" << m.vocab << " max_context=" << m.max_context << " tied=" << m.tied_embeddings
    << " attention=" << static_cast<int>(m.attention) << " mla=" << m.mla.q_lora_rank << "/" << m.mla.kv_lora_rank
    << "/" << m.mla.qk_nope_dim << "/" << m.mla.qk_rope_dim << "/" << m.mla.v_dim << " dsa=" << m.dsa.index_heads << "/"
    << m.dsa.index_dim << "/" << m.dsa.top_k << "/" << m.dsa.pattern << "/" << m.dsa.block << " moe=" << m.moe.experts
    << "/" << m.moe.top_k << "/" << m.moe.expert_intermediate << "/" << m.moe.shared_experts << "/"
    << m.moe.shared_intermediate << "/" << m.moe.first_dense_layers << "/" << m.moe.layer_frequency << "/"
    << m.moe.expert_bias << "/" << m.moe.router_bias << " window=" << m.window.window << "/" << m.window.pattern
    << " mtp=" << m.mtp_layers << " bias=" << m.qkv_bias << m.o_bias << " qk_norm=" << m.qk_norm
    << " sinks=" << m.attention_sinks << " linear=" << m.linear.key_heads << "/" << m.linear.value_heads << "/"
    << m.linear.key_dim << "/" << m.linear.value_dim << "/" << m.linear.conv_kernel << "/" << m.linear.pattern << "/"
    << m.linear.state_bytes << "/" << static_cast<int>(m.linear.kind) << "/" << m.linear.chunk
    << " gated_mlp=" << m.gated_mlp << " ffn=" << m.ffn_pattern << " formats=" << models::format_name(m.formats.weights)
    << "/" << models::format_name(m.formats.experts) << "/" << models::format_name(m.formats.kv_cache)
    << " compress=" << m.compress.window << "/" << m.compress.sparse_ratio << "/" << m.compress.dense_ratio << "/"
    << m.compress.q_lora_rank << "/" << m.compress.o_groups << "/" << m.compress.o_lora_rank << "/"
    << m.compress.streams << "/" << m.compress.rope_dim;
  if (m.vision) {
    const auto& v = *m.vision;
    s << " vision=" << v.depth << "/" << v.hidden << "/" << v.heads << "/" << v.intermediate << "/" << v.patch << "/"
      << v.spatial_merge << "/" << v.temporal_patch << "/" << v.window << "/" << v.out_hidden << "/" << v.min_pixels
      << "/" << v.max_pixels << "/";
    for (int l : v.full_attention_layers) s << l << ",";
  }
  return s.str();
}

std::vector<Diagnostic> problems_of(const std::string& json) {
  std::vector<Diagnostic> problems;
  CHECK_FALSE(parse_hf_config(json, "m/config.json", problems).has_value());
  return problems;
}

}  // namespace

TEST_CASE("HF import: every preset's config.json imports to exactly the preset") {
  // Presets whose model_type the importer does not read yet (deepseek_v32, kimi_k25, minimax_m2,
  // qwen3_5_moe / qwen3_5 with linear attention): built from their config.json by hand
  // (models/model_spec.cpp names each source), no copy of it here.
  // Mixtral (model_type mixtral), Llama-4 (llama4, its chunked attention), MiMo (mimo,
  // mimo_v2_flash), Step-3.7 (step3p7), Gemma-4 (gemma4) and Kimi-K3 (kimi_k3: its vision tower, KDA)
  // likewise.
  const std::set<std::string_view> no_importer = {
      "deepseek-v3.2",   "kimi-k2.5",      "minimax-m2.5",    "minimax-m2.7",  "qwen3.5-397b-a17b", "qwen3.5-122b-a10b",
      "qwen3.5-35b-a3b", "qwen3.5-27b",    "mixtral-8x7b",    "mixtral-8x22b", "llama-4-scout",     "llama-4-maverick",
      "mimo-7b",         "step-3.7-flash", "gemma-4-26b-a4b", "gemma-4-31b",   "mimo-v2-flash",     "kimi-k3"};
  for (const auto name : models::model_preset_names()) {
    if (no_importer.count(name) != 0) continue;
    CAPTURE(name);
    std::vector<Diagnostic> problems;
    const auto imported = read_hf_config(kDir + "/hf/" + std::string(name) + "/config.json", problems);
    for (const auto& d : problems) MESSAGE(d.to_string());
    REQUIRE(imported.has_value());
    CHECK(figures(*imported) == figures(*models::model_preset(name)));
    CHECK(imported->total_params() == models::model_preset(name)->total_params());
  }
}

TEST_CASE("HF import: GLM-5.2's indexer_types say which layers run the DSA indexer") {
  std::ifstream in(kDir + "/hf/glm-5.2/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  std::vector<Diagnostic> problems;
  const auto m = parse_hf_config(config.dump(), "m/config.json", problems);
  REQUIRE(m.has_value());
  CHECK(m->count_layers(0, m->layers).indexer == 21);
  // Every layer full (GLM-5.1's indexer_types): the indexer everywhere, as without the key.
  nlohmann::json full = config;
  for (auto& t : full["indexer_types"]) t = "full";
  const auto all = parse_hf_config(full.dump(), "m/config.json", problems);
  REQUIRE(all.has_value());
  CHECK(all->dsa.pattern.empty());
  // A shared first layer has no full layer to share: refused at the key.
  nlohmann::json shared = config;
  shared["indexer_types"][0] = "shared";
  const auto p = problems_of(shared.dump());
  REQUIRE(p.size() == 1);
  CHECK(p[0].path == "indexer_types");
  CHECK(p[0].message.find("expected one of full / shared per layer, the first full") != std::string::npos);
}

TEST_CASE("HF import: MiniMax-M3's sparse_attention_config and moe_layer_freq") {
  std::ifstream in(kDir + "/hf/minimax-m3/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  std::vector<Diagnostic> problems;
  const auto m = parse_hf_config(config.dump(), "m/config.json", problems);
  REQUIRE(m.has_value());
  // The top 16 blocks of 128 tokens; the three leading layers dense in attention and MLP.
  CHECK(m->dsa.top_k == 2048);
  CHECK(m->dsa.block == 128);
  CHECK(m->count_layers(0, m->layers).dense_attention == 3);
  CHECK(m->moe.first_dense_layers == 3);
  // Sparse attention switched off: a GQA model with the same MoE.
  nlohmann::json off = config;
  off["sparse_attention_config"]["use_sparse_attention"] = false;
  const auto dense = parse_hf_config(off.dump(), "m/config.json", problems);
  REQUIRE(dense.has_value());
  CHECK_FALSE(dense->dsa.enabled());
  // A per-layer list of the wrong length, and a MoE layer before a dense one: refused at the key.
  nlohmann::json short_list = config;
  short_list["sparse_attention_config"]["sparse_attention_freq"].erase(0);
  auto p = problems_of(short_list.dump());
  REQUIRE(p.size() == 1);
  CHECK(p[0].path == "sparse_attention_config.sparse_attention_freq");
  nlohmann::json interleaved = config;
  interleaved["moe_layer_freq"][5] = 0;
  p = problems_of(interleaved.dump());
  REQUIRE(p.size() == 1);
  CHECK(p[0].path == "moe_layer_freq");
}

TEST_CASE("HF import: DeepSeek-V4's compress_ratios say which layers are CSA and which HCA") {
  std::ifstream in(kDir + "/hf/deepseek-v4-flash/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  std::vector<Diagnostic> problems;
  const auto m = parse_hf_config(config.dump(), "m/config.json", problems);
  REQUIRE(m.has_value());
  // 44 ratios for 43 layers and the MTP layer: 0, 0, then 4 and 128 alternating; the ratio-0
  // layers are taken as HCA (no indexer).
  CHECK(m->compress.sparse_ratio == 4);
  CHECK(m->compress.dense_ratio == 128);
  CHECK(m->count_layers(0, m->layers).indexer == 21);
  CHECK_FALSE(m->is_indexer_layer(1));
  CHECK(m->is_indexer_layer(2));
  CHECK(m->formats.experts == models::Format::kMxfp4);  // expert_dtype fp4
  // A list shorter than the layers, and a third compression: refused at the key.
  nlohmann::json short_list = config;
  short_list["compress_ratios"] = nlohmann::json::array({0, 4, 128});
  auto p = problems_of(short_list.dump());
  REQUIRE(p.size() == 1);
  CHECK(p[0].path == "compress_ratios");
  nlohmann::json three = config;
  three["compress_ratios"][5] = 16;
  p = problems_of(three.dump());
  REQUIRE(p.size() == 1);
  CHECK(p[0].path == "compress_ratios");
  // Another family's config carrying the key is refused, not imported without it.
  nlohmann::json other = config;
  other["model_type"] = "deepseek_v3";
  p = problems_of(other.dump());
  CHECK_FALSE(p.empty());
}

TEST_CASE("HF import: an unknown model_type names the supported ones at its line and column") {
  const auto p = problems_of("{\n  \"hidden_size\": 4096,\n  \"model_type\": \"mixtral\"\n}\n");
  REQUIRE(p.size() == 1);
  CHECK(p[0].file == "m/config.json");
  CHECK(p[0].line == 3);
  CHECK(p[0].column == 3);  // the key's opening quote
  CHECK(p[0].path == "model_type");
  CHECK(p[0].message ==
        "model_type 'mixtral' is not supported (did you mean 'mistral'?); supported: llama, mistral, qwen2, qwen3, "
        "qwen3_moe, "
        "deepseek_v3, kimi_k2, glm4_moe, glm_moe_dsa, gpt_oss, qwen2_5_vl, nemotron_h, minimax_m3, deepseek_v4");
  const auto typo = problems_of(R"({"model_type": "qwen3_mo"})");
  REQUIRE(typo.size() == 1);
  CHECK(typo[0].message.find("(did you mean 'qwen3_moe'?)") != std::string::npos);
}

TEST_CASE("HF import: missing keys and wrong types are all reported, with the key") {
  const auto p = problems_of(R"({
  "model_type": "deepseek_v3",
  "hidden_size": "7168",
  "num_hidden_layers": 61,
  "num_attention_heads": 128,
  "vocab_size": 129280,
  "max_position_embeddings": 163840,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "v_head_dim": 128,
  "n_routed_experts": 256,
  "moe_intermediate_size": 2048
})");
  REQUIRE(p.size() == 2);
  // A string where a number belongs, reported at its key.
  CHECK(p[0].line == 3);
  CHECK(p[0].path == "hidden_size");
  CHECK(p[0].message == "expected an integer (the model width), got the text '7168'");
  // A missing key, reported at the object it is missing from (line 1).
  CHECK(p[1].line == 1);
  CHECK(p[1].path == "num_experts_per_tok");
  CHECK(p[1].message == "missing key 'num_experts_per_tok' (experts per token)");
}

TEST_CASE("HF import: nested keys carry their full path; invalid JSON gives its position") {
  const auto p = problems_of(R"({
  "model_type": "qwen2_5_vl",
  "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
  "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
  "max_position_embeddings": 128000,
  "vision_config": {
    "hidden_size": 1280, "num_heads": 16, "intermediate_size": 3420, "patch_size": 14,
    "out_hidden_size": 3584
  }
})");
  REQUIRE(p.size() == 1);
  CHECK(p[0].path == "vision_config.depth");
  CHECK(p[0].line == 6);  // the vision_config object
  CHECK(p[0].message == "missing key 'depth' (vision blocks)");

  const auto bad = problems_of("{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 40 96\n}");
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].line == 3);
  CHECK(bad[0].message.rfind("not valid JSON: ", 0) == 0);

  // A number beyond a double is an out_of_range in nlohmann, not a parse_error: still bad input,
  // placed at the literal (line 3, column 18 = after the 2 spaces and "hidden_size": ).
  const auto huge = problems_of("{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 1E999\n}");
  REQUIRE(huge.size() == 1);
  CHECK(huge[0].line == 3);
  CHECK(huge[0].column == 18);
  CHECK(huge[0].message.rfind("not valid JSON: ", 0) == 0);
}

TEST_CASE("HF import: a scenario reads config.json next to it and overrides its figures") {
  const auto s = scenario::load_scenario_text(R"(
model: {hf_config: hf/deepseek-v3/config.json, formats: {kv_cache: fp8}, name: my-deepseek}
deployment:
  pools:
    - chip: h200-sxm
      instances: 1
      parallel: {tp: 8}
      max_model_len: 16384)" + kWorkload,
                                              "import.yaml", kDir);
  const models::ModelSpec& m = s.config.model;
  CHECK(m.name == "my-deepseek");
  CHECK(m.formats.kv_cache == models::Format::kFp8);
  CHECK(m.formats.weights == models::Format::kFp8Block);  // from quantization_config
  CHECK(m.kv_bytes_per_token() == 35'136);
  CHECK(s.resolved["model"]["hf_config"] == "hf/deepseek-v3/config.json");
  // The default MoE split: experts tensor-parallel over the 8 TP ranks.
  CHECK(s.config.pools[0].plan.moe_tp == 8);
  // The resolved scenario reloads to itself.
  const auto again = scenario::load_scenario_text(s.resolved.dump(), "resolved.json", kDir);
  CHECK(again.resolved == s.resolved);
}

TEST_CASE("HF import: a preset and an hf_config together, or a missing file, are errors") {
  const std::string base = R"(
deployment:
  pools:
    - chip: h200-sxm
      instances: 1)" + kWorkload;
  auto diagnostics = [&](const std::string& model) {
    try {
      scenario::load_scenario_text(model + base, "bad.yaml", kDir);
    } catch (const InputError& e) {
      return e.diagnostics();
    }
    FAIL("expected an InputError");
    return std::vector<Diagnostic>{};
  };
  const auto both = diagnostics("model: {preset: glm-5, hf_config: hf/glm-5/config.json}");
  REQUIRE(both.size() == 1);
  CHECK(both[0].path == "model.hf_config");
  CHECK(both[0].message == "give either a preset or an hf_config file, not both");
  const auto missing = diagnostics("model: {hf_config: nowhere/config.json}");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].line == 1);
  CHECK(missing[0].message.rfind("cannot open the config.json file: No such file or directory ('", 0) == 0);
}

namespace {

// Mistral-7B-v0.1's published config.json (the keys the importer reads; architecture figures as
// published: 32 layers, 4096 wide, 32 heads over 8 KV heads, MLP 14336, a 4096-token window).
std::string mistral_config(const std::string& type, const std::string& extra = "") {
  return R"({"architectures": ["MistralForCausalLM"], "model_type": ")" + type + R"(",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 32000)" +
         extra + "}";
}

}  // namespace

TEST_CASE("HF import: Mistral imports with its sliding window, relabelled llama too") {
  for (const char* type : {"mistral", "llama"}) {
    std::vector<Diagnostic> problems;
    const auto m = parse_hf_config(mistral_config(type), "mistral-7b/config.json", problems);
    REQUIRE_MESSAGE(m.has_value(), type);
    CHECK(problems.empty());
    CHECK(m->window.window == 4096);
    CHECK(m->window.pattern.empty());  // every layer slides
    CHECK(m->layers == 32);
    CHECK(m->kv_heads == 8);
  }
  // sliding_window: null is no window.
  std::string none = mistral_config("mistral");
  none.replace(none.find("\"sliding_window\": 4096"), 22, "\"sliding_window\": null");
  std::vector<Diagnostic> problems;
  const auto m = parse_hf_config(none, "m/config.json", problems);
  REQUIRE(m.has_value());
  CHECK(m->window.window == 0);
}

TEST_CASE("HF import: a feature the family's importer does not read is refused with the reason") {
  // Mixtral relabelled llama: its experts would be dropped.
  std::vector<Diagnostic> problems;
  CHECK_FALSE(parse_hf_config(mistral_config("llama", R"(, "num_local_experts": 8, "num_experts_per_tok": 2)"),
                              "mixtral/config.json", problems)
                  .has_value());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].path == "num_local_experts");
  CHECK(problems[0].message.find("routed experts (MoE), which the llama importer does not read") != std::string::npos);
  CHECK(problems[0].line > 0);
  // DeepSeek's MLA under a llama label.
  problems.clear();
  CHECK_FALSE(
      parse_hf_config(mistral_config("llama", R"(, "kv_lora_rank": 512)"), "m/config.json", problems).has_value());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].path == "kv_lora_rank");
  // Qwen's layer-dependent window switched on.
  problems.clear();
  CHECK_FALSE(parse_hf_config(mistral_config("qwen2", R"(, "use_sliding_window": true, "max_window_layers": 28)"),
                              "m/config.json", problems)
                  .has_value());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].path == "use_sliding_window");
  // Switched off (as Qwen ships it), the window is not used: imported without one.
  problems.clear();
  const auto q =
      parse_hf_config(mistral_config("qwen2", R"(, "use_sliding_window": false)"), "m/config.json", problems);
  REQUIRE(q.has_value());
  CHECK(q->window.window == 0);
}
