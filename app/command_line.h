// The parsing every command shares (internal to app/): Boost.Program_options over the
// command's options plus its positional scenario files.
#pragma once

#include <charconv>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/output_file.h"
#include "core/units.h"
#include "studies/run.h"

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
                                            const std::string& what, boost::program_options::variables_map& vm,
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

// Unsigned options, strictly: Boost reads "-1" into an unsigned type as 2^64 - 1 (lexical_cast), so
// `--seed -1` became 18446744073709551615. An Unsigned<T> option takes decimal digits only, within
// T; anything else is a bad command line (exit code 2).
template <typename T>
struct Unsigned {
  T value{};
};
template <typename T>
std::ostream& operator<<(std::ostream& out, const Unsigned<T>& u) {
  return out << u.value;
}
// Found by argument-dependent lookup from Boost.Program_options (its customisation point).
template <typename T>
void validate(boost::any& v, const std::vector<std::string>& values, Unsigned<T>*, int) {
  namespace po = boost::program_options;
  po::validators::check_first_occurrence(v);
  const std::string& s = po::validators::get_single_string(values);
  T out{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (s.empty() || s.front() == '-' || ec != std::errc() || end != s.data() + s.size()) {
    throw po::invalid_option_value(s);
  }
  v = Unsigned<T>{out};
}
template <typename T>
boost::program_options::typed_value<Unsigned<T>>* unsigned_value() {
  return boost::program_options::value<Unsigned<T>>();
}
template <typename T>
T unsigned_of(const boost::program_options::variables_map& vm, const char* name) {
  return vm[name].as<Unsigned<T>>().value;
}
template <typename T>
std::optional<T> optional_unsigned(const boost::program_options::variables_map& vm, const char* name) {
  return vm.count(name) ? std::optional<T>(unsigned_of<T>(vm, name)) : std::nullopt;
}

// The value of an option that has no default, when given.
template <typename T>
std::optional<T> optional_value(const boost::program_options::variables_map& vm, const char* name) {
  return vm.count(name) ? std::optional<T>(vm[name].as<T>()) : std::nullopt;
}

// The per-hypothesis limits of serve, sweep and plan (studies/run.h, HypothesisLimits; README.md
// Limits). Quantities with units; 'none' lifts a limit.
inline void add_limit_options(boost::program_options::options_description& d) {
  namespace po = boost::program_options;
  d.add_options()("max-wall-time", po::value<std::string>()->default_value("10 min"),
                  "host time one hypothesis may take, e.g. '30 s' ('none': no limit)")(
      "max-memory", po::value<std::string>(),
      "memory one hypothesis may hold, e.g. '8 GiB' (default: the machine's memory / threads)")(
      "max-simulated-time", po::value<std::string>()->default_value("24 h"),
      "simulated time one hypothesis may cover (its horizon, or how long it runs)");
}

// Reads the options of add_limit_options. On a malformed value prints it and returns false.
inline bool read_limits(const boost::program_options::variables_map& vm, studies::HypothesisLimits& limits,
                        std::ostream& err) {
  auto quantity = [&](const char* name, Dimension dim, std::optional<double>& out) {
    if (!vm.count(name)) return true;
    const std::string text = vm[name].as<std::string>();
    if (text == "none") {
      out.reset();
      return true;
    }
    const QuantityParse q = parse_quantity(text, dim);
    if (!q.ok || !(q.value > 0)) {
      err << "error: --" << name << ": " << (q.ok ? "must be greater than 0" : q.error) << "\n";
      return false;
    }
    out = q.value;
    return true;
  };
  std::optional<double> memory_bytes;
  const bool ok = quantity("max-wall-time", Dimension::kDuration, limits.wall_s) &&
                  quantity("max-memory", Dimension::kBytes, memory_bytes) &&
                  quantity("max-simulated-time", Dimension::kDuration, limits.simulated_s);
  if (memory_bytes) limits.memory_gb = *memory_bytes * 1e-9;
  return ok;
}

// --json's target: "-", a file, or "" when not given. A file is checked before any work: one that
// cannot be written throws InputError (exit code 2, nothing run).
inline std::string json_target(const boost::program_options::variables_map& vm) {
  std::string target = vm.count("json") ? vm["json"].as<std::string>() : "";
  if (!target.empty()) check_output_file(target, "JSON output (--json)");
  return target;
}

}  // namespace servesim::app
