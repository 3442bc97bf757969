#include "studies/attribution.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>

#include "models/parallel_plan.h"
#include "studies/objective.h"
#include "studies/text_format.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

// ---- reading the result ------------------------------------------------------------------------

std::optional<double> number_at(const Json* j, std::initializer_list<const char*> path) {
  return j ? studies::number_at(*j, path) : std::nullopt;
}

const Json* child(const Json* j, const char* key) {
  if (!j || !j->is_object()) return nullptr;
  const auto it = j->find(key);
  return it == j->end() || it->is_null() ? nullptr : &*it;
}

const Json& pools_of(const RunView& v) {
  static const Json empty = Json::array();
  const Json* p = child(v.result, "pools");
  return p && p->is_array() ? *p : empty;
}

// The resolved scenario's entry for pool i (deployment.pools[i]), or null.
const Json* scenario_pool(const RunView& v, std::size_t i) {
  const Json* pools = child(child(v.scenario, "deployment"), "pools");
  return pools && pools->is_array() && i < pools->size() ? &(*pools)[i] : nullptr;
}

// Pipeline stages of pool i: pools[].plan.pp (report contract), else the resolved scenario's.
double stages_of(const RunView& v, std::size_t i) {
  if (const auto pp = number_at(&pools_of(v)[i], {"plan", "pp"})) return *pp;
  if (const auto pp = number_at(scenario_pool(v, i), {"parallel", "pp"})) return *pp;
  return 1;
}

// The pools that play a part: `roles` in order of preference (the first role any pool has).
std::vector<std::size_t> pools_with_role(const RunView& v, std::initializer_list<const char*> roles) {
  const Json& pools = pools_of(v);
  for (const char* role : roles) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < pools.size(); ++i) {
      if (pools[i].value("role", std::string()) == role) out.push_back(i);
    }
    if (!out.empty()) return out;
  }
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < pools.size(); ++i) all.push_back(i);
  return all;
}

// ---- formatting --------------------------------------------------------------------------------

// A value with the precision its size needs: 1234 -> "1,234", 18.04 -> "18.0", 0.0423 -> "0.042".
std::string magnitude(double v) {
  const double a = std::abs(v);
  if (a >= 1000) {
    const long long r = std::llround(a);
    std::string digits = std::to_string(r), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return (v < 0 ? "-" : "") + out;
  }
  if (a >= 10 || a == 0) return fmt("%.1f", v);
  if (a >= 1) return fmt("%.2f", v);
  return fmt("%.2g", v);
}

std::string signed_value(double v, const std::string& unit) {
  return (v >= 0 ? "+" : "") + magnitude(v) + (unit.empty() ? "" : " " + unit);
}

std::string percent(double fraction) {
  const double p = 100 * fraction;
  return (p >= 0 ? "+" : "") + (std::abs(p) >= 10 ? fmt("%.0f", p) : fmt("%.1f", p)) + "%";
}

std::string json_scalar(const Json& j) {
  if (j.is_null()) return "(none)";
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_float()) return fmt("%g", j.get<double>());
  return j.dump();
}

// ---- components: names, and what bears on them --------------------------------------------------

struct ComponentFacts {
  const char* name;
  const char* display;
  const char* group;              // the communication group it runs over, or ""
  std::vector<const char*> keys;  // key patterns that bear on it (see key_matches)
  bool any_pool = false;          // a request-level part: keys of every pool bear on it
};

const std::vector<const char*> kComputeKeys = {"parallel.tp",        "parallel.dp",    "chip",  "model",
                                               "max_batched_tokens", "max_batch_size", "policy"};

