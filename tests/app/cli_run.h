// The command line as users drive it, for the app tests: arguments in, exit code and both
// streams out.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/app.h"

namespace servesim::test {

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = app::run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace servesim::test
