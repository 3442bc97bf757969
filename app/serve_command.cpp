// `servesim serve`: hypotheses as JSON lines on stdin, answers on stdout (studies/serve.h).
#include <filesystem>
#include <ostream>

#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "studies/serve.h"

namespace servesim::app {
namespace {

namespace po = boost::program_options;

// The scenarios shipped with servesim, found beside the binary (build/servesim -> scenarios/), or
// nothing when the binary was moved away from them.
std::vector<std::string> shipped_scenarios() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const auto& up : {exe.parent_path(), exe.parent_path().parent_path()}) {
    if (std::filesystem::is_directory(up / "scenarios", ec)) return {(up / "scenarios").string()};
  }
  return {};
}

}  // namespace

int serve_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim serve [--root DIR]... [limits]\n\n"
      "Reads one hypothesis per line on stdin and answers each with one line on stdout, in order:\n"
      "  request: {\"id\": any, \"scenario\": PATH or {inline scenario}, \"set\": {\"key.path\": value},"
      " \"seed\": N,\n           \"constraints\": [\"ttft_p99 <= 2 s\", \"tpot <= 50 ms\"], \"attainment\": \"99%\"}\n"
      "  answer:  {\"id\", \"ok\": true, \"summary\", \"pools\", \"simulation\", \"verdict\"} or"
      " {\"id\", \"ok\": false, \"errors\": [{\"code\", \"path\", \"message\", \"allowed\", ...}]}\n"
      "Bad lines get an error answer; the process ends at the end of input. The JSON Schema of both:\n"
      "'servesim schema'; every key a request can set: 'servesim keys'; a Python client:\n"
      "python/servesim_client.py. Scenario files (.yaml, .yml) and the files they name must lie\n"
      "under a root. A hypothesis asked again (the same scenario, set, seed, limits and\n"
      "early_stop) is answered from its first run while the files it names are unchanged.\n\noptions");
  visible.add_options()("help,h", "show this help")(
      "root", po::value<std::vector<std::string>>()->composing(),
      "a folder whose scenarios may be read (repeatable; default: the working directory and the "
      "shipped scenarios)");
  add_limit_options(visible);
  po::variables_map vm;
  if (!parse_command(args, visible, vm, err)) return 2;
  if (vm.count("help")) {
    out << visible;
    return 0;
  }
  if (vm.count("scenario")) {
    err << "error: serve takes no files (the hypotheses come on stdin)\n\n" << visible;
    return 2;
  }
  studies::HypothesisLimits limits;
  if (!read_limits(vm, limits, err)) return 2;
  studies::ServeOptions options;
  options.budget = studies::budget_of(limits, 1);
  std::vector<std::string> roots;
  if (vm.count("root")) {
    roots = vm["root"].as<std::vector<std::string>>();
    for (const std::string& r : roots) {
      if (!std::filesystem::is_directory(r)) {
        err << "error: --root " << r << ": not a folder\n";
        return 2;
      }
    }
  } else {
    roots = shipped_scenarios();
    roots.push_back(std::filesystem::current_path().string());
  }
  options.roots = canonical_folders(roots);
  studies::ScenarioCache cache;
  studies::serve(in, out, cache, options);
  return 0;
}

}  // namespace servesim::app
