// A progress bar for long runs and sweeps, drawn on stderr only when stderr is a terminal.
//
// A background thread polls a callback four times a second and redraws one line
// ("[#########.......]  45%  ETA 12 s  27.1 of 60.0 s simulated, 5.2 M events/s"); it shows nothing during
// the first half second, so quick runs print nothing, and it clears its line when it stops. It
// writes with write(2) on file descriptor 2, never through the library's streams: library code,
// tests and `serve` never see it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>
#include <thread>

namespace servesim::app {

// True when `err` is the process's std::cerr and file descriptor 2 is a terminal.
bool progress_wanted(const std::ostream& err);

class ProgressBar {
 public:
  struct Status {
    double fraction = -1;  // done, in [0, 1]; negative when unknown
    std::string text;
  };
  // Where and when it draws: file descriptor 2 after half a second, every quarter of a second.
  // A zero delay draws the first frame at once, before the first wait (tests draw to a pipe).
  struct Options {
    int fd = 2;
    std::chrono::milliseconds delay{500};
    std::chrono::milliseconds period{250};
  };
  // Does nothing at all unless `enabled`.
  ProgressBar(bool enabled, std::function<Status()> poll) : ProgressBar(enabled, std::move(poll), Options{}) {}
  ProgressBar(bool enabled, std::function<Status()> poll, Options options);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // The line for a status, without the carriage return (for tests); with the seconds elapsed
  // since the bar started, the time left at the rate so far ("ETA 42 s").
  static std::string line(const Status& status, int width = 28, double elapsed_s = -1);

 private:
  std::function<Status()> poll_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace servesim::app
