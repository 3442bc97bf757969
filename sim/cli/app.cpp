#include "sim/cli/app.h"

#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "reports/report.h"
#include "sim/cli/commands.h"
#include "sim/cluster/simulation.h"
#include "sim/core/errors.h"

namespace servesim::app {
namespace po = boost::program_options;

RunOutput execute(const scenario::Scenario& scenario, bool paranoid) {
  RunOutput out;
  out.metrics = std::make_unique<metrics::RunMetrics>();
  const auto start = std::chrono::steady_clock::now();
  cluster::Simulation sim(scenario.config, *out.metrics);
  sim.set_paranoid(paranoid);
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

std::optional<int> parse_command(const std::vector<std::string>& args,
                                 const po::options_description& visible, const std::string& what,
                                 po::variables_map& vm, std::string& file, std::ostream& out,
                                 std::ostream& err) {
  po::options_description hidden;
  hidden.add_options()("file", po::value<std::vector<std::string>>(), "the file");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("file", -1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "error: " << e.what() << "\n\n" << visible;
    return 2;
  }
  if (vm.count("help")) {
    out << visible;
    return 0;
  }
  if (!vm.count("file") || vm["file"].as<std::vector<std::string>>().size() != 1) {
    err << "error: " << what << "\n\n" << visible;
    return 2;
  }
  file = vm["file"].as<std::vector<std::string>>().front();
  return std::nullopt;
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
    "  workload stats FILE-or-SCENARIO\n"
    "                      summarise a trace or a scenario's traffic before simulating it\n"
    "\n"
    "Run 'servesim <command> --help' for the options of a command.\n";

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
      ("out", po::value<std::string>(), "write report.json, requests.csv and summary.txt to DIR")
      ("seed", po::value<std::uint64_t>(), "random seed (overrides the scenario's)")
      ("reproducible", "leave host measurements (wall time, events/s, peak memory) out of the "
                       "report, so that equal runs give byte-identical files");
  po::variables_map vm;
  std::string path;
  if (auto done = parse_command(args, visible, "run takes exactly one scenario file", vm, path, out, err)) {
    return *done;
  }
  scenario::LoadOptions options;
  if (vm.count("set")) options.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("seed")) options.seed = vm["seed"].as<std::uint64_t>();
  const bool reproducible = vm.count("reproducible") > 0;
  const std::string json_target = vm.count("json") ? vm["json"].as<std::string>() : "";
  const std::string out_dir = vm.count("out") ? vm["out"].as<std::string>() : "";

  try {
    const scenario::Scenario sc = scenario::load_scenario_file(path, options);
    RunOutput run = execute(sc, false);
    reports::RunInfo info;
    info.name = sc.name;
    info.events = run.events;
    info.fingerprint = run.fingerprint;
    if (!reproducible) {
      info.wall_s = run.wall_s;
      info.peak_rss_mb = peak_rss_mb();
    }
    const std::string report = build_report(sc.resolved, run.summary, info).dump(2) + "\n";
    const std::string table = reports::summary_table(run.summary, sc.config.slo, info);

    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      write_atomically(std::filesystem::path(out_dir) / "report.json", report);
      std::ostringstream csv;
      reports::write_requests_csv(csv, *run.metrics);
      write_atomically(std::filesystem::path(out_dir) / "requests.csv", csv.str());
      write_atomically(std::filesystem::path(out_dir) / "summary.txt", table);
    }
    print_or_write_json(json_target, report,
                        table + (out_dir.empty() ? std::string()
                                                 : "  wrote       " + out_dir +
                                                       "/report.json, requests.csv, summary.txt\n"),
                        out);
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
    if (command == "workload") return workload_command(rest, out, err);
    err << "error: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    err << "servesim: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace servesim::app
