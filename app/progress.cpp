#include "app/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace servesim::app {

bool progress_wanted(const std::ostream& err) { return &err == &std::cerr && isatty(STDERR_FILENO) == 1; }

std::string ProgressBar::line(const Status& s, int width, double elapsed_s) {
  std::string bar = "[";
  const double f = s.fraction < 0 ? -1 : std::min(1.0, s.fraction);
  const int filled = f < 0 ? 0 : static_cast<int>(std::floor(f * width));
  for (int i = 0; i < width; ++i) bar += i < filled ? '#' : '.';
  bar += "]";
  char pct[16] = "    ";
  if (f >= 0) std::snprintf(pct, sizeof pct, " %3.0f%%", 100 * f);
  // The time left at the rate so far: elapsed x (1 - f) / f, once 1% is done.
  std::string eta;
  if (elapsed_s >= 0 && f >= 0.01 && f < 1) {
    const double left = elapsed_s * (1 - f) / f;
    char buf[32];
    if (left < 60) {
      std::snprintf(buf, sizeof buf, "  ETA %.0f s", std::ceil(left));
    } else if (left < 3600) {
      std::snprintf(buf, sizeof buf, "  ETA %d min %02d s", static_cast<int>(left / 60), static_cast<int>(left) % 60);
    } else {
      std::snprintf(buf, sizeof buf, "  ETA %.1f h", left / 3600);
    }
    eta = buf;
  }
  return bar + pct + eta + "  " + s.text;
}

ProgressBar::ProgressBar(bool enabled, std::function<Status()> poll, Options options) : poll_(std::move(poll)) {
  if (!enabled) return;
  thread_ = std::thread([this, options] {
    using namespace std::chrono_literals;
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    bool drawn = false;
    auto draw = [&] {
      last = std::chrono::steady_clock::now();
      const std::string text =
          "\r" + line(poll_(), 28, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) +
          "\x1b[K";
      drawn = ::write(options.fd, text.data(), text.size()) >= 0;
      return drawn;
    };
    if (options.delay.count() == 0 && !draw()) return;
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(50ms, options.period));
      const auto now = std::chrono::steady_clock::now();
      if (now - start < options.delay) continue;
      if (drawn && now - last < options.period) continue;
      if (!draw()) return;
    }
    if (drawn) {
      const char clear[] = "\r\x1b[K";
      if (::write(options.fd, clear, sizeof clear - 1) < 0) return;
    }
  });
}

ProgressBar::~ProgressBar() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

}  // namespace servesim::app
