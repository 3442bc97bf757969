// Output files, written whole or not at all, wherever their path points. Every file the project
// writes goes through here (reports, CSVs, traces, profiles, sweep results, tool outputs).
//
// - A regular file, or a path that does not exist yet, is written to a temporary file in the same
//   folder and renamed over the target when complete: a failed or interrupted write leaves the old
//   file (or none). The temporary file is unnamed (O_TMPFILE) where the file system allows it, so
//   that even SIGKILL during the write leaves nothing behind; elsewhere it is a hidden
//   ".NAME.XXXXXX" that every error path removes. A replaced file keeps its permissions.
// - A symbolic link is followed: its final target is written as above and the link stays a link.
// - Anything else that opens for writing (a character device such as /dev/null or /dev/stdout, a
//   FIFO, a socket) is written in place, directly: never replaced by a regular file.
// - Every write error is reported (ENOSPC on /dev/full, EIO, EPIPE, a short write): an error names
//   the file and the system's reason, as an InputError with exit code 2 (a destination that cannot
//   be written is bad input, like a missing input file) and the outcome "nothing was written".
// - check_output_file / check_output_folder find an unwritable destination before any work is
//   done (the command then exits 2 with nothing run).
// Ignored: durability across a power cut (no fsync; a kill of the process is covered).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace servesim {

class OutputFile {
 public:
  // Opens the destination (a temporary file beside it, or the special file itself). Throws
  // InputError when it cannot.
  explicit OutputFile(std::string path);
  ~OutputFile();  // an uncommitted file leaves no trace (the old target stays)
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;

  // Appends bytes. Throws InputError on any write error (the file is then abandoned).
  void write(std::string_view bytes);
  // Makes the file visible under its path (renames the temporary file over the target). Throws
  // InputError when that fails.
  void commit();

  const std::string& path() const { return path_; }

 private:
  void abandon() noexcept;
  [[noreturn]] void fail(const std::string& what, int error);

  std::string path_;    // as given, for messages
  std::string target_;  // the path written: path_ with symbolic links followed
  int fd_ = -1;
  bool direct_ = false;     // a special file, written in place
  bool unnamed_ = false;    // O_TMPFILE: linked into the folder at commit
  std::string temp_;        // the named temporary file (when not unnamed_)
  unsigned mode_ = 0666;    // permissions of the committed file (before the umask when new)
  bool keep_mode_ = false;  // mode_ is the replaced file's own
};

// Writes `text` to `path` as above. Throws InputError.
void write_atomically(const std::filesystem::path& path, std::string_view text);

// Several files committed together: each is written in full before any is renamed into place, so
// a write error (a full disk) leaves every target as it was.
// `written`: files already written (streamed while a run went), committed with the others.
void write_all_or_none(const std::vector<std::pair<std::string, std::string_view>>& files,
                       const std::vector<OutputFile*>& written = {});

// Throws InputError (naming the path and why) when `path` could not be written: a folder, a
// missing or unwritable parent folder, a file or special file without write permission, a
// symbolic link loop. Creates nothing. "-" (stdout) is always fine.
void check_output_file(const std::string& path, const std::string& what = "output file");
// The same for a folder (created later, with its missing parents, when absent) and the files a
// command will write in it.
void check_output_folder(const std::string& dir, const std::vector<std::string>& files,
                         const std::string& what = "output folder");

// Creates `dir` and its missing parents. Throws InputError when it cannot.
void create_output_folder(const std::string& dir);

}  // namespace servesim
