// What the commands of the command line share (internal to sim/cli): each command's entry point,
// option parsing, and the two helpers every command that writes files or reports bad input uses.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "sim/core/errors.h"

namespace servesim::app {

// `servesim workload ...` (workload_stats.cpp).
int workload_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The options of a command that takes exactly one file (`what` names the command in messages):
// parses `args` into `vm` and `file`, and answers --help (exit code 0) and bad options or file
// counts (2) itself. Returns that exit code when the command is done, nullopt to go on.
std::optional<int> parse_command(const std::vector<std::string>& args,
                                 const boost::program_options::options_description& visible,
                                 const std::string& what, boost::program_options::variables_map& vm,
                                 std::string& file, std::ostream& out, std::ostream& err);

// Writes `text` to `path` through a temporary file in the same folder and a rename.
void write_atomically(const std::filesystem::path& path, const std::string& text);
// Every diagnostic on its own line, then how many, and that nothing was run.
void print_diagnostics(const InputError& e, std::ostream& err);
// `--json -` prints only the JSON; otherwise the text is printed, and the JSON written to
// `json_target` (when given) and reported as written.
void print_or_write_json(const std::string& json_target, const std::string& json,
                         const std::string& text, std::ostream& out);

}  // namespace servesim::app
