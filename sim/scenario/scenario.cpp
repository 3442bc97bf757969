#include "sim/scenario/scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "models/parallel_plan.h"
#include "sim/scenario/overrides.h"
#include "sim/scenario/reader.h"
#include "topologies/placement.h"

namespace servesim::scenario {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kMaxTokens = 100'000'000;  // per request; RequestState holds 32-bit counts
const Duration kMaxDuration = Duration::seconds(100.0 * 86400.0);

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / kGiB);
  return buf;
}

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

std::int64_t shortest_length(const workloads::LengthDistribution& d) {
  struct Visitor {
    std::int64_t operator()(const workloads::FixedLength& f) const { return f.value; }
    std::int64_t operator()(const workloads::UniformLength& u) const { return u.min; }
    std::int64_t operator()(const workloads::LognormalLength& l) const { return l.min; }
  };
  return std::visit(Visitor{}, d);
}

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

// Marks of pool keys that whole-deployment checks report against, and which parts of the pool
// were read without errors (each check runs when its inputs are valid, so that one mistake does
// not hide an unrelated one).
struct PoolMarks {
  Field tp, chip, max_model_len, max_batched_tokens, pool;
  bool chip_ok = false, plan_ok = false, len_ok = false, scheduler_ok = false, kv_ok = false;
  bool all_ok = false;
};

Field field_or(MapReader& m, std::string_view key) {
  if (auto f = m.find(key)) return *f;
  return Field{YAML::Node(), m.mark(), child_path(m.path(), key)};
}

