#include "app/app.h"

#include <iostream>

#include "app/commands.h"
#include "core/errors.h"
#include "core/output_file.h"
#include "core/version.h"

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
  // A failure explained on the error stream has no output; a study that ran and answers "no"
  // (plan with nothing feasible) has, and its exit code says so.
  if (output.exit_code != 0 && output.json.empty() && output.text.empty()) return output.exit_code;
  if (output.json.empty()) {
    out << output.text;
  } else {
    print_or_write_json(json_target, output.json, output.text, out);
  }
  return output.exit_code;
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
    "  keys                every scenario key with its type, unit, range and default\n"
    "  schema              the JSON Schema of serve's requests and answers\n"
    "  completion bash     a bash completion script\n"
    "\n"
    "Run 'servesim <command> --help' for the options of a command, 'servesim --version' for the\n"
    "version and commit of this build. Exit codes: 0 ok, 1 internal error, 2 bad input (every\n"
    "problem listed; nothing run or written), 3 plan found no deployment meeting the constraints.\n";

}  // namespace

const std::vector<std::string>& command_names() {
  static const std::vector<std::string> names = {"run",       "sweep",    "serve", "diff",   "plan",      "workload",
                                                 "calibrate", "validate", "keys",  "schema", "completion"};
  return names;
}

int run_command_by_name(const std::string& command, const std::vector<std::string>& rest, std::istream& in,
                        std::ostream& out, std::ostream& err) {
  if (command == "run") return run_command(rest, out, err);
  if (command == "sweep") return sweep_command(rest, out, err);
  if (command == "serve") return serve_command(rest, in, out, err);
  if (command == "diff") return diff_command(rest, out, err);
  if (command == "plan") return plan_command(rest, out, err);
  if (command == "workload") return workload_command(rest, out, err);
  if (command == "calibrate") return calibrate_command(rest, out, err);
  if (command == "validate") return validate_command(rest, out, err);
  if (command == "keys") return keys_command(rest, out, err);
  if (command == "schema") return schema_command(rest, out, err);
  if (command == "completion") return completion_command(rest, out, err);
  err << "error: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}

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
    if (command == "--version" || command == "version") {
      out << version_line() << "\n";
      return 0;
    }
    return run_command_by_name(command, std::vector<std::string>(args.begin() + 1, args.end()), std::cin, out, err);
  } catch (const InputError& e) {
    // Bad input found anywhere below a command (an output that cannot be written included).
    print_diagnostics(e, err);
    return 2;
  } catch (const std::exception& e) {
    err << "servesim: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace servesim::app
