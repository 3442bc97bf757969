// `servesim sweep`: many variants of one scenario, in parallel (OpenMP threads, Open MPI ranks),
// journaled so that a killed sweep resumes where it stopped, ranked by an objective under
// constraints, with the Pareto front of two objectives.
//
// Every variant is a hypothesis (evaluate.h): the base scenario, the sweep's --set overrides,
// then the variant's values, validated like a file. The simulation seed is the scenario's (or a
// varied `seed` key), so every variant sees the same traffic (common random numbers) and a
// variant's result depends on nothing but the variant: not on the thread or rank count, not on
// which run of a resumed sweep computed it. Outputs are ordered by variant index.
#include "studies/sweep.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/hash.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "studies/evaluate.h"
#include "studies/journal.h"
#include "studies/objective.h"
#include "studies/sweep_ranks.h"
#include "studies/sweep_spec.h"
#include "studies/text_format.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

std::string value_text(const std::optional<double>& v) { return v ? fmt("%.4g", *v) : "-"; }

// The last segment of a key path, for column headers: "deployment.pools[0].instances" -> "instances".
std::string short_key(const std::string& key) {
  const std::size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

// A column header short enough for the table.
std::string label(const std::string& metric) {
  if (metric == "output_tokens_per_s_per_chip") return "tok/s/chip";
  if (metric == "output_tokens_per_s") return "tok/s";
  if (metric == "input_tokens_per_s") return "in_tok/s";
  if (metric == "goodput_per_chip") return "goodput/chip";
  return metric;
}

// The set of variant i as a result line has it: {"key": "value text"}.
Json set_of(const std::vector<std::string>& assignments) {
  Json set = Json::object();
  for (const std::string& a : assignments) {
    const std::size_t eq = a.find('=');
    set[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return set;
}

// Why a verified journal record cannot stand for variant `i` of this sweep, or "" when it can:
// the shape every reader of a result relies on (objective.cpp, summary_text).
std::string record_problem(const Json& r, const std::vector<std::vector<std::string>>& variants,
                           const std::vector<bool>& have) {
  const auto v = r.find("variant");
  if (v == r.end() || !v->is_number_unsigned() || v->get<std::uint64_t>() >= variants.size()) {
    return "it names no variant of this sweep";
  }
  const auto i = v->get<std::size_t>();
  if (have[i]) return "variant " + std::to_string(i) + " is already done (a duplicate)";
  if (r.value("set", Json()) != set_of(variants[i])) return "its set differs from variant " + std::to_string(i) + "'s";
  const auto ok = r.find("ok");
  if (ok == r.end() || !ok->is_boolean()) return "it has no ok";
  if (ok->get<bool>()) {
    const auto s = r.find("summary"), p = r.find("pools"), sim = r.find("simulation");
    if (s == r.end() || !s->is_object() || p == r.end() || !p->is_array() || sim == r.end() || !sim->is_object()) {
      return "it lacks a summary, pools or simulation";
    }
    for (const Json& pool : *p) {
      if (!pool.is_object() || (pool.contains("chips") && !pool["chips"].is_number())) return "a pool is malformed";
    }
  } else if (!r.contains("errors") || !r["errors"].is_array()) {
    return "it has no errors";
  }
  return "";
}

// The table of the best feasible variants and the Pareto front, for the terminal and summary.txt.
std::string summary_text(const std::vector<Json>& results, const std::vector<VarySpec>& specs,
                         const std::vector<Verdict>& verdicts, const std::vector<std::size_t>& order,
                         const Objective& objective, const std::pair<Objective, Objective>& pareto,
                         const std::vector<std::size_t>& front, const Pricing& pricing, std::size_t top,
                         const std::string& name) {
  std::size_t ok = 0, feasible = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    ok += results[i].value("ok", false);
    feasible += verdicts[i].feasible;
  }
  std::string out = "servesim sweep: " + name + ": " + std::to_string(results.size()) + " variants, " +
                    std::to_string(ok) + " valid, " + std::to_string(feasible) + " meet the constraints\n";
  auto header = [&](const std::vector<std::string>& extra) {
    std::string h = "  " + pad("rank", 4) + " " + pad("variant", 7);
    for (const VarySpec& s : specs) h += " " + pad(short_key(s.key), 12);
    for (const auto& e : extra) h += " " + pad(label(e), 14);
    return h + "\n";
  };
  auto values = [&](std::size_t i) {
    std::string v;
    for (const VarySpec& s : specs) {
      const Json& set = results[i]["set"];
      v += " " + pad(set.contains(s.key) ? set[s.key].get<std::string>() : "", 12);
    }
    return v;
  };
  const std::vector<std::string> shown = {"ttft_p99", "tpot_p50", "output_tokens_per_s_per_chip"};
  out += "top " + std::to_string(std::min(top, order.size())) + " by " + objective.text() + ":\n";
  std::vector<std::string> cols = {objective.metric};
  for (const auto& m : shown) {
    if (m != objective.metric) cols.push_back(m);
  }
  out += header(cols);
  for (std::size_t r = 0; r < order.size() && r < top; ++r) {
    const std::size_t i = order[r];
    std::string line = "  " + pad(std::to_string(r + 1), 4) + " " + pad(std::to_string(i), 7) + values(i);
    for (const auto& c : cols) line += " " + pad(value_text(metric_value(results[i], c, pricing)), 14);
    out += line + "\n";
  }
  if (order.empty()) out += "  (no variant meets the constraints)\n";
  out += "Pareto front of " + pareto.first.text() + " and " + pareto.second.text() + " (" +
         std::to_string(front.size()) + " variants):\n";
  out += header({pareto.first.metric, pareto.second.metric});
  for (std::size_t r = 0; r < front.size(); ++r) {
    const std::size_t i = front[r];
    out += "  " + pad(std::to_string(r + 1), 4) + " " + pad(std::to_string(i), 7) + values(i) + " " +
           pad(value_text(metric_value(results[i], pareto.first.metric, pricing)), 14) + " " +
           pad(value_text(metric_value(results[i], pareto.second.metric, pricing)), 14) + "\n";
  }
  // Why the others failed, briefly: the first few invalid or infeasible variants.
  std::size_t listed = 0;
  for (std::size_t i = 0; i < results.size() && listed < 5; ++i) {
    if (verdicts[i].feasible) continue;
    ++listed;
    std::string why;
    if (!results[i].value("ok", false)) {
      const Json& e = results[i]["errors"];
      why = e.empty() ? "invalid"
                      : "invalid: " + e[0].value("path", std::string()) + ": " + e[0].value("message", std::string());
    } else {
      for (const auto& v : verdicts[i].violations) why += (why.empty() ? "" : "; ") + v;
    }
    out += (listed == 1 ? "not feasible (first 5):\n" : "") + std::string("  variant ") + std::to_string(i) + ":" +
           values(i) + "  " + why + "\n";
  }
  return out;
}

}  // namespace

StudyOutput sweep(const SweepRequest& request, std::ostream& out, std::ostream& err) {
  // Only rank 0 speaks.
  SweepRanks& ranks = *request.ranks;
  std::ostringstream quiet;
  std::ostream& say = ranks.rank() == 0 ? out : quiet;
  std::ostream& complain = ranks.rank() == 0 ? err : quiet;
  std::vector<std::string> problems;
  if (request.files.size() != 1) {
    problems.emplace_back("sweep takes exactly one scenario file");
  }
  if (request.vary.empty()) problems.emplace_back("nothing to vary: give at least one --vary KEY=SPEC");
  std::vector<VarySpec> specs;
  {
    for (const std::string& v : request.vary) {
      std::string e;
      if (auto s = parse_vary(v, e))
        specs.push_back(*s);
      else
        problems.push_back(e);
    }
  }
  std::string e;
  const auto objective = parse_objective(request.objective, e);
  if (!objective) problems.push_back(e);
  std::vector<Constraint> constraints;
  {
    for (const std::string& c : request.constraints) {
      e.clear();
      if (auto parsed = parse_constraint(c, e))
        constraints.push_back(*parsed);
      else
        problems.push_back(e);
    }
  }
  std::optional<std::pair<Objective, Objective>> pareto;
  {
    const std::string& p = request.pareto;
    const std::size_t comma = p.find(',');
    e.clear();
    std::string e2;
    const auto a = comma == std::string::npos ? std::nullopt : parse_objective(p.substr(0, comma), e);
    const auto b = comma == std::string::npos ? std::nullopt : parse_objective(p.substr(comma + 1), e2);
    if (a && b)
      pareto.emplace(*a, *b);
    else
      problems.push_back(comma == std::string::npos ? "--pareto expects two objectives A,B" : (e.empty() ? e2 : e));
  }
  Pricing pricing;
  if (request.chip_hour_price) {
    pricing.chip_hour_usd = *request.chip_hour_price;
    if (!(*pricing.chip_hour_usd > 0)) problems.emplace_back("--chip-hour-price must be greater than 0");
  }
  Sampling sampling = Sampling::kGrid;
  std::int64_t samples = 0;
  if (request.samples) {
    samples = *request.samples;
    const std::string& s = request.sampling;
    if (samples < 1 || samples > 1'000'000) problems.emplace_back("--samples must be between 1 and 1,000,000");
    if (s == "lhs")
      sampling = Sampling::kLatinHypercube;
    else if (s == "random")
      sampling = Sampling::kRandom;
    else
      problems.push_back("--sampling must be lhs or random, got '" + s + "'");
  }
  std::string threads_error, threads_note;
  const int threads = thread_count(request.threads, threads_error, threads_note);
  if (!threads_error.empty()) problems.push_back(threads_error);
  const bool json_out = request.json.has_value();
  if (json_out && *request.json != "-") problems.emplace_back("--json takes '-' (the result lines go to --out)");
  std::vector<std::vector<std::string>> variants;
  if (problems.empty()) {
    e.clear();
    variants = make_variants(specs, sampling, samples, request.seed, e);
    if (!e.empty()) problems.push_back(e);
  }
  const std::string path = request.files.size() == 1 ? request.files.front() : "";
  const std::filesystem::path dir = request.out
                                        ? std::filesystem::path(*request.out)
                                        : std::filesystem::path(std::filesystem::path(path).stem().string() + ".sweep");
  std::shared_ptr<const scenario::ScenarioDocument> doc;
  if (problems.empty()) {
    try {
      doc = scenario::parse_scenario_file(path);
    } catch (const InputError& ie) {
      print_diagnostics(ie, complain);
      return StudyOutput::failed(2);
    }
  }
  if (!problems.empty()) {
    for (const auto& p : problems) complain << "error: " << p << "\n";
    complain << problems.size() << (problems.size() == 1 ? " problem" : " problems") << " found; nothing was run.\n";
    return StudyOutput::failed(2);
  }
  const std::vector<std::string>& base_sets = request.sets;

  // The header pins everything that decides the variants' results, and nothing else (the
  // objective, constraints and thread count may change between a run and its resumption).
  Json header = Json::object();
  header["servesim_sweep_journal"] = 1;
  header["scenario"] = path;
  header["scenario_fnv1a"] = hex64(fnv1a64(read_input_file(InputSource{path, "scenario file", ""}, kMaxScenarioBytes)));
  header["set"] = base_sets;
  Json vary = Json::array();
  for (const VarySpec& s : specs) vary.push_back(s.key + "=" + s.text);
  header["vary"] = vary;
  header["sampling"] = sampling == Sampling::kGrid ? "grid" : sampling == Sampling::kRandom ? "random" : "lhs";
  header["samples"] = samples;
  header["seed"] = request.seed;
  header["variants"] = variants.size();

  const std::size_t n = variants.size();
  std::vector<Json> results(n);
  std::vector<bool> have(n, false);
  Journal journal;
  std::vector<std::int64_t> pending;
  std::size_t resumed = 0;
  if (ranks.rank() == 0) {
    std::vector<Journal::Line> lines;
    std::string error;
    try {
      // Before any variant runs: a folder that cannot take the results is said now.
      check_output_folder(dir.string(), {"journal.jsonl", "results.jsonl", "summary.txt"}, "--out folder");
      create_output_folder(dir.string());
    } catch (const InputError& ie) {
      error = ie.diagnostics().front().to_string();
    }
    if (!error.empty() || !journal.open((dir / "journal.jsonl").string(), header, lines, error)) {
      complain << "error: " << error << "\n";
      pending = {-1};  // tells the other ranks to stop
      ranks.broadcast(pending);
      return StudyOutput::failed(2);
    }
    // Every record is verified (its check) and must fit this sweep; a bad one is said and its
    // variant computed again.
    std::size_t bad = 0;
    for (Journal::Line& line : lines) {
      std::string why;
      std::optional<Json> r = Journal::verify(line.text, why);
      if (r) why = record_problem(*r, variants, have);
      if (!why.empty()) {
        if (++bad <= 5)
          complain << "warning: " << (dir / "journal.jsonl").string() << ":" << line.number
                   << ": a record the sweep cannot use (" << why << "); its variant is computed again\n";
        continue;
      }
      const auto i = (*r)["variant"].get<std::size_t>();
      have[i] = true;
      results[i] = std::move(*r);
      ++resumed;
    }
    if (bad > 5) complain << "warning: " << bad - 5 << " more unusable records in the journal\n";
    for (std::size_t i = 0; i < n; ++i) {
      if (!have[i]) pending.push_back(static_cast<std::int64_t>(i));
    }
    if (resumed > 0) {
      say << "resuming " << dir.string() << "/journal.jsonl: " << resumed << " of " << n << " variants already done"
          << (journal.dropped_bytes() > 0
                  ? " (dropped a torn last line of " + std::to_string(journal.dropped_bytes()) + " bytes)"
                  : "")
          << "\n";
    }
  }
  ranks.broadcast(pending);
  if (pending.size() == 1 && pending[0] == -1) return StudyOutput::failed(2);

  // This rank's share: every size-th pending variant.
  std::vector<std::size_t> mine;
  std::size_t from_others = 0;
  for (std::size_t k = 0; k < pending.size(); ++k) {
    if (static_cast<int>(k % static_cast<std::size_t>(ranks.size())) == ranks.rank()) {
      mine.push_back(static_cast<std::size_t>(pending[k]));
    } else {
      ++from_others;
    }
  }

  scenario::Caches caches;  // shared by the variants' runs (sim/scenario/caches.h)
  const cluster::BudgetLimits budget = budget_of(request.limits, threads);
  if (!threads_note.empty()) complain << "note: " << threads_note << "\n";
  auto record_of = [&](std::size_t i) {
    Hypothesis h;
    h.base = doc;
    h.caches = &caches;
    h.sets = base_sets;
    h.sets.insert(h.sets.end(), variants[i].begin(), variants[i].end());
    h.budget = budget;
    Evaluation ev = evaluate(h);
    Json rec = Json::object();
    rec["variant"] = i;
    rec["set"] = set_of(variants[i]);
    for (auto& [key, value] : ev.result.items()) rec[key] = std::move(value);
    return rec.dump(-1, ' ', false, Json::error_handler_t::replace);
  };

  std::mutex mu;
  // Variants done, for a progress display (rank 0's count includes the other ranks').
  StudyProgress own_progress;
  StudyProgress& progress = request.progress ? *request.progress : own_progress;
  progress.total = static_cast<std::int64_t>(n);
  progress.done = static_cast<std::int64_t>(resumed);
  std::size_t received = 0;
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  // Rank 0 keeps what arrives; every record is journaled before it counts.
  auto keep = [&](const std::string& line) {
    Json r = Json::parse(line);
    const auto i = r["variant"].get<std::size_t>();
    journal.append(line);
    results[i] = std::move(r);
    have[i] = true;
  };
  auto drain = [&] {
    std::string line;
    while (ranks.try_receive(line)) {
      keep(line);
      ++received;
      ++progress.done;
    }
  };
  {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (std::size_t k = 0; k < mine.size(); ++k) {
      if (failed.load()) continue;
      try {
        const std::string line = record_of(mine[k]);
        std::lock_guard<std::mutex> lock(mu);
        if (ranks.rank() == 0) {
          keep(line);
          drain();
        } else {
          ranks.send_to_root(line);
        }
        ++progress.done;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
        failed.store(true);
      }
    }
    if (failure) std::rethrow_exception(failure);
    if (ranks.rank() == 0) {
      while (received < from_others) {
        {
          std::lock_guard<std::mutex> lock(mu);
          drain();
        }
        if (received < from_others) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  if (ranks.rank() != 0) return {};

  // Rank, filter and write, in variant order.
  std::vector<Verdict> verdicts(n);
  std::vector<std::size_t> order;
  std::vector<std::optional<double>> pa(n), pb(n);
  for (std::size_t i = 0; i < n; ++i) {
    verdicts[i] = judge(results[i], *objective, constraints, pricing);
    if (verdicts[i].feasible) {
      order.push_back(i);
      pa[i] = metric_value(results[i], pareto->first.metric, pricing);
      pb[i] = metric_value(results[i], pareto->second.metric, pricing);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return better(*objective, verdicts[a].objective, verdicts[b].objective);
  });
  std::vector<std::int64_t> rank_of(n, 0);
  for (std::size_t r = 0; r < order.size(); ++r) rank_of[order[r]] = static_cast<std::int64_t>(r + 1);
  const auto front = pareto_front(pa, pb, pareto->first, pareto->second);

  std::string lines;
  for (std::size_t i = 0; i < n; ++i) {
    Json line = results[i];
    line["objective"] = verdicts[i].objective ? Json(*verdicts[i].objective) : Json(nullptr);
    line["feasible"] = verdicts[i].feasible;
    line["rank"] = verdicts[i].feasible ? Json(rank_of[i]) : Json(nullptr);
    line["violations"] = verdicts[i].violations;
    lines += line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  const std::string name = std::filesystem::path(path).stem().string();
  const std::string table =
      summary_text(results, specs, verdicts, order, *objective, *pareto, front, pricing, request.top, name);
  write_all_or_none({{(dir / "results.jsonl").string(), lines}, {(dir / "summary.txt").string(), table}});
  if (json_out) return {0, lines, {}};
  return {
      0, {}, table + "  wrote       " + (dir / "results.jsonl").string() + ", summary.txt (journal: journal.jsonl)\n"};
}

}  // namespace servesim::studies
