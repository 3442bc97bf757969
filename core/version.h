// The version of this build and the git commit it was configured from, for `servesim --version`
// and every report. The commit is read when CMake configures the build (the configure step runs
// again when HEAD moves); outside a git checkout it is "unknown".
#pragma once

#include <string>
#include <string_view>

namespace servesim {

std::string_view servesim_version();  // "0.1.0" (CMakeLists.txt's project version)
std::string_view servesim_commit();   // 12 hex digits, or "unknown"
// "servesim 0.1.0 (commit 0123456789ab)"
std::string version_line();

}  // namespace servesim
