// `servesim run SCENARIO.yaml`: one scenario, its summary table and the reports asked for (JSON,
// HTML, per-request CSV, Perfetto trace), each written whole or not at all.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "app/progress.h"
#include "core/output_file.h"
#include "core/units.h"
#include "reports/html_report.h"
#include "reports/report.h"
#include "reports/trace.h"
#include "studies/run.h"

namespace servesim::app {
namespace po = boost::program_options;
namespace {

// "A:B" with durations ("10 s:20 s", ":5 s", "30 s:") into a trace window.
bool parse_window(const std::string& text, metrics::TraceOptions& trace, std::string& error) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) {
    error = "--trace-window expects FROM:TO with units, e.g. '10 s:20 s' (either side may be empty)";
    return false;
  }
  auto side = [&](const std::string& part, std::optional<SimTime>& out) {
    if (part.find_first_not_of(' ') == std::string::npos) return true;
    const QuantityParse q = parse_quantity(part, Dimension::kDuration);
    if (!q.ok) {
      error = "--trace-window: " + q.error;
      return false;
    }
    out = SimTime::zero() + Duration::seconds(q.value);
    return true;
  };
  if (!side(text.substr(0, colon), trace.from) || !side(text.substr(colon + 1), trace.to)) return false;
  if (trace.from && trace.to && *trace.to < *trace.from) {
    error = "--trace-window: the window ends before it starts";
    return false;
  }
  return true;
}