const std::vector<ComponentFacts>& component_table() {
  static const std::vector<ComponentFacts> table = [] {
    std::vector<ComponentFacts> t;
    auto compute = [&](const char* name, const char* display, std::vector<const char*> extra = {}) {
      std::vector<const char*> keys = kComputeKeys;
      keys.insert(keys.end(), extra.begin(), extra.end());
      t.push_back({name, display, "", keys});
    };
    compute("gemm_qkv", "QKV projections");
    compute("gemm_out", "attention output projection");
    compute("gemm_mlp", "MLP GEMMs");
    compute("moe_experts", "MoE experts", {"parallel.ep", "parallel.moe_tp", "moe_routing"});
    compute("attention_prefill", "prefill attention", {"max_model_len"});
    compute("attention_decode", "decode attention", {"max_model_len"});
    compute("dsa_indexer", "DSA indexer");
    compute("elementwise", "elementwise kernels");
    compute("lm_head", "LM head");
    compute("dequantize", "dequantisation", {"formats"});
    t.push_back(
        {"tp_all_reduce", "TP all-reduce", "tp", {"parallel.tp", "scale_up", "collective", "cluster", "placement"}});
    t.push_back({"ep_dispatch",
                 "MoE dispatch (all-to-all)",
                 "ep",
                 {"parallel.ep", "parallel.moe_tp", "parallel.dp", "parallel.tp", "moe_routing", "scale_up",
                  "scale_out", "collective", "cluster", "placement"}});
    t.push_back({"ep_combine",
                 "MoE combine (all-to-all)",
                 "ep",
                 {"parallel.ep", "parallel.moe_tp", "parallel.dp", "parallel.tp", "moe_routing", "scale_up",
                  "scale_out", "collective", "cluster", "placement"}});
    t.push_back({"cp_exchange", "context-parallel exchange", "cp", {"parallel.cp", "scale_up", "cluster"}});
    t.push_back({"pp_send", "pipeline sends", "pp", {"parallel.pp", "scale_up", "scale_out", "cluster"}});
    t.push_back({"scheduling", "host scheduling", "", {"max_batch_size", "iteration_overhead", "sequence_overhead"}});
    // The report contract's latency parts.
    t.push_back({"queueing",
                 "queueing",
                 "",
                 {"instances", "arrivals", "requests", "max_batch_size", "max_batched_tokens", "max_queue", "router",
                  "kv_cache", "parallel"},
                 true});
    t.push_back({"encode", "encode", "", {"vision", "images", "encode"}, true});
    t.push_back({"embedding_transfer", "embedding transfer", "", {"transfer", "cluster", "placement"}, true});
    t.push_back({"prefill",
                 "prefill",
                 "",
                 {"parallel.tp", "parallel.pp", "parallel.cp", "chip", "max_batched_tokens", "policy"}});
    t.push_back({"prefill_interference",
                 "interleaved work between prefill chunks",
                 "",
                 {"max_batched_tokens", "max_batch_size", "policy"}});
    t.push_back({"kv_transfer_exposed",
                 "exposed KV transfer",
                 "",
                 {"transfer", "kv_transfer", "overlap", "kv_cache", "cluster", "placement", "scale_out"},
                 true});
    t.push_back({"first_decode", "first decode iteration", "", {"max_batch_size", "chip", "parallel"}, true});
    t.push_back({"preemption", "preemption", "", {"kv_cache", "max_batch_size", "memory_utilization"}, true});
    t.push_back({"imbalance", "attention-DP imbalance", "dp", {"parallel.dp", "moe_routing"}});
    t.push_back({"mtp_draft", "MTP drafts", "", {"mtp", "speculative"}});
    t.push_back({"a2a_kv_contention",
                 "all-to-all slowed by KV flows on its NICs",
                 "ep",
                 {"a2a_contention", "kv_transfer", "parallel.ep", "scale_out", "cluster", "placement"}});
    // Throughput factors.
    t.push_back({"tokens_per_iteration",
                 "tokens per iteration",
                 "",
                 {"max_batch_size", "max_batched_tokens", "arrivals", "instances", "requests", "policy"}});
    t.push_back({"utilization", "utilization", "", {"arrivals", "instances", "requests", "horizon"}});
    t.push_back({"stage_slots", "instances x stages", "", {"instances", "parallel.pp"}});
    return t;
  }();
  return table;
}

const ComponentFacts* facts_of(const std::string& name) {
  for (const ComponentFacts& f : component_table()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::string display_name(const std::string& name) {
  if (const ComponentFacts* f = facts_of(name)) return f->display;
  std::string out = name;
  std::replace(out.begin(), out.end(), '_', ' ');
  return out;
}

// A pattern bears on a key when it is one of the key's dotted segments (ignoring list indices),
// or two consecutive ones ("parallel.tp").
bool key_matches(const std::string& key, const std::string& pattern) {
  std::string clean;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '[') {
      i = key.find(']', i);
      if (i == std::string::npos) break;
      continue;
    }
    clean += key[i];
  }
  const std::string dotted = "." + clean + ".";
  return dotted.find("." + pattern + ".") != std::string::npos;
}

// The pool index a key belongs to ("deployment.pools[2]...." -> 2), or -1 for keys of the whole
// scenario.
int key_pool(const std::string& key) {
  static const std::string prefix = "deployment.pools[";
  if (key.rfind(prefix, 0) != 0) return -1;
  return std::atoi(key.c_str() + prefix.size());
}

// "deployment.pools[0].parallel.tp" -> "parallel.tp" (the last two segments).
std::string short_key(const std::string& key) {
  const std::size_t last = key.rfind('.');
  if (last == std::string::npos || last == 0) return key;
  const std::size_t before = key.rfind('.', last - 1);
  return before == std::string::npos ? key : key.substr(before + 1);
}

// ---- communication groups ----------------------------------------------------------------------

struct GroupFact {
  int ranks = 1;
  bool leaves_domain = false;
  std::string tier;      // "" when unknown
  int domain_chips = 0;  // 0 when unknown
};

const char* const kGroups[] = {"tp", "dp", "ep", "cp", "pp"};

