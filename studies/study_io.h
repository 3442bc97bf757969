// What the studies share with whoever runs them: a progress counter a display can poll from
// another thread, and the output a study ends with.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace servesim::studies {

// Units of work done (runs, variants) and, once known, their total (0 until then). Relaxed
// atomics, updated by the study as it goes; display only.
struct StudyProgress {
  std::atomic<std::int64_t> done{0};
  std::atomic<std::int64_t> total{0};
};

// A study's answer: an exit code (0 ok, 2 bad input, already explained on the study's error
// stream), its JSON document and its text for a terminal.
struct StudyOutput {
  int exit_code = 0;
  std::string json;
  std::string text;

  static StudyOutput failed(int exit_code) { return {exit_code, {}, {}}; }
};

}  // namespace servesim::studies
