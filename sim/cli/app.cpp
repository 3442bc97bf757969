#include "sim/cli/app.h"

#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "sim/cli/command_line.h"

#include "reports/html_report.h"
#include "reports/report.h"
#include "reports/trace.h"
#include "sim/cli/commands.h"
#include "sim/cli/diff.h"
#include "sim/cli/plan.h"
#include "sim/cli/progress.h"
#include "sim/cli/serve.h"
#include "sim/cli/sweep.h"
#include "core/units.h"
#include "sim/cluster/simulation.h"
#include "core/errors.h"

namespace servesim::app {
namespace po = boost::program_options;

RunOutput execute(const scenario::Scenario& scenario, const ExecuteOptions& options) {
  RunOutput out;
  out.metrics = std::make_unique<metrics::RunMetrics>();
  if (options.time_series) out.metrics->enable_time_series();
  if (options.trace) out.metrics->enable_trace(*options.trace);
  const auto start = std::chrono::steady_clock::now();
  cluster::Simulation sim(scenario.config, *out.metrics);
  sim.set_paranoid(options.paranoid);
  sim.set_progress(options.progress);
  const cluster::RunResult r = sim.run();
  out.summary = metrics::summarize(*out.metrics, r.end, scenario.config.slo);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.events = r.events;
  out.fingerprint = r.fingerprint;
  return out;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void write_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
    f << text;
    f.flush();
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

void print_diagnostics(const InputError& e, std::ostream& err) {
  for (const auto& d : e.diagnostics()) err << "error: " << d.to_string() << "\n";
  err << e.diagnostics().size() << (e.diagnostics().size() == 1 ? " problem" : " problems")
      << " found; nothing was run.\n";
}

void print_or_write_json(const std::string& json_target, const std::string& json,
                         const std::string& text, std::ostream& out) {
  if (json_target == "-") {
    out << json;
    return;
  }
  if (!json_target.empty()) write_atomically(json_target, json);
  out << text;
  if (!json_target.empty()) out << "  wrote       " << json_target << "\n";
}

namespace {

constexpr const char* kUsage =
    "usage: servesim <command> [options]\n"
    "\n"
    "commands:\n"
    "  run SCENARIO.yaml   simulate a scenario and report its latency, throughput and costs\n"
    "  sweep SCENARIO.yaml --vary KEY=SPEC ...\n"
    "                      run many variants in parallel (journaled, resumable), rank them by an\n"
    "                      objective under constraints, show the Pareto front\n"
    "  serve               answer hypotheses sent as JSON lines on stdin, one line each on stdout\n"
    "  diff A.yaml B.yaml  (or A.yaml --set KEY=VALUE ...) run both with the same seed: metric\n"
    "                      deltas, and the TTFT, TPOT and throughput deltas attributed to components\n"
    "  plan SCENARIO.yaml  the fewest chips (or lowest cost) that meets the SLOs: parallel plans,\n"
    "                      batch caps, instance counts and pool ratios searched\n"
    "  workload stats FILE-or-SCENARIO\n"
    "                      summarise a trace or a scenario's traffic before simulating it\n"
    "  calibrate MEASUREMENTS... --chip NAME --out PROFILE\n"
    "                      fit the cost model to operator measurements, report the error, write a\n"
    "                      hardware profile\n"
    "  validate MEASURED.csv\n"
    "                      simulate measured serving benchmarks and report the error\n"
    "\n"
    "Run 'servesim <command> --help' for the options of a command.\n";

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

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim run SCENARIO.yaml [--set KEY.PATH=VALUE]... [--json FILE|-] [--out DIR] "
      "[--seed N]\n\noptions");
  visible.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>()->composing(),
       "override a scenario value, e.g. --set deployment.pools[0].instances=8 (repeatable; "
       "checked like the file)")
      ("json", po::value<std::string>(), "write the JSON report to FILE, or to stdout with '-'")
      ("out", po::value<std::string>(),
       "write report.json, report.html, requests.csv and summary.txt to DIR")
      ("html", po::value<std::string>(), "write the self-contained HTML report (SVG charts) to FILE")
      ("time-series", "add the run over time (key time_series) to the JSON report")
      ("trace", po::value<std::string>(),
       "write a Perfetto / Chrome JSON trace (one track per instance) to FILE")
      ("trace-limit", po::value<std::int64_t>()->default_value(200000),
       "keep at most N spans in the trace; the file says where it was cut")
      ("trace-window", po::value<std::string>(),
       "trace only spans that start in FROM:TO, e.g. '10 s:20 s'")
      ("seed", po::value<std::uint64_t>(), "random seed (overrides the scenario's)")
      ("reproducible", "leave host measurements (wall time, events/s, peak memory) out of the "
                       "report, so that equal runs give byte-identical files");
  po::variables_map vm;
  std::string path;
  if (auto done = parse_single_file(args, visible, "run takes exactly one scenario file", vm, path, out, err)) {
    return *done;
  }
  scenario::LoadOptions options;
  if (vm.count("set")) options.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("seed")) options.seed = vm["seed"].as<std::uint64_t>();
  const bool reproducible = vm.count("reproducible") > 0;
  const std::string json_target = vm.count("json") ? vm["json"].as<std::string>() : "";
  const std::string out_dir = vm.count("out") ? vm["out"].as<std::string>() : "";
  const std::string html_target = vm.count("html") ? vm["html"].as<std::string>() : "";
  const std::string trace_target = vm.count("trace") ? vm["trace"].as<std::string>() : "";
  const bool want_html = !html_target.empty() || !out_dir.empty();
  ExecuteOptions exec;
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

  try {
    const scenario::Scenario sc = scenario::load_scenario_file(path, options);
    for (const auto& w : sc.warnings) err << "warning: " << w.to_string() << "\n";
    cluster::RunProgress progress;
    const std::int64_t total_requests = sc.config.workload.requests;
    const std::optional<Duration> horizon = sc.config.horizon;
    exec.progress = &progress;
    RunOutput run;
    {
      ProgressBar bar(progress_wanted(err), [&] {
        ProgressBar::Status st;
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
      run = execute(sc, exec);
    }
    reports::RunInfo info;
    info.name = sc.name;
    info.warnings = sc.warnings;
    info.events = run.events;
    info.fingerprint = run.fingerprint;
    for (const auto& pool : sc.config.pools) info.chips.push_back(pool.name + ": " + pool.chip.name + " (" + pool.chip.source + ")");
    if (!reproducible) {
      info.wall_s = run.wall_s;
      info.peak_rss_mb = peak_rss_mb();
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
      std::filesystem::create_directories(out_dir);
      write_atomically(std::filesystem::path(out_dir) / "report.json", report);
      std::ostringstream csv;
      reports::write_requests_csv(csv, *run.metrics);
      write_atomically(std::filesystem::path(out_dir) / "requests.csv", csv.str());
      write_atomically(std::filesystem::path(out_dir) / "summary.txt", table);
      write_atomically(std::filesystem::path(out_dir) / "report.html", html);
    }
    if (!html_target.empty()) write_atomically(html_target, html);
    if (!trace_target.empty()) write_atomically(trace_target, trace_text);
    if (json_target == "-") {
      out << report;
    } else {
      if (!json_target.empty()) write_atomically(json_target, report);
      out << table;
      if (!out_dir.empty()) {
        out << "  wrote       " << out_dir << "/report.json, report.html, requests.csv, summary.txt\n";
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

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    if (args.empty()) {
      err << kUsage;
      return 2;
    }
    const std::string& command = args.front();
    if (command == "--help" || command == "-h" || command == "help") {
      out << kUsage;
      return 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "run") return run_command(rest, out, err);
    if (command == "sweep") return sweep_command(rest, out, err);
    if (command == "serve") return serve_command(rest, std::cin, out, err);
    if (command == "diff") return diff_command(rest, out, err);
    if (command == "plan") return plan_command(rest, out, err);
    if (command == "workload") return workload_command(rest, out, err);
    if (command == "calibrate") return calibrate_command(rest, out, err);
    if (command == "validate") return validate_command(rest, out, err);
    err << "error: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    err << "servesim: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace servesim::app
