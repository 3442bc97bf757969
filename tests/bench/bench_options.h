// The command lines of the benchmark programs: Boost.Program_options, as the main binary, so that
// a malformed value (`--runs abc`, `--runs -3`) is a usage error with exit code 2, never a
// default, a crash or a silent zero.
#pragma once

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace servesim::bench {

namespace po = boost::program_options;

// Parses argv against `options`, with the bare arguments collected under `positional_name` (when
// not null). Prints the usage and returns the exit code when the program is done (0 for --help, 2
// for a bad command line); nullopt otherwise.
inline std::optional<int> parse_options(int argc, char** argv, const po::options_description& options,
                                        const char* positional_name, po::variables_map& vm) {
  po::options_description all;
  all.add(options);
  po::positional_options_description positional;
  if (positional_name != nullptr) {
    all.add_options()(positional_name, po::value<std::vector<std::string>>(), "");
    positional.add(positional_name, -1);
  }
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "error: " << e.what() << "\n\n" << options;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << options;
    return 0;
  }
  return std::nullopt;
}

// Prints `message` and the usage; the exit code of a bad command line.
inline int usage_error(const std::string& message, const po::options_description& options) {
  std::cerr << "error: " << message << "\n\n" << options;
  return 2;
}

// The positional arguments (empty when none were given).
inline std::vector<std::string> positionals(const po::variables_map& vm, const char* name) {
  return vm.count(name) ? vm[name].as<std::vector<std::string>>() : std::vector<std::string>{};
}

}  // namespace servesim::bench
