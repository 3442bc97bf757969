// `servesim sweep SCENARIO --vary KEY=SPEC ...`: see sweep.cpp and README.md (Sweeps).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace servesim::app {

// The sweep command (arguments after "sweep"). Exit codes as run_cli's.
int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace servesim::app
