#include <filesystem>
#include <type_traits>

#include "sim/scenario/hf_config.h"
#include "sim/scenario/sections.h"

namespace servesim::scenario {
namespace {

// Resolves `model: NAME` and `model: {preset: NAME, ...}` alike: a scalar becomes {preset: NAME}.
YAML::Node as_preset_map(const YAML::Node& node) {
  if (!node.IsScalar()) return node;
  YAML::Node m(YAML::NodeType::Map);
  m["preset"] = node.Scalar();
  return m;
}

// `origin` is where the user wrote the preset: the section itself when it was given by name
// (`model: NAME`, rewritten into {preset: NAME} before reading), else its `preset` key.
// Sets `given` when the section names a preset; returns the preset when it exists (an unknown
// name is reported).
template <class Spec>
std::optional<Spec> read_preset(MapReader& m, std::optional<Spec> (*lookup)(std::string_view),
                                const std::vector<std::string_view>& names, std::string_view what, const Field& section,
                                bool& given) {
  auto f = m.find("preset");
  given = f.has_value();
  if (!f) return std::nullopt;
  if (section.node.IsScalar()) {
    f->mark = section.mark;
    f->path = section.path;
  }
  if (!f->node.IsScalar()) {
    m.doc().error(f->mark, f->path, "expected a " + std::string(what) + " preset name, got " + describe(f->node));
    return std::nullopt;
  }
  const std::string name = f->node.Scalar();
  auto spec = lookup(name);
  if (!spec) {
    m.doc().error(f->mark, f->path, unknown_name(std::string(what) + " preset", name, names, "presets"));
    return std::nullopt;
  }
  m.echo()["preset"] = name;
  return spec;
}

// A sub-mapping of `parent` (absent or null: every key takes its default).
MapReader sub(MapReader& parent, std::string_view key) {
  auto f = parent.find(key);
  return MapReader(parent.doc(), f ? f->node : YAML::Node(), f ? f->mark : parent.mark(),
                   child_path(parent.path(), key), parent.echo()[std::string(key)]);
}

// An efficiency: a number in (0, 1], or a curve [[size, efficiency], ...] with sizes ascending
// (FLOPs or bytes per kernel).
std::optional<models::EfficiencyCurve> read_curve(MapReader& m, std::string_view key,
                                                  const models::EfficiencyCurve& d) {
  auto f = m.find(key);
  if (f && f->node.IsSequence()) {
    models::EfficiencyCurve c;
    Json echo = Json::array();
    bool ok = true;
    for (std::size_t i = 0; i < f->node.size(); ++i) {
      const YAML::Node k = f->node[i];
      double size = 0, eff = 0;
      const bool pair = k.IsSequence() && k.size() == 2 && k[0].IsScalar() && k[1].IsScalar();
      try {
        if (pair) {
          size = k[0].as<double>();
          eff = k[1].as<double>();
        }
      } catch (const YAML::Exception&) {
        size = eff = 0;
      }
      if (!pair || !(size > 0)) {
        m.doc().error(k.Mark(), index_path(f->path, i),
                      "expected a knot [size, efficiency] with a positive size (FLOPs or bytes per "
                      "kernel), got " +
                          describe(k));
        ok = false;
        continue;
      }
      c.knots.push_back({size, eff});
      echo.push_back(Json::array({size, eff}));
    }
    for (const std::string& p : c.problems()) {
      m.doc().error(f->mark, f->path, p);
      ok = false;
    }
    m.echo()[std::string(key)] = echo;
    return ok ? std::optional<models::EfficiencyCurve>(c) : std::nullopt;
  }
  if (!d.is_constant() && !f) {
    Json echo = Json::array();
    for (const auto& k : d.knots) echo.push_back(Json::array({k.size, k.efficiency}));
    m.echo()[std::string(key)] = echo;
    return d;
  }
  const auto v = m.number(key, 0, 1, true, d.first());
  if (!v) return std::nullopt;
  return models::EfficiencyCurve(*v);
}

// The all-reduce lines of models::Efficiency: a list of {base, per_step, efficiency, algorithm}
// (algorithm ring or one_shot), echoed as given.
Json line_echo(const models::Efficiency::CollectiveLine& l) {
  auto us = [](Duration d) { return Json(format_quantity(d.to_seconds(), Dimension::kDuration)); };
  return Json{{"base", us(l.base)},
              {"per_step", us(l.per_step)},
              {"efficiency", l.efficiency},
              {"algorithm", l.one_shot ? "one_shot" : "ring"}};
}

std::optional<std::vector<models::Efficiency::CollectiveLine>> read_all_reduce_lines(
    MapReader& m, std::string_view key, const std::vector<models::Efficiency::CollectiveLine>& d) {
  auto f = m.find(key);
  if (!f) {
    Json echo = Json::array();
    for (const auto& l : d) echo.push_back(line_echo(l));
    m.echo()[std::string(key)] = echo;
    return d;
  }
  if (!f->node.IsSequence()) {
    m.doc().error(f->mark, f->path,
                  "expected a list of lines {base, per_step, efficiency, algorithm}, got " + describe(f->node));
    return std::nullopt;
  }
  std::vector<models::Efficiency::CollectiveLine> out;
  Json& echo = m.echo()[std::string(key)] = Json::array();
  bool ok = true;
  for (std::size_t i = 0; i < f->node.size(); ++i) {
    const YAML::Node item = f->node[i];
    Json one = Json::object();
    MapReader r(m.doc(), item, item.Mark(), index_path(f->path, i), one);
    models::Efficiency::CollectiveLine l;
    const auto base = r.duration("base", Duration::zero(), Duration::seconds(1), std::nullopt);
    const auto step = r.duration("per_step", Duration::zero(), Duration::seconds(1), Duration::zero());
    // Above 1 where the switch reduces (NVLS); 4 bounds a typo.
    const auto eff = r.number("efficiency", 0, 4, true, std::nullopt);
    const auto alg = r.choice("algorithm", {"ring", "one_shot"}, std::string("ring"));
    r.finish();
    if (!r.valid() || !base || !step || !eff || !alg) {
      ok = false;
      continue;
    }
    l.base = *base;
    l.per_step = *step;
    l.efficiency = *eff;
    l.one_shot = *alg == "one_shot";
    out.push_back(l);
    echo.push_back(one);
  }
  return ok ? std::optional(out) : std::nullopt;
}

// A mapping from a weight format to one T each (models::Efficiency::MoeExperts, GemmFormat),
// `fields` naming T's keys for the error: `read_one(reader, format)` reads one entry's keys (every
// one required) and finishes the reader, nullopt on a problem; `refuse(format)` is the reason a
// format is not allowed there, or "". Absent: `d`, echoed with `echo_one`.
template <class T, class EchoOne, class ReadOne, class Refuse>
std::optional<std::vector<T>> read_format_map(MapReader& m, std::string_view key, const std::vector<T>& d,
                                              const std::string& what, const std::string& fields, EchoOne echo_one,
                                              ReadOne read_one, Refuse refuse) {
  auto f = m.find(key);
  if (!f) {
    Json& echo = m.echo()[std::string(key)] = Json::object();
    for (const auto& x : d) echo[std::string(models::format_name(x.format))] = echo_one(x);
    return d;
  }
  if (!f->node.IsMap()) {
    m.doc().error(f->mark, f->path, "expected a mapping from " + what + " to " + fields + ", got " + describe(f->node));
    return std::nullopt;
  }
  std::vector<T> out;
  Json& echo = m.echo()[std::string(key)] = Json::object();
  bool ok = true;
  for (const auto& item : f->node) {
    const std::string name = item.first.IsScalar() ? item.first.Scalar() : std::string();
    const auto format = models::parse_format(name);
    const std::string path = child_path(f->path, name);
    const std::string refused = format ? refuse(*format) : std::string();
    if (!format || !refused.empty()) {
      m.doc().error(item.first.Mark(), path,
                    format ? refused : unknown_name(what, name, models::format_names(), "formats"));
      ok = false;
      continue;
    }
    Json& one = echo[name] = Json::object();
    MapReader r(m.doc(), item.second, item.second.Mark(), path, one);
    if (std::optional<T> x = read_one(r, *format)) {
      out.push_back(*x);
    } else {
      ok = false;
    }
  }
  return ok ? std::optional(out) : std::nullopt;
}

// The routed experts' grouped-GEMM models (models::Efficiency::MoeExperts), per expert weight
// format: {overhead, compute, memory, token_bytes, pair_bytes}.
Json moe_experts_echo(const models::Efficiency::MoeExperts& x) {
  auto curve = [](const models::EfficiencyCurve& c) {
    Json a = Json::array();
    for (const auto& k : c.knots) a.push_back(Json::array({k.size, k.efficiency}));
    return a;
  };
  return Json{{"overhead", format_quantity(x.overhead.to_seconds(), Dimension::kDuration)},
              {"compute", curve(x.compute)},
              {"memory", curve(x.memory)},
              {"token_bytes", x.token_bytes},
              {"pair_bytes", x.pair_bytes}};
}

std::optional<models::Efficiency::MoeExperts> read_moe_expert(MapReader& r, models::Format format) {
  models::Efficiency::MoeExperts x;
  x.format = format;
  const auto overhead = r.duration("overhead", Duration::zero(), Duration::seconds(1), std::nullopt);
  std::optional<models::EfficiencyCurve> compute, memory;
  for (const auto& [k, out_curve] : {std::pair{"compute", &compute}, std::pair{"memory", &memory}}) {
    if (!r.has(k)) {
      r.missing(k, "an efficiency curve [[size, efficiency], ...]");
      continue;
    }
    *out_curve = read_curve(r, k, models::EfficiencyCurve());
  }
  const auto token = r.number("token_bytes", 0, 1e3, false, std::nullopt);
  const auto pair = r.number("pair_bytes", 0, 1e3, false, std::nullopt);
  r.finish();
  if (!r.valid() || !overhead || !compute || !memory || !token || !pair) return std::nullopt;
  x.overhead = *overhead;
  x.compute = *compute;
  x.memory = *memory;
  x.token_bytes = *token;
  x.pair_bytes = *pair;
  return x;
}

std::optional<std::vector<models::Efficiency::MoeExperts>> read_moe_experts(
    MapReader& m, std::string_view key, const std::vector<models::Efficiency::MoeExperts>& d) {
  return read_format_map(m, key, d, "expert weight format", "{overhead, compute, memory, token_bytes, pair_bytes}",
                         moe_experts_echo, read_moe_expert, [](models::Format) { return std::string(); });
}

// Quantised-activation GEMM formats (models::Efficiency::GemmFormat), per weight format:
// {overhead, quant_bytes, compute}.
Json gemm_format_echo(const models::Efficiency::GemmFormat& x) {
  return Json{{"overhead", format_quantity(x.overhead.to_seconds(), Dimension::kDuration)},
              {"quant_bytes", x.quant_bytes},
              {"compute", x.compute}};
}

std::optional<models::Efficiency::GemmFormat> read_gemm_format(MapReader& r, models::Format format) {
  const auto overhead = r.duration("overhead", Duration::zero(), Duration::seconds(1), std::nullopt);
  const auto bytes = r.number("quant_bytes", 0, 1e3, false, std::nullopt);
  const auto compute = r.number("compute", 0, 2, true, std::nullopt);
  r.finish();
  if (!r.valid() || !overhead || !bytes || !compute) return std::nullopt;
  return models::Efficiency::GemmFormat{format, *overhead, *bytes, *compute};
}

std::optional<std::vector<models::Efficiency::GemmFormat>> read_gemm_formats(
    MapReader& m, std::string_view key, const std::vector<models::Efficiency::GemmFormat>& d) {
  return read_format_map(m, key, d, "weight format", "{overhead, quant_bytes, compute}", gemm_format_echo,
                         read_gemm_format, [](models::Format f) {
                           return f == models::Format::kBf16
                                      ? std::string("bf16 GEMMs quantise nothing: the GEMM curves describe them")
                                      : std::string();
                         });
}

}  // namespace

std::optional<models::Efficiency> read_efficiency(MapReader& chip, const models::Efficiency& d) {
  MapReader m = sub(chip, "efficiency");
  models::Efficiency e = d;
  bool ok = m.valid();
  auto curve = [&](std::string_view key, const models::EfficiencyCurve& v, models::EfficiencyCurve& out) {
    auto r = read_curve(m, key, v);
    if (r)
      out = *r;
    else
      ok = false;
  };
  auto frac = [&](std::string_view key, double v, double& out) {
    auto r = m.number(key, 0, 1, true, v);
    if (r)
      out = *r;
    else
      ok = false;
  };
  auto dur = [&](std::string_view key, Duration v, Duration& out) {
    auto r = m.duration(key, Duration::zero(), Duration::seconds(10), v);
    if (r)
      out = *r;
    else
      ok = false;
  };
  curve("gemm_compute", d.gemm_compute, e.gemm_compute);
  curve("gemm_memory", d.gemm_memory, e.gemm_memory);
  dur("gemm_overhead", d.gemm_overhead, e.gemm_overhead);
  curve("attention_prefill", d.attention_prefill, e.attention_prefill);
  curve("attention_decode", d.attention_decode, e.attention_decode);
  dur("attention_overhead", d.attention_overhead, e.attention_overhead);
  // Prefill attention's own memory curve and MLA prefill's own compute curve: only where given
  // (absent, attention_decode and attention_prefill apply).
  for (auto [key, field] : {std::pair{"attention_prefill_memory", &models::Efficiency::attention_prefill_memory},
                            std::pair{"attention_latent_prefill", &models::Efficiency::attention_latent_prefill}}) {
    if (!m.has(key) && (d.*field).knots.empty()) continue;
    if (auto r = read_curve(m, key, d.*field))
      e.*field = *r;
    else
      ok = false;
  }
  curve("elementwise", d.elementwise, e.elementwise);
  dur("elementwise_overhead", d.elementwise_overhead, e.elementwise_overhead);
  {
    MapReader f = sub(m, "format_compute");
    for (auto r : {models::ComputeRate::kFp8, models::ComputeRate::kInt8, models::ComputeRate::kFp4}) {
      const auto i = static_cast<std::size_t>(r);
      auto v = f.number(models::compute_rate_name(r), 0, 1, true, d.format_compute[i]);
      if (v)
        e.format_compute[i] = *v;
      else
        ok = false;
    }
    f.finish();
    ok = ok && f.valid();
  }
  // GEMM tile / wave quantisation (models::padded_gemm_flops): only where given (absent, the raw
  // FLOPs, as profiles written before it).
  if (m.has("gemm_tiling")) {
    MapReader t = sub(m, "gemm_tiling");
    const auto tile = t.number("tile", 0, 4096, true, std::nullopt);
    const auto small = t.number("small_m_tile", 0, 4096, false, d.gemm_tiling.small_m_tile);
    const auto waves = t.boolean("waves", d.gemm_tiling.waves);
    t.finish();
    if (t.valid() && tile && small && waves)
      e.gemm_tiling = {*tile, *small, *waves};
    else
      ok = false;
  }
  frac("collective_bandwidth", d.collective_bandwidth, e.collective_bandwidth);
  dur("collective_latency", d.collective_latency, e.collective_latency);
  dur("iteration_overhead", d.iteration_overhead, e.iteration_overhead);
  dur("sequence_overhead", d.sequence_overhead, e.sequence_overhead);
  if (auto r = m.boolean("host_overlap", d.host_overlap))
    e.host_overlap = *r;
  else
    ok = false;
  // In-domain all-reduce lines: only where given (absent, the collective line above applies).
  if (m.has("all_reduce_lines") || !d.all_reduce_lines.empty()) {
    if (auto r = read_all_reduce_lines(m, "all_reduce_lines", d.all_reduce_lines))
      e.all_reduce_lines = *r;
    else
      ok = false;
  }
  // Grouped expert GEMMs: only where given (absent, the GEMM curves apply; models/chip_spec.h).
  for (const auto& [key, field] : {std::pair{"moe_compute", &e.moe_compute}, std::pair{"moe_memory", &e.moe_memory}}) {
    if (!m.has(key) && field->knots.empty()) continue;
    if (auto r = read_curve(m, key, *field))
      *field = *r;
    else
      ok = false;
  }
  if (m.has("moe_overhead") || !e.moe_compute.knots.empty()) dur("moe_overhead", d.moe_overhead, e.moe_overhead);
  // Sparse MLA prefill kernels: only where given (absent, attention_prefill applies).
  if (m.has("attention_sparse") || !d.attention_sparse.knots.empty()) {
    if (auto r = read_curve(m, "attention_sparse", d.attention_sparse))
      e.attention_sparse = *r;
    else
      ok = false;
  }
  if (m.has("attention_sparse_overhead") || !e.attention_sparse.knots.empty()) {
    dur("attention_sparse_overhead", d.attention_sparse_overhead, e.attention_sparse_overhead);
    dur("attention_sparse_query", d.attention_sparse_query, e.attention_sparse_query);
  }
  // mHC kernels: only where given (absent, the elementwise curve applies).
  if (m.has("mhc") || !d.mhc.knots.empty()) {
    if (auto r = read_curve(m, "mhc", d.mhc))
      e.mhc = *r;
    else
      ok = false;
  }
  if (m.has("mhc_overhead") || !e.mhc.knots.empty()) dur("mhc_overhead", d.mhc_overhead, e.mhc_overhead);
  // The DSA indexer's scoring kernel: only where given (absent, prefill attention's curve applies).
  if (m.has("indexer") || !d.indexer.knots.empty()) {
    if (auto r = read_curve(m, "indexer", d.indexer))
      e.indexer = *r;
    else
      ok = false;
  }
  if (m.has("indexer_overhead") || !e.indexer.knots.empty()) {
    dur("indexer_overhead", d.indexer_overhead, e.indexer_overhead);
  }
  // The top-k selection over its logits: only where given (absent, the elementwise curve applies).
  if (m.has("topk") || !d.topk.knots.empty()) {
    if (auto r = read_curve(m, "topk", d.topk))
      e.topk = *r;
    else
      ok = false;
  }
  if (m.has("topk_overhead") || m.has("topk_wave") || !e.topk.knots.empty()) {
    dur("topk_overhead", d.topk_overhead, e.topk_overhead);
    dur("topk_wave", d.topk_wave, e.topk_wave);
  }
  // The engine's dense prefill of short DSA chunks: only where given or set by the profile.
  if (m.has("dsa_dense_prefill") || d.dsa_dense_prefill) {
    if (auto r = m.boolean("dsa_dense_prefill", d.dsa_dense_prefill))
      e.dsa_dense_prefill = *r;
    else
      ok = false;
  }
  // Grouped-GEMM models of the routed experts per weight format: only where given.
  if (m.has("moe_experts") || !d.moe_experts.empty()) {
    if (auto r = read_moe_experts(m, "moe_experts", d.moe_experts))
      e.moe_experts = *r;
    else
      ok = false;
  }
  // Quantised-activation GEMM formats: only where given.
  if (m.has("gemm_formats") || !d.gemm_formats.empty()) {
    if (auto r = read_gemm_formats(m, "gemm_formats", d.gemm_formats))
      e.gemm_formats = *r;
    else
      ok = false;
  }
  m.finish();
  return ok ? std::optional<models::Efficiency>(e) : std::nullopt;
}

namespace {

std::optional<models::Format> read_format(MapReader& m, std::string_view key,
                                          const std::vector<std::string_view>& names, models::Format fallback) {
  const auto v = m.choice(key, names, std::string(models::format_name(fallback)));
  if (!v) return std::nullopt;
  return models::parse_format(*v);
}

// Reads the model's figures on top of `d` (a preset or an imported config.json; a blank spec when
// neither, in which case the core figures are required).
bool read_model_figures(MapReader& m, const models::ModelSpec& d, bool have_base, models::ModelSpec& s) {
  bool ok = true;
  auto dflt = [&](auto v) { return have_base ? std::optional<decltype(v)>(v) : std::nullopt; };
  auto take = [&ok](auto opt, auto& out) {
    if (opt)
      out = static_cast<std::remove_reference_t<decltype(out)>>(*opt);
    else
      ok = false;
  };
  auto opt_int = [&](MapReader& r, std::string_view key, std::int64_t min, std::int64_t max, int fallback, int& out) {
    take(r.integer(key, min, max, std::int64_t{fallback}), out);
  };
  auto opt_bool = [&](MapReader& r, std::string_view key, bool fallback, bool& out) {
    take(r.boolean(key, fallback), out);
  };
  take(m.string("name", dflt(d.name)), s.name);
  const auto attention =
      m.choice("attention", {"gqa", "mla"}, d.attention == models::AttentionKind::kMla ? "mla" : "gqa");
  if (attention) {
    s.attention = *attention == "mla" ? models::AttentionKind::kMla : models::AttentionKind::kGqa;
  } else {
    ok = false;
  }
  const bool mla = s.attention == models::AttentionKind::kMla;
  take(m.integer("layers", 1, 10'000, dflt(std::int64_t{d.layers})), s.layers);
  take(m.integer("hidden", 1, 1'000'000, dflt(std::int64_t{d.hidden})), s.hidden);
  take(m.integer("heads", 1, 100'000, dflt(std::int64_t{d.heads})), s.heads);
  // MLA caches a latent, not heads: kv_heads and head_dim follow the heads and the MLA dims.
  const auto mla_default = [&](int v) {
    return mla ? std::optional<std::int64_t>(std::max(v, 1)) : dflt(std::int64_t{v});
  };
  take(m.integer("kv_heads", 1, 100'000, mla_default(d.kv_heads > 0 ? d.kv_heads : s.heads)), s.kv_heads);
  take(m.integer("head_dim", 1, 100'000, mla_default(d.head_dim)), s.head_dim);
  take(m.integer("intermediate", 1, 10'000'000, dflt(std::int64_t{d.intermediate})), s.intermediate);
  take(m.integer("vocab", 1, 100'000'000, dflt(std::int64_t{d.vocab})), s.vocab);
  take(m.integer("max_context", 1, kMaxTokens, dflt(std::int64_t{d.max_context})), s.max_context);
  take(m.boolean("tied_embeddings", have_base ? std::optional<bool>(d.tied_embeddings) : false), s.tied_embeddings);
  opt_bool(m, "qkv_bias", d.qkv_bias, s.qkv_bias);
  opt_bool(m, "o_bias", d.o_bias, s.o_bias);
  opt_bool(m, "qk_norm", d.qk_norm, s.qk_norm);
  opt_bool(m, "attention_sinks", d.attention_sinks, s.attention_sinks);
  // The Qwen3.5 keys are echoed only for models that use them (or where the scenario gives them),
  // so that the resolved scenarios of the other architectures stay as they were.
  if (m.has("attention_output_gate") || d.attention_output_gate) {
    opt_bool(m, "attention_output_gate", d.attention_output_gate, s.attention_output_gate);
  }
  // Gemma-4's and MiMo-V2-Flash's likewise: a value head of its own width, V from K's projection.
  if (m.has("value_head_dim") || d.value_head_dim > 0) {
    opt_int(m, "value_head_dim", 0, 100'000, d.value_head_dim, s.value_head_dim);
  }
  if (m.has("k_eq_v") || d.k_eq_v) opt_bool(m, "k_eq_v", d.k_eq_v, s.k_eq_v);
  // Nemotron-H's keys likewise: plain (squared-ReLU) MLPs and layers without a feed-forward block.
  if (m.has("gated_mlp") || !d.gated_mlp) opt_bool(m, "gated_mlp", d.gated_mlp, s.gated_mlp);
  if (m.has("ffn_pattern") || !d.ffn_pattern.empty()) take(m.string("ffn_pattern", d.ffn_pattern), s.ffn_pattern);
  opt_int(m, "mtp_layers", 0, 64, d.mtp_layers, s.mtp_layers);
  {
    MapReader r = sub(m, "mla");
    opt_int(r, "q_lora_rank", 0, 1'000'000, d.mla.q_lora_rank, s.mla.q_lora_rank);
    opt_int(r, "kv_lora_rank", 0, 1'000'000, d.mla.kv_lora_rank, s.mla.kv_lora_rank);
    opt_int(r, "qk_nope_dim", 0, 100'000, d.mla.qk_nope_dim, s.mla.qk_nope_dim);
    opt_int(r, "qk_rope_dim", 0, 100'000, d.mla.qk_rope_dim, s.mla.qk_rope_dim);
    opt_int(r, "v_dim", 0, 100'000, d.mla.v_dim, s.mla.v_dim);
    r.finish();
    ok = ok && r.valid();
  }
  {
    MapReader r = sub(m, "dsa");
    opt_int(r, "index_heads", 0, 100'000, d.dsa.index_heads, s.dsa.index_heads);
    opt_int(r, "index_dim", 0, 100'000, d.dsa.index_dim, s.dsa.index_dim);
    opt_int(r, "top_k", 0, kMaxTokens, d.dsa.top_k, s.dsa.top_k);
    // Which layers run the indexer (F) and which reuse the last one's top-k (S); echoed only where
    // a model has one, so that other reports keep their shape.
    if (r.has("pattern") || !d.dsa.pattern.empty()) {
      take(r.string("pattern", d.dsa.pattern), s.dsa.pattern);
    }
    // Tokens per scored block (block sparse attention); echoed only where it is not 1.
    if (r.has("block") || d.dsa.block != 1) opt_int(r, "block", 1, kMaxTokens, d.dsa.block, s.dsa.block);
    r.finish();
    ok = ok && r.valid();
  }
  {
    MapReader r = sub(m, "sliding_window");
    opt_int(r, "window", 0, kMaxTokens, d.window.window, s.window.window);
    // An empty pattern (every layer sliding when there is a window) is echoed as null.
    if (auto pf = r.find("pattern"); pf && !pf->node.IsNull()) {
      take(r.string("pattern", d.window.pattern), s.window.pattern);
    } else {
      s.window.pattern = pf ? std::string() : d.window.pattern;
      r.echo()["pattern"] = s.window.pattern.empty() ? Json(nullptr) : Json(s.window.pattern);
    }
    // The window layers' own KV heads and head dim (0 = the model's), echoed where a model has them.
    if (r.has("kv_heads") || d.window.kv_heads > 0) {
      opt_int(r, "kv_heads", 0, 100'000, d.window.kv_heads, s.window.kv_heads);
    }
    if (r.has("head_dim") || d.window.head_dim > 0) {
      opt_int(r, "head_dim", 0, 100'000, d.window.head_dim, s.window.head_dim);
    }
    r.finish();
    ok = ok && r.valid();
  }
  // DeepSeek-V4's compressed attention (models::CompressSpec): echoed where the model has it.
  if (m.has("compressed_attention") || d.compress.enabled()) {
    MapReader r = sub(m, "compressed_attention");
    opt_int(r, "window", 0, kMaxTokens, d.compress.window, s.compress.window);
    opt_int(r, "sparse_ratio", 1, kMaxTokens, d.compress.sparse_ratio, s.compress.sparse_ratio);
    opt_int(r, "dense_ratio", 1, kMaxTokens, d.compress.dense_ratio, s.compress.dense_ratio);
    opt_int(r, "q_lora_rank", 0, 1'000'000, d.compress.q_lora_rank, s.compress.q_lora_rank);
    opt_int(r, "o_groups", 1, 100'000, d.compress.o_groups, s.compress.o_groups);
    opt_int(r, "o_lora_rank", 0, 1'000'000, d.compress.o_lora_rank, s.compress.o_lora_rank);
    opt_int(r, "streams", 1, 64, d.compress.streams, s.compress.streams);
    opt_int(r, "rope_dim", 0, 100'000, d.compress.rope_dim, s.compress.rope_dim);
    r.finish();
    ok = ok && r.valid();
  }
  if (m.has("linear_attention") || d.linear.enabled()) {
    MapReader r = sub(m, "linear_attention");
    opt_int(r, "key_heads", 0, 100'000, d.linear.key_heads, s.linear.key_heads);
    opt_int(r, "value_heads", 0, 100'000, d.linear.value_heads, s.linear.value_heads);
    opt_int(r, "key_dim", 0, 100'000, d.linear.key_dim, s.linear.key_dim);
    opt_int(r, "value_dim", 0, 100'000, d.linear.value_dim, s.linear.value_dim);
    opt_int(r, "conv_kernel", 0, 1'000, d.linear.conv_kernel, s.linear.conv_kernel);
    opt_int(r, "state_bytes", 1, 8, d.linear.state_bytes, s.linear.state_bytes);
    take(r.string("pattern", d.linear.pattern), s.linear.pattern);
    // Gated DeltaNet (the default), Mamba-2 or Kimi Delta Attention: echoed where it is not the
    // default or is given.
    const bool mamba = d.linear.kind == models::LinearKind::kMamba2;
    const bool kda = d.linear.kind == models::LinearKind::kKda;
    if (r.has("kind") || mamba || kda) {
      const auto kind = r.choice("kind", {"gated_delta_net", "mamba2", "kda"},
                                 std::string(mamba ? "mamba2"
                                             : kda ? "kda"
                                                   : "gated_delta_net"));
      if (kind) {
        s.linear.kind = *kind == "mamba2" ? models::LinearKind::kMamba2
                        : *kind == "kda"  ? models::LinearKind::kKda
                                          : models::LinearKind::kGatedDeltaNet;
      } else {
        ok = false;
      }
    }
    if (r.has("chunk") || mamba) opt_int(r, "chunk", 1, 1'000'000, d.linear.chunk, s.linear.chunk);
    r.finish();
    ok = ok && r.valid();
  }
  {
    MapReader r = sub(m, "moe");
    opt_int(r, "experts", 0, 100'000, d.moe.experts, s.moe.experts);
    opt_int(r, "top_k", 0, 100'000, d.moe.top_k, s.moe.top_k);
    opt_int(r, "expert_intermediate", 0, 10'000'000, d.moe.expert_intermediate, s.moe.expert_intermediate);
    opt_int(r, "shared_experts", 0, 100'000, d.moe.shared_experts, s.moe.shared_experts);
    // The shared experts' total width follows their count unless given.
    const int shared_default = r.has("shared_experts") || r.has("expert_intermediate")
                                   ? s.moe.shared_experts * s.moe.expert_intermediate
                                   : d.moe.shared_intermediate;
    opt_int(r, "shared_intermediate", 0, 10'000'000, shared_default, s.moe.shared_intermediate);
    opt_int(r, "first_dense_layers", 0, 10'000, d.moe.first_dense_layers, s.moe.first_dense_layers);
    opt_int(r, "layer_frequency", 1, 10'000, std::max(1, d.moe.layer_frequency), s.moe.layer_frequency);
    opt_bool(r, "expert_bias", d.moe.expert_bias, s.moe.expert_bias);
    opt_bool(r, "router_bias", d.moe.router_bias, s.moe.router_bias);
    // Latent MoE (Nemotron-3 Super, Ultra): echoed where the model has one or the scenario gives it.
    if (r.has("latent") || d.moe.latent > 0) opt_int(r, "latent", 0, 1'000'000, d.moe.latent, s.moe.latent);
    r.finish();
    ok = ok && r.valid();
  }
  {
    auto f = m.find("vision");
    if ((f && f->node.IsNull()) || (!f && !d.vision)) {  // null, or absent with no preset's encoder
      m.echo()["vision"] = nullptr;
      s.vision.reset();
    } else {
      const models::VisionSpec v0 = d.vision.value_or(models::VisionSpec{});
      MapReader r = sub(m, "vision");
      models::VisionSpec v = v0;
      opt_int(r, "depth", 1, 10'000, v0.depth, v.depth);
      opt_int(r, "hidden", 1, 1'000'000, v0.hidden, v.hidden);
      opt_int(r, "heads", 1, 100'000, v0.heads, v.heads);
      opt_int(r, "intermediate", 1, 10'000'000, v0.intermediate, v.intermediate);
      opt_int(r, "patch", 1, 10'000, v0.patch, v.patch);
      opt_int(r, "spatial_merge", 1, 64, v0.spatial_merge, v.spatial_merge);
      opt_int(r, "temporal_patch", 1, 64, v0.temporal_patch, v.temporal_patch);
      opt_int(r, "in_channels", 1, 64, v0.in_channels, v.in_channels);
      opt_int(r, "window", 0, 100'000, v0.window, v.window);
      opt_int(r, "out_hidden", 1, 1'000'000, v0.out_hidden, v.out_hidden);
      take(r.integer("min_pixels", 1, std::int64_t{1} << 40, v0.min_pixels), v.min_pixels);
      take(r.integer("max_pixels", 1, std::int64_t{1} << 40, v0.max_pixels), v.max_pixels);
      if (auto fl = r.find("full_attention_layers"); fl && fl->node.IsSequence()) {
        v.full_attention_layers.clear();
        Json echo = Json::array();
        for (std::size_t i = 0; i < fl->node.size(); ++i) {
          try {
            const int l = fl->node[i].as<int>();
            v.full_attention_layers.push_back(l);
            echo.push_back(l);
          } catch (const YAML::Exception&) {
            m.doc().error(fl->node[i].Mark(), index_path(fl->path, i),
                          "expected a block index, got " + describe(fl->node[i]));
            ok = false;
          }
        }
        r.echo()["full_attention_layers"] = echo;
      } else if (fl && !fl->node.IsNull()) {
        m.doc().error(fl->mark, fl->path, "expected a list of block indexes, got " + describe(fl->node));
        ok = false;
      } else {
        Json echo = Json::array();
        for (int l : v.full_attention_layers) echo.push_back(l);
        r.echo()["full_attention_layers"] = echo;
      }
      r.finish();
      ok = ok && r.valid();
      s.vision = v;
    }
  }
  {
    MapReader r = sub(m, "formats");
    const auto all = models::format_names();
    const auto weights = read_format(r, "weights", all, d.formats.weights);
    // Experts follow the weights unless the base keeps them in a format of their own (gpt-oss).
    const models::Format experts_default =
        weights && d.formats.experts == d.formats.weights ? *weights : d.formats.experts;
    const auto experts = read_format(r, "experts", all, experts_default);
    const auto kv = read_format(r, "kv_cache", models::kv_format_names(), d.formats.kv_cache);
    const auto emulate = r.boolean("emulate", d.formats.emulate);
    if (weights && experts && kv && emulate) {
      s.formats = {*weights, *experts, *kv, *emulate, std::nullopt};
    } else {
      ok = false;
    }
    // Dense MLPs in a format of their own, echoed only where a model has one.
    if (r.has("mlp") || d.formats.mlp) {
      if (const auto mlp = read_format(r, "mlp", all, d.formats.mlp.value_or(s.formats.weights))) {
        s.formats.mlp = *mlp;
      } else {
        ok = false;
      }
    }
    r.finish();
    ok = ok && r.valid();
  }
  return ok;
}

}  // namespace

std::optional<models::ModelSpec> read_model(MapReader& top, const std::string& base_dir) {
  auto f = top.find("model");
  Json& echo = top.echo()["model"];
  if (!f) {
    top.missing("model",
                "a preset name like 'llama-3.1-8b', {hf_config: FILE}, or a mapping of "
                "the model's figures");
    return std::nullopt;
  }
  MapReader m(top.doc(), as_preset_map(f->node), f->mark, f->path, echo);
  if (!m.valid()) return std::nullopt;
  bool had_preset = false;
  std::optional<models::ModelSpec> base =
      read_preset<models::ModelSpec>(m, &models::model_preset, models::model_preset_names(), "model", *f, had_preset);
  if (had_preset && !base) return std::nullopt;
  if (auto h = m.find("hf_config")) {
    if (had_preset) {
      m.doc().error(h->mark, h->path, "give either a preset or an hf_config file, not both");
      return std::nullopt;
    }
    if (!h->node.IsScalar()) {
      m.doc().error(h->mark, h->path, "expected the path of a config.json, got " + describe(h->node));
      return std::nullopt;
    }
    const std::string given = h->node.Scalar();
    std::filesystem::path path(given);
    if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
    if (!m.doc().allows_file(h->mark, h->path, path.string())) return std::nullopt;
    std::vector<Diagnostic> problems;
    base = read_hf_config(path.string(), problems);
    for (Diagnostic& d : problems) {
      if (d.line == 0) {
        // The file as a whole (cannot open it, too big, not a file): said at the key that names it.
        m.doc().error(h->mark, h->path, d.message + " ('" + path.string() + "')");
      } else {
        m.doc().diagnostics().push_back(std::move(d));
      }
    }
    if (!base) return std::nullopt;
    m.echo()["hf_config"] = given;
  }
  const models::ModelSpec d = base.value_or(models::ModelSpec{});
  models::ModelSpec s;
  bool ok = read_model_figures(m, d, base.has_value(), s);
  m.finish();
  s.source = base ? d.source : "scenario";
  if (!ok) return std::nullopt;
  for (const auto& problem : models::validate_model(s)) {
    m.doc().error(m.mark(), m.path(), problem);
    ok = false;
  }
  return ok ? std::optional<models::ModelSpec>(s) : std::nullopt;
}

namespace {

// ", with GEMM tables" / ", with GEMM and attention tables" for a profile's measured tables.
std::string tables_said(const models::PreparedTables* t) {
  if (t == nullptr) return "";
  bool gemm = false, attention = false;
  for (const models::MeasuredLogGrid& g : t->tables().log_grids) {
    (g.kind == models::OpKind::kAttentionPrefill || g.kind == models::OpKind::kAttentionDecode ? attention : gemm) =
        true;
  }
  if (!gemm && !attention) return "";
  return gemm && attention ? ", with GEMM and attention tables"
         : gemm            ? ", with GEMM tables"
                           : ", with attention tables";
}

std::string engine_said(const std::string& engine) {
  if (engine == "trtllm") return "TensorRT-LLM";
  if (engine == "sglang") return "SGLang";
  if (engine == "vllm") return "vLLM";
  return engine;
}

// Whether the collective figures of a profile measured on chip `measured` describe the scale-up
// fabric of `pool`'s chip: the same preset, or one whose scale-up links are the same (bandwidth
// per direction and domain). They are fitted over that fabric (all_reduce_lines' efficiencies are
// fractions of its bandwidth, their fixed times its switches' and kernels'), so on another
// (H800's cut NVLink under an H100 profile) the pool's own preset figures apply.
bool same_fabric(const std::string& measured, const models::ChipSpec& pool) {
  if (measured.empty() || measured == pool.name) return true;
  const auto m = models::chip_preset(measured);
  return m && m->scale_up_bandwidth.bytes_per_s == pool.scale_up_bandwidth.bytes_per_s &&
         m->scale_up_domain == pool.scale_up_domain;
}

// The collective figures of `own` (the preset's) in `e`.
void keep_fabric_figures(models::Efficiency& e, const models::Efficiency& own) {
  e.collective_latency = own.collective_latency;
  e.collective_bandwidth = own.collective_bandwidth;
  e.all_reduce_lines = own.all_reduce_lines;
}

// Which of a pool's chip figures are measured (ChipSpec::calibration): the profile it applies,
// whose kernels it measured, and whether they are this chip's.
std::string calibration_said(const ChipProfile& p, const std::string& preset, bool own_fabric) {
  const std::string kernels = p.engine.empty() ? "kernels" : engine_said(p.engine) + " kernels";
  const std::string how = p.by_default ? " (the preset's default)" : "";
  if (!p.transferred_from.empty()) {
    return "transferred: profile " + p.name + how + ", " + kernels + " measured on " + p.transferred_from +
           ", carried to " + p.chip + " by calibrate's transfer rule; nothing of " + p.chip + " was measured";
  }
  if (!p.chip.empty() && p.chip != preset) {
    return "borrowed: profile " + p.name + how + ", " + kernels + " measured on " + p.chip + ", applied to " + preset +
           (own_fabric ? "" : "; collectives " + preset + "'s own (another scale-up fabric)");
  }
  return "calibrated: profile " + p.name + how + ", " + kernels + " measured on " + (p.chip.empty() ? preset : p.chip) +
         (p.created.empty() ? "" : " (" + p.created + ")");
}

}  // namespace

std::optional<models::ChipSpec> read_chip(MapReader& pool, models::CostModelConfig* cost_model,
                                          std::string_view engine) {
  auto f = pool.find("chip");
  Json& echo = pool.echo()["chip"];
  if (!f) {
    pool.missing("chip", "a preset name like 'h100-sxm' or a mapping of the chip's figures");
    return std::nullopt;
  }
  MapReader m(pool.doc(), as_preset_map(f->node), f->mark, f->path, echo);
  if (!m.valid()) return std::nullopt;
  bool had_preset = false;
  const auto base =
      read_preset<models::ChipSpec>(m, &models::chip_preset, models::chip_preset_names(), "chip", *f, had_preset);
  if (had_preset && !base) return std::nullopt;
  if (!base) {
    m.doc().error(m.mark(), child_path(m.path(), "preset"),
                  "a chip needs a preset to start from (its efficiencies are measured per chip "
                  "family); override any figure next to it");
    return std::nullopt;
  }
  const models::ChipSpec& d = *base;
  models::ChipSpec c = d;
  bool ok = true;
  auto q = [&](std::string_view key, Dimension dim, double v, double& out, bool zero_ok = false) {
    auto r = m.quantity(key, dim, 0, kInf, zero_ok, v);
    if (r)
      out = *r;
    else
      ok = false;
  };
  if (auto r = m.string("name", d.name))
    c.name = *r;
  else
    ok = false;
  q("memory", Dimension::kBytes, d.memory.value, c.memory.value);
  q("hbm_bandwidth", Dimension::kBandwidth, d.hbm_bandwidth.bytes_per_s, c.hbm_bandwidth.bytes_per_s);
  q("bf16_flops", Dimension::kFlopRate, d.bf16_flops.flop_per_s, c.bf16_flops.flop_per_s);
  // Zero: the chip has no tensor-core rate for the format.
  q("fp8_flops", Dimension::kFlopRate, d.fp8_flops.flop_per_s, c.fp8_flops.flop_per_s, true);
  q("int8_flops", Dimension::kFlopRate, d.int8_flops.flop_per_s, c.int8_flops.flop_per_s, true);
  q("fp4_flops", Dimension::kFlopRate, d.fp4_flops.flop_per_s, c.fp4_flops.flop_per_s, true);
  q("scale_up_bandwidth", Dimension::kBandwidth, d.scale_up_bandwidth.bytes_per_s, c.scale_up_bandwidth.bytes_per_s);
  if (auto r = m.integer("scale_up_domain", 1, 1'000'000, d.scale_up_domain)) {
    c.scale_up_domain = static_cast<int>(*r);
  } else {
    ok = false;
  }
  q("scale_out_bandwidth", Dimension::kBandwidth, d.scale_out_bandwidth.bytes_per_s, c.scale_out_bandwidth.bytes_per_s);
  q("host_bandwidth", Dimension::kBandwidth, d.host_bandwidth.bytes_per_s, c.host_bandwidth.bytes_per_s);
  if (auto r = m.duration("scale_out_latency", Duration::zero(), Duration::seconds(1), d.scale_out_latency)) {
    c.scale_out_latency = *r;
  } else {
    ok = false;
  }
  // A calibration profile replaces the preset's efficiencies; figures given next to it win.
  models::Efficiency base_efficiency = d.efficiency;
  if (auto p = read_chip_profile(m, d, engine)) {
    ok = ok && p->ok;
    base_efficiency = p->efficiency;
    const bool own_fabric = same_fabric(p->chip, d);
    if (!own_fabric) keep_fabric_figures(base_efficiency, d.efficiency);
    // The preset's own words on its efficiencies no longer apply: the profile's replace them.
    c.source = "efficiencies from profile " + p->name +
               (p->chip.empty() || p->chip == d.name ? "" : " (measured on " + p->chip + ")") +
               (p->created.empty() ? "" : ", " + p->created) + tables_said(p->tables.get()) + "; preset: " + d.source;
    c.calibration = calibration_said(*p, d.name, own_fabric);
    if (cost_model && p->tables && !p->tables->tables().log_grids.empty()) {
      *cost_model = models::TableConfig{p->tables, "profile " + p->name};
    }
  } else {
    // How much that can matter, measured: efficiencies carried between chips that both have tables
    // miss the target's measured operators by 18% (median over operator classes) and up to 56%
    // (calibrate/README.md, transfer to chips without measurements).
    c.calibration = "uncalibrated: the preset's efficiencies (" + d.source +
                    "); operator times from carried efficiencies miss measured ones by ~18% median, up to ~56%";
  }
  if (auto e = read_efficiency(m, base_efficiency))
    c.efficiency = *e;
  else
    ok = false;
  m.finish();
  return ok ? std::optional<models::ChipSpec>(c) : std::nullopt;
}

}  // namespace servesim::scenario
