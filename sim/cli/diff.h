// `servesim diff A B` and `servesim diff A --set ...`: two runs with the same seed, their metric
// deltas and the attribution of the TTFT, TPOT and throughput deltas (attribution.h; README.md).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace servesim::app {

// The diff command (arguments after "diff"). Exit codes as run_cli's.
int diff_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace servesim::app
