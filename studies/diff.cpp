// `servesim diff A B` / `servesim diff A --set KEY=VALUE ...`: runs two hypotheses with the same
// seed (common random numbers: the same traffic in both) and explains how B differs from A
// (attribution.h). A and B are scenarios (YAML) or reports written by `servesim run --json`
// (JSON, schema servesim.report/1, which carry their resolved scenario), so two saved runs can be
// compared without running them again.
#include "studies/diff.h"

#include <filesystem>
#include <optional>

#include "core/input_file.h"
#include "reports/report.h"
#include "studies/attribution.h"
#include "studies/evaluate.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

bool is_report_path(const std::string& path) { return std::filesystem::path(path).extension() == ".json"; }

// A report file read back: its result part and its resolved scenario. Problems are diagnostics
// with the file's line and column.
struct ReportFile {
  Json result;
  Json scenario;
};

ReportFile read_report(const std::string& path) {
  const std::string text = read_input_file(InputSource{path, "report file", ""}, kMaxJsonFileBytes);
  if (const auto deep = json_too_deep_at(text)) {
    const auto [line, column] = line_and_column(text, *deep);
    throw InputError(
        {Diagnostic{path, line, column, "",
                    "the JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels (limits: README.md)"}});
  }
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // nlohmann counts bytes; the user wants a line and a column.
    const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    int line = 1, column = 1;
    for (std::size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    const std::size_t colon = what.find("syntax error");
    throw InputError({Diagnostic{path, line, column, "",
                                 "not valid JSON: " + (colon == std::string::npos ? what : what.substr(colon))}});
  } catch (const Json::exception& e) {
    // out_of_range for a number beyond a double (1E999): nlohmann records no position for it.
    throw InputError({Diagnostic{path, 0, 0, "", std::string("not valid JSON: ") + e.what()}});
  }
  std::vector<Diagnostic> problems;
  if (!j.is_object() || j.value("schema", std::string()) != reports::kReportSchema) {
    problems.push_back({path, 1, 1, "schema",
                        std::string("not a servesim report (expected \"schema\": \"") + reports::kReportSchema +
                            "\", as `servesim run --json` writes)"});
  } else {
    for (const char* key : {"summary", "pools", "simulation", "scenario"}) {
      if (!j.contains(key)) problems.push_back({path, 1, 1, key, std::string("the report has no '") + key + "'"});
    }
  }
  if (!problems.empty()) throw InputError(std::move(problems));
  ReportFile r;
  r.result = Json::object();
  r.result["ok"] = true;
  r.result["summary"] = j["summary"];
  r.result["pools"] = j["pools"];
  r.result["simulation"] = j["simulation"];
  r.scenario = j["scenario"];
  return r;
}

// One side of the comparison, as given and as run.
struct Side {
  std::string source;
  bool report = false;
  std::vector<std::string> sets;
  std::optional<scenario::Scenario> loaded;
  Json result;
  Json scenario;
  double wall_s = 0;
};

Json side_json(const Side& s, bool reproducible) {
  Json j = Json::object();
  j["source"] = s.source;
  j["kind"] = s.report ? "report" : "scenario";
  j["set"] = s.sets;
  j["name"] = s.scenario.value("name", std::string());
  j["seed"] = s.scenario.contains("seed") ? s.scenario["seed"] : Json(nullptr);
  const Json& sim = s.result["simulation"];
  j["events"] = sim.value("events", Json(nullptr));
  j["fingerprint"] = sim.value("fingerprint", Json(nullptr));
  j["simulated_s"] = sim.value("simulated_s", Json(nullptr));
  j["wall_s"] = reproducible || s.report ? Json(nullptr) : Json(s.wall_s);
  return j;
}

std::string side_text(const Side& s) {
  std::string t = s.source;
  for (const auto& set : s.sets) t += " --set " + set;
  return t;
}

}  // namespace

