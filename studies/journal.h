// The sweep's journal: an append-only JSON-lines file that makes a sweep resumable after any
// kill, SIGKILL included.
//
// Line 1 is a header that pins the sweep's definition (scenario file and its content hash,
// overrides, what is varied and how it is sampled); every later line is one finished variant's
// record, written with one write(2) and made durable with fdatasync before the sweep counts it
// as done. Each record ends with a check: the FNV-1a hash of the record's text before it
// ("check":"..." as its last key), so that a record cut short, edited or forged is found and its
// variant recomputed rather than trusted (Journal::verify).
//
// Opening an existing journal takes an exclusive lock on it (flock, held until the Journal is
// destroyed: a second sweep on the same folder is refused while the first runs), checks the header
// against the current sweep (a different sweep is refused, naming what differs, rather than
// resumed wrongly), returns the record lines, and drops a torn last line (a write cut short by
// the kill) by truncating the file to its last complete line. A damaged header is an error: the
// journal was edited.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::studies {

class Journal {
 public:
  struct Line {
    int number = 0;    // 1-based line of the file
    std::string text;  // without the newline
  };

  // Opens `path` (creating it with `header` when absent) and locks it; the record lines already
  // there are appended to `lines` (unverified). Returns false with a sentence in `error` when
  // another sweep holds the journal, it belongs to another sweep, or its header is damaged.
  bool open(const std::string& path, const nlohmann::ordered_json& header, std::vector<Line>& lines,
            std::string& error);
  // One record (a JSON object's text), with its check appended, durable when this returns.
  // Throws std::runtime_error on an I/O error.
  void append(const std::string& record);
  ~Journal();

  // The record of a journal line without its check, or nullopt (and `why`) when the line is not a
  // JSON object ending with a check that matches it.
  static std::optional<nlohmann::ordered_json> verify(const std::string& line, std::string& why);

  // How many bytes of a torn last line open() dropped (0 when none), for messages and tests.
  std::size_t dropped_bytes() const { return dropped_bytes_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::size_t dropped_bytes_ = 0;
};

}  // namespace servesim::studies
