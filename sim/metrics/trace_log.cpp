#include "sim/metrics/trace_log.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::metrics {

std::string_view trace_kind_name(TraceKind k) {
  switch (k) {
    case TraceKind::kIteration: return "iteration";
    case TraceKind::kTransfer: return "kv_transfer";
    case TraceKind::kFailure: return "failure";
    case TraceKind::kCount: break;
  }
  return "?";
}

const std::array<std::string_view, 4>& trace_arg_names(TraceKind k) {
  static const std::array<std::string_view, 4> kIteration = {"decodes", "prefill_chunks", "prefill_tokens",
                                                             "preemptions"};
  static const std::array<std::string_view, 4> kTransfer = {"request", "bytes", "exposed_ns", ""};
  static const std::array<std::string_view, 4> kFailure = {"requests", "lost", "", ""};
  static const std::array<std::string_view, 4> kNone = {"", "", "", ""};
  return k == TraceKind::kIteration  ? kIteration
         : k == TraceKind::kTransfer ? kTransfer
         : k == TraceKind::kFailure  ? kFailure
                                     : kNone;
}

TraceLog::TraceLog(TraceOptions options) : options_(options) {
  SERVESIM_CHECK(options_.limit >= 0);
  // Reserve up front, but not absurdly: a huge limit on a short run should not take the memory.
  spans_.reserve(static_cast<std::size_t>(std::min<std::int64_t>(options_.limit, 1 << 20)));
}

void TraceLog::add_pool(std::string name, int instances, int lanes) {
  pools_.push_back(PoolTracks{std::move(name), instances, lanes});
}

}  // namespace servesim::metrics
