#include "studies/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/hash.h"

namespace servesim::studies {
namespace {

void write_all(int fd, const std::string& bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write the journal " + path + ": " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fdatasync(fd) != 0) {
    throw std::runtime_error("cannot sync the journal " + path + ": " + std::strerror(errno));
  }
}

// Makes a new file's directory entry durable too.
void sync_directory(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

bool Journal::open(const std::string& path, const nlohmann::ordered_json& header, std::vector<Line>& lines,
                   std::string& error) {
  path_ = path;
  const std::string header_line = header.dump() + "\n";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error = "cannot open the journal " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "the journal " + path + " is not a regular file";
    return false;
  }
  // One sweep per journal: a second one on the same folder is told so, at once.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    error = errno == EWOULDBLOCK ? "another sweep is writing to " + path +
                                       " right now; wait for it to finish, or "
                                       "use another --out folder"
                                 : "cannot lock the journal " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string text;
  {
    char buf[1 << 16];
    off_t at = 0;
    while (true) {
      const ssize_t n = ::pread(fd_, buf, sizeof buf, at);
      if (n < 0) {
        if (errno == EINTR) continue;
        error = "cannot read the journal " + path + ": " + std::strerror(errno);
        return false;
      }
      if (n == 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
  }
  std::size_t keep = 0;  // bytes of complete lines
  int line_no = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t nl = text.find('\n', pos);
    ++line_no;
    if (nl == std::string::npos) break;  // a torn last line (a write cut short): dropped below
    std::string line = text.substr(pos, nl - pos);
    if (line_no == 1) {
      nlohmann::ordered_json j;
      try {
        j = nlohmann::ordered_json::parse(line);
      } catch (const nlohmann::json::exception&) {
        error = "the journal " + path + " is corrupt at line 1 (its header); move it away to start the sweep afresh";
        return false;
      }
      if (j != header) {
        std::string what;
        for (const auto& [key, value] : header.items()) {
          if (!j.is_object() || !j.contains(key) || j[key] != value) what += (what.empty() ? "" : ", ") + key;
        }
        error = "the journal " + path + " belongs to a different sweep (" +
                (what.empty() ? std::string("its header differs") : "differs in: " + what) +
                "); use another --out folder, or delete it to start afresh";
        return false;
      }
    } else {
      lines.push_back(Line{line_no, std::move(line)});
    }
    pos = nl + 1;
    keep = pos;
  }
  if (keep < text.size()) {
    dropped_bytes_ = text.size() - keep;
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0 || ::fdatasync(fd_) != 0) {
      error = "cannot truncate the torn last line of " + path + ": " + std::strerror(errno);
      return false;
    }
  }
  if (keep == 0) {
    write_all(fd_, header_line, path);
    sync_directory(path);
  }
  return true;
}

namespace {

constexpr const char* kCheckKey = ",\"check\":\"";

}  // namespace

void Journal::append(const std::string& record) {
  // {...} -> {...,"check":"<fnv1a of {...}>"}
  std::string line = record;
  if (line.size() < 2 || line.back() != '}') throw std::runtime_error("a journal record must be a JSON object");
  line.pop_back();
  line += std::string(kCheckKey) + hex64(fnv1a64(record)) + "\"}\n";
  write_all(fd_, line, path_);
}

std::optional<nlohmann::ordered_json> Journal::verify(const std::string& line, std::string& why) {
  const std::size_t at = line.rfind(kCheckKey);
  const std::size_t digits = at == std::string::npos ? 0 : at + std::char_traits<char>::length(kCheckKey);
  if (at == std::string::npos || line.size() != digits + 16 + 2 || line.compare(digits + 16, 2, "\"}") != 0) {
    why = "it has no check (cut short, or not written by a sweep)";
    return std::nullopt;
  }
  const std::string record = line.substr(0, at) + "}";
  if (hex64(fnv1a64(record)) != line.substr(digits, 16)) {
    why = "its check does not match its content (edited or damaged)";
    return std::nullopt;
  }
  try {
    auto j = nlohmann::ordered_json::parse(record);
    if (j.is_object()) return j;
  } catch (const nlohmann::json::exception&) {
  }
  why = "it is not a JSON object";
  return std::nullopt;
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace servesim::studies
