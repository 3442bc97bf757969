// What one run may cost on the host: wall time and memory. A screening loop (serve, sweep, plan)
// gives each hypothesis a budget so that one runaway hypothesis (a horizon of months, a looped
// trace, a billion requests) ends with an error naming the limit instead of taking the machine.
//
// The event loop asks allows() every 4,096 events (a clock read and a few compares: ~0.01% of a
// run). Memory is estimated, not measured: a process's resident size is shared by the threads of
// a sweep, so each run counts what it holds itself: the requests in flight at
// kBytesPerRequestInFlight each (their hot state, journey and live metric record, in chunks that
// go when their requests finish), and every request taken in at kBytesPerFinishedRequest (the
// times its report's exact figures need; measured, see README.md Limits). The loader refuses at
// load a workload whose request count alone cannot fit (sim/scenario), so this check catches
// what only a run can know (horizon-bounded and looped traffic, a backlog that grows without
// bound). Simulated time is bounded by SimulationConfig::clock_limit, inside the loop itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/time.h"

namespace servesim::cluster {

// Host memory a request costs a run. Every request taken in keeps its times to the end
// (metrics::RequestTimes, 40 B, in chunks) and, when the run ends, the summary's samples take
// about as much again for a moment: kBytesPerFinishedRequest is the slope of the peak resident set
// of `servesim_bench_scaling scenarios/quickstart.yaml --requests 1000000,10000000
// --fixed-instances 100` (a load that keeps few requests in flight), rounded up. A request in
// flight holds its hot state, journey, input, prefix keys and live metric record (about 300 B,
// rounded up from their sizes with the chunks they sit in). The per-request CSV is written as
// requests finish, so `--out` adds nothing per request.
inline constexpr std::int64_t kBytesPerFinishedRequest = 100;
inline constexpr std::int64_t kBytesPerRequestInFlight = 400;

// The machine's physical memory in bytes (the default memory limit of a run).
std::int64_t physical_memory_bytes();

struct BudgetLimits {
  std::optional<double> wall_s;                                 // host seconds for the run
  std::optional<std::int64_t> memory_bytes;                     // estimated bytes the run holds
  std::int64_t bytes_per_request = kBytesPerFinishedRequest;    // per request taken in
  std::int64_t bytes_per_in_flight = kBytesPerRequestInFlight;  // per request in flight
  std::optional<Duration> simulated;                            // simulated time (checked with the others)
  std::optional<std::uint64_t> events;                          // simulation events (checked every 4,096)
  const std::atomic<bool>* cancel = nullptr;                    // set by another thread to stop the run
};

class RunBudget {
 public:
  explicit RunBudget(BudgetLimits limits) : limits_(limits), start_(std::chrono::steady_clock::now()) {}

  // False (and why() says which limit) once the run has exceeded a limit.
  // `taken_in`: requests the run has taken in; `in_flight`: of those, not finished.
  bool allows(SimTime now, std::int64_t taken_in, std::int64_t in_flight, std::uint64_t events);
  // The memory the run holds by the estimate above.
  std::int64_t held_bytes(std::int64_t taken_in, std::int64_t in_flight) const {
    return taken_in * limits_.bytes_per_request + in_flight * limits_.bytes_per_in_flight;
  }
  bool exceeded() const { return !why_.empty(); }
  const std::string& why() const { return why_; }
  double wall_s() const;

 private:
  BudgetLimits limits_;
  std::chrono::steady_clock::time_point start_;
  std::string why_;
};

}  // namespace servesim::cluster