// Pool i's groups: pools[].groups (report contract) or, without it, from the resolved plan and the
// chip's scale-up domain: a group of `ranks` chips `stride` apart spans (ranks - 1) stride + 1
// chips from its first (models::ParallelPlan::group) and leaves the domain when the span is
// larger than the domain (instances start on a domain boundary, as the loader places them).
std::map<std::string, GroupFact> groups_of(const RunView& v, std::size_t i) {
  std::map<std::string, GroupFact> out;
  const Json& pools = pools_of(v);
  if (i < pools.size()) {
    if (const Json* g = child(&pools[i], "groups"); g && g->is_object()) {
      for (const auto& [name, fact] : g->items()) {
        GroupFact f;
        f.ranks = fact.value("ranks", 1);
        f.leaves_domain = fact.value("leaves_domain", false);
        f.tier = fact.value("tier", std::string());
        f.domain_chips = fact.value("domain_chips", 0);
        out[name] = f;
      }
      return out;
    }
  }
  const Json* sp = scenario_pool(v, i);
  const Json* par = child(sp, "parallel");
  if (!par) return out;
  models::ParallelPlan plan;
  plan.tp = par->value("tp", 1);
  plan.pp = par->value("pp", 1);
  plan.dp = par->value("dp", 1);
  plan.ep = par->value("ep", 1);
  plan.moe_tp = par->value("moe_tp", 1);
  plan.cp = par->value("cp", 1);
  const auto domain = number_at(sp, {"chip", "scale_up_domain"});
  auto add = [&](const char* name, models::Group g) {
    const models::GroupShape s = plan.group(g);
    GroupFact f;
    f.ranks = s.ranks;
    f.domain_chips = domain ? static_cast<int>(*domain) : 0;
    f.leaves_domain = domain && s.ranks > 1 && s.span() > *domain;
    out[name] = f;
  };
  add("tp", models::Group::kTp);
  add("dp", models::Group::kDp);
  add("ep", models::Group::kEp);
  add("cp", models::Group::kCp);
  add("pp", models::Group::kPp);
  return out;
}

std::string upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// What changed about group `g` between the two runs, as a phrase, or "".
std::string group_phrase(const std::string& g, const std::map<std::string, GroupFact>& a,
                         const std::map<std::string, GroupFact>& b) {
  const auto ia = a.find(g), ib = b.find(g);
  if (ia == a.end() || ib == b.end()) return "";
  const GroupFact &x = ia->second, &y = ib->second;
  if (x.ranks == y.ranks && x.leaves_domain == y.leaves_domain && x.tier == y.tier) return "";
  const std::string name = upper(g);
  std::string s = name + " " + std::to_string(x.ranks) + " -> " + std::to_string(y.ranks);
  const int domain = y.domain_chips > 0 ? y.domain_chips : x.domain_chips;
  const std::string dom =
      domain > 0 ? "the " + std::to_string(domain) + "-chip scale-up domain" : "the scale-up domain";
  if (y.leaves_domain && !x.leaves_domain) {
    s += ": the " + name + " group now leaves " + dom + (y.tier.empty() ? "" : " (over " + y.tier + ")");
  } else if (!y.leaves_domain && x.leaves_domain) {
    s += ": the " + name + " group now stays inside " + dom;
  } else if (y.leaves_domain && x.tier != y.tier && !y.tier.empty()) {
    s += ": the " + name + " group now crosses " + y.tier + (x.tier.empty() ? "" : " instead of " + x.tier);
  } else if (y.leaves_domain) {
    s += ", beyond " + dom + " in both";
  } else if (y.ranks > 1 || x.ranks > 1) {
    s += ", inside " + dom;
  }
  return s;
}

// ---- breakdown attribution ---------------------------------------------------------------------

struct Part {
  std::string name;
  double a = 0, b = 0;
};

// {component: ms} of a contract breakdown, or nullopt.
std::optional<std::map<std::string, double>> contract_parts(const RunView& v, const char* key) {
  const Json* m = child(child(v.result, "summary"), key);
  if (!m || !m->is_object()) return std::nullopt;
  std::map<std::string, double> out;
  for (const auto& [name, value] : m->items()) {
    if (value.is_number()) out[name] = value.get<double>();
  }
  return out;
}

// The mean split in the proportions of the busy components of `pools` (summed over them, shares
// weighted by each pool's stage slots, so that a bigger pool weighs more).
std::map<std::string, double> share_parts(const RunView& v, const std::vector<std::size_t>& pools, double mean) {
  std::map<std::string, double> busy;
  double total = 0;
  const Json& all = pools_of(v);
  for (const std::size_t i : pools) {
    const double slots = all[i].value("instances", 0.0) * stages_of(v, i);
    const Json* bd = child(&all[i], "breakdown");
    if (!bd || !bd->is_object()) continue;
    for (const auto& [name, share] : bd->items()) {
      if (name == "idle" || !share.is_number()) continue;
      busy[name] += share.get<double>() * slots;
      total += share.get<double>() * slots;
    }
  }
  std::map<std::string, double> out;
  if (total <= 0) return out;
  for (const auto& [name, w] : busy) out[name] = mean * w / total;
  return out;
}

std::vector<std::string> changed_keys_for(const ComponentFacts* facts, const Json& changes,
                                          const std::vector<std::size_t>& pools) {
  std::vector<std::string> out;
  if (!facts) return out;
  for (const Json& c : changes) {
    const std::string key = c["key"].get<std::string>();
    const int pool = key_pool(key);
    if (pool >= 0 && !facts->any_pool &&
        std::find(pools.begin(), pools.end(), static_cast<std::size_t>(pool)) == pools.end()) {
      continue;
    }
    for (const char* pattern : facts->keys) {
      if (key_matches(key, pattern)) {
        out.push_back(key);
        break;
      }
    }
  }
  return out;
}

