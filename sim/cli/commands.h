// What the commands of the command line share (internal to sim/cli): each command's entry point,
// and the two helpers every command that writes files or reports bad input uses.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/core/errors.h"

namespace servesim::app {

// `servesim workload ...` (workload_stats.cpp).
int workload_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Writes `text` to `path` through a temporary file in the same folder and a rename.
void write_atomically(const std::filesystem::path& path, const std::string& text);
// Every diagnostic on its own line, then how many, and that nothing was run.
void print_diagnostics(const InputError& e, std::ostream& err);

}  // namespace servesim::app