// A scenario piped in (`servesim run -`): named <stdin> in diagnostics, its relative files
// resolved from the working directory.
scenario::Scenario load_stdin_scenario(const scenario::LoadOptions& options) {
  std::ostringstream text;
  text << std::cin.rdbuf();
  return scenario::load_scenario_text(text.str(), "<stdin>", ".", options);
}

}  // namespace

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim run SCENARIO.yaml [--set KEY.PATH=VALUE]... [--json FILE|-] [--out DIR] "
      "[--seed N]\nSCENARIO.yaml '-' reads the scenario from stdin (relative files from the working "
      "directory).\n\noptions");
  visible.add_options()("help,h", "show this help")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "override a scenario value, e.g. --set deployment.pools[0].instances=8 (repeatable; "
      "checked like the file)")("json", po::value<std::string>(),
                                "write the JSON report to FILE, or to stdout with '-'")(
      "out", po::value<std::string>(), "write report.json, report.html, requests.csv and summary.txt to DIR")(
      "no-requests-csv", "with --out, leave out requests.csv (one row per request: large on long runs)")(
      "html", po::value<std::string>(), "write the self-contained HTML report (SVG charts) to FILE")(
      "time-series", "add the run over time (key time_series) to the JSON report")(
      "trace", po::value<std::string>(), "write a Perfetto / Chrome JSON trace (one track per instance) to FILE")(
      "trace-limit", po::value<std::int64_t>()->default_value(200000),
      "keep at most N spans in the trace; the file says where it was cut")(
      "trace-window", po::value<std::string>(), "trace only spans that start in FROM:TO, e.g. '10 s:20 s'")(
      "seed", unsigned_value<std::uint64_t>(), "random seed (overrides the scenario's)")(
      "max-memory", po::value<std::string>(),
      "memory the run may hold, e.g. '8 GiB' (default: the machine's); a workload that cannot fit is "
      "refused before it runs")("reproducible",
                                "leave host measurements (wall time, events/s, peak memory) out of the "
                                "report, so that equal runs give byte-identical files");
  po::variables_map vm;
  std::string path;
  if (auto done = parse_single_file(args, visible, "run takes exactly one scenario file", vm, path, out, err)) {
    return *done;
  }
  scenario::LoadOptions options;
  if (vm.count("set")) options.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("seed")) options.seed = unsigned_of<std::uint64_t>(vm, "seed");
  const bool reproducible = vm.count("reproducible") > 0;
  studies::ExecuteOptions exec;
  if (vm.count("max-memory")) {
    const QuantityParse q = parse_quantity(vm["max-memory"].as<std::string>(), Dimension::kBytes);
    if (!q.ok || !(q.value >= 1)) {
      err << "error: --max-memory: " << (q.ok ? "must be at least 1 B" : q.error) << "\n";
      return 2;
    }
    options.memory_limit_bytes = static_cast<std::int64_t>(q.value);
  } else if (const std::int64_t machine = cluster::physical_memory_bytes(); machine > 0) {
    options.memory_limit_bytes = machine;
  }
  exec.budget.memory_bytes = options.memory_limit_bytes;
  const std::string json_target = vm.count("json") ? vm["json"].as<std::string>() : "";
  const std::string out_dir = vm.count("out") ? vm["out"].as<std::string>() : "";
  const std::string html_target = vm.count("html") ? vm["html"].as<std::string>() : "";
  const std::string trace_target = vm.count("trace") ? vm["trace"].as<std::string>() : "";
  const bool want_html = !html_target.empty() || !out_dir.empty();
  exec.time_series = want_html || vm.count("time-series") > 0;
  if (!trace_target.empty()) {
    metrics::TraceOptions trace;
    trace.limit = vm["trace-limit"].as<std::int64_t>();
    std::string error;
    if (trace.limit < 0) error = "--trace-limit must be at least 0";
    if (vm.count("trace-window") && error.empty()) parse_window(vm["trace-window"].as<std::string>(), trace, error);
    if (!error.empty()) {
      err << "error: " << error << "\n";
      return 2;
    }
    exec.trace = trace;
  } else if (vm.count("trace-window")) {
    err << "error: --trace-window needs --trace FILE\n";
    return 2;
  }
  if (vm.count("no-requests-csv") && out_dir.empty()) {
    err << "error: --no-requests-csv leaves requests.csv out of --out DIR: it needs --out\n";
    return 2;
  }

  try {
    // Where the reports go is checked before anything runs.
    if (!out_dir.empty()) {
      check_output_folder(out_dir, {"report.json", "requests.csv", "summary.txt", "report.html"}, "--out folder");
    }
    if (!json_target.empty()) check_output_file(json_target, "JSON report (--json)");
    if (!html_target.empty()) check_output_file(html_target, "HTML report (--html)");
    if (!trace_target.empty()) check_output_file(trace_target, "trace (--trace)");
    const scenario::Scenario sc =
        path == "-" ? load_stdin_scenario(options) : scenario::load_scenario_file(path, options);
    for (const auto& w : sc.warnings) err << "warning: " << w.to_string() << "\n";
    cluster::RunProgress progress;
    const std::int64_t total_requests = sc.config.workload.requests;
    const std::optional<Duration> horizon = sc.config.horizon;
    exec.progress = &progress;
    studies::RunOutput run;
    // The bar covers the run and then the reports, one step per file written.
    std::atomic<int> written{-1};
    std::atomic<const char*> writing{""};
    const bool skip_csv = vm.count("no-requests-csv") > 0;
    const int files = (out_dir.empty() ? 0
                       : skip_csv      ? 3
                                       : 4) +
                      !html_target.empty() + !trace_target.empty() + (!json_target.empty() && json_target != "-");
    std::optional<ProgressBar> bar;
    bar.emplace(progress_wanted(err), [&] {
      ProgressBar::Status st;
      if (written.load() >= 0) {
        st.fraction = files > 0 ? static_cast<double>(written.load()) / files : 1;
        st.text = std::string("writing ") + writing.load();
        return st;
      }
      const double now_s = static_cast<double>(progress.now_ps.load()) * 1e-12;
      if (horizon) {
        st.fraction = now_s / horizon->to_seconds();
      } else if (total_requests > 0) {
        st.fraction = static_cast<double>(progress.arrivals.load()) / static_cast<double>(total_requests);
      }
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.1f s simulated, %s events", now_s,
                    format_count(progress.events.load()).c_str());
      st.text = buf;
      return st;
    });
    // requests.csv is written while the run goes (a row as each request finishes, in id order),
    // into a temporary file committed with the other reports.
    std::optional<OutputFile> csv_file;
    std::optional<reports::RequestsCsv> csv;
    if (!out_dir.empty() && !skip_csv) {
      create_output_folder(out_dir);
      csv_file.emplace((std::filesystem::path(out_dir) / "requests.csv").string());
      csv.emplace([&](std::string_view text) { csv_file->write(text); });
      exec.requests = &*csv;
    }
    run = studies::execute(sc, exec);
    if (csv) csv->finish();
    writing.store("reports");
    written.store(0);
    // Every file is written in full before any is renamed into place (write_all_or_none); the bar
    // counts the files as their texts are ready.
    std::vector<std::pair<std::string, std::string_view>> outputs;
    auto add = [&](const std::filesystem::path& target, std::string_view text, const char* what) {
      writing.store(what);
      outputs.emplace_back(target.string(), text);
      written.fetch_add(1);
    };
    reports::RunInfo info;
    info.name = sc.name;
    info.warnings = sc.warnings;
    info.events = run.events;
    info.fingerprint = run.fingerprint;
    for (const auto& pool : sc.config.pools) {
      info.chips.push_back(pool.name + ": " + pool.chip.name + " (" + pool.chip.source + ")");
      info.calibration.push_back(pool.chip.calibration);
    }
    if (!reproducible) {
      info.wall_s = run.wall_s;
      info.peak_rss_mb = studies::peak_rss_mb();
    }
    nlohmann::ordered_json report_json = build_report(sc.resolved, run.summary, info);
    std::string html;
    if (want_html) {
      nlohmann::ordered_json with_series = report_json;
      with_series["time_series"] = reports::time_series_json(*run.metrics->time_series());
      html = reports::html_report(with_series, reports::latency_cdfs(*run.metrics));
      if (vm.count("time-series")) report_json = std::move(with_series);
    } else if (exec.time_series) {
      report_json["time_series"] = reports::time_series_json(*run.metrics->time_series());
    }
    const std::string report = report_json.dump(2) + "\n";
    const std::string table = reports::summary_table(run.summary, sc.config.slo, info);
    std::string trace_text;
    if (exec.trace) {
      std::ostringstream t;
      reports::write_trace(t, *run.metrics->trace_log(), sc.name);
      trace_text = t.str();
    }

    if (!out_dir.empty()) {
      create_output_folder(out_dir);
      const std::filesystem::path dir(out_dir);
      add(dir / "report.json", report, "report.json");
      if (csv) written.fetch_add(1);  // requests.csv: written already
      add(dir / "summary.txt", table, "summary.txt");
      add(dir / "report.html", html, "report.html");
    }
    if (!html_target.empty()) add(html_target, html, "the HTML report");
    if (!trace_target.empty()) add(trace_target, trace_text, "the trace");
    if (!json_target.empty() && json_target != "-") add(json_target, report, "the JSON report");
    write_all_or_none(outputs, csv_file ? std::vector<OutputFile*>{&*csv_file} : std::vector<OutputFile*>{});
    bar.reset();  // the bar's line is cleared before the table is printed
    if (json_target == "-") {
      out << report;
    } else {
      out << table;
      if (!out_dir.empty()) {
        out << "  wrote       " << out_dir << "/report.json, report.html, " << (skip_csv ? "" : "requests.csv, ")
            << "summary.txt\n";
      }
      for (const std::string* t : {&json_target, &html_target, &trace_target}) {
        if (!t->empty()) out << "  wrote       " << *t << "\n";
      }
      if (exec.trace && run.metrics->trace_log()->dropped() > 0) {
        out << "  trace cut   at " << run.metrics->trace_log()->options().limit << " spans ("
            << format_count(run.metrics->trace_log()->dropped()) << " more not written; see --trace-limit)\n";
      }
    }
    return 0;
  } catch (const InputError& e) {
    print_diagnostics(e, err);
    return 2;
  }
}

}  // namespace servesim::app