// Why a component moved: its group's change, then up to two keys that bear on it.
std::string why(const std::string& component, const Json& changes, const std::vector<std::size_t>& pools,
                const RunView& a, const RunView& b) {
  const ComponentFacts* facts = facts_of(component);
  std::vector<std::string> phrases;
  if (facts && facts->group[0] != '\0' && !pools.empty()) {
    const std::string g = group_phrase(facts->group, groups_of(a, pools.front()), groups_of(b, pools.front()));
    if (!g.empty()) phrases.push_back(g);
  }
  std::size_t named = 0;
  for (const std::string& key : changed_keys_for(facts, changes, pools)) {
    if (named == 2) break;
    // A plan key already said by the group phrase is not repeated.
    const std::string sk = short_key(key);
    if (!phrases.empty() && facts && sk == std::string("parallel.") + facts->group) continue;
    for (const Json& c : changes) {
      if (c["key"] == key) {
        phrases.push_back(sk + " " + json_scalar(c["a"]) + " -> " + json_scalar(c["b"]));
        break;
      }
    }
    ++named;
  }
  std::string s;
  for (const auto& p : phrases) s += (s.empty() ? "" : "; ") + p;
  return s;
}

Json attribute_parts(const std::string& metric, const std::string& unit, double va, double vb,
                     const std::map<std::string, double>& pa, const std::map<std::string, double>& pb,
                     const std::string& basis, const std::string& note, const Json& changes,
                     const std::vector<std::size_t>& pools, const RunView& a, const RunView& b) {
  std::vector<Part> parts;
  parts.reserve(pa.size() + pb.size());
  for (const auto& [name, x] : pa) parts.push_back({name, x, pb.count(name) ? pb.at(name) : 0.0});
  for (const auto& [name, y] : pb) {
    if (!pa.count(name)) parts.push_back({name, 0.0, y});
  }
  const double delta = vb - va;
  double sum = 0;
  for (const Part& p : parts) sum += p.b - p.a;
  const double residual = delta - sum;
  // Beyond rounding (the parts are given to ~1e-9 relative), the rest is listed as such.
  if (std::abs(residual) > 1e-6 * std::max({std::abs(va), std::abs(vb), 1e-9})) {
    parts.push_back({"unattributed", 0.0, residual});
  }
  std::stable_sort(parts.begin(), parts.end(),
                   [](const Part& x, const Part& y) { return std::abs(x.b - x.a) > std::abs(y.b - y.a); });
  Json j = Json::object();
  j["metric"] = metric;
  j["unit"] = unit;
  j["a"] = va;
  j["b"] = vb;
  j["delta"] = delta;
  j["relative"] = va != 0 ? Json(delta / va) : Json(nullptr);
  j["basis"] = basis;
  if (!note.empty()) j["note"] = note;
  Json list = Json::array();
  for (const Part& p : parts) {
    if (p.a == 0 && p.b == 0) continue;
    Json c = Json::object();
    c["name"] = p.name;
    c["label"] = p.name == "unattributed" ? "unattributed" : display_name(p.name);
    c["a"] = p.a;
    c["b"] = p.b;
    c["delta"] = p.b - p.a;
    c["share_of_delta"] = delta != 0 ? Json((p.b - p.a) / delta) : Json(nullptr);
    c["why"] = p.name == "unattributed" ? "" : why(p.name, changes, pools, a, b);
    list.push_back(std::move(c));
  }
  j["components"] = std::move(list);
  return j;
}

Json pool_indices(const std::vector<std::size_t>& pools) {
  Json j = Json::array();
  for (const std::size_t i : pools) j.push_back(i);
  return j;
}

Json latency_attribution(const char* metric, const char* stat_key, const char* contract_key,
                         std::initializer_list<const char*> roles, const RunView& a, const RunView& b,
                         const Json& changes) {
  const auto va = number_at(a.result, {"summary", stat_key, "mean"});
  const auto vb = number_at(b.result, {"summary", stat_key, "mean"});
  if (!va || !vb) return nullptr;
  const auto ca = contract_parts(a, contract_key), cb = contract_parts(b, contract_key);
  const std::vector<std::size_t> pa = pools_with_role(a, roles), pb = pools_with_role(b, roles);
  Json j;
  if (ca && cb) {
    j = attribute_parts(metric, "ms", *va, *vb, *ca, *cb, std::string("summary.") + contract_key, "", changes, pb, a,
                        b);
  } else {
    std::string note = "split in the proportions of the busy time of the pool that ";
    note += std::string(metric) == "ttft_mean"
                ? "prefills; queueing is not separated from work (the report has no summary.ttft_breakdown_ms)"
                : "decodes (the report has no summary.tpot_breakdown_ms)";
    j = attribute_parts(metric, "ms", *va, *vb, share_parts(a, pa, *va), share_parts(b, pb, *vb), "pools[].breakdown",
                        note, changes, pb, a, b);
  }
  j["pools"] = pool_indices(pb);
  return j;
}

