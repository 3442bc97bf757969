#include "sim/scenario/scenario.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/input_file.h"
#include "sim/cluster/run_budget.h"
#include "sim/scenario/overrides.h"
#include "sim/scenario/reader.h"
#include "sim/scenario/sections.h"

namespace servesim::scenario {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / kGiB);
  return buf;
}

Field field_or(MapReader& m, std::string_view key) {
  if (auto f = m.find(key)) return *f;
  return Field{YAML::Node(), m.mark(), child_path(m.path(), key)};
}

metrics::SloTargets read_slo(MapReader& parent, std::string_view key) {
  metrics::SloTargets slo;
  auto sf = parent.find(key);
  MapReader s(parent.doc(), sf ? sf->node : YAML::Node(), sf ? sf->mark : parent.mark(), child_path(parent.path(), key),
              parent.echo()[std::string(key)]);
  const Duration tiny = Duration::picoseconds(1);
  // An absent or null target is no target (the echo writes null, and reads back the same).
  for (auto [name, target] : {std::pair{"ttft", &slo.ttft}, std::pair{"tpot", &slo.tpot}, std::pair{"e2e", &slo.e2e}}) {
    const auto f = s.find(name);
    if (f && !f->node.IsNull()) {
      *target = s.duration(name, tiny, kMaxDuration, std::nullopt);
    } else {
      s.echo()[name] = nullptr;
    }
  }
  s.finish();
  return slo;
}

