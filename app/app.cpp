#include "app/app.h"

#include <iostream>

#include "app/commands.h"
#include "core/output_file.h"

namespace servesim::app {

void print_or_write_json(const std::string& json_target, const std::string& json, const std::string& text,
                         std::ostream& out) {
  if (json_target == "-") {
    out << json;
    return;
  }
  if (!json_target.empty()) write_atomically(json_target, json);
  out << text;
  if (!json_target.empty()) out << "  wrote       " << json_target << "\n";
}

int print_output(const studies::StudyOutput& output, const std::string& json_target, std::ostream& out) {
  if (output.exit_code != 0) return output.exit_code;
  if (output.json.empty()) {
    out << output.text;
  } else {
    print_or_write_json(json_target, output.json, output.text, out);
  }
  return 0;
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
