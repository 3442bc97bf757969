// The sweep's journal: an append-only JSON-lines file that makes a sweep resumable after any
// kill, SIGKILL included.
//
// Line 1 is a header that pins the sweep's definition (scenario file and its content hash,
// overrides, what is varied and how it is sampled); every later line is one finished variant's
// record, written with one write(2) and made durable with fdatasync before the sweep counts it
// as done. Opening an existing journal checks the header against the current sweep (a different
// sweep is refused, naming what differs, rather than resumed wrongly), returns the finished
// records, and drops a torn last line (a write cut short by the kill) by truncating the file to
// its last complete line. Any other unreadable line is an error: the journal was edited.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::studies {

class Journal {
 public:
  // Opens `path` (creating it with `header` when absent); the records already there are appended
  // to `records`. Returns false with a sentence in `error` when the journal belongs to another
  // sweep or is corrupt.
  bool open(const std::string& path, const nlohmann::ordered_json& header,
            std::vector<nlohmann::ordered_json>& records, std::string& error);
  // One record, durable when this returns. Throws std::runtime_error on an I/O error.
  void append(const std::string& line);
  ~Journal();

  // How many bytes of a torn last line open() dropped (0 when none), for messages and tests.
  std::size_t dropped_bytes() const { return dropped_bytes_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::size_t dropped_bytes_ = 0;
};


}  // namespace servesim::studies
