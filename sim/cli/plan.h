// `servesim plan SCENARIO.yaml`: the fewest chips or lowest cost that meets the SLOs, searched over
// parallel plans, batch caps, instance counts and pool ratios (plan.cpp, plan_search.h; README.md).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace servesim::app {

// The plan command (arguments after "plan"). Exit codes as run_cli's.
int plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace servesim::app