cluster::PoolConfig read_pool(Document& doc, const YAML::Node& node,
                                             const YAML::Mark& mark, const std::string& path,
                                             std::size_t index, Json& echo,
                                             const std::optional<models::ModelSpec>& model,
                                             PoolMarks& marks) {
  MapReader m(doc, node, mark, path, echo);
  cluster::PoolConfig p;
  if (!m.valid()) return p;
  bool ok = true;
  if (auto r = m.string("name", "pool" + std::to_string(index))) p.name = *r; else ok = false;
  const auto role = m.choice("role", {"combined", "prefill", "decode", "encode"}, "combined");
  if (role && *role != "combined") {
    const Field f = field_or(m, "role");
    doc.error(f.mark, f.path,
              "role '" + *role + "' needs disaggregated (EPD) serving, which this version does not "
              "model yet; use 'combined' (each instance prefills and decodes)");
    ok = false;
  }
  marks.pool = Field{YAML::Node(), m.mark(), path};
  marks.chip = field_or(m, "chip");
  if (auto c = read_chip(m)) {
    p.chip = *c;
    marks.chip_ok = true;
  } else {
    ok = false;
  }
  if (auto r = m.integer("instances", 1, 1'000'000, std::nullopt)) {
    p.instances = static_cast<int>(*r);
  } else {
    ok = false;
  }

  {
    auto f = m.find("parallel");
    MapReader par(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(),
                  child_path(path, "parallel"), echo["parallel"]);
    marks.tp = field_or(par, "tp");
    const auto tp = par.integer("tp", 1, 4096, 1);
    const auto pp = par.integer("pp", 1, 1024, 1);
    par.finish();
    marks.plan_ok = tp && pp && par.valid();
    if (marks.plan_ok) {
      p.plan.tp = static_cast<int>(*tp);
      p.plan.pp = static_cast<int>(*pp);
    }
    ok = ok && marks.plan_ok;
  }

  marks.max_model_len = field_or(m, "max_model_len");
  const std::optional<std::int64_t> model_len =
      model ? std::optional<std::int64_t>(model->max_context) : std::nullopt;
  if (model_len || m.has("max_model_len")) {
    if (auto r = m.integer("max_model_len", 2, kMaxTokens, model_len.value_or(2))) {
      p.max_model_len = *r;
      marks.len_ok = true;
    } else {
      ok = false;
    }
  } else {
    m.find("max_model_len");  // known key; its default comes from a model that failed to load
    ok = false;
  }

  {
    auto f = m.find("scheduler");
    MapReader s(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(),
                child_path(path, "scheduler"), echo["scheduler"]);
    const bool before = ok;
    ok = true;
    const auto policy = s.choice("policy", {"sarathi", "whole_prompt"}, "sarathi");
    if (policy) {
      p.scheduler.policy = *policy == "sarathi" ? cluster::SchedulerPolicy::kSarathi
                                                : cluster::SchedulerPolicy::kWholePrompt;
    } else {
      ok = false;
    }
    if (auto r = s.integer("max_batch_size", 1, 1'000'000, 256)) p.scheduler.max_batch_size = *r;
    else ok = false;
    marks.max_batched_tokens = field_or(s, "max_batched_tokens");
    // Sarathi-Serve's default chunk is 512 tokens; vLLM without chunked prefill batches up to
    // max_model_len tokens so that any admissible prompt fits.
    const std::int64_t budget_default =
        policy && *policy == "whole_prompt" ? std::max<std::int64_t>(p.max_model_len, 2048) : 512;
    if (auto r = s.integer("max_batched_tokens", 1, 1 << 20, budget_default)) {
      p.scheduler.max_batched_tokens = *r;
    } else {
      ok = false;
    }
    if (auto r = s.integer("max_queue", 0, 1'000'000'000, 0)) p.scheduler.max_queue = *r;
    else ok = false;
    s.finish();
    marks.scheduler_ok = ok && s.valid();
    ok = before && marks.scheduler_ok;
  }
  {
    auto f = m.find("kv_cache");
    MapReader k(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(),
                child_path(path, "kv_cache"), echo["kv_cache"]);
    const bool before = ok;
    ok = true;
    if (auto r = k.integer("block_tokens", 1, 4096, 16)) p.kv_cache.block_tokens = *r; else ok = false;
    if (auto r = k.number("memory_utilization", 0, 1, true, 0.9)) p.kv_cache.memory_utilization = *r;
    else ok = false;
    // Assumed framework reserve (CUDA context, NCCL buffers, CUDA graphs): 1 GiB.
    if (auto r = k.quantity("reserved", Dimension::kBytes, 0, kInf, true, 1.0 * kGiB)) {
      p.kv_cache.reserved = Bytes{*r};
    } else {
      ok = false;
    }
    if (auto r = k.number("watermark", 0, 0.5, false, 0.01)) p.kv_cache.watermark = *r; else ok = false;
    k.finish();
    marks.kv_ok = ok && k.valid();
    ok = before && marks.kv_ok;
  }
  {
    auto f = m.find("router");
    MapReader r(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(),
                child_path(path, "router"), echo["router"]);
    const auto policy = r.choice("policy", {"least_loaded", "round_robin"}, "least_loaded");
    const auto load = r.choice("load", {"tokens", "requests"}, "tokens");
    if (policy) {
      p.router.policy = *policy == "least_loaded" ? cluster::RouterPolicy::kLeastLoaded
                                                  : cluster::RouterPolicy::kRoundRobin;
    } else {
      ok = false;
    }
    if (load) {
      p.router.load = *load == "tokens" ? cluster::LoadMetric::kOutstandingTokens
                                        : cluster::LoadMetric::kOutstandingRequests;
    } else {
      ok = false;
    }
    r.finish();
    ok = ok && r.valid();
  }
  m.finish();
  marks.all_ok = ok && m.valid();
  return p;
}

std::optional<workloads::LengthDistribution> read_length(MapReader& parent, std::string_view key) {
  auto f = parent.find(key);
  if (!f) {
    parent.missing(key, "a distribution like {distribution: fixed, value: 512}");
    return std::nullopt;
  }
  MapReader m(parent.doc(), f->node, f->mark, f->path, parent.echo()[std::string(key)]);
  if (!m.valid()) return std::nullopt;
  const auto kind = m.choice("distribution", {"fixed", "uniform", "lognormal"}, std::nullopt);
  if (!kind) m.ignore_unknown_keys();
  std::optional<workloads::LengthDistribution> out;
  if (kind == "fixed") {
    if (auto v = m.integer("value", 1, kMaxTokens, std::nullopt)) out = workloads::FixedLength{*v};
  } else if (kind == "uniform") {
    const auto lo = m.integer("min", 1, kMaxTokens, std::nullopt);
    const auto hi = m.integer("max", 1, kMaxTokens, std::nullopt);
    if (lo && hi) {
      if (*lo > *hi) {
        const Field fm = field_or(m, "max");
        m.doc().error(fm.mark, fm.path, "max (" + std::to_string(*hi) + ") is below min (" +
                                            std::to_string(*lo) + ")");
      } else {
        out = workloads::UniformLength{*lo, *hi};
      }
    }
  } else if (kind == "lognormal") {
    const auto median = m.number("median", 0, static_cast<double>(kMaxTokens), true, std::nullopt);
    const auto sigma = m.number("sigma", 0, 10, false, std::nullopt);
    const auto lo = m.integer("min", 1, kMaxTokens, 1);
    const auto hi = m.integer("max", 1, kMaxTokens, std::nullopt);
    if (median && sigma && lo && hi) {
      if (*lo > *hi) {
        const Field fm = field_or(m, "max");
        m.doc().error(fm.mark, fm.path, "max (" + std::to_string(*hi) + ") is below min (" +
                                            std::to_string(*lo) + ")");
      } else {
        out = workloads::LognormalLength{*median, *sigma, *lo, *hi};
      }
    }
  }
  m.finish();
  return out;
}

std::optional<workloads::LengthConfig> read_lengths(MapReader& workload, const std::string& base_dir) {
  auto f = workload.find("lengths");
  if (!f) {
    workload.missing("lengths", "{prompt: ..., output: ...} or {trace: {file: ...}}");
    return std::nullopt;
  }
  MapReader m(workload.doc(), f->node, f->mark, f->path, workload.echo()["lengths"]);
  if (!m.valid()) return std::nullopt;
  std::optional<workloads::LengthConfig> out;
  if (m.has("trace")) {
    if (m.has("prompt") || m.has("output")) {
      m.doc().error(m.mark(), m.path(),
                    "give either a trace or prompt and output distributions, not both");
    }
    m.find("prompt");
    m.find("output");
    auto tf = m.find("trace");
    MapReader t(m.doc(), tf->node, tf->mark, tf->path, m.echo()["trace"]);
    workloads::TraceLengths tl;
    bool ok = t.valid();
    if (auto r = t.string("file", std::nullopt)) {
      const std::filesystem::path p(*r);
      tl.path = p.is_absolute() || base_dir.empty() ? p.string() : (std::filesystem::path(base_dir) / p).string();
      if (!std::ifstream(tl.path)) {
        const Field ff = field_or(t, "file");
        t.doc().error(ff.mark, ff.path, "cannot open the trace file '" + tl.path + "'" +
                                            (p.is_absolute() ? "" : " (relative paths start at "
                                                                    "the scenario file's folder)"));
        ok = false;
      }
    } else {
      ok = false;
    }
    if (auto r = t.string("prompt_column", tl.prompt_column)) tl.prompt_column = *r; else ok = false;
    if (auto r = t.string("output_column", tl.output_column)) tl.output_column = *r; else ok = false;
    if (auto r = t.integer("max_total_tokens", 0, kMaxTokens, 0)) {
      if (*r == 1) {
        const Field fm = field_or(t, "max_total_tokens");
        t.doc().error(fm.mark, fm.path, "must be 0 (no cap) or at least 2 (one prompt and one "
                                        "output token)");
        ok = false;
      }
      tl.max_total_tokens = *r;
    } else {
      ok = false;
    }
    if (auto r = t.choice("order", {"shuffle", "sequential"}, "shuffle")) tl.shuffle = *r == "shuffle";
    else ok = false;
    if (ok) {
      // Read the trace now, once: a bad file is reported before anything runs, and the simulation
      // uses these rows.
      try {
        tl.rows = workloads::load_trace_rows(tl);
      } catch (const InputError& e) {
        for (const auto& d : e.diagnostics()) t.doc().diagnostics().push_back(d);
        ok = false;
      }
    }
    t.finish();
    if (ok) out = tl;
  } else {
    m.find("trace");
    const auto prompt = read_length(m, "prompt");
    const auto output = read_length(m, "output");
    if (prompt && output) out = workloads::IndependentLengths{*prompt, *output};
  }
  m.finish();
  return out;
}

std::optional<workloads::WorkloadConfig> read_workload(MapReader& top, const std::string& base_dir) {
  auto f = top.find("workload");
  if (!f) {
    top.missing("workload", "the traffic: arrivals, lengths and a request count");
    return std::nullopt;
  }
  MapReader m(top.doc(), f->node, f->mark, f->path, top.echo()["workload"]);
  if (!m.valid()) return std::nullopt;
  workloads::WorkloadConfig w;
  bool ok = true;
  if (auto r = m.integer("requests", 0, 1'000'000'000, 0)) w.requests = *r; else ok = false;
  {
    auto af = m.find("arrivals");
    if (!af) {
      m.missing("arrivals", "{process: poisson, rate: 10 /s} or {process: closed_loop, clients: 32}");
      ok = false;
    } else {
      MapReader a(m.doc(), af->node, af->mark, af->path, m.echo()["arrivals"]);
      const auto process = a.choice("process", {"poisson", "closed_loop"}, std::nullopt);
      if (!process) a.ignore_unknown_keys();
      if (process == "poisson") {
        if (auto r = a.quantity("rate", Dimension::kFrequency, 0, 1e9, false, std::nullopt)) {
          w.arrivals = workloads::PoissonArrivals{Frequency{*r}};
        } else {
          ok = false;
        }
      } else if (process == "closed_loop") {
        workloads::ClosedLoopArrivals c;
        if (auto r = a.integer("clients", 1, 10'000'000, std::nullopt)) c.clients = static_cast<int>(*r);
        else ok = false;
        if (auto r = a.duration("think_time", Duration::zero(), kMaxDuration, Duration::zero())) {
          c.think_time = *r;
        } else {
          ok = false;
        }
        w.arrivals = c;
      } else {
        ok = false;
      }
      a.finish();
      ok = ok && a.valid();
    }
  }
  if (auto l = read_lengths(m, base_dir)) w.lengths = *l; else ok = false;
  m.finish();
  return ok ? std::optional<workloads::WorkloadConfig>(w) : std::nullopt;
}

std::string memory_advice(const std::string& consumer) {
  if (consumer == "weights") return "more tensor or pipeline parallelism would split them";
  if (consumer == "activations") return "a smaller scheduler.max_batched_tokens would shrink them";
  return "a smaller kv_cache.reserved would free it";
}

void check_deployment(Document& doc, const models::ModelSpec& model, const cluster::PoolConfig& p,
                      const PoolMarks& marks) {
  bool plan_valid = marks.plan_ok;
  if (marks.plan_ok) {
    const int max_tp = marks.chip_ok ? p.chip.scale_up_domain : 64;
    for (const auto& problem : models::validate_plan(model, p.plan, max_tp)) {
      doc.error(marks.tp.mark, marks.tp.path, problem);
      plan_valid = false;
    }
  }
  if (marks.plan_ok && marks.chip_ok) {
    for (const auto& problem :
         topologies::validate_placement(cluster::fabric_of(p.chip), p.plan.tp, p.plan.pp)) {
      doc.error(marks.tp.mark, marks.tp.path, problem);
      plan_valid = false;
    }
  }
  if (marks.scheduler_ok && p.scheduler.max_batched_tokens < p.scheduler.max_batch_size) {
    doc.error(marks.max_batched_tokens.mark, marks.max_batched_tokens.path,
              "the token budget (" + std::to_string(p.scheduler.max_batched_tokens) +
                  ") is below max_batch_size (" + std::to_string(p.scheduler.max_batch_size) +
                  "): a full batch of decodes would not fit in one iteration");
  }
  if (marks.scheduler_ok && marks.len_ok &&
      p.scheduler.policy == cluster::SchedulerPolicy::kWholePrompt &&
      p.scheduler.max_batched_tokens < p.max_model_len) {
    doc.error(marks.max_batched_tokens.mark, marks.max_batched_tokens.path,
              "whole_prompt scheduling needs a token budget of at least max_model_len (" +
                  std::to_string(p.max_model_len) + ") so that every admissible prompt fits; got " +
                  std::to_string(p.scheduler.max_batched_tokens));
  }
  if (marks.len_ok && p.max_model_len > model.max_context) {
    doc.error(marks.max_model_len.mark, marks.max_model_len.path,
              "max_model_len " + std::to_string(p.max_model_len) + " exceeds the context of " +
                  model.name + " (" + std::to_string(model.max_context) + " tokens)");
  }
  if (!(plan_valid && marks.chip_ok && marks.scheduler_ok && marks.kv_ok)) return;

  const cluster::PoolCapacity cap = cluster::pool_capacity(model, p);
  const models::MemoryPlan& mem = cap.memory;
  const std::string where = p.plan.pp > 1 ? "each chip of pipeline stage " +
                                                std::to_string(mem.stage) : "each chip";
  const std::string plan = "tp=" + std::to_string(p.plan.tp) + ", pp=" + std::to_string(p.plan.pp);
  if (!mem.fits()) {
    const double need = mem.weights.value + mem.activations.value + mem.reserved.value;
    char util[32];
    std::snprintf(util, sizeof util, "%g", p.kv_cache.memory_utilization);
    doc.error(marks.chip.mark, marks.chip.path,
              model.name + " does not fit on " + p.chip.name + " with " + plan + ": " + where +
                  " needs " + gib(mem.weights.value) + " of weights + " +
                  gib(mem.activations.value) + " of activations + " + gib(mem.reserved.value) +
                  " reserved = " + gib(need) + " before any KV cache, but has " +
                  gib(mem.usable.value) + " usable (" + gib(mem.capacity.value) +
                  " x memory_utilization " + util + "): short by " +
                  gib(need - mem.usable.value) + "; the biggest consumer is " +
                  mem.biggest_consumer() + " (" + memory_advice(mem.biggest_consumer()) + ")");
    return;
  }
  if (!marks.len_ok) return;
  const std::int64_t admissible = cap.admissible_tokens;
  if (admissible < p.max_model_len) {
    doc.error(marks.max_model_len.mark, marks.max_model_len.path,
              "the KV cache of " + (p.plan.pp > 1 ? std::string("each pipeline lane") :
                                                    std::string("each instance")) +
                  " admits at most " + format_count(admissible) + " tokens (" +
                  gib(mem.kv.value) + " of KV memory per chip at " +
                  format_count(static_cast<std::int64_t>(mem.kv_bytes_per_token)) +
                  " bytes per token, less the admission watermark), fewer than max_model_len " +
                  format_count(p.max_model_len) + ": the longest request could never run; set " +
                  "max_model_len to at most " + format_count(admissible) +
                  " or give the KV cache more room (more chips per instance, a bigger chip)");
  }
}

Scenario load(YAML::Node root, Document& doc, const std::string& display_name,
              const std::string& base_dir, const LoadOptions& options) {
  for (std::size_t i = 0; i < options.sets.size(); ++i) {
    apply_override(root, options.sets[i], static_cast<int>(i) + 1, doc);
  }
  Scenario out;
  Json echo = Json::object();
  MapReader top(doc, root, YAML::Mark(), "", echo);
  if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
    throw InputError(std::move(doc.diagnostics()));
  }
  const std::string stem = std::filesystem::path(display_name).stem().string();
  out.name = top.string("name", stem.empty() ? "scenario" : stem).value_or(stem);
  if (auto r = top.integer("seed", 0, std::numeric_limits<std::int64_t>::max(), 0)) {
    out.config.seed = static_cast<std::uint64_t>(*r);
  }
  if (options.seed) {
    out.config.seed = *options.seed;
    echo["seed"] = *options.seed;
  }
  const auto model = read_model(top);

  std::vector<std::pair<cluster::PoolConfig, PoolMarks>> pools;
  bool pools_ok = true;
  {
    auto df = top.find("deployment");
    if (!df) {
      top.missing("deployment", "the pools of instances that serve the model");
      pools_ok = false;
    } else {
      MapReader dep(doc, df->node, df->mark, df->path, echo["deployment"]);
      auto pf = dep.find("pools");
      if (!pf) {
        dep.missing("pools", "a list of pools");
        pools_ok = false;
      } else if (!pf->node.IsSequence() || pf->node.size() == 0) {
        doc.error(pf->mark, pf->path,
                  "expected a non-empty list of pools, got " +
                      (pf->node.IsSequence() ? std::string("an empty list") : describe(pf->node)));
        pools_ok = false;
      } else {
        Json& list = dep.echo()["pools"];
        list = Json::array();
        for (std::size_t i = 0; i < pf->node.size(); ++i) {
          list.push_back(Json::object());
          PoolMarks marks;
          const YAML::Node item = pf->node[i];
          auto p = read_pool(doc, item, item.Mark(), index_path(pf->path, i), i, list.back(), model,
                             marks);
          pools_ok = pools_ok && marks.all_ok;
          pools.emplace_back(std::move(p), marks);
        }
        if (pf->node.size() > 1) {
          doc.error(pf->mark, pf->path,
                    "this version serves from one pool of role 'combined'; " +
                        std::to_string(pf->node.size()) + " were given");
          pools_ok = false;
        }
      }
      dep.finish();
    }
  }
  const auto workload = read_workload(top, base_dir);

  {
    auto sf = top.find("slo");
    MapReader s(doc, sf ? sf->node : YAML::Node(), sf ? sf->mark : top.mark(), "slo", echo["slo"]);
    const Duration tiny = Duration::picoseconds(1);
    // An absent or null target is no target (the echo writes null, and reads back the same).
    for (auto [key, target] : {std::pair{"ttft", &out.config.slo.ttft},
                               std::pair{"tpot", &out.config.slo.tpot},
                               std::pair{"e2e", &out.config.slo.e2e}}) {
      const auto f = s.find(key);
      if (f && !f->node.IsNull()) {
        *target = s.duration(key, tiny, kMaxDuration, std::nullopt);
      } else {
        s.echo()[key] = nullptr;
      }
    }
    s.finish();
  }
  {
    auto hf = top.find("simulation");
    MapReader s(doc, hf ? hf->node : YAML::Node(), hf ? hf->mark : top.mark(), "simulation",
                echo["simulation"]);
    const auto f = s.find("horizon");
    if (f && !f->node.IsNull()) {
      out.config.horizon = s.duration("horizon", Duration::picoseconds(1), kMaxDuration, std::nullopt);
    } else {
      s.echo()["horizon"] = nullptr;
    }
    s.finish();
  }
  top.finish();

  if (model) {
    for (const auto& [pool, marks] : pools) check_deployment(doc, *model, pool, marks);
  }
  if (workload) {
    if (workload->requests == 0 && !out.config.horizon) {
      const auto wf = top.find("workload");
      doc.error(wf->node.IsMap() ? wf->node.Mark() : wf->mark, "workload",
                "the run needs an end: set workload.requests (how many requests to send) or "
                "simulation.horizon (how long to simulate)");
    }
    if (const auto* ind = std::get_if<workloads::IndependentLengths>(&workload->lengths)) {
      // A deployment that would reject every request is a mistake, not a scenario.
      const std::int64_t shortest = shortest_length(ind->prompt) + shortest_length(ind->output);
      for (const auto& [pool, marks] : pools) {
        if (marks.len_ok && shortest > pool.max_model_len) {
          doc.error(marks.max_model_len.mark, marks.max_model_len.path,
                    "every request would be rejected: the shortest prompt + output the workload "
                    "draws is " + std::to_string(shortest) + " tokens, more than max_model_len " +
                        std::to_string(pool.max_model_len));
        }
      }
    }
  }
  if (doc.has_errors() || !model || !workload || !pools_ok) {
    auto diags = std::move(doc.diagnostics());
    // File diagnostics in document order, then the --set ones in command-line order.
    // The scenario file's problems in document order, then those in files it names (traces) as
    // found, then the --set ones in command-line order.
    auto rank = [&](const Diagnostic& d) {
      return d.file == display_name ? 0 : (d.file.rfind("--set", 0) == 0 ? 2 : 1);
    };
    std::stable_sort(diags.begin(), diags.end(), [&](const Diagnostic& a, const Diagnostic& b) {
      if (rank(a) != rank(b)) return rank(a) < rank(b);
      if (rank(a) == 2) return std::stoi(a.file.substr(7)) < std::stoi(b.file.substr(7));  // "--set #N"
      return rank(a) == 0 && std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    if (diags.empty()) diags.push_back(Diagnostic{display_name, 0, 0, "", "invalid scenario"});
    throw InputError(std::move(diags));
  }
  out.config.model = *model;
  for (auto& [pool, marks] : pools) out.config.pools.push_back(std::move(pool));
  out.config.workload = *workload;
  out.resolved = std::move(echo);
  return out;
}

}  // namespace

Scenario load_scenario_text(std::string_view yaml, const std::string& display_name,
                            const std::string& base_dir, const LoadOptions& options) {
  Document doc(display_name);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    throw InputError({Diagnostic{display_name, e.mark.is_null() ? 0 : e.mark.line + 1,
                                 e.mark.is_null() ? 0 : e.mark.column + 1, "",
                                 "not valid YAML: " + e.msg}});
  }
  if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
    throw InputError({Diagnostic{display_name, root.Mark().line + 1, root.Mark().column + 1, "",
                                 "a scenario is a mapping of sections (model, deployment, "
                                 "workload, ...), got " + describe(root)}});
  }
  return load(root, doc, display_name, base_dir, options);
}

Scenario load_scenario_file(const std::string& path, const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({Diagnostic{path, 0, 0, "", "cannot open the scenario file"}});
  std::ostringstream text;
  text << in.rdbuf();
  const std::string base = std::filesystem::path(path).parent_path().string();
  return load_scenario_text(text.str(), path, base, options);
}

}  // namespace servesim::scenario
