// `servesim workload stats FILE-or-SCENARIO`: the options of the traffic summary
// (studies/workload_stats.h computes it).
#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "studies/workload_stats.h"

namespace servesim::app {
namespace {

namespace po = boost::program_options;

constexpr const char* kGroupUsage =
    "usage: servesim workload <command> [options]\n"
    "\n"
    "commands:\n"
    "  stats FILE-or-SCENARIO   request count, rate over time, length percentiles, images,\n"
    "                           prefix reuse and sessions of a trace or a scenario's workload\n";

int stats_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim workload stats FILE-or-SCENARIO [--json FILE|-] [--windows N] ...\n\n"
      "A trace file (Azure, Splitwise, BurstGPT CSV or Mooncake JSON lines) is summarised as\n"
      "one replay; a scenario (.yaml) as its workload would be generated.\n\noptions");
  visible.add_options()("help,h", "show this help")("json", po::value<std::string>(),
                                                    "write the figures as JSON to FILE, or to stdout with '-'")(
      "windows", po::value<int>()->default_value(10), "windows of the rate-over-time table")(
      "max-requests", po::value<std::int64_t>()->default_value(10'000'000),
      "stop after this many requests (0: no limit)")("format", po::value<std::string>()->default_value("auto"),
                                                     "trace layout: auto, azure, splitwise, burstgpt, mooncake")(
      "skip-bad-rows", "skip bad trace rows (and count them) instead of stopping")(
      "block-tokens", po::value<std::int64_t>(),
      "block size for the reuse of shared prefixes and session histories [a scenario's KV "
      "block size, else 16]")("set", po::value<std::vector<std::string>>()->composing(), "override a scenario value")(
      "seed", unsigned_value<std::uint64_t>(), "random seed (overrides the scenario's)");
  po::variables_map vm;
  std::string path;
  if (auto done = parse_single_file(args, visible, "workload stats takes exactly one trace or scenario file", vm, path,
                                    out, err)) {
    return *done;
  }
  studies::WorkloadStatsRequest r;
  r.file = path;
  r.windows = vm["windows"].as<int>();
  r.max_requests = vm["max-requests"].as<std::int64_t>();
  r.format = vm["format"].as<std::string>();
  r.skip_bad_rows = vm.count("skip-bad-rows") > 0;
  r.block_tokens = optional_value<std::int64_t>(vm, "block-tokens");
  if (vm.count("set")) r.sets = vm["set"].as<std::vector<std::string>>();
  r.seed = optional_unsigned<std::uint64_t>(vm, "seed");
  const std::string json = json_target(vm);
  return print_output(studies::workload_stats(r, err), json, out);
}

}  // namespace

int workload_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << kGroupUsage;
    return 2;
  }
  if (args.front() == "--help" || args.front() == "-h") {
    out << kGroupUsage;
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args.front() == "stats") return stats_command(rest, out, err);
  err << "error: unknown workload command '" << args.front() << "'\n\n" << kGroupUsage;
  return 2;
}

}  // namespace servesim::app
