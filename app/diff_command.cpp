// `servesim diff A B` / `servesim diff A --set KEY=VALUE ...`: the options of the comparison
// (studies/diff.h runs it).
#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "studies/diff.h"

namespace servesim::app {
namespace po = boost::program_options;

int diff_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim diff A.yaml B.yaml [options]\n"
      "       servesim diff A.yaml --set KEY=VALUE [--set ...] [options]   (B = A with the changes)\n"
      "A and B may also be reports written by 'servesim run --json' (.json).\n\noptions");
  visible.add_options()("help,h", "show this help")("set", po::value<std::vector<std::string>>()->composing(),
                                                    "a change that makes B (applied to B only; repeatable)")(
      "set-both", po::value<std::vector<std::string>>()->composing(),
      "an override applied to A and B alike, e.g. a shorter run (repeatable)")("seed", unsigned_value<std::uint64_t>(),
                                                                               "the seed of both runs (default: A's)")(
      "json", po::value<std::string>(), "write the comparison as JSON to FILE, or to stdout with '-'")(
      "top", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{4}),
      "components named in each sentence")("reproducible", "leave the host measurements (wall time) out of the JSON");
  po::variables_map vm;
  if (!parse_command(args, visible, vm, err)) return 2;
  if (vm.count("help")) {
    out << visible;
    return 0;
  }
  const std::vector<std::string> files =
      vm.count("scenario") ? vm["scenario"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const std::vector<std::string> sets =
      vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const std::vector<std::string> both =
      vm.count("set-both") ? vm["set-both"].as<std::vector<std::string>>() : std::vector<std::string>{};
  std::vector<std::string> problems;
  if (files.empty() || files.size() > 2)
    problems.emplace_back("diff takes one or two files (A, and B or --set changes)");
  if (files.size() == 1 && sets.empty()) {
    problems.emplace_back("one file and no --set: B would equal A; give B or the changes (--set KEY=VALUE)");
  }
  if (unsigned_of<std::size_t>(vm, "top") < 1) problems.emplace_back("--top must be at least 1");
  if (!problems.empty()) {
    for (const auto& p : problems) err << "error: " << p << "\n";
    err << "\n" << visible;
    return 2;
  }
  studies::DiffRequest r;
  r.files = files;
  r.sets = sets;
  r.set_both = both;
  r.seed = optional_unsigned<std::uint64_t>(vm, "seed");
  r.top = unsigned_of<std::size_t>(vm, "top");
  r.reproducible = vm.count("reproducible") > 0;
  const std::string json = json_target(vm);
  return print_output(studies::diff(r, err), json, out);
}

}  // namespace servesim::app
