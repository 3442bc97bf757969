#include "studies/objective.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/units.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

enum class Kind { kLatencyMs, kRate, kFraction, kCount, kUsd };

struct Metric {
  std::string name;
  Kind kind;
  bool maximize;
};

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> all = [] {
    std::vector<Metric> m;
    for (const char* d : {"ttft", "tpot", "itl", "e2e"}) {
      for (const char* s : {"mean", "p50", "p90", "p99"}) {
        m.push_back({std::string(d) + "_" + s, Kind::kLatencyMs, false});
      }
    }
    for (const char* r : {"output_tokens_per_s", "input_tokens_per_s", "requests_per_s", "goodput",
                          "output_tokens_per_s_per_chip", "goodput_per_chip"}) {
      m.push_back({r, Kind::kRate, true});
    }
    m.push_back({"slo_attainment", Kind::kFraction, true});
    m.push_back({"chips", Kind::kCount, false});
    m.push_back({"completed", Kind::kCount, true});
    m.push_back({"rejected", Kind::kCount, false});
    m.push_back({"cost", Kind::kUsd, false});
    m.push_back({"cost_per_hour", Kind::kUsd, false});
    return m;
  }();
  return all;
}

const Metric* find_metric(const std::string& name) {
  for (const Metric& m : metrics()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string unknown_metric(const std::string& name) {
  std::string best;
  std::size_t best_d = 4;
  for (const Metric& m : metrics()) {
    const std::size_t d = edit_distance(name, m.name);
    if (d < best_d) {
      best_d = d;
      best = m.name;
    }
  }
  return "unknown metric '" + name + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?") +
         " (the metrics: see 'servesim sweep --help')";
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

}  // namespace

std::optional<double> number_at(const Json& j, std::initializer_list<const char*> path) {
  const Json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object()) return std::nullopt;
    const auto it = cur->find(k);
    if (it == cur->end()) return std::nullopt;
    cur = &*it;
  }
  return cur->is_number() ? std::optional<double>(cur->get<double>()) : std::nullopt;
}

bool holds(const Constraint& c, double x) {
  switch (c.op) {
    case Constraint::Op::kLe: return x <= c.value;
    case Constraint::Op::kLt: return x < c.value;
    case Constraint::Op::kGe: return x >= c.value;
    case Constraint::Op::kGt: return x > c.value;
  }
  return false;
}

namespace {

std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const Metric& m : metrics()) out.push_back(m.name);
  return out;
}

std::optional<Objective> parse_objective(const std::string& text, std::string& error) {
  Objective o;
  std::string name = trim(text);
  std::optional<bool> direction;
  if (name.rfind("min:", 0) == 0 || name.rfind("max:", 0) == 0) {
    direction = name[1] == 'a';
    name = trim(name.substr(4));
  }
  const Metric* m = find_metric(name);
  if (!m) {
    error = "objective: " + unknown_metric(name);
    return std::nullopt;
  }
  o.metric = name;
  o.maximize = direction.value_or(m->maximize);
  return o;
}

std::optional<std::string> slo_target_override(const std::string& text, std::string& error) {
  std::size_t at = std::string::npos, len = 0;
  for (const char* op : {"<=", ">=", "<", ">"}) {
    if ((at = text.find(op)) != std::string::npos) {
      len = std::char_traits<char>::length(op);
      break;
    }
  }
  if (at == std::string::npos) return std::nullopt;
  const std::string metric = trim(text.substr(0, at));
  if (metric != "ttft" && metric != "tpot" && metric != "e2e") return std::nullopt;
  if (text[at] != '<') {
    error = "constraint '" + text + "': a per-request target is an upper limit ('" + metric + " <= 2 s'), as in slo:";
    return std::nullopt;
  }
  const std::string value = trim(text.substr(at + len));
  const QuantityParse q = parse_quantity(value, Dimension::kDuration);
  if (!q.ok || !(q.value > 0)) {
    error = "constraint '" + text + "': " + (q.ok ? std::string("the target must be positive") : q.error);
    return std::nullopt;
  }
  return "slo." + metric + "=" + value;
}