// ---- throughput --------------------------------------------------------------------------------

// L(x, y) = (x - y) / (ln x - ln y), L(x, x) = x: the logarithmic mean.
double log_mean(double x, double y) {
  if (std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y))) return x;
  return (x - y) / (std::log(x) - std::log(y));
}

struct TokenPools {
  double slots = 0;        // S: instances x stages
  double busy_slot_s = 0;  // utilization x S x end
  double iterations = 0;
  std::map<std::string, double> component_slot_s;  // busy stage-seconds per component
};

TokenPools token_pools(const RunView& v, const std::vector<std::size_t>& pools, double end_s) {
  TokenPools t;
  const Json& all = pools_of(v);
  for (const std::size_t i : pools) {
    const double slots = all[i].value("instances", 0.0) * stages_of(v, i);
    t.slots += slots;
    t.busy_slot_s += all[i].value("utilization", 0.0) * slots * end_s;
    t.iterations += all[i].value("iterations", 0.0);
    if (const Json* bd = child(&all[i], "breakdown"); bd && bd->is_object()) {
      for (const auto& [name, share] : bd->items()) {
        if (name != "idle" && share.is_number()) t.component_slot_s[name] += share.get<double>() * slots * end_s;
      }
    }
  }
  return t;
}

Json throughput_attribution(const RunView& a, const RunView& b, const Json& changes) {
  const auto ta = number_at(a.result, {"summary", "throughput", "output_tokens_per_s"});
  const auto tb = number_at(b.result, {"summary", "throughput", "output_tokens_per_s"});
  if (!ta || !tb) return nullptr;
  const std::vector<std::size_t> pa = pools_with_role(a, {"decode", "combined"});
  const std::vector<std::size_t> pb = pools_with_role(b, {"decode", "combined"});
  const auto ca = contract_parts(a, "throughput_breakdown"), cb = contract_parts(b, "throughput_breakdown");
  if (ca && cb) {
    Json j = attribute_parts("output_tokens_per_s", "tok/s", *ta, *tb, *ca, *cb, "summary.throughput_breakdown", "",
                             changes, pb, a, b);
    j["pools"] = pool_indices(pb);
    return j;
  }
  const double end_a = number_at(a.result, {"simulation", "simulated_s"}).value_or(0);
  const double end_b = number_at(b.result, {"simulation", "simulated_s"}).value_or(0);
  const TokenPools xa = token_pools(a, pa, end_a), xb = token_pools(b, pb, end_b);
  const bool decomposable = *ta > 0 && *tb > 0 && xa.iterations > 0 && xb.iterations > 0 && xa.busy_slot_s > 0 &&
                            xb.busy_slot_s > 0 && xa.slots > 0 && xb.slots > 0;
  if (!decomposable) {
    Json j = attribute_parts("output_tokens_per_s", "tok/s", *ta, *tb, {}, {}, "none",
                             "not decomposed: a run has no output tokens or no busy iterations", changes, pb, a, b);
    j["pools"] = pool_indices(pb);
    return j;
  }
  // T = k u S / t with k = T end / iterations, u = busy / (S end), t = busy / iterations.
  const double ka = *ta * end_a / xa.iterations, kb = *tb * end_b / xb.iterations;
  const double ua = xa.busy_slot_s / (xa.slots * end_a), ub = xb.busy_slot_s / (xb.slots * end_b);
  const double ita = xa.busy_slot_s / xa.iterations, itb = xb.busy_slot_s / xb.iterations;
  const double lt = log_mean(*tb, *ta);
  std::map<std::string, double> parts_a, parts_b;
  // Each factor's term as the B side of a part whose A side is 0, so the parts' deltas are the
  // terms (the A and B columns of a factor hold the factor itself, in "factors").
  auto term = [&](const std::string& name, double value) { parts_b[name] += value; };
  term("tokens_per_iteration", lt * std::log(kb / ka));
  term("utilization", lt * std::log(ub / ua));
  term("stage_slots", lt * std::log(xb.slots / xa.slots));
  const double lit = log_mean(itb, ita);
  std::map<std::string, double> ca_ms, cb_ms;
  for (const auto& [name, s] : xa.component_slot_s) ca_ms[name] = s / xa.iterations;
  for (const auto& [name, s] : xb.component_slot_s) cb_ms[name] = s / xb.iterations;
  std::map<std::string, bool> seen;
  for (const auto& [name, t] : ca_ms) seen[name] = true;
  for (const auto& [name, t] : cb_ms) seen[name] = true;
  for (const auto& [name, unused] : seen) {
    const double x = ca_ms.count(name) ? ca_ms[name] : 0.0, y = cb_ms.count(name) ? cb_ms[name] : 0.0;
    if (x == 0 && y == 0) continue;
    term(name, -lt * (y - x) / lit);
  }
  Json j = attribute_parts("output_tokens_per_s", "tok/s", *ta, *tb, parts_a, parts_b, "lmdi",
                           "T = k x u x S / t over the pools that emit tokens (LMDI, exact in sum): k output "
                           "tokens per iteration, u utilization, S instances x stages, t busy stage-time per "
                           "iteration split by component",
                           changes, pb, a, b);
  // The parts' A/B columns carry terms, not values: replace them by the factors themselves, and
  // say the factor's move first in the words.
  for (Json& c : j["components"]) {
    const std::string name = c["name"].get<std::string>();
    c.erase("a");
    c.erase("b");
    double fa = 0, fb = 0;
    std::string unit, phrase;
    if (name == "tokens_per_iteration") {
      fa = ka, fb = kb, unit = "tokens";
      phrase = magnitude(ka) + " -> " + magnitude(kb) + " output tokens per iteration";
    } else if (name == "utilization") {
      fa = ua, fb = ub, unit = "fraction";
      phrase = fmt("%.1f%%", 100 * ua) + " -> " + fmt("%.1f%%", 100 * ub) + " busy";
    } else if (name == "stage_slots") {
      fa = xa.slots, fb = xb.slots, unit = "slots";
      phrase = magnitude(xa.slots) + " -> " + magnitude(xb.slots) + " instance stages";
    } else if (name == "unattributed") {
      continue;
    } else {
      fa = (ca_ms.count(name) ? ca_ms[name] : 0.0) * 1e3;
      fb = (cb_ms.count(name) ? cb_ms[name] : 0.0) * 1e3;
      unit = "ms per iteration";
      c["label"] = c["label"].get<std::string>() + " time";
      phrase = magnitude(fa) + " -> " + magnitude(fb) + " ms per iteration";
    }
    c["factor_a"] = fa;
    c["factor_b"] = fb;
    c["factor_unit"] = unit;
    const std::string w = c["why"].get<std::string>();
    c["why"] = phrase + (w.empty() ? "" : "; " + w);
  }
  Json f = Json::object();
  f["tokens_per_iteration"] = {{"a", ka}, {"b", kb}};
  f["utilization"] = {{"a", ua}, {"b", ub}};
  f["stage_slots"] = {{"a", xa.slots}, {"b", xb.slots}};
  f["iteration_ms"] = {{"a", ita * 1e3}, {"b", itb * 1e3}};
  j["factors"] = f;
  j["pools"] = pool_indices(pb);
  return j;
}

