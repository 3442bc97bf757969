#include <type_traits>

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
                                std::vector<std::string_view> names, std::string_view what,
                                const Field& section, bool& given) {
  auto f = m.find("preset");
  given = f.has_value();
  if (!f) return std::nullopt;
  if (section.node.IsScalar()) {
    f->mark = section.mark;
    f->path = section.path;
  }
  if (!f->node.IsScalar()) {
    m.doc().error(f->mark, f->path, "expected a " + std::string(what) + " preset name, got " +
                                        describe(f->node));
    return std::nullopt;
  }
  const std::string name = f->node.Scalar();
  auto spec = lookup(name);
  if (!spec) {
    std::string list;
    for (auto n : names) list += (list.empty() ? "" : ", ") + std::string(n);
    const std::string_view hint = closest_match(name, names);
    m.doc().error(f->mark, f->path,
                  "unknown " + std::string(what) + " preset '" + name + "'" +
                      (hint.empty() ? "" : " (did you mean '" + std::string(hint) + "'?)") +
                      "; presets: " + list);
    return std::nullopt;
  }
  m.echo()["preset"] = name;
  return spec;
}

std::optional<models::Efficiency> read_efficiency(MapReader& chip, const models::Efficiency& d) {
  auto f = chip.find("efficiency");
  MapReader m(chip.doc(), f ? f->node : YAML::Node(), f ? f->mark : chip.mark(),
              child_path(chip.path(), "efficiency"), chip.echo()["efficiency"]);
  models::Efficiency e;
  bool ok = m.valid();
  auto frac = [&](std::string_view key, double v, double& out) {
    auto r = m.number(key, 0, 1, true, v);
    if (r) out = *r; else ok = false;
  };
  auto dur = [&](std::string_view key, Duration v, Duration& out) {
    auto r = m.duration(key, Duration::zero(), Duration::seconds(10), v);
    if (r) out = *r; else ok = false;
  };
  frac("gemm_compute", d.gemm_compute, e.gemm_compute);
  frac("gemm_memory", d.gemm_memory, e.gemm_memory);
  dur("gemm_overhead", d.gemm_overhead, e.gemm_overhead);
  frac("attention_prefill", d.attention_prefill, e.attention_prefill);
  frac("attention_decode", d.attention_decode, e.attention_decode);
  dur("attention_overhead", d.attention_overhead, e.attention_overhead);
  frac("elementwise", d.elementwise, e.elementwise);
  dur("elementwise_overhead", d.elementwise_overhead, e.elementwise_overhead);
  frac("collective_bandwidth", d.collective_bandwidth, e.collective_bandwidth);
  dur("collective_latency", d.collective_latency, e.collective_latency);
  dur("iteration_overhead", d.iteration_overhead, e.iteration_overhead);
  dur("sequence_overhead", d.sequence_overhead, e.sequence_overhead);
  m.finish();
  return ok ? std::optional<models::Efficiency>(e) : std::nullopt;
}

}  // namespace

