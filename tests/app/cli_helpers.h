// What the command-line tests share: running the CLI in-process, scratch folders, reading files.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/app.h"
#include "tests/scratch.h"

namespace servesim::testing {

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = app::run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

inline const std::string kQuickstart = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/quickstart.yaml";

// A fresh, empty folder path for one test's outputs, in this process's own scratch folder
// (tests/scratch.h; removed if it exists; not created).
inline std::filesystem::path scratch(const std::string& name) { return scratch_path(name); }

inline std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace servesim::testing
