// `servesim sweep SCENARIO.yaml --vary KEY=SPEC ...`: the options of a sweep (studies/sweep.h runs
// it).
#include <sstream>

#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "app/progress.h"
#include "studies/sweep.h"

namespace servesim::app {
namespace {

namespace po = boost::program_options;

constexpr const char* kMetricsHelp =
    "metrics (objectives and constraints): ttft_, tpot_, itl_, e2e_ + mean|p50|p90|p99 (ms; limits "
    "need units, '2 s', '50 ms'), output_tokens_per_s, input_tokens_per_s, requests_per_s, goodput, "
    "output_tokens_per_s_per_chip, goodput_per_chip (/s), slo_attainment (0.99 or 99%), chips, "
    "completed, rejected, cost (USD per million output tokens, needs --chip-hour-price), "
    "cost_per_hour\n";

}  // namespace

int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim sweep SCENARIO.yaml --vary KEY=SPEC [--vary ...] [options]\n\n"
      "SPEC: a,b,c (a list) | lo:hi:step | lo:hi:*factor | lo:hi (an interval, with --samples);\n"
      "numbers may carry units: --vary 'workload.arrivals.rate=10 /s:40 /s:10 /s'\n\noptions");
  visible.add_options()("help,h", "show this help")("vary", po::value<std::vector<std::string>>()->composing(),
                                                    "a key to vary and its values (repeatable)")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a scenario value in every variant")(
      "samples", po::value<std::int64_t>(), "draw N variants instead of the full grid")(
      "sampling", po::value<std::string>()->default_value("lhs"), "with --samples: lhs (Latin hypercube) or random")(
      "seed", unsigned_value<std::uint64_t>()->default_value(Unsigned<std::uint64_t>{0}),
      "seed of the sampling (the simulation seed is the scenario's; vary `seed` for replications)")(
      "objective", po::value<std::string>()->default_value("output_tokens_per_s_per_chip"),
      "rank by this metric (min:NAME or max:NAME to set the direction)")(
      "constraint", po::value<std::vector<std::string>>()->composing(),
      "keep variants with METRIC OP VALUE, e.g. 'ttft_p99 <= 2 s' (repeatable)")(
      "pareto", po::value<std::string>()->default_value("output_tokens_per_s_per_chip,tpot_p50"),
      "two objectives A,B for the Pareto front")("chip-hour-price", po::value<double>(),
                                                 "USD per chip-hour, for the cost metrics")(
      "top", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{10}),
      "rows in the table of best variants")("threads", po::value<int>(),
                                            "OpenMP threads per process (default: the cores available)")(
      "out", po::value<std::string>(),
      "folder for journal.jsonl, results.jsonl, summary.txt (default: ./<scenario>.sweep)")(
      "json", po::value<std::string>(), "'-': print the result lines instead of the table");
  add_limit_options(visible);
  // Every rank parses the command line alike; only rank 0 speaks.
  studies::SweepRanks ranks;
  std::ostringstream quiet;
  std::ostream& say = ranks.rank() == 0 ? out : quiet;
  std::ostream& complain = ranks.rank() == 0 ? err : quiet;

  po::variables_map vm;
  if (!parse_command(args, visible, vm, complain)) return 2;
  if (vm.count("help")) {
    say << visible << "\n" << kMetricsHelp;
    return 0;
  }
  studies::SweepRequest r;
  if (vm.count("scenario")) r.files = vm["scenario"].as<std::vector<std::string>>();
  if (vm.count("vary")) r.vary = vm["vary"].as<std::vector<std::string>>();
  if (vm.count("set")) r.sets = vm["set"].as<std::vector<std::string>>();
  r.samples = optional_value<std::int64_t>(vm, "samples");
  r.sampling = vm["sampling"].as<std::string>();
  r.seed = unsigned_of<std::uint64_t>(vm, "seed");
  r.objective = vm["objective"].as<std::string>();
  if (vm.count("constraint")) r.constraints = vm["constraint"].as<std::vector<std::string>>();
  r.pareto = vm["pareto"].as<std::string>();
  r.chip_hour_price = optional_value<double>(vm, "chip-hour-price");
  r.top = unsigned_of<std::size_t>(vm, "top");
  r.threads = optional_value<int>(vm, "threads");
  r.out = optional_value<std::string>(vm, "out");
  r.json = optional_value<std::string>(vm, "json");
  r.ranks = &ranks;
  if (!read_limits(vm, r.limits, complain)) return 2;
  studies::StudyProgress progress;
  r.progress = &progress;
  studies::StudyOutput result;
  {
    ProgressBar bar(ranks.rank() == 0 && progress_wanted(err), [&] {
      ProgressBar::Status st;
      const std::int64_t done = progress.done.load(), n = progress.total.load();
      st.fraction = n > 0 ? static_cast<double>(done) / static_cast<double>(n) : 1;
      st.text = std::to_string(done) + " of " + std::to_string(n) + " variants";
      return st;
    });
    result = studies::sweep(r, out, err);
  }
  return print_output(result, r.json ? "-" : "", out);
}

}  // namespace servesim::app
