// What one run may cost on the host: wall time and memory. A screening loop (serve, sweep, plan)
// gives each hypothesis a budget so that one runaway hypothesis (a horizon of months, a looped
// trace, a billion requests) ends with an error naming the limit instead of taking the machine.
//
// The event loop asks allows() every 4,096 events (a clock read and a few compares: ~0.01% of a
// run). Memory is estimated, not measured: a process's resident size is shared by the threads of
// a sweep, so each run counts what it holds itself, the requests it has taken in at
// kBytesPerRequest each (their slab state, journey, metric records; measured, see
// README.md Limits). The loader refuses at load a workload whose request count alone cannot fit
// (sim/scenario), so this check catches what only a run can know (horizon-bounded and looped
// traffic). Simulated time is bounded by SimulationConfig::clock_limit, inside the loop itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/time.h"

namespace servesim::cluster {

// Host memory one request costs a run that keeps every request to the end: the slope of the peak
// resident set of `servesim run scenarios/quickstart.yaml --set workload.requests=N` between
// N = 10^5 and 10^6, rounded up: 229 B without per-request outputs, 498 B with `--out` (the
// per-request CSV and the HTML report are built in memory).
inline constexpr std::int64_t kBytesPerRequest = 240;
inline constexpr std::int64_t kBytesPerRequestWithCsv = 520;

// The machine's physical memory in bytes (the default memory limit of a run).
std::int64_t physical_memory_bytes();

struct BudgetLimits {
  std::optional<double> wall_s;              // host seconds for the run
  std::optional<std::int64_t> memory_bytes;  // estimated bytes the run holds
  std::int64_t bytes_per_request = kBytesPerRequest;
  std::optional<Duration> simulated;          // simulated time (checked with the others)
  std::optional<std::uint64_t> events;        // simulation events (checked every 4,096)
  const std::atomic<bool>* cancel = nullptr;  // set by another thread to stop the run
};

class RunBudget {
 public:
  explicit RunBudget(BudgetLimits limits) : limits_(limits), start_(std::chrono::steady_clock::now()) {}

  // False (and why() says which limit) once the run has exceeded a limit.
  bool allows(SimTime now, std::int64_t requests_held, std::uint64_t events);
  bool exceeded() const { return !why_.empty(); }
  const std::string& why() const { return why_; }
  double wall_s() const;

 private:
  BudgetLimits limits_;
  std::chrono::steady_clock::time_point start_;
  std::string why_;
};

}  // namespace servesim::cluster
