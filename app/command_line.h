// The parsing every command shares (internal to app/): Boost.Program_options over the
// command's options plus its positional scenario files.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace servesim::app {

// Parses `args` against `visible` and a hidden positional "scenario" (every bare argument). On a
// malformed command line prints the error and `visible` to `err` and returns false (exit code 2).
inline bool parse_command(const std::vector<std::string>& args,
                          const boost::program_options::options_description& visible,
                          boost::program_options::variables_map& vm, std::ostream& err) {
  namespace po = boost::program_options;
  po::options_description hidden;
  hidden.add_options()("scenario", po::value<std::vector<std::string>>(), "scenario file");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("scenario", -1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "error: " << e.what() << "\n\n" << visible;
    return false;
  }
  return true;
}

// parse_command for a command that takes exactly one file (`what` names the command in
// messages): answers --help (exit code 0), bad options and file counts (2) itself, returning that
// exit code when the command is done; otherwise sets `file` and returns nullopt.
inline std::optional<int> parse_single_file(const std::vector<std::string>& args,
                                            const boost::program_options::options_description& visible,
                                            const std::string& what,
                                            boost::program_options::variables_map& vm,
                                            std::string& file, std::ostream& out, std::ostream& err) {
  if (!parse_command(args, visible, vm, err)) return 2;
  if (vm.count("help")) {
    out << visible;
    return 0;
  }
  if (!vm.count("scenario") || vm["scenario"].as<std::vector<std::string>>().size() != 1) {
    err << "error: " << what << "\n\n" << visible;
    return 2;
  }
  file = vm["scenario"].as<std::vector<std::string>>().front();
  return std::nullopt;
}

// The value of an option that has no default, when given.
template <typename T>
std::optional<T> optional_value(const boost::program_options::variables_map& vm, const char* name) {
  return vm.count(name) ? std::optional<T>(vm[name].as<T>()) : std::nullopt;
}

// --json's target: "-", a file, or "" when not given.
inline std::string json_target(const boost::program_options::variables_map& vm) {
  return vm.count("json") ? vm["json"].as<std::string>() : "";
}

}  // namespace servesim::app