std::optional<Constraint> parse_constraint(const std::string& text, std::string& error) {
  Constraint c;
  c.text = text;
  std::size_t at = std::string::npos, len = 0;
  for (const char* op : {"<=", ">=", "<", ">"}) {
    const std::size_t p = text.find(op);
    if (p != std::string::npos) {
      at = p;
      len = std::char_traits<char>::length(op);
      c.op = op[0] == '<' ? (len == 2 ? Constraint::Op::kLe : Constraint::Op::kLt)
                          : (len == 2 ? Constraint::Op::kGe : Constraint::Op::kGt);
      break;
    }
  }
  if (at == std::string::npos) {
    error = "constraint '" + text + "': expected METRIC OP VALUE with OP one of <=, <, >=, >, e.g. 'ttft_p99 <= 2 s'";
    return std::nullopt;
  }
  c.metric = trim(text.substr(0, at));
  const std::string value = trim(text.substr(at + len));
  const Metric* m = find_metric(c.metric);
  if (!m) {
    error = "constraint '" + text + "': " + unknown_metric(c.metric);
    return std::nullopt;
  }
  auto fail = [&](const std::string& why) {
    error = "constraint '" + text + "': " + why;
    return std::nullopt;
  };
  switch (m->kind) {
    case Kind::kLatencyMs: {
      const QuantityParse q = parse_quantity(value, Dimension::kDuration);
      if (!q.ok) return fail(q.error);
      c.value = q.value * 1e3;
      break;
    }
    case Kind::kRate: {
      const QuantityParse q = parse_quantity(value, Dimension::kFrequency);
      if (!q.ok) return fail(q.error);
      c.value = q.value;
      break;
    }
    case Kind::kFraction:
    case Kind::kCount:
    case Kind::kUsd: {
      std::string v = value;
      const bool percent = m->kind == Kind::kFraction && !v.empty() && v.back() == '%';
      if (percent) v = trim(v.substr(0, v.size() - 1));
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(x)) {
        return fail("expected a plain number" + std::string(m->kind == Kind::kFraction ? " or a percentage" : "") +
                    ", got '" + value + "'");
      }
      c.value = percent ? x / 100 : x;
      break;
    }
  }
  // A limit no result can reach (an attainment of 150%, a negative latency) would silently make
  // every variant infeasible, or every one feasible.
  if (m->kind == Kind::kFraction && !(c.value >= 0 && c.value <= 1)) {
    return fail("a share is between 0 and 1 (0% and 100%), got '" + value + "'");
  }
  if (!(c.value >= 0)) return fail("must be at least 0, got '" + value + "'");
  return c;
}

std::optional<double> metric_value(const Json& r, const std::string& name, const Pricing& pricing) {
  if (!r.is_object() || !r.value("ok", false)) return std::nullopt;
  const Json& s = r["summary"];
  double chips = 0;
  for (const Json& p : r["pools"]) chips += p.value("chips", 0.0);
  const std::size_t us = name.find('_');
  const std::string head = name.substr(0, us);
  if (head == "ttft" || head == "tpot" || head == "itl" || head == "e2e") {
    const std::string stat = name.substr(us + 1);
    const std::string key = head + "_ms";
    return number_at(s, {key.c_str(), stat.c_str()});
  }
  if (name == "output_tokens_per_s" || name == "input_tokens_per_s" || name == "requests_per_s" ||
      name == "output_tokens_per_s_per_chip") {
    return number_at(s, {"throughput", name.c_str()});
  }
  if (name == "goodput") return number_at(s, {"slo", "goodput_requests_per_s"});
  if (name == "goodput_per_chip") {
    const auto g = number_at(s, {"slo", "goodput_requests_per_s"});
    return g && chips > 0 ? std::optional<double>(*g / chips) : std::nullopt;
  }
  if (name == "slo_attainment") return number_at(s, {"slo", "attainment"});
  if (name == "chips") return chips;
  if (name == "completed" || name == "rejected") return number_at(s, {"requests", name.c_str()});
  if (name == "cost_per_hour") {
    return pricing.chip_hour_usd ? std::optional<double>(chips * *pricing.chip_hour_usd) : std::nullopt;
  }
  if (name == "cost") {
    const auto tps = number_at(s, {"throughput", "output_tokens_per_s"});
    if (!pricing.chip_hour_usd || !tps || *tps <= 0) return std::nullopt;
    return chips * *pricing.chip_hour_usd / (*tps * 3600) * 1e6;
  }
  return std::nullopt;
}

Verdict judge(const Json& result, const Objective& objective, const std::vector<Constraint>& constraints,
              const Pricing& pricing) {
  Verdict v;
  v.objective = metric_value(result, objective.metric, pricing);
  if (!result.value("ok", false)) {
    v.violations.emplace_back("invalid scenario");
    return v;
  }
  for (const Constraint& c : constraints) {
    const auto x = metric_value(result, c.metric, pricing);
    const Metric* m = find_metric(c.metric);
    const std::string unit = m->kind == Kind::kLatencyMs ? " ms" : m->kind == Kind::kRate ? " /s" : "";
    if (!x) {
      v.violations.push_back(c.metric + " is not available in this result");
      continue;
    }
    if (!holds(c, *x)) {
      const char* op = c.op == Constraint::Op::kLe   ? "<="
                       : c.op == Constraint::Op::kLt ? "<"
                       : c.op == Constraint::Op::kGe ? ">="
                                                     : ">";
      v.violations.push_back(c.metric + " = " + show(*x) + unit + ", not " + op + " " + show(c.value) + unit);
    }
  }
  v.feasible = v.violations.empty();
  return v;
}

bool better(const Objective& o, const std::optional<double>& a, const std::optional<double>& b) {
  if (!a) return false;
  if (!b) return true;
  return o.maximize ? *a > *b : *a < *b;
}

std::vector<std::size_t> pareto_front(const std::vector<std::optional<double>>& first,
                                      const std::vector<std::optional<double>>& second, const Objective& a,
                                      const Objective& b) {
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (first[i] && second[i]) candidates.push_back(i);
  }
  // Best first by the first objective, then the second, then index: a point is on the front when
  // it beats every earlier point on the second objective.
  std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t x, std::size_t y) {
    if (*first[x] != *first[y]) return better(a, first[x], first[y]);
    return better(b, second[x], second[y]);
  });
  std::vector<std::size_t> front;
  std::optional<double> best_second;
  for (const std::size_t i : candidates) {
    if (!best_second || better(b, second[i], best_second)) {
      front.push_back(i);
      best_second = second[i];
    }
  }
  return front;
}

}  // namespace servesim::studies
