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

bool RunBudget::allows(SimTime now, std::int64_t requests_held, std::uint64_t events) {
  if (!why_.empty()) return false;
  char buf[256];
  if (limits_.cancel != nullptr && limits_.cancel->load(std::memory_order_relaxed)) {
    std::snprintf(buf, sizeof buf, "the run was cancelled at %.3f s of simulated time", now.to_seconds());
    why_ = buf;
  } else if (limits_.simulated && now - SimTime::zero() > *limits_.simulated) {
    std::snprintf(buf, sizeof buf,
                  "the run passed its simulated-time limit of %g s (%s requests taken in); give it a "
                  "simulation.horizon within the limit",
                  limits_.simulated->to_seconds(), format_count(requests_held).c_str());
    why_ = buf;
  } else if (limits_.events && events > *limits_.events) {
    std::snprintf(buf, sizeof buf,
                  "the run passed its limit of %s events (at %.3f s of simulated time, %s requests taken in)",
                  format_count(static_cast<std::int64_t>(*limits_.events)).c_str(), now.to_seconds(),
                  format_count(requests_held).c_str());
    why_ = buf;
  } else if (limits_.wall_s && wall_s() > *limits_.wall_s) {
    std::snprintf(buf, sizeof buf,
                  "the run took more than its wall-time limit of %g s (at %.3f s of simulated time, %s requests "
                  "taken in)",
                  *limits_.wall_s, now.to_seconds(), format_count(requests_held).c_str());
    why_ = buf;
  } else if (limits_.memory_bytes && requests_held * limits_.bytes_per_request > *limits_.memory_bytes) {
    std::snprintf(buf, sizeof buf,
                  "the run holds %s requests (about %.3g GB at %lld B each) at %.3f s of simulated time, more "
                  "than its memory limit of %.3g GB",
                  format_count(requests_held).c_str(),
                  static_cast<double>(requests_held * limits_.bytes_per_request) * 1e-9,
                  static_cast<long long>(limits_.bytes_per_request), now.to_seconds(),
                  static_cast<double>(*limits_.memory_bytes) * 1e-9);
    why_ = buf;
  }
  return why_.empty();
}

}  // namespace servesim::cluster
