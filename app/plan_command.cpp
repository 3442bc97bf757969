// `servesim plan SCENARIO.yaml`: the options of the search (studies/plan.h has the search).
#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "app/progress.h"
#include "studies/plan.h"

namespace servesim::app {
namespace {

namespace po = boost::program_options;

constexpr const char* kHelpTail =
    "Constraints: the scenario's slo: always counts, met by --attainment of the requests (99% by\n"
    "default; 'none' leaves it out). --constraint 'ttft <= 2 s' (tpot, e2e: a bare name, no\n"
    "percentile) is a per-request target, the same as slo: {ttft: 2 s}; --constraint 'METRIC OP\n"
    "VALUE' on any metric of 'servesim sweep --help' adds to them. Latency limits, SLO attainment,\n"
    "goodput and throughput floors guide the search (they get easier with more instances); chips,\n"
    "cost and per-chip floors are checked at the least count that meets them.\n"
    "Lists: comma-separated integers, or 'auto' (see studies/README.md for what auto searches).\n"
    "Exit codes: 0 a deployment found, 3 none meets the constraints (the report is printed all the\n"
    "same), 2 bad input, 1 internal error.\n";

}  // namespace

int plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim plan SCENARIO.yaml [--target chips|cost|cost_per_hour] [--constraint C]... [options]\n"
      "Searches parallel plans, batch caps and instance counts (and E:P:D ratios with several pools)\n"
      "for the fewest chips or lowest cost that meets the SLOs.\n\noptions");
  visible.add_options()("help,h", "show this help")(
      "target", po::value<std::string>()->default_value("chips"),
      "what to minimise: chips, cost (USD per million output tokens), cost_per_hour, or any metric (min:/max:)")(
      "constraint", po::value<std::vector<std::string>>()->composing(),
      "a constraint every deployment must meet, e.g. 'ttft_p99 <= 2 s' (repeatable)")(
      "attainment", po::value<std::string>()->default_value("99%"),
      "without --constraint: the scenario's slo: must be met by this share of requests")(
      "tp", po::value<std::string>(), "tensor-parallel degrees to try (default auto)")(
      "pp", po::value<std::string>(), "pipeline-parallel degrees to try (default auto)")(
      "dp", po::value<std::string>(), "attention data-parallel degrees to try (default auto)")(
      "ep", po::value<std::string>(), "expert-parallel degrees to try, MoE models (default auto)")(
      "cp", po::value<std::string>(), "context-parallel degrees to try (default: the scenario's)")(
      "max-batch-size", po::value<std::string>(), "batch caps to try (default: the scenario's)")(
      "max-batched-tokens", po::value<std::string>(), "token budgets to try (default: the scenario's)")(
      "ratios", po::value<std::string>(), "instance ratios between the pools to try, e.g. 1:2,1:3 (default auto)")(
      "max-chips", po::value<std::int64_t>(), "never try a deployment with more chips")(
      "max-candidates", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{512}),
      "refuse a larger space")(
      "max-runs", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{2000}),
      "the budget of simulation runs; candidates still searching when it is spent end unfinished")(
      "chip-hour-price", po::value<double>(), "USD per chip-hour, for the cost targets")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a scenario value (repeatable)")(
      "seed", unsigned_value<std::uint64_t>(), "the seed of every run (default: the scenario's)")(
      "threads", po::value<int>(), "OpenMP threads (default: the cores available)")(
      "top", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{5}),
      "the best deployments to show (and that pruning keeps)")(
      "no-refine", "with several pools, keep instance counts at multiples of the ratio")(
      "json", po::value<std::string>(), "write the search as JSON to FILE, or to stdout with '-'")(
      "reproducible", "leave the wall time out, so that equal searches give byte-identical output");
  add_limit_options(visible);
  po::variables_map vm;
  std::string path;
  if (auto done = parse_single_file(args, visible, "plan takes exactly one scenario file", vm, path, out, err)) {
    if (*done == 0 && vm.count("help")) out << "\n" << kHelpTail;
    return *done;
  }
  const std::string json = json_target(vm);
  studies::PlanRequest r;
  r.scenario = path;
  r.target = vm["target"].as<std::string>();
  if (vm.count("constraint")) r.constraints = vm["constraint"].as<std::vector<std::string>>();
  r.attainment = vm["attainment"].as<std::string>();
  r.tp = optional_value<std::string>(vm, "tp");
  r.pp = optional_value<std::string>(vm, "pp");
  r.dp = optional_value<std::string>(vm, "dp");
  r.ep = optional_value<std::string>(vm, "ep");
  r.cp = optional_value<std::string>(vm, "cp");
  r.max_batch_size = optional_value<std::string>(vm, "max-batch-size");
  r.max_batched_tokens = optional_value<std::string>(vm, "max-batched-tokens");
  r.ratios = optional_value<std::string>(vm, "ratios");
  r.max_chips = optional_value<std::int64_t>(vm, "max-chips");
  r.max_candidates = unsigned_of<std::size_t>(vm, "max-candidates");
  r.max_runs = unsigned_of<std::size_t>(vm, "max-runs");
  r.chip_hour_price = optional_value<double>(vm, "chip-hour-price");
  if (vm.count("set")) r.sets = vm["set"].as<std::vector<std::string>>();
  r.seed = optional_unsigned<std::uint64_t>(vm, "seed");
  r.threads = optional_value<int>(vm, "threads");
  r.top = unsigned_of<std::size_t>(vm, "top");
  r.refine = vm.count("no-refine") == 0;
  r.reproducible = vm.count("reproducible") > 0;
  if (!read_limits(vm, r.limits, err)) return 2;
  studies::StudyProgress progress;
  r.progress = &progress;
  studies::StudyOutput result;
  {
    ProgressBar bar(progress_wanted(err), [&] {
      ProgressBar::Status st;
      st.text =
          std::to_string(progress.done.load()) + " runs over " + std::to_string(progress.total.load()) + " deployments";
      return st;
    });
    result = studies::plan(r, err);
  }
  return print_output(result, json, out);
}

}  // namespace servesim::app