namespace {

// A run keeps every request's times to the end (cluster::kBytesPerFinishedRequest each; the rest
// of a request's state goes when it finishes): a request count that cannot fit is refused here,
// with the estimate, rather than failing after an hour.
void check_request_memory(Document& doc, const WorkloadSection& workload, const LoadOptions& options) {
  std::int64_t count = workload.config.requests;
  if (count == 0) {
    for (const auto& c : workload.config.classes) {
      if (c.requests == 0) return;  // bounded by a horizon or a trace: the run's budget checks it
      count += c.requests;
    }
  }
  const std::int64_t limit = options.memory_limit_bytes.value_or(cluster::physical_memory_bytes());
  const std::int64_t each = std::max<std::int64_t>(1, options.bytes_per_request);
  if (count <= 0 || limit <= 0 || count <= limit / each) return;
  char text[400];
  std::snprintf(
      text, sizeof text,
      "%s requests would hold about %.3g GB of memory (%lld B each: every request keeps its times for "
      "the report's exact figures), more than the %.3g GB this run may use (%s): send fewer requests, or bound the "
      "run with simulation.horizon",
      format_count(count).c_str(), static_cast<double>(count) * static_cast<double>(each) * 1e-9,
      static_cast<long long>(each), static_cast<double>(limit) * 1e-9,
      options.memory_limit_bytes ? "the memory limit" : "the machine's memory");
  doc.error(workload.requests.mark, workload.requests.path, text);
}

// A span of time for messages, in the unit that reads best ("4.8e+05 days", "2.5 h", "40 s").
std::string span_text(double seconds) {
  char buf[48];
  if (seconds >= 2 * 86400.0)
    std::snprintf(buf, sizeof buf, "%.3g days", seconds / 86400.0);
  else if (seconds >= 2 * 3600.0)
    std::snprintf(buf, sizeof buf, "%.3g h", seconds / 3600.0);
  else
    std::snprintf(buf, sizeof buf, "%.3g s", seconds);
  return buf;
}

// An open-loop rate so low that the run sees no traffic, or not all of it, before the simulated
// clock ends (core/time.h) is a mistake (a unit: 1e-9 /s for 1 /ns?), not a scenario: refused at
// the rate, not reported as a run in which nothing arrived.
void check_arrival_rates(Document& doc, const WorkloadSection& w, const std::optional<Duration>& horizon) {
  for (std::size_t i = 0; i < w.config.classes.size() && i < w.rates.size(); ++i) {
    const workloads::ClassConfig& c = w.config.classes[i];
    double rate = 0;
    if (const auto* p = std::get_if<workloads::PoissonArrivals>(&c.arrivals); p && !p->curve) rate = p->rate.per_s;
    if (const auto* g = std::get_if<workloads::GammaArrivals>(&c.arrivals); g && !g->curve) rate = g->rate.per_s;
    if (!(rate > 0)) continue;
    const double window_s = (horizon ? *horizon : kClockLimit).to_seconds();
    const std::int64_t count = c.requests > 0 ? c.requests : w.config.requests;
    const std::string at = format_quantity(rate, Dimension::kFrequency);
    char text[400];
    if (rate * window_s < 1) {
      std::snprintf(text, sizeof text,
                    "at %s, less than one request is expected to arrive in %s (%s): the run would see no traffic",
                    at.c_str(), span_text(window_s).c_str(), horizon ? "the horizon" : "the simulated clock's range");
    } else if (!horizon && count > 0 && static_cast<double>(count) / rate > window_s) {
      std::snprintf(text, sizeof text,
                    "at %s, %s requests take about %s to arrive, beyond the simulated clock's range (%s): only "
                    "about %s would; raise the rate or send fewer",
                    at.c_str(), format_count(count).c_str(), span_text(static_cast<double>(count) / rate).c_str(),
                    span_text(window_s).c_str(), format_count(static_cast<std::int64_t>(rate * window_s)).c_str());
    } else {
      continue;
    }
    doc.error(w.rates[i].mark, w.rates[i].path, text);
  }
}

Scenario load(YAML::Node root, Document& doc, const std::string& display_name, const std::string& base_dir,
              const LoadOptions& options) {
  doc.keys = options.keys;
  // Without a session's caches the load keeps its own while it reads, so that pools naming the
  // same profile share one parse and one prepared copy of its tables; the run is given none.
  std::optional<Caches> load_caches;
  if (options.caches == nullptr) load_caches.emplace();
  doc.caches = options.caches != nullptr ? options.caches : &*load_caches;
  for (std::size_t i = 0; i < options.sets.size(); ++i) {
    apply_override(root, options.sets[i], static_cast<int>(i) + 1, doc);
  }
  doc.set_file_roots(options.file_roots);
  Scenario out;
  out.source = display_name;
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
  const auto model = read_model(top, base_dir);

  std::vector<std::pair<cluster::PoolConfig, PoolMarks>> pools;
  bool pools_ok = true;
  {
    auto df = top.find("deployment");
    if (!df) {
      top.missing("deployment", "the pools of instances that serve the model");
      pools_ok = false;
    } else {
      MapReader dep(doc, df->node, df->mark, df->path, echo["deployment"]);
      // The serving engine whose measured kernels cost the chips: each pool's chip takes its
      // preset's shipped profile for it (sim/scenario/shipped_profiles.h, default_profile).
      const std::string engine =
          dep.choice("engine", {kEngines[0], kEngines[1], kEngines[2]}, std::string(kDefaultEngine))
              .value_or(std::string(kDefaultEngine));
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
          auto p = read_pool(doc, engine, item, item.Mark(), index_path(pf->path, i), i, list.back(), model, marks);
          pools_ok = pools_ok && marks.all_ok;
          pools.emplace_back(std::move(p), marks);
        }
        const std::size_t before = doc.diagnostics().size();
        check_roles(doc, *pf, pools, model);
        if (doc.diagnostics().size() != before) pools_ok = false;
      }
      read_deployment_options(dep, out.config);
      dep.finish();
    }
  }
  const auto workload = read_workload(top, base_dir);
  out.config.slo = read_slo(top, "slo");
  if (workload) {
    // A class without targets of its own is held to the top-level ones (and echoes them).
    for (std::size_t i = 0; i < workload->class_slo.size(); ++i) {
      const auto& own = workload->class_slo[i];
      out.config.class_slo.push_back(own ? *own : out.config.slo);
      if (workload->classes_form && !own) echo["workload"]["classes"][i]["slo"] = echo["slo"];
    }
  }
  {
    auto hf = top.find("simulation");
    MapReader s(doc, hf ? hf->node : YAML::Node(), hf ? hf->mark : top.mark(), "simulation", echo["simulation"]);
    const auto f = s.find("horizon");
    if (f && !f->node.IsNull()) {
      out.config.horizon = s.duration("horizon", Duration::picoseconds(1), kMaxDuration, std::nullopt);
    } else {
      s.echo()["horizon"] = nullptr;
    }
    // Decode steps one event may carry (sim/cluster/simulation.h, decode runs): a speed knob
    // with the same schedule; 1 gives one event per step.
    if (auto n = s.integer("decode_steps_per_event", 1, 4096, 64)) {
      out.config.decode_steps_per_event = static_cast<int>(*n);
    }
    s.finish();
  }
  ClusterMarks cluster_marks;
  const auto cluster = read_cluster(top, cluster_marks);
  top.finish();

  if (model) {
    for (const auto& [pool, marks] : pools) check_deployment(doc, *model, pool, marks);
  }
  {
    std::vector<cluster::PoolConfig> configs;
    std::vector<const PoolMarks*> marks;
    for (const auto& [pool, m] : pools) {
      configs.push_back(pool);
      marks.push_back(&m);
    }
    place_on_cluster(doc, configs, pools_ok ? cluster : std::nullopt, cluster_marks, marks, echo, out.config.cluster);
  }
  if (workload) {
    // The run ends at its request count, its horizon, or when every class runs dry (a trace
    // replayed a finite number of times, a class with a request count of its own).
    bool finite = true;
    for (const auto& c : workload->config.classes) {
      const auto* t = std::get_if<workloads::TraceReplay>(&c.arrivals);
      finite = finite && (c.requests > 0 || (t != nullptr && t->loops > 0));
    }
    if (workload->config.requests == 0 && !out.config.horizon && !finite) {
      const auto wf = top.find("workload");
      doc.error(wf->node.IsMap() ? wf->node.Mark() : wf->mark, "workload",
                "the run needs an end: set workload.requests (how many requests to send) or "
                "simulation.horizon (how long to simulate)");
    }
    for (const auto& c : workload->config.classes) {
      // Prefix caches key a replayed trace's hash ids, one per block_tokens prompt tokens: whole
      // KV blocks each.
      const auto* t = std::get_if<workloads::TraceReplay>(&c.arrivals);
      for (const auto& [pool, marks] : pools) {
        if (t == nullptr || !pool.prefix_cache.enabled || !marks.kv_ok ||
            t->block_tokens % pool.kv_cache.block_tokens == 0) {
          continue;
        }
        doc.error(marks.prefix_cache.mark, marks.prefix_cache.path,
                  "the prefix cache keys the trace's hash ids, one per " + std::to_string(t->block_tokens) +
                      " prompt tokens, which is not a whole number "
                      "of this pool's " +
                      std::to_string(pool.kv_cache.block_tokens) +
                      "-token KV blocks: make kv_cache.block_tokens divide the trace's block_tokens");
      }
    }
    check_request_memory(doc, *workload, options);
    check_arrival_rates(doc, *workload, out.config.horizon);
    for (const auto& c : workload->config.classes) {
      const auto* ind = c.lengths ? std::get_if<workloads::IndependentLengths>(&*c.lengths) : nullptr;
      if (ind == nullptr) continue;
      // A deployment that would reject every request is a mistake, not a scenario.
      const std::int64_t shortest = workloads::shortest_length(ind->prompt) + workloads::shortest_length(ind->output);
      for (const auto& [pool, marks] : pools) {
        if (marks.len_ok && shortest > pool.max_model_len) {
          doc.error(marks.max_model_len.mark, marks.max_model_len.path,
                    "every request would be rejected: the shortest prompt + output the workload " +
                        (workload->classes_form ? "class '" + c.name + "' " : std::string()) + "draws is " +
                        std::to_string(shortest) + " tokens, more than max_model_len " +
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
  out.config.workload = workload->config;
  if (options.caches != nullptr) out.config.caches = options.caches->run();
  out.resolved = std::move(echo);
  out.files = doc.named_files();
  out.warnings = std::move(doc.warnings());
  std::stable_sort(out.warnings.begin(), out.warnings.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair(a.line, a.column) < std::pair(b.line, b.column);
  });
  return out;
}

}  // namespace

class ScenarioDocument {
 public:
  // The text, not the parsed tree: yaml-cpp's only deep copy (YAML::Clone) drops the line and
  // column marks that diagnostics need, and a load mutates its tree (overrides). Re-parsing is
  // cheap next to a run (0.4 ms of a 76 ms hypothesis in tests/bench/bench_serve.cpp).
  std::string text;
  std::string display_name;
  std::string base_dir;
};

namespace {

YAML::Node parse_root(std::string_view yaml, const std::string& display_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    throw InputError({Diagnostic{display_name, e.mark.is_null() ? 0 : e.mark.line + 1,
                                 e.mark.is_null() ? 0 : e.mark.column + 1, "", "not valid YAML: " + e.msg}});
  }
  if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
    throw InputError({Diagnostic{display_name, root.Mark().line + 1, root.Mark().column + 1, "",
                                 "a scenario is a mapping of sections (model, deployment, "
                                 "workload, ...), got " +
                                     describe(root)}});
  }
  return root;
}

std::string read_scenario_file(const std::string& path) {
  return read_input_file(InputSource{path, "scenario file", ""}, kMaxScenarioBytes);
}

}  // namespace

