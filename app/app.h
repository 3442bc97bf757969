// The servesim command line: run_cli parses the command and dispatches it to the command's
// entry point (commands.h), which reads its options (Boost.Program_options), calls the study that
// does the work (studies/) and prints or writes its answer. main() is a one-line call into
// run_cli so that tests and the benchmark drive exactly what users run.
//
// Exit codes (DESIGN.md): 0 ok; 2 bad input (every problem listed on stderr with
// file:line:col and key path; nothing written); 1 internal error.
// Outputs are written to a temporary file beside the target and renamed into place, so a failed
// or interrupted run never leaves a half-written report.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace servesim::app {

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace servesim::app