std::optional<models::ModelSpec> read_model(MapReader& top) {
  auto f = top.find("model");
  Json& echo = top.echo()["model"];
  if (!f) {
    top.missing("model", "a preset name like 'llama-3.1-8b' or a mapping of the model's figures");
    return std::nullopt;
  }
  MapReader m(top.doc(), as_preset_map(f->node), f->mark, f->path, echo);
  if (!m.valid()) return std::nullopt;
  bool had_preset = false;
  const auto base = read_preset<models::ModelSpec>(m, &models::model_preset,
                                                   models::model_preset_names(), "model", *f, had_preset);
  if (had_preset && !base) return std::nullopt;
  const models::ModelSpec d = base.value_or(models::ModelSpec{});
  auto dflt = [&](auto v) { return base ? std::optional<decltype(v)>(v) : std::nullopt; };
  models::ModelSpec s;
  bool ok = true;
  auto take = [&ok](auto opt, auto& out) {
    if (opt) out = static_cast<std::remove_reference_t<decltype(out)>>(*opt); else ok = false;
  };
  take(m.string("name", dflt(d.name)), s.name);
  take(m.integer("layers", 1, 10'000, dflt(std::int64_t{d.layers})), s.layers);
  take(m.integer("hidden", 1, 1'000'000, dflt(std::int64_t{d.hidden})), s.hidden);
  take(m.integer("heads", 1, 100'000, dflt(std::int64_t{d.heads})), s.heads);
  take(m.integer("kv_heads", 1, 100'000, dflt(std::int64_t{d.kv_heads})), s.kv_heads);
  take(m.integer("head_dim", 1, 100'000, dflt(std::int64_t{d.head_dim})), s.head_dim);
  take(m.integer("intermediate", 1, 10'000'000, dflt(std::int64_t{d.intermediate})), s.intermediate);
  take(m.integer("vocab", 1, 100'000'000, dflt(std::int64_t{d.vocab})), s.vocab);
  take(m.integer("max_context", 1, kMaxTokens, dflt(std::int64_t{d.max_context})), s.max_context);
  take(m.boolean("tied_embeddings", base ? std::optional<bool>(d.tied_embeddings) : false),
       s.tied_embeddings);
  m.finish();
  s.source = base ? d.source : "scenario";
  if (!ok) return std::nullopt;
  for (const auto& problem : models::validate_model(s)) {
    m.doc().error(m.mark(), m.path(), problem);
    ok = false;
  }
  return ok ? std::optional<models::ModelSpec>(s) : std::nullopt;
}

std::optional<models::ChipSpec> read_chip(MapReader& pool) {
  auto f = pool.find("chip");
  Json& echo = pool.echo()["chip"];
  if (!f) {
    pool.missing("chip", "a preset name like 'h100-sxm' or a mapping of the chip's figures");
    return std::nullopt;
  }
  MapReader m(pool.doc(), as_preset_map(f->node), f->mark, f->path, echo);
  if (!m.valid()) return std::nullopt;
  bool had_preset = false;
  const auto base = read_preset<models::ChipSpec>(m, &models::chip_preset,
                                                  models::chip_preset_names(), "chip", *f, had_preset);
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
  auto q = [&](std::string_view key, Dimension dim, double v, double& out) {
    auto r = m.quantity(key, dim, 0, kInf, false, v);
    if (r) out = *r; else ok = false;
  };
  if (auto r = m.string("name", d.name)) c.name = *r; else ok = false;
  q("memory", Dimension::kBytes, d.memory.value, c.memory.value);
  q("hbm_bandwidth", Dimension::kBandwidth, d.hbm_bandwidth.bytes_per_s, c.hbm_bandwidth.bytes_per_s);
  q("bf16_flops", Dimension::kFlopRate, d.bf16_flops.flop_per_s, c.bf16_flops.flop_per_s);
  q("scale_up_bandwidth", Dimension::kBandwidth, d.scale_up_bandwidth.bytes_per_s,
    c.scale_up_bandwidth.bytes_per_s);
  if (auto r = m.integer("scale_up_domain", 1, 1'000'000, d.scale_up_domain)) {
    c.scale_up_domain = static_cast<int>(*r);
  } else {
    ok = false;
  }
  q("scale_out_bandwidth", Dimension::kBandwidth, d.scale_out_bandwidth.bytes_per_s,
    c.scale_out_bandwidth.bytes_per_s);
  if (auto r = m.duration("scale_out_latency", Duration::zero(), Duration::seconds(1),
                          d.scale_out_latency)) {
    c.scale_out_latency = *r;
  } else {
    ok = false;
  }
  if (auto e = read_efficiency(m, d.efficiency)) c.efficiency = *e; else ok = false;
  m.finish();
  return ok ? std::optional<models::ChipSpec>(c) : std::nullopt;
}

}  // namespace servesim::scenario