StudyOutput diff(const DiffRequest& request, std::ostream& err) {
  const std::vector<std::string>& files = request.files;
  const std::vector<std::string>& sets = request.sets;
  const std::vector<std::string>& both = request.set_both;
  Side a, b;
  a.source = files[0];
  b.source = files.size() == 2 ? files[1] : files[0];
  a.sets = both;
  b.sets = both;
  b.sets.insert(b.sets.end(), sets.begin(), sets.end());
  a.report = is_report_path(a.source);
  b.report = is_report_path(b.source);
  if ((a.report || b.report) && (!sets.empty() || !both.empty() || request.seed)) {
    err << "error: --set, --set-both and --seed change a scenario before it runs; a report (.json) has run "
           "already\n";
    return StudyOutput::failed(2);
  }

  // Load both (every problem of either reported at once), B with A's seed.
  std::vector<Diagnostic> diagnostics;
  std::optional<std::uint64_t> seed = request.seed;
  auto load = [&](Side& s) {
    try {
      if (s.report) {
        ReportFile r = read_report(s.source);
        s.result = std::move(r.result);
        s.scenario = std::move(r.scenario);
        // A scenario B runs with the seed A's report ran with.
        if (!seed && s.scenario.contains("seed") && s.scenario["seed"].is_number_unsigned()) {
          seed = s.scenario["seed"].get<std::uint64_t>();
        }
        return;
      }
      Hypothesis h;
      h.base = scenario::parse_scenario_file(s.source);
      h.sets = s.sets;
      h.seed = seed;
      s.loaded = load_hypothesis(h);
      s.scenario = s.loaded->resolved;
      if (!seed && s.loaded->resolved.contains("seed")) seed = s.loaded->resolved["seed"].get<std::uint64_t>();
    } catch (const InputError& e) {
      diagnostics.insert(diagnostics.end(), e.diagnostics().begin(), e.diagnostics().end());
    }
  };
  load(a);
  load(b);
  if (!diagnostics.empty()) {
    print_diagnostics(InputError(diagnostics), err);
    return StudyOutput::failed(2);
  }
  for (const Side* s : {&a, &b}) {
    for (const auto& w : s->loaded ? s->loaded->warnings : std::vector<Diagnostic>{}) {
      err << "warning: " << w.to_string() << "\n";
    }
  }

  // Both runs at once (each is single-threaded; the results do not depend on the order).
  Side* sides[2] = {&a, &b};
  std::exception_ptr failure;
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int i = 0; i < 2; ++i) {
    Side& s = *sides[i];
    if (!s.loaded) continue;
    try {
      Evaluation ev = evaluate(*s.loaded);
      s.result = std::move(ev.result);
      s.wall_s = ev.wall_s;
    } catch (...) {
#pragma omp critical
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);

  DiffOptions options;
  options.words_components = request.top;
  const RunView va{&a.result, &a.scenario}, vb{&b.result, &b.scenario};
  Json d = diff_results(va, vb, options);
  const bool reproducible = request.reproducible;
  Json doc = Json::object();
  doc["schema"] = d["schema"];
  doc["a"] = side_json(a, reproducible);
  doc["b"] = side_json(b, reproducible);
  for (auto& [key, value] : d.items()) {
    if (key != "schema") doc[key] = std::move(value);
  }
  std::string text = "servesim diff\n  A  " + side_text(a) + "\n  B  " + side_text(b) + "\n";
  const Json &seed_a = doc["a"]["seed"], &seed_b = doc["b"]["seed"];
  if (seed_a == seed_b) {
    text += "  seed " + seed_a.dump() + " in both (the same traffic)\n";
  } else {
    text += "  seeds differ (" + seed_a.dump() + " vs " + seed_b.dump() + "): the traffic differs too\n";
  }
  text += diff_text(doc);
  return {0, doc.dump(2) + "\n", text};
}

}  // namespace servesim::studies
