// The commands of the command line (internal to app/): each command's entry point, called by
// run_cli with the arguments after its name, and the output every study-backed command ends with.
// Option parsing is in command_line.h.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "studies/study_io.h"

namespace servesim::app {

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int serve_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);
int diff_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int workload_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int schema_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int keys_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int completion_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The command table (app.cpp): the names, in usage order, and a command run by name (exit code 2
// and the usage for a name that is none of them).
const std::vector<std::string>& command_names();
int run_command_by_name(const std::string& command, const std::vector<std::string>& args, std::istream& in,
                        std::ostream& out, std::ostream& err);

// `--json -` prints only the JSON; otherwise the text is printed, and the JSON written to
// `json_target` (when given) and reported as written.
void print_or_write_json(const std::string& json_target, const std::string& json, const std::string& text,
                         std::ostream& out);

// A study's output printed as above; returns its exit code.
int print_output(const studies::StudyOutput& output, const std::string& json_target, std::ostream& out);

}  // namespace servesim::app
