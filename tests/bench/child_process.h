// Runs one benchmark run in a fresh child process, so that its peak memory (wait4's ru_maxrss) is
// that run's own and no run inherits another's heap.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

namespace servesim::bench {

struct ChildRun {
  std::string output;    // what the child's body returned
  double rss_mb = 0;     // the child's peak resident set
  double process_s = 0;  // fork to exit
  double cpu_s = 0;      // the child's user + system CPU time (wait4's rusage)
};

// `body` runs in the child and returns one line of text for the parent; nullopt when the child
// failed (a non-zero exit, a crash, nothing written).
template <class Body>
std::optional<ChildRun> run_in_child(Body body) {
  int fd[2];
  if (pipe(fd) != 0) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const std::string line = body();
    const auto n = static_cast<ssize_t>(line.size());
    if (write(fd[1], line.data(), line.size()) != n) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  std::string output;
  char buf[256];
  for (ssize_t got; (got = read(fd[0], buf, sizeof buf)) > 0;) output.append(buf, static_cast<std::size_t>(got));
  close(fd[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  if (output.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  ChildRun run;
  run.output = std::move(output);
  run.rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  run.process_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  run.cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  return run;
}

}  // namespace servesim::bench