// ---- metrics and sentences ---------------------------------------------------------------------

Json metric_rows(const RunView& a, const RunView& b) {
  Json rows = Json::array();
  const Pricing none;
  auto row = [&](const std::string& name, const std::string& unit, std::optional<double> x, std::optional<double> y) {
    if (!x && !y) return;
    Json r = Json::object();
    r["metric"] = name;
    r["unit"] = unit;
    r["a"] = x ? Json(*x) : Json(nullptr);
    r["b"] = y ? Json(*y) : Json(nullptr);
    r["delta"] = x && y ? Json(*y - *x) : Json(nullptr);
    r["relative"] = x && y && *x != 0 ? Json((*y - *x) / *x) : Json(nullptr);
    rows.push_back(std::move(r));
  };
  for (const char* d : {"ttft", "tpot", "itl", "e2e"}) {
    for (const char* s : {"mean", "p50", "p90", "p99"}) {
      const std::string m = std::string(d) + "_" + s;
      row(m, "ms", metric_value(*a.result, m, none), metric_value(*b.result, m, none));
    }
  }
  for (const char* m : {"output_tokens_per_s", "input_tokens_per_s", "requests_per_s", "output_tokens_per_s_per_chip",
                        "goodput", "goodput_per_chip"}) {
    row(m, "/s", metric_value(*a.result, m, none), metric_value(*b.result, m, none));
  }
  row("slo_attainment", "fraction", metric_value(*a.result, "slo_attainment", none),
      metric_value(*b.result, "slo_attainment", none));
  for (const char* m : {"chips", "completed", "rejected"}) {
    row(m, "", metric_value(*a.result, m, none), metric_value(*b.result, m, none));
  }
  for (const char* m : {"lost", "requeued"}) {
    row(m, "", number_at(a.result, {"summary", "requests", m}), number_at(b.result, {"summary", "requests", m}));
  }
  return rows;
}

