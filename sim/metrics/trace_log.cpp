#include "sim/metrics/trace_log.h"

#include <algorithm>
#include <tuple>

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

namespace {

// The order the log keeps and sorts spans in: by start, then a total order of the rest.
bool earlier(const TraceSpan& a, const TraceSpan& b) {
  return std::tie(a.start_ps, a.pool, a.instance, a.lane, a.kind, a.end_ps, a.args[0], a.args[1], a.args[2],
                  a.args[3]) <
         std::tie(b.start_ps, b.pool, b.instance, b.lane, b.kind, b.end_ps, b.args[0], b.args[1], b.args[2], b.args[3]);
}

}  // namespace

void TraceLog::record_past_limit(const TraceSpan& span) {
  ++dropped_;
  const TraceSpan* out = &span;
  TraceSpan evicted;
  if (!spans_.empty()) {
    if (!heap_) {
      std::make_heap(spans_.begin(), spans_.end(), earlier);
      heap_ = true;
    }
    if (earlier(span, spans_.front())) {
      std::pop_heap(spans_.begin(), spans_.end(), earlier);
      evicted = spans_.back();
      spans_.back() = span;
      std::push_heap(spans_.begin(), spans_.end(), earlier);
      out = &evicted;
    }
  }
  if (dropped_ == 1 || out->start_ps < cut_at_ps_) cut_at_ps_ = out->start_ps;
}

void TraceLog::finish() {
  std::sort(spans_.begin(), spans_.end(), earlier);
  heap_ = false;
}

void TraceLog::add_pool(std::string name, int instances, int lanes) {
  pools_.push_back(PoolTracks{std::move(name), instances, lanes});
}

}  // namespace servesim::metrics