std::shared_ptr<const ScenarioDocument> parse_scenario_text(std::string_view yaml, const std::string& display_name,
                                                            const std::string& base_dir) {
  check_yaml_limits(yaml, display_name);
  parse_root(yaml, display_name);  // syntax problems surface here, once
  auto doc = std::make_shared<ScenarioDocument>();
  doc->text = std::string(yaml);
  doc->display_name = display_name;
  doc->base_dir = base_dir;
  return doc;
}

std::shared_ptr<const ScenarioDocument> parse_scenario_file(const std::string& path) {
  return parse_scenario_text(read_scenario_file(path), path, std::filesystem::path(path).parent_path().string());
}

Scenario load_scenario(const ScenarioDocument& document, const LoadOptions& options) {
  Document doc(document.display_name);
  return load(parse_root(document.text, document.display_name), doc, document.display_name, document.base_dir, options);
}

Scenario load_scenario_text(std::string_view yaml, const std::string& display_name, const std::string& base_dir,
                            const LoadOptions& options) {
  check_yaml_limits(yaml, display_name);
  Document doc(display_name);
  return load(parse_root(yaml, display_name), doc, display_name, base_dir, options);
}

Scenario load_scenario_file(const std::string& path, const LoadOptions& options) {
  return load_scenario_text(read_scenario_file(path), path, std::filesystem::path(path).parent_path().string(),
                            options);
}

LoadedChip load_chip(std::string_view preset, const std::string& profile, std::string_view engine) {
  YAML::Node pool(YAML::NodeType::Map);
  pool["chip"]["preset"] = std::string(preset);
  if (!profile.empty()) pool["chip"]["profile"] = profile;
  Document doc("chip " + std::string(preset));
  Json echo;
  MapReader m(doc, pool, YAML::Mark(), "", echo);
  LoadedChip out;
  const auto chip = read_chip(m, &out.cost_model, engine);
  if (doc.has_errors() || !chip) throw InputError(std::move(doc.diagnostics()));
  out.chip = *chip;
  return out;
}

}  // namespace servesim::scenario