// Pools matched by name: utilization, KV peak, preemptions, and KV-transfer figures when reported.
Json pool_rows(const RunView& a, const RunView& b) {
  Json rows = Json::array();
  const Json &pa = pools_of(a), &pb = pools_of(b);
  for (const Json& x : pa) {
    const std::string name = x.value("name", std::string());
    for (const Json& y : pb) {
      if (y.value("name", std::string()) != name) continue;
      Json r = Json::object();
      r["name"] = name;
      r["role"] = y.value("role", std::string());
      for (const char* k :
           {"instances", "chips", "utilization", "kv_cache_peak_fraction", "preemptions", "iterations"}) {
        r[k] = {{"a", x.contains(k) ? x[k] : Json(nullptr)}, {"b", y.contains(k) ? y[k] : Json(nullptr)}};
      }
      if (x.contains("kv_transfer") || y.contains("kv_transfer")) {
        r["kv_transfer"] = {{"a", x.value("kv_transfer", Json(nullptr))}, {"b", y.value("kv_transfer", Json(nullptr))}};
      }
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string metric_label(const std::string& m) {
  if (m == "ttft_mean") return "TTFT";
  if (m == "tpot_mean") return "TPOT";
  if (m == "output_tokens_per_s") return "throughput";
  return m;
}

// "TPOT +18.0 ms (+35%): MoE all-to-all +12.1 ms (EP 32 -> 64: ...), ...; these 3 explain 98% of
// the delta (the other 5: +0.4 ms)."
std::string sentence(const Json& at, std::size_t top) {
  const std::string unit = at["unit"].get<std::string>();
  const double delta = at["delta"].get<double>();
  std::string s = metric_label(at["metric"].get<std::string>()) + " " + signed_value(delta, unit);
  if (!at["relative"].is_null()) s += " (" + percent(at["relative"].get<double>()) + ")";
  const double a = at["a"].get<double>(), b = at["b"].get<double>();
  s += ", " + magnitude(a) + " -> " + magnitude(b) + " " + unit;
  const Json& comps = at["components"];
  if (comps.empty()) return s + (at.contains("note") ? "; " + at["note"].get<std::string>() : "") + ".";
  s += ": ";
  double listed = 0;
  std::size_t shown = 0;
  for (const Json& c : comps) {
    if (shown == top) break;
    // Components that moved by less than 0.5% of the delta say nothing.
    if (shown > 0 && std::abs(c["delta"].get<double>()) < 0.005 * std::abs(delta)) break;
    const std::string w = c["why"].get<std::string>();
    s += (shown > 0 ? ", " : "") + c["label"].get<std::string>() + " " + signed_value(c["delta"].get<double>(), unit) +
         (w.empty() ? "" : " (" + w + ")");
    listed += c["delta"].get<double>();
    ++shown;
  }
  const std::size_t rest = comps.size() - shown;
  if (delta != 0) {
    // A share says something when the listed parts move with the delta and do not overshoot it;
    // when parts cancel (a faster GEMM against a new all-to-all), their sum is clearer.
    const double share = listed / delta;
    if (share >= 0 && share <= 1 + 1e-9) {
      s += "; " + std::string(shown == 1 ? "this explains " : "these explain ") + fmt("%.0f", 100 * share) +
           "% of the delta";
    } else {
      s += "; " + std::string(shown == 1 ? "this is " : "these sum to ") + signed_value(listed, unit);
    }
    if (rest > 0 && std::abs(delta - listed) > 1e-9 * std::abs(delta)) {
      s += " (the other " + std::to_string(rest) + ": " + signed_value(delta - listed, unit) + ")";
    }
  }
  if (at["basis"] == "pools[].breakdown") s += " [from the pool's busy-time shares]";
  return s + ".";
}

}  // namespace

Json scenario_changes(const Json& a, const Json& b) {
  Json out = Json::array();
  std::function<void(const Json*, const Json*, const std::string&)> walk = [&](const Json* x, const Json* y,
                                                                               const std::string& key) {
    auto add = [&] { out.push_back({{"key", key}, {"a", x ? *x : Json(nullptr)}, {"b", y ? *y : Json(nullptr)}}); };
    if (x && y && x->is_object() && y->is_object()) {
      for (const auto& [k, v] : x->items()) {
        const auto it = y->find(k);
        walk(&v, it == y->end() ? nullptr : &*it, key.empty() ? k : key + "." + k);
      }
      for (const auto& [k, v] : y->items()) {
        if (!x->contains(k)) walk(nullptr, &v, key.empty() ? k : key + "." + k);
      }
      return;
    }
    if (x && y && x->is_array() && y->is_array()) {
      // Lists of scalars are one value ("[1, 2]" -> "[1, 3]"); lists of objects go item by item.
      const bool objects = (!x->empty() && (*x)[0].is_object()) || (!y->empty() && (*y)[0].is_object());
      if (!objects) {
        if (*x != *y) add();
        return;
      }
      for (std::size_t i = 0; i < std::max(x->size(), y->size()); ++i) {
        walk(i < x->size() ? &(*x)[i] : nullptr, i < y->size() ? &(*y)[i] : nullptr,
             key + "[" + std::to_string(i) + "]");
      }
      return;
    }
    if (!x || !y || *x != *y) add();
  };
  walk(&a, &b, "");
  return out;
}

Json diff_results(const RunView& a, const RunView& b, const DiffOptions& options) {
  Json d = Json::object();
  d["schema"] = "servesim.diff/1";
  const Json changes = a.scenario && b.scenario ? scenario_changes(*a.scenario, *b.scenario) : Json::array();
  d["changes"] = changes;
  d["metrics"] = metric_rows(a, b);
  d["pools"] = pool_rows(a, b);
  // The groups of each pool in both runs (the facts the words use).
  Json groups = Json::array();
  const std::size_t n = std::min(pools_of(a).size(), pools_of(b).size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto ga = groups_of(a, i), gb = groups_of(b, i);
    Json g = Json::object();
    g["pool"] = pools_of(b)[i].value("name", std::string());
    g["source"] = child(&pools_of(b)[i], "groups") ? "pools[].groups" : "scenario";
    for (const char* name : kGroups) {
      Json side = Json::object();
      for (const auto* m : {&ga, &gb}) {
        const auto it = m->find(name);
        Json f = nullptr;
        if (it != m->end()) {
          f = {{"ranks", it->second.ranks},
               {"leaves_domain", it->second.leaves_domain},
               {"tier", it->second.tier.empty() ? Json(nullptr) : Json(it->second.tier)},
               {"domain_chips", it->second.domain_chips > 0 ? Json(it->second.domain_chips) : Json(nullptr)}};
        }
        side[m == &ga ? "a" : "b"] = f;
      }
      g[name] = side;
    }
    groups.push_back(std::move(g));
  }
  d["groups"] = groups;
  Json at = Json::object();
  at["ttft_mean"] =
      latency_attribution("ttft_mean", "ttft_ms", "ttft_breakdown_ms", {"prefill", "combined"}, a, b, changes);
  at["tpot_mean"] =
      latency_attribution("tpot_mean", "tpot_ms", "tpot_breakdown_ms", {"decode", "combined"}, a, b, changes);
  at["throughput"] = throughput_attribution(a, b, changes);
  Json sentences = Json::array();
  for (const char* k : {"ttft_mean", "tpot_mean", "throughput"}) {
    if (!at[k].is_null()) sentences.push_back(sentence(at[k], options.words_components));
  }
  d["attribution"] = std::move(at);
  d["sentences"] = std::move(sentences);
  return d;
}

std::string diff_text(const Json& d) {
  std::string out;
  const Json& changes = d["changes"];
  if (changes.empty()) {
    out += "changes: none (the resolved scenarios are equal)\n";
  } else {
    out += "changes (" + std::to_string(changes.size()) + " key" + (changes.size() == 1 ? "" : "s") + "):\n";
    std::size_t shown = 0;
    for (const Json& c : changes) {
      if (shown++ == 12) {
        out += "  ... and " + std::to_string(changes.size() - 12) + " more (see --json)\n";
        break;
      }
      out += "  " + c["key"].get<std::string>() + ": " + json_scalar(c["a"]) + " -> " + json_scalar(c["b"]) + "\n";
    }
  }
  out += "  metric                                 A             B          delta\n";
  for (const Json& r : d["metrics"]) {
    const std::string unit = r["unit"].get<std::string>();
    const bool frac = unit == "fraction";
    auto cell = [&](const Json& v) {
      if (v.is_null()) return std::string("-");
      return frac ? fmt("%.1f%%", 100 * v.get<double>()) : magnitude(v.get<double>());
    };
    std::string delta = "-";
    if (!r["delta"].is_null()) {
      delta = frac ? (r["delta"].get<double>() >= 0 ? "+" : "") + fmt("%.1f pt", 100 * r["delta"].get<double>())
                   : signed_value(r["delta"].get<double>(), "");
      if (!r["relative"].is_null() && !frac) delta += " (" + percent(r["relative"].get<double>()) + ")";
    }
    std::string name = r["metric"].get<std::string>() + (unit.empty() || frac ? "" : " " + unit);
    char buf[200];
    std::snprintf(buf, sizeof buf, "  %-32s %13s %13s  %s\n", name.c_str(), cell(r["a"]).c_str(), cell(r["b"]).c_str(),
                  delta.c_str());
    out += buf;
  }
  // A figure a report does not have (a hand-written or older one) reads "-".
  auto share = [](const Json& v) { return v.is_number() ? fmt("%.1f%%", 100 * v.get<double>()) : std::string("-"); };
  auto count = [](const Json& v) { return v.is_null() ? std::string("-") : v.dump(); };
  for (const Json& p : d["pools"]) {
    out += "  pool " + pad(p["name"].get<std::string>(), 12, false) + " utilization " + share(p["utilization"]["a"]) +
           " -> " + share(p["utilization"]["b"]) + ", KV peak " + share(p["kv_cache_peak_fraction"]["a"]) + " -> " +
           share(p["kv_cache_peak_fraction"]["b"]) + ", preemptions " + count(p["preemptions"]["a"]) + " -> " +
           count(p["preemptions"]["b"]) + "\n";
    if (p.contains("kv_transfer")) {
      auto exposed = [](const Json& kv) {
        return kv.is_object() && kv.contains("exposed_mean_ms") && kv["exposed_mean_ms"].is_number()
                   ? magnitude(kv["exposed_mean_ms"].get<double>()) + " ms"
                   : std::string("-");
      };
      out += "       " + std::string(12, ' ') + " KV transfer exposed per transfer " + exposed(p["kv_transfer"]["a"]) +
             " -> " + exposed(p["kv_transfer"]["b"]) + "\n";
    }
  }
  for (const Json& s : d["sentences"]) out += s.get<std::string>() + "\n";
  return out;
}

}  // namespace servesim::studies
