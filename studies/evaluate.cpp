#include "studies/evaluate.h"

#include <chrono>
#include <cstdio>

#include "reports/report.h"
#include "studies/run.h"

namespace servesim::studies {

nlohmann::ordered_json error_result(const std::vector<Diagnostic>& errors) {
  nlohmann::ordered_json r = nlohmann::ordered_json::object();
  r["ok"] = false;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Diagnostic& d : errors) {
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["path"] = d.path;
    e["message"] = d.message;
    e["file"] = d.file;
    e["line"] = d.line;
    e["column"] = d.column;
    list.push_back(std::move(e));
  }
  r["errors"] = std::move(list);
  return r;
}

scenario::Scenario load_hypothesis(const Hypothesis& h) {
  scenario::LoadOptions options;
  options.sets = h.sets;
  options.seed = h.seed;
  options.caches = h.caches;
  options.memory_limit_bytes = h.budget.memory_bytes;
  options.bytes_per_request = h.budget.bytes_per_request;
  options.file_roots = h.file_roots;
  return scenario::load_scenario(*h.base, options);
}

Evaluation evaluate(const scenario::Scenario& sc, const cluster::BudgetLimits& budget,
                    const std::vector<metrics::SettleRule>& settle) {
  Evaluation ev;
  const auto start = std::chrono::steady_clock::now();
  ExecuteOptions options;
  options.budget = budget;
  options.settle = settle;
  const RunOutput run = execute(sc, options);
  reports::RunInfo info;
  info.name = sc.name;
  info.events = run.events;
  info.fingerprint = run.fingerprint;
  for (const auto& pool : sc.config.pools) info.calibration.push_back(pool.chip.calibration);
  // The summary and pools exactly as the report has them (the scenario echo is left out).
  nlohmann::ordered_json report = reports::build_report(nlohmann::ordered_json::object(), run.summary, info);
  ev.result = nlohmann::ordered_json::object();
  ev.result["ok"] = true;
  ev.result["summary"] = std::move(report["summary"]);
  ev.result["pools"] = std::move(report["pools"]);
  nlohmann::ordered_json sim = nlohmann::ordered_json::object();
  sim["events"] = report["simulation"]["events"];
  sim["fingerprint"] = report["simulation"]["fingerprint"];
  sim["simulated_s"] = report["simulation"]["simulated_s"];
  ev.result["simulation"] = std::move(sim);
  if (run.settled) {
    ev.result["early"] = {{"constraint", settle[run.settled->rule].text},
                          {"settled", run.settled->why},
                          {"at_s", run.settled_at_s},
                          {"events", run.events}};
  }
  ev.ok = true;
  ev.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ev;
}

Evaluation evaluate(const Hypothesis& h) {
  Evaluation ev;
  const auto start = std::chrono::steady_clock::now();
  try {
    const scenario::Scenario sc = load_hypothesis(h);
    ev = evaluate(sc, h.budget, h.settle);
    if (h.keep_scenario) ev.scenario = sc.resolved;
    ev.files = sc.files;
  } catch (const InputError& e) {
    ev.errors = e.diagnostics();
    ev.result = error_result(ev.errors);
    ev.limit_exceeded = dynamic_cast<const LimitExceeded*>(&e) != nullptr;
  }
  ev.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ev;
}

}  // namespace servesim::studies
