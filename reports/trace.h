// The Perfetto / Chrome trace of a run (Chrome JSON trace format, which ui.perfetto.dev and
// chrome://tracing open): one process per pool, one thread per instance (per pipeline lane when
// pp > 1), one complete event ("ph": "X") per span of the run's TraceLog, its arguments in "args".
// Iterations are named by what they ran (decode, prefill or mixed) so the UI colours them apart.
//
// The file says how it was bounded: `otherData` has the span limit, the time window, how many
// spans were kept and dropped; when the limit cut the trace, a global instant event marks the
// moment and says why. Times are microseconds with picosecond digits (exact, deterministic).
// Ignores: flow arrows between tracks (later, with transfers).
#pragma once

#include <ostream>
#include <string>

#include "sim/metrics/trace_log.h"

namespace servesim::reports {

void write_trace(std::ostream& out, const metrics::TraceLog& log, const std::string& scenario_name);

}  // namespace servesim::reports
