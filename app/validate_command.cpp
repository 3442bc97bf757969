// `servesim validate MEASURED.csv`: the options of a validation (studies/validate.h runs it).
#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "studies/validate.h"

namespace servesim::app {
namespace po = boost::program_options;

int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim validate MEASURED.csv [--json FILE|-] [--rows] [--rounds N] [--threads N]\n"
      "                         [--profile CHIP[/ENGINE]=PROFILE]...\n"
      "\nSimulates every measured serving benchmark of the file (the format of the shipped\n"
      "calibrate/data/serving/silicon_dev.csv, described in calibrate/data/SOURCE.md) and reports\n"
      "the error of TTFT and TPOT per row, per (model, system, mode) and overall.\n\noptions");
  visible.add_options()("help,h", "show this help")("json", po::value<std::string>(),
                                                    "write the JSON report to FILE, or to stdout with '-'")(
      "rows", "print every row's measured and simulated figures")("rounds", po::value<int>()->default_value(10),
                                                                  "measured requests per client in each simulation")(
      "warmup-rounds", po::value<int>()->default_value(2),
      "the benchmarks' warm-up requests per client (simulated with --warmup continuous)")(
      "warmup", po::value<std::string>()->default_value("drained"),
      "drained: the warm-up ends with every response back (aiperf), so only the measured phase "
      "is simulated, from an idle engine; continuous: one closed loop, its first warm-up rounds "
      "left out")("threads", po::value<int>()->default_value(0), "OpenMP threads (default: all cores)")(
      "reproducible", "leave the host time out of the JSON report")(
      "start", po::value<std::string>()->default_value("together"),
      "how the clients start: staggered, together (closed_loop start modes)")(
      "spacing-us", po::value<double>()->default_value(100),
      "--start ramp: microseconds between clients' first requests")(
      "print-scenario", po::value<std::string>(), "print the scenario built for the row with this id, and stop")(
      "profile", po::value<std::vector<std::string>>(),
      "CHIP[/ENGINE]=PROFILE: rows on that chip (served by that engine) take PROFILE, a shipped "
      "name, a profile file or 'none', instead of the shipped one: what an uncalibrated chip or "
      "engine would predict (repeatable; the first that matches a row applies)");
  po::variables_map vm;
  std::string path;
  if (auto done = parse_single_file(args, visible, "validate takes exactly one measurement file", vm, path, out, err)) {
    return *done;
  }
  studies::ValidateRequest r;
  r.file = path;
  r.rounds = vm["rounds"].as<int>();
  r.warmup_rounds = vm["warmup-rounds"].as<int>();
  r.warmup = vm["warmup"].as<std::string>();
  r.threads = vm["threads"].as<int>();
  r.start = vm["start"].as<std::string>();
  r.spacing_us = vm["spacing-us"].as<double>();
  r.rows = vm.count("rows") > 0;
  r.reproducible = vm.count("reproducible") > 0;
  r.print_scenario = optional_value<std::string>(vm, "print-scenario");
  if (vm.count("profile") > 0) r.profiles = vm["profile"].as<std::vector<std::string>>();
  const std::string json = json_target(vm);
  return print_output(studies::validate(r, err), json, out);
}

}  // namespace servesim::app
