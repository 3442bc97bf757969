#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/errors.h"
#include "core/units.h"

namespace servesim {
namespace {

[[noreturn]] void refuse(const InputSource& s, const std::string& message) {
  throw InputError({Diagnostic{s.path, 0, 0, s.key_path, message}});
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string too_big(const InputSource& s, const std::string& size, std::uint64_t max_bytes) {
  return "the " + s.what + " is " + size + ", more than the " + format_limit(max_bytes) + " a " + s.what +
         " may have (limits: README.md)";
}

std::string too_long(const InputSource& s, const std::string& kind, std::uint64_t max_bytes) {
  return "the " + s.what + " goes on past the " + format_limit(max_bytes) + " a " + s.what + " may have (" + kind +
         ", read up to the limit; limits: README.md)";
}

}  // namespace

std::string format_limit(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%g GiB", b / kGiB);
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%g MiB", b / kMiB);
  else if (bytes >= (1ull << 10))
    std::snprintf(buf, sizeof buf, "%g KiB", b / kKiB);
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string read_input_file(const InputSource& s, std::uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO that has no writer must not wait for one (it then reads as empty).
  Fd f{::open(s.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
  if (f.fd < 0) refuse(s, "cannot open the " + s.what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) refuse(s, "cannot read the " + s.what + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) refuse(s, "the " + s.what + " is a folder, not a file");
  const bool regular = S_ISREG(st.st_mode);
  if (regular && static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    refuse(s, too_big(s, format_count(st.st_size) + " bytes", max_bytes));
  }
  // Blocking reads from here on (a pipe's writer may be slow); each read is bounded.
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  if (regular) text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      refuse(s, "cannot read the " + s.what + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes) {
      refuse(s, too_long(s, regular ? "a file that grew while read" : kind_of(st.st_mode), max_bytes));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  if (text.empty() && S_ISFIFO(st.st_mode)) refuse(s, "the " + s.what + " is empty (a FIFO that nothing writes to)");
  return text;
}

void check_streamed_file(const InputSource& s) {
  struct stat st {};
  if (::stat(s.path.c_str(), &st) != 0) refuse(s, "cannot open the " + s.what + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    refuse(s, "the " + s.what + " is " + kind_of(st.st_mode) +
                  ", not a regular file (it is read in chunks and "
                  "re-read, so it must be a file on disk)");
  }
  Fd f{::open(s.path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) refuse(s, "cannot open the " + s.what + ": " + std::strerror(errno));
}

std::optional<std::size_t> invalid_utf8_at(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Well-formed sequences (Unicode 15, table 3-7): the lead byte fixes the length and the range
    // of the second byte; later bytes are 0x80..0xBF.
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c == 0xE0)
      len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC)
      len = 3;  // NOLINT(bugprone-branch-clone): as the EE..EF row; one branch per row of the table
    else if (c == 0xED)
      len = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF)
      len = 3;
    else if (c == 0xF0)
      len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      len = 4;
    else if (c == 0xF4)
      len = 4, hi = 0x8F;
    else
      return i;
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::nullopt;
}

std::optional<std::size_t> json_too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

bool path_within(const std::string& file, const std::vector<std::string>& roots) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(file, ec), ec);
  if (ec) return false;
  const std::string s = p.string();
  for (const std::string& root : roots) {
    if (s.size() > root.size() && s.compare(0, root.size(), root) == 0 &&
        (root.back() == '/' || s[root.size()] == '/')) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> canonical_folders(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::canonical(d, ec);
    if (!ec && std::filesystem::is_directory(p, ec)) out.push_back(p.string());
  }
  return out;
}

std::pair<int, int> line_and_column(std::string_view text, std::size_t offset) {
  int line = 1;
  std::size_t start = 0;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      start = i + 1;
    }
  }
  return {line, static_cast<int>(offset - start) + 1};
}

}  // namespace servesim
