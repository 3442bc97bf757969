// What the libFuzzer harnesses share (tests/fuzz/README.md): a scratch folder for inputs that the
// code under test reads from a file, and the rule that only InputError may escape.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace servesim::fuzz {

// A folder of this process's own (mkdtemp), removed at exit; every file a harness writes goes
// there, and it is the sandbox root of the loaders (files a fuzzed scenario names must lie in it).
inline const std::string& scratch_dir() {
  // The exit handler reads a plain buffer: it runs after `dir` is destroyed (it was registered
  // before `dir` finished constructing, and exit handlers run in reverse order).
  static char name[4096];
  static const std::string dir = [] {
    std::string t = (std::filesystem::temp_directory_path() / "servesim_fuzz.XXXXXX").string();
    if (t.size() >= sizeof name || ::mkdtemp(t.data()) == nullptr) std::abort();
    t.copy(name, t.size());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(name, ec);
    });
    return t;
  }();
  return dir;
}

// Writes the fuzzer's bytes to `name` in the scratch folder and returns its path.
inline std::string write_input(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return path;
}

}  // namespace servesim::fuzz
