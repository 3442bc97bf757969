#include "sim/cluster/run_budget.h"

#include <unistd.h>

#include <cstdio>

#include "core/units.h"

namespace servesim::cluster {

std::int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
}

double RunBudget::wall_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

bool RunBudget::allows(SimTime now, std::int64_t taken_in, std::int64_t in_flight, std::uint64_t events) {
  if (!why_.empty()) return false;
  char buf[256];
  if (limits_.cancel != nullptr && limits_.cancel->load(std::memory_order_relaxed)) {
    std::snprintf(buf, sizeof buf, "the run was cancelled at %.3f s of simulated time", now.to_seconds());
    why_ = buf;
  } else if (limits_.simulated && now - SimTime::zero() > *limits_.simulated) {
    std::snprintf(buf, sizeof buf,
                  "the run passed its simulated-time limit of %g s (%s requests taken in); give it a "
                  "simulation.horizon within the limit",
                  limits_.simulated->to_seconds(), format_count(taken_in).c_str());
    why_ = buf;
  } else if (limits_.events && events > *limits_.events) {
    std::snprintf(buf, sizeof buf,
                  "the run passed its limit of %s events (at %.3f s of simulated time, %s requests taken in)",
                  format_count(static_cast<std::int64_t>(*limits_.events)).c_str(), now.to_seconds(),
                  format_count(taken_in).c_str());
    why_ = buf;
  } else if (limits_.wall_s && wall_s() > *limits_.wall_s) {
    std::snprintf(buf, sizeof buf,
                  "the run took more than its wall-time limit of %g s (at %.3f s of simulated time, %s requests "
                  "taken in)",
                  *limits_.wall_s, now.to_seconds(), format_count(taken_in).c_str());
    why_ = buf;
  } else if (limits_.memory_bytes && held_bytes(taken_in, in_flight) > *limits_.memory_bytes) {
    std::snprintf(buf, sizeof buf,
                  "the run holds about %.3g GB for its requests at %.3f s of simulated time (%s taken in at %lld B "
                  "each, %s in flight at %lld B each), more than its memory limit of %.3g GB",
                  static_cast<double>(held_bytes(taken_in, in_flight)) * 1e-9, now.to_seconds(),
                  format_count(taken_in).c_str(), static_cast<long long>(limits_.bytes_per_request),
                  format_count(in_flight).c_str(), static_cast<long long>(limits_.bytes_per_in_flight),
                  static_cast<double>(*limits_.memory_bytes) * 1e-9);
    why_ = buf;
  }
  return why_.empty();
}

}  // namespace servesim::cluster
