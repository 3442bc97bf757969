// Input and output files (core/input_file.h, core/output_file.h) and the simulated clock's range
// (core/time.h): limits, special files, encodings, the sandbox, saturation.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/errors.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "core/time.h"
#include "tests/scratch.h"

using namespace servesim;
namespace fs = std::filesystem;

namespace {

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.diagnostics().front().message;
  }
  return "";
}

}  // namespace

TEST_CASE("read_input_file: size limits from the size, streams read up to the limit") {
  const std::string small = testing::scratch_file("small.txt", "0123456789");
  CHECK(read_input_file({small, "test file", ""}, 10) == "0123456789");
  CHECK(error_of([&] {
          read_input_file({small, "test file", ""}, 9);
        }) == "the test file is 10 bytes, more than the 9 bytes a test file may have (limits: README.md)");
  CHECK(error_of([&] {
          read_input_file({"/dev/zero", "test file", ""}, 1 << 20);
        }) ==
        "the test file goes on past the 1 MiB a test file may have (a character device, read up to the limit; "
        "limits: README.md)");
  CHECK(error_of([&] {
          read_input_file({testing::scratch_root().string(), "test file", ""}, 10);
        }) == "the test file is a folder, not a file");
  CHECK(error_of([&] {
          read_input_file({"/nonexistent/x", "test file", ""}, 10);
        }) == "cannot open the test file: No such file or directory");
  // A FIFO with a writer is read like a pipe; one nobody writes to is refused, not waited on.
  const fs::path fifo = testing::scratch_path("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] {
          read_input_file({fifo.string(), "test file", ""}, 10);
        }) == "the test file is empty (a FIFO that nothing writes to)");
  // The writer holds the FIFO open for reading and writing (which never waits for a partner),
  // so what it writes stays in the pipe until read; it closes once the reader has taken every
  // byte (FIONREAD 0), which ends the reader's read. A reader that opens before the writer reads
  // an empty FIFO and is refused, and tries again 1 ms later (10 s at most either way), so the
  // test does not depend on which process runs first.
  const pid_t writer = fork();
  if (writer == 0) {
    const int fd = ::open(fifo.c_str(), O_RDWR);
    if (fd < 0 || ::write(fd, "abc", 3) != 3) _exit(1);
    int left = 3;
    for (int attempt = 0; attempt < 10000 && ::ioctl(fd, FIONREAD, &left) == 0 && left > 0; ++attempt) ::usleep(1000);
    ::close(fd);
    _exit(left == 0 ? 0 : 1);
  }
  std::string got;
  for (int attempt = 0; attempt < 10000 && got.empty(); ++attempt) {
    try {
      got = read_input_file({fifo.string(), "test file", ""}, 10);
    } catch (const InputError&) {
      ::usleep(1000);
    }
  }
  int status = 0;
  ::waitpid(writer, &status, 0);
  CHECK(got == "abc");
}

TEST_CASE("check_streamed_file: regular files only") {
  CHECK_NOTHROW(check_streamed_file({testing::scratch_file("t.csv", "a\n"), "trace file", "x"}));
  CHECK(error_of([&] {
          check_streamed_file({"/dev/zero", "trace file", "x"});
        }) ==
        "the trace file is a character device, not a regular file (it is read in chunks and re-read, so it must be "
        "a file on disk)");
  CHECK(error_of([&] {
          check_streamed_file({testing::scratch_root().string(), "trace file", "x"});
        }).rfind("the trace file is a folder", 0) == 0);
}

