#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/errors.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxLinks = 40;  // as the kernel's own limit on symbolic links in a path walk

[[noreturn]] void refuse(const std::string& path, const std::string& message, const char* outcome) {
  throw InputError({Diagnostic{path, 0, 0, "", message}}, outcome);
}

std::string reason(int error) { return std::strerror(error); }

// `path` with every symbolic link at its end followed (the folders above are the kernel's to
// resolve). Sets `error` to ELOOP on a loop.
std::string follow_links(const std::string& path, int& error) {
  std::string p = path;
  error = 0;
  for (int hops = 0; hops < kMaxLinks; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::string link(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : PATH_MAX), '\0');
    const ssize_t n = ::readlink(p.c_str(), link.data(), link.size());
    if (n < 0) return p;
    link.resize(static_cast<std::size_t>(n));
    const fs::path next(link);
    p = next.is_absolute() ? next.string() : (fs::path(p).parent_path() / next).string();
  }
  error = ELOOP;
  return p;
}

std::string folder_of(const std::string& path) {
  const std::string dir = fs::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

bool can_write(const std::string& path, int& error) {
  if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0) return true;
  error = errno;
  return false;
}

bool can_create_in(const std::string& dir, int& error) {
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0) return true;
  error = errno;
  return false;
}

// A name for a temporary file in `dir`, hidden, unique in this process and unlikely elsewhere.
std::string temp_name(const std::string& dir, const std::string& target) {
  static std::atomic<unsigned> counter{0};
  return (fs::path(dir) / ("." + fs::path(target).filename().string() + "." + std::to_string(::getpid()) + "." +
                           std::to_string(counter.fetch_add(1)) + ".tmp"))
      .string();
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  int error = 0;
  target_ = follow_links(path_, error);
  if (error != 0) refuse(path_, "cannot write: " + reason(error), "nothing was written");
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) refuse(path_, "cannot write: it is a folder, not a file", "nothing was written");
  if (exists && !S_ISREG(st.st_mode)) {
    direct_ = true;
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) fail("cannot open it for writing", errno);
    return;
  }
  if (exists) {
    mode_ = st.st_mode & 07777;
    keep_mode_ = true;
  }
  const std::string dir = folder_of(target_);
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd_ >= 0) {
    unnamed_ = true;
    return;
  }
  // Kernels or file systems without O_TMPFILE answer EISDIR, EOPNOTSUPP or EINVAL; anything else
  // (a missing folder, no permission, a read-only file system) is the answer for a named file too.
  if (errno != EISDIR && errno != EOPNOTSUPP && errno != EINVAL) fail("cannot create a file in " + dir, errno);
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_ = temp_name(dir, target_);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) {
      temp_.clear();
      fail("cannot create a file in " + dir, errno);
    }
  }
  if (fd_ < 0) {
    temp_.clear();
    fail("cannot create a temporary file in " + dir, EEXIST);
  }
}

OutputFile::OutputFile(OutputFile&& o) noexcept
    : path_(std::move(o.path_)),
      target_(std::move(o.target_)),
      fd_(o.fd_),
      direct_(o.direct_),
      unnamed_(o.unnamed_),
      temp_(std::move(o.temp_)),
      mode_(o.mode_),
      keep_mode_(o.keep_mode_) {
  o.fd_ = -1;
  o.temp_.clear();
}

OutputFile::~OutputFile() { abandon(); }

void OutputFile::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void OutputFile::fail(const std::string& what, int error) {
  abandon();
  refuse(path_, what + ": " + reason(error), "nothing was written");
}

