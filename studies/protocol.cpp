#include "studies/protocol.h"

#include <cmath>
#include <cstdio>

#include "core/version.h"
#include "sim/scenario/keys.h"
#include "studies/text_format.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// The parent of a key path ("a.b[0].c" -> "a.b[0]"), or "" at the top.
std::string parent_of(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

Json allowed_for(const Diagnostic& d, const std::string& code) {
  Json a = Json::object();
  if (code == "unknown_key") {
    // The keys the loader knows beside the unknown one.
    const std::string parent = scenario::KeyRecorder::normalize(parent_of(d.path));
    Json keys = Json::array();
    for (const scenario::KeyInfo& k : scenario::scenario_keys()) {
      if (parent_of(k.key) == parent && k.key.size() > parent.size()) {
        keys.push_back(parent.empty() ? k.key : k.key.substr(parent.size() + 1));
      }
    }
    if (!keys.empty()) a["keys"] = keys;
    return a;
  }
  const scenario::KeyInfo* k = scenario::find_key(d.path);
  if (k == nullptr) return a;
  a["type"] = k->type;
  if (!k->choices.empty()) a["choices"] = k->choices;
  if (!k->unit.empty()) a["unit"] = k->unit;
  if (k->min) a["min"] = *k->min;
  if (k->max) a["max"] = *k->max;
  if (k->min || k->max) a["min_exclusive"] = k->min_exclusive;
  return a;
}

std::string show_default(const scenario::KeyInfo& k) {
  if (k.defaults.empty()) return k.required ? "required" : "-";
  std::string out;
  for (const std::string& d : k.defaults) {
    std::string v = d;
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    out += (out.empty() ? "" : " | ") + v;
  }
  return out;
}

std::string show_range(const scenario::KeyInfo& k) {
  if (!k.choices.empty()) {
    std::string out;
    for (const auto& c : k.choices) out += (out.empty() ? "" : " | ") + c;
    return out;
  }
  if (!k.min && !k.max) return k.unit;
  auto num = [](double v) { return fmt("%g", v); };
  std::string r = k.min ? std::string(k.min_exclusive ? "(" : "[") + num(*k.min) : std::string("(-inf");
  r += ", " + (k.max ? num(*k.max) + "]" : std::string("inf)"));
  if (k.type == "quantity" || k.type == "duration") r += " " + k.unit;
  return r;
}

// `s` padded to `width`, never cut.
std::string cell(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

}  // namespace

std::string error_code(const Diagnostic& d) {
  const std::string& m = d.message;
  if (d.file == "<request>") {
    if (starts_with(m, "the line is not valid JSON")) return "bad_json";
    if (starts_with(m, "unknown field")) return "unknown_field";
    if (starts_with(m, "missing:")) return "missing_field";
    if (starts_with(m, "internal error")) return "internal_error";
    if (starts_with(m, "constraint")) return "bad_constraint";
    return "bad_request";
  }
  if (starts_with(m, "cannot open the scenario file") || starts_with(m, "cannot open")) return "scenario_unreadable";
  if (starts_with(m, "not valid YAML") || starts_with(m, "a scenario is a mapping")) return "scenario_syntax";
  if (starts_with(m, "unknown key ")) return "unknown_key";
  if (starts_with(m, "missing required key ")) return "missing_key";
  // The typed getters' and the unit parser's words for a value that is not what the key takes.
  for (const char* p :
       {"expected ", "must be ", "unknown value ", "unknown unit", "missing unit", "a quantity", "duplicate key"}) {
    if (starts_with(m, p)) return "bad_value";
  }
  return "invalid_scenario";
}

Json error_json(const Diagnostic& d, const std::string& code) {
  Json e = Json::object();
  e["code"] = code;
  e["path"] = d.path;
  e["message"] = d.message;
  e["file"] = d.file;
  e["line"] = d.line;
  e["column"] = d.column;
  if (code == "unknown_key" || code == "bad_value" || code == "missing_key") {
    Json a = allowed_for(d, code);
    if (!a.empty()) e["allowed"] = std::move(a);
  }
  return e;
}

Json error_answer(const std::vector<Diagnostic>& errors) {
  Json r = Json::object();
  r["ok"] = false;
  Json list = Json::array();
  for (const Diagnostic& d : errors) list.push_back(error_json(d, error_code(d)));
  r["errors"] = std::move(list);
  return r;
}

VerdictRequest parse_verdict_request(const std::vector<std::string>& constraints, const std::string& attainment,
                                     std::vector<std::string>& problems) {
  VerdictRequest v;
  v.attainment = attainment;
  v.asked = !constraints.empty();
  for (const std::string& c : constraints) {
    std::string e;
    if (auto set = slo_target_override(c, e)) {
      v.slo_sets.push_back(*set);
      continue;
    }
    if (!e.empty()) {
      problems.push_back(e);
      continue;
    }
    if (auto parsed = parse_constraint(c, e)) {
      v.constraints.push_back(*parsed);
    } else {
      problems.push_back(e);
    }
  }
  if (attainment != "none") {
    std::string e;
    if (!parse_constraint("slo_attainment >= " + attainment, e)) problems.push_back("attainment: " + e);
  }
  return v;
}

std::vector<metrics::SettleRule> settle_rules(const VerdictRequest& request) {
  using M = metrics::SettleRule::Metric;
  std::vector<metrics::SettleRule> rules;
  std::vector<Constraint> checks = request.constraints;
  if (request.attainment != "none") {
    std::string e;
    if (auto c = parse_constraint("slo_attainment >= " + request.attainment, e)) checks.insert(checks.begin(), *c);
  }
  for (const Constraint& c : checks) {
    metrics::SettleRule r;
    r.text = c.text;
    r.limit = c.value;
    if (c.metric == "slo_attainment") {
      if (c.op != Constraint::Op::kGe && c.op != Constraint::Op::kGt) continue;
      r.metric = M::kAttainment;
      r.strict = c.op == Constraint::Op::kGt;
      rules.push_back(r);
      continue;
    }
    if (c.op != Constraint::Op::kLe && c.op != Constraint::Op::kLt) continue;
    const std::size_t cut = c.metric.rfind('_');
    if (cut == std::string::npos) continue;
    const std::string head = c.metric.substr(0, cut), stat = c.metric.substr(cut + 1);
    if (head == "ttft") {
      r.metric = M::kTtft;
    } else if (head == "tpot") {
      r.metric = M::kTpot;
    } else if (head == "e2e") {
      r.metric = M::kE2e;
    } else {
      continue;  // itl, rates, counts, cost
    }
    if (stat == "mean") {
      r.quantile = -1;
    } else if (stat == "p50") {
      r.quantile = 0.5;
    } else if (stat == "p90") {
      r.quantile = 0.9;
    } else if (stat == "p99") {
      r.quantile = 0.99;
    } else {
      continue;
    }
    r.strict = c.op == Constraint::Op::kLt;
    rules.push_back(r);
  }
  return rules;
}

Json verdict_json(const Json& result, const VerdictRequest& request) {
  if (!result.value("ok", false)) return nullptr;
  if (const auto early = result.find("early"); early != result.end()) {
    const std::string text = (*early)["constraint"].get<std::string>();
    std::string metric;
    for (const Constraint& c : request.constraints) {
      if (c.text == text) metric = c.metric;
    }
    if (metric.empty()) metric = "slo_attainment";  // the one check not among the constraints
    Json v = Json::object();
    v["feasible"] = false;
    v["early"] = true;
    v["checks"] = Json::array({{{"constraint", text}, {"metric", metric}, {"value", nullptr}, {"holds", false}}});
    v["violations"] = Json::array({(*early)["settled"]});
    return v;
  }
  std::vector<Constraint> checks;
  const bool has_slo = result["summary"].contains("slo") && result["summary"]["slo"].is_object();
  if (has_slo && request.attainment != "none") {
    std::string e;
    if (auto c = parse_constraint("slo_attainment >= " + request.attainment, e)) checks.push_back(*c);
  }
  checks.insert(checks.end(), request.constraints.begin(), request.constraints.end());
  if (checks.empty() && !request.asked) return nullptr;
  Json v = Json::object();
  Json list = Json::array();
  Json violations = Json::array();
  bool feasible = true;
  for (const Constraint& c : checks) {
    const auto value = metric_value(result, c.metric, Pricing{});
    const bool ok = value && holds(c, *value);
    feasible = feasible && ok;
    list.push_back(
        {{"constraint", c.text}, {"metric", c.metric}, {"value", value ? Json(*value) : Json(nullptr)}, {"holds", ok}});
    if (!ok) {
      const Verdict one = judge(result, Objective{c.metric, false}, {c}, Pricing{});
      for (const auto& why : one.violations) violations.push_back(why);
    }
  }
  v["feasible"] = feasible;
  v["checks"] = std::move(list);
  v["violations"] = std::move(violations);
  return v;
}

StudyOutput keys_listing() {
  Json j = Json::object();
  j["schema"] = "servesim.keys/1";
  j["servesim"] = {{"version", std::string(servesim_version())}, {"commit", std::string(servesim_commit())}};
  Json list = Json::array();
  std::size_t width = 0;
  for (const scenario::KeyInfo& k : scenario::scenario_keys()) {
    width = std::max(width, k.key.size());
    Json e = Json::object();
    e["key"] = k.key;
    e["type"] = k.type;
    e["unit"] = k.unit.empty() ? Json(nullptr) : Json(k.unit);
    e["min"] = k.min ? Json(*k.min) : Json(nullptr);
    e["max"] = k.max ? Json(*k.max) : Json(nullptr);
    e["min_exclusive"] = k.min_exclusive;
    e["choices"] = k.choices.empty() ? Json(nullptr) : Json(k.choices);
    Json defaults = Json::array();
    for (const std::string& d : k.defaults) defaults.push_back(Json::parse(d));
    e["defaults"] = defaults;
    e["required"] = k.required;
    list.push_back(std::move(e));
  }
  j["keys"] = list;
  std::string text = "scenario keys (" + std::to_string(list.size()) +
                     "; --set KEY=VALUE with [N] for list items; defaults as the resolved scenario echoes them)\n";
  text += cell("key", width) + "  " + cell("type", 9) + "  " + cell("range / choices / unit", 34) + "  default\n";
  for (const scenario::KeyInfo& k : scenario::scenario_keys()) {
    text +=
        cell(k.key, width) + "  " + cell(k.type, 9) + "  " + cell(show_range(k), 34) + "  " + show_default(k) + "\n";
  }
  return {0, j.dump(2) + "\n", text};
}

}  // namespace servesim::studies
