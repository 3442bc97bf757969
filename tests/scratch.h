// Scratch space for tests: one folder per test process, made with mkdtemp (a unique name, so two
// test runs, or two test executables, never share a path), removed when the process exits.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace servesim::testing {

inline const std::filesystem::path& scratch_root() {
  // The exit handler reads a plain buffer: it runs after `root` is destroyed (it was registered
  // before `root` finished constructing, and exit handlers run in reverse order).
  static char name[4096];
  static const std::filesystem::path root = [] {
    std::string t = (std::filesystem::temp_directory_path() / "servesim_test.XXXXXX").string();
    if (t.size() >= sizeof name || ::mkdtemp(t.data()) == nullptr) std::abort();
    t.copy(name, t.size());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(name, ec);
    });
    return std::filesystem::path(t);
  }();
  return root;
}

// A path in this process's scratch folder, removed if it exists (and not created).
inline std::filesystem::path scratch_path(const std::string& name) {
  const std::filesystem::path p = scratch_root() / name;
  std::error_code ec;
  std::filesystem::remove_all(p, ec);
  return p;
}

// Writes `text` to a file of that name in the scratch folder and returns its path.
inline std::string scratch_file(const std::string& name, const std::string& text) {
  const std::filesystem::path p = scratch_path(name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

}  // namespace servesim::testing