void OutputFile::write(std::string_view bytes) {
  if (fd_ < 0) refuse(path_, "cannot write: the file was already closed", "nothing was written");
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    if (n == 0) fail("cannot write", EIO);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void OutputFile::commit() {
  if (fd_ < 0) refuse(path_, "cannot write: the file was already closed", "nothing was written");
  if (direct_) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) refuse(path_, "cannot write: " + reason(errno), "nothing was written");
    return;
  }
  if (keep_mode_ && ::fchmod(fd_, static_cast<mode_t>(mode_)) != 0) fail("cannot keep the file's permissions", errno);
  if (unnamed_) {
    // Give the unnamed file a (hidden, temporary) name in the target's folder, then rename it over
    // the target: linkat cannot replace a file. AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the
    // /proc/self/fd link works for anyone where /proc is mounted.
    const std::string dir = folder_of(target_);
    for (int attempt = 0; attempt < 100 && temp_.empty(); ++attempt) {
      const std::string name = temp_name(dir, target_);
      const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
      if (::linkat(fd_, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0 ||
          ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        temp_ = name;
      } else if (errno != EEXIST) {
        fail("cannot name the finished file in " + dir, errno);
      }
    }
    if (temp_.empty()) fail("cannot name the finished file in " + dir, EEXIST);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot write", errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("cannot replace it", errno);
  temp_.clear();
}

void write_atomically(const std::filesystem::path& path, std::string_view text) {
  OutputFile f(path.string());
  f.write(text);
  f.commit();
}

void write_all_or_none(const std::vector<std::pair<std::string, std::string_view>>& files,
                       const std::vector<OutputFile*>& written) {
  std::vector<OutputFile> open;
  open.reserve(files.size());
  for (const auto& [path, text] : files) {
    open.emplace_back(path);
    open.back().write(text);
  }
  for (OutputFile* f : written) f->commit();
  for (OutputFile& f : open) f.commit();
}

void check_output_file(const std::string& path, const std::string& what) {
  if (path == "-") return;
  auto bad = [&](const std::string& why) { refuse(path, "cannot write the " + what + ": " + why, "nothing was run"); };
  if (path.empty()) bad("the path is empty");
  int error = 0;
  const std::string target = follow_links(path, error);
  if (error != 0) bad(reason(error));
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) bad("it is a folder, not a file");
    if (!can_write(target, error)) bad(reason(error));
    if (S_ISREG(st.st_mode) && !can_create_in(folder_of(target), error)) {
      bad("cannot create files in its folder " + folder_of(target) + " (needed to replace it whole): " + reason(error));
    }
    return;
  }
  if (errno != ENOENT) bad(reason(errno));
  const std::string dir = folder_of(target);
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0) bad("its folder " + dir + " does not exist (" + reason(errno) + ")");
  if (!S_ISDIR(d.st_mode)) bad(dir + " is not a folder");
  if (!can_create_in(dir, error)) bad("cannot create files in " + dir + ": " + reason(error));
}

void check_output_folder(const std::string& dir, const std::vector<std::string>& files, const std::string& what) {
  auto bad = [&](const std::string& why) { refuse(dir, "cannot write the " + what + ": " + why, "nothing was run"); };
  if (dir.empty()) bad("the path is empty");
  int error = 0;
  const std::string target = follow_links(dir, error);
  if (error != 0) bad(reason(error));
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) bad("it exists and is not a folder");
    if (!can_create_in(target, error)) bad(reason(error));
    for (const std::string& f : files) check_output_file((fs::path(dir) / f).string(), f);
    return;
  }
  // ENOTDIR: a parent is a file, said below as "... is not a folder".
  if (errno != ENOENT && errno != ENOTDIR) bad(reason(errno));
  // Created later with its missing parents: the nearest folder that exists must take them.
  fs::path up = fs::path(target).parent_path();
  while (!up.empty() && ::stat(up.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) bad(up.string() + ": " + reason(errno));
    up = up.parent_path();
  }
  const std::string base = up.empty() ? "." : up.string();
  if (up.empty() && ::stat(".", &st) != 0) bad(reason(errno));
  if (!S_ISDIR(st.st_mode)) bad(base + " is not a folder");
  if (!can_create_in(base, error)) bad("cannot create folders in " + base + ": " + reason(error));
}

void create_output_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) refuse(dir, "cannot create the folder: " + ec.message(), "nothing was written");
}

}  // namespace servesim
