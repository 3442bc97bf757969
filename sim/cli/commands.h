// What the commands of the command line share (internal to sim/cli): each command's entry point
// and the JSON-or-table output; option parsing is in command_line.h, atomic writes and
// diagnostics in app.h.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "sim/cli/app.h"

namespace servesim::app {

// `servesim workload ...` (workload_stats.cpp).
int workload_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `servesim calibrate MEASUREMENTS... --chip NAME --out PROFILE` (calibrate_command.cpp).
int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `servesim validate MEASURED.csv` (validate.cpp).
int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `--json -` prints only the JSON; otherwise the text is printed, and the JSON written to
// `json_target` (when given) and reported as written.
void print_or_write_json(const std::string& json_target, const std::string& json,
                         const std::string& text, std::ostream& out);

}  // namespace servesim::app