TEST_CASE("invalid_utf8_at: well-formed UTF-8 only (Unicode table 3-7)") {
  CHECK_FALSE(invalid_utf8_at("plain ascii").has_value());
  CHECK_FALSE(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80").has_value());  // é € 😀
  CHECK(invalid_utf8_at("caf\xe9") == 3u);                                                // Latin-1 é
  CHECK(invalid_utf8_at("\xc0\xaf") == 0u);                                               // an overlong '/'
  CHECK(invalid_utf8_at("a\xed\xa0\x80") == 1u);                                          // a UTF-16 surrogate
  CHECK(invalid_utf8_at("\xf4\x90\x80\x80") == 0u);                                       // above U+10FFFF
  CHECK(invalid_utf8_at("ab\xe2\x82") == 2u);                                             // cut short
  CHECK(line_and_column("ab\ncd\xe9", 5) == std::pair<int, int>{2, 3});
}

TEST_CASE("json_too_deep_at: brackets in strings do not count") {
  CHECK_FALSE(json_too_deep_at(R"({"a": [1, {"b": "[[[[[["}]})", 3).has_value());
  CHECK(json_too_deep_at("[[[[", 3) == 3u);
  CHECK_FALSE(json_too_deep_at(R"(["\"[[[["])", 1).has_value());
}

TEST_CASE("path_within: symbolic links and .. are resolved before the sandbox is judged") {
  const fs::path root = testing::scratch_path("root");
  fs::create_directories(root / "in");
  fs::create_symlink("/etc", root / "escape");
  const auto roots = canonical_folders({root.string()});
  REQUIRE(roots.size() == 1);
  CHECK(path_within((root / "in" / "a.yaml").string(), roots));
  CHECK(path_within((root / "in" / "new" / "b.yaml").string(), roots));  // not there yet: where it would be
  CHECK_FALSE(path_within((root / "escape" / "passwd").string(), roots));
  CHECK_FALSE(path_within((root / "in" / ".." / ".." / "x.yaml").string(), roots));
  CHECK_FALSE(path_within(root.string(), roots));  // the root itself is not a file in it
}

TEST_CASE("check_output_file: an unwritable destination is found before any work") {
  CHECK_NOTHROW(check_output_file("-"));
  CHECK_NOTHROW(check_output_file("/dev/null"));
  CHECK_NOTHROW(check_output_file((testing::scratch_root() / "new.json").string()));
  CHECK(error_of([] { check_output_file("/nonexistent/dir/r.json", "JSON report"); }) ==
        "cannot write the JSON report: its folder /nonexistent/dir does not exist (No such file or directory)");
  CHECK(error_of([] { check_output_file(testing::scratch_root().string(), "JSON report"); }) ==
        "cannot write the JSON report: it is a folder, not a file");
  const fs::path loop = testing::scratch_path("loop");
  fs::create_symlink("loop", loop);
  CHECK(error_of([&] { check_output_file(loop.string(), "JSON report"); }) ==
        "cannot write the JSON report: Too many levels of symbolic links");
  const std::string file = testing::scratch_file("plain.txt", "x");
  CHECK(error_of([&] { check_output_folder(file + "/sub", {"a.json"}); }).find("is not a folder") != std::string::npos);
  CHECK(error_of([&] { check_output_folder(file, {"a.json"}); }) ==
        "cannot write the output folder: it exists and is not a folder");
}

TEST_CASE("OutputFile: a full disk is an error, and the file written commits whole") {
  CHECK(error_of([] { write_atomically("/dev/full", "x"); }) == "cannot write: No space left on device");
  const fs::path target = testing::scratch_path("out.txt");
  {
    OutputFile f(target.string());
    f.write("half");
    CHECK_FALSE(fs::exists(target));  // nothing visible before the commit
    f.write(" and half");
    f.commit();
  }
  std::ifstream in(target);
  std::string text;
  std::getline(in, text);
  CHECK(text == "half and half");
}

TEST_CASE("Time: the arithmetic saturates instead of wrapping") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  CHECK(Duration::seconds(1e300) == Duration::max());
  CHECK(Duration::seconds(std::numeric_limits<double>::quiet_NaN()) == Duration::max());
  CHECK(Duration::seconds(-1e300).ps() == -kMax);
  CHECK(Duration::seconds(1.5).ps() == 1'500'000'000'000);
  CHECK((SimTime::never() + Duration::seconds(1)) == SimTime::never());
  CHECK((SimTime::zero() + kClockLimit + kClockLimit) == SimTime::never());
  CHECK((Duration::max() + Duration::seconds(1)) == Duration::max());
  CHECK((Duration::seconds(1e6) * 1'000'000'000) == Duration::max());
  CHECK((Duration::seconds(-1e6) * 1'000'000'000).ps() == -kMax);
  // 100 days, and 6.75 days of headroom to 2^63 ps.
  CHECK(kClockLimit.to_seconds() == 8'640'000.0);
  CHECK(static_cast<double>(kMax) * 1e-12 - kClockLimit.to_seconds() > 6.7 * 86400);
}
