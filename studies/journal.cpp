#include "studies/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

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

bool Journal::open(const std::string& path, const nlohmann::ordered_json& header,
                   std::vector<nlohmann::ordered_json>& records, std::string& error) {
  path_ = path;
  const std::string header_line = header.dump() + "\n";
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      text = s.str();
    }
  }
  std::size_t keep = 0;  // bytes of complete, valid lines
  if (!text.empty()) {
    std::size_t pos = 0;
    int line_no = 0;
    while (pos < text.size()) {
      const std::size_t nl = text.find('\n', pos);
      const bool last = nl == std::string::npos || nl + 1 == text.size();
      const std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      ++line_no;
      nlohmann::ordered_json j;
      bool parsed = nl != std::string::npos;
      if (parsed) {
        try {
          j = nlohmann::ordered_json::parse(line);
        } catch (const nlohmann::json::parse_error&) {
          parsed = false;
        }
      }
      if (!parsed) {
        // A torn last line (a write cut short): dropped below. A torn header means the sweep
        // was killed before it began: the journal starts afresh.
        if (last && (line_no > 1 || nl == std::string::npos)) break;
        error = "the journal " + path + " is corrupt at line " + std::to_string(line_no) +
                (line_no == 1 ? " (its header)" : "") + "; move it away to start the sweep afresh";
        return false;
      }
      if (line_no == 1) {
        if (j != header) {
          std::string what;
          for (const auto& [key, value] : header.items()) {
            if (!j.contains(key) || j[key] != value) what += (what.empty() ? "" : ", ") + key;
          }
          error = "the journal " + path + " belongs to a different sweep (" +
                  (what.empty() ? std::string("its header differs") : "differs in: " + what) +
                  "); use another --out folder, or delete it to start afresh";
          return false;
        }
      } else {
        records.push_back(std::move(j));
      }
      pos = nl + 1;
      keep = pos;
    }
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error = "cannot open the journal " + path + ": " + std::strerror(errno);
    return false;
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

void Journal::append(const std::string& line) { write_all(fd_, line + "\n", path_); }

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace servesim::studies
