// A bounded log of what each instance did when, for the Perfetto / Chrome trace (reports/trace.h).
//
// Models: spans on tracks. A track is one lane of one instance of one pool (a pipeline lane with
// pp > 1; the instance itself otherwise); a span is one thing the lane did over [start, end] with
// up to four integer arguments whose names depend on its kind (TraceKind). Adding a kind (a KV
// transfer, a failure) is one enumerator, one name and its argument names in trace_log.cpp, and a
// record() call where it happens; the writer needs no change.
//
// Bounded: the log keeps at most `limit` spans, optionally only those that start inside a time
// window, in a buffer reserved up front (up to 1 M spans; past that it grows geometrically), so
// recording a span does not allocate. Past the limit it keeps the `limit` spans that start first
// (ties: by track, kind, end and arguments), whatever order they were recorded in (a multi-step
// decode run records its steps when it applies them, after later spans of other instances): the
// others are counted, not kept, and the log remembers the earliest start among them (the cut:
// every span that starts before it is kept) so the trace can say so. finish() puts the kept
// spans in that order.
// Ignores: spans that start outside the window (a span that starts inside and ends after it is
// kept whole).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/time.h"

namespace servesim::metrics {

enum class TraceKind : std::uint8_t {
  kIteration,  // a batch iteration: args decodes, prefill chunks, prefill tokens, preemptions
  kTransfer,   // a KV cache arriving at a decode instance, from its start: args request, bytes,
               // exposed ns (its own track per instance; `lane` unused)
  kFailure,    // an instance down from its fault to its repair: args requests hit, lost (1) or
               // re-queued (0) (its own track per instance; `lane` unused)
  kCount
};
std::string_view trace_kind_name(TraceKind k);
// The names of a kind's four arguments; an empty name means the argument is unused.
const std::array<std::string_view, 4>& trace_arg_names(TraceKind k);

struct TraceSpan {
  std::int64_t start_ps = 0;
  std::int64_t end_ps = 0;
  std::uint32_t pool = 0;
  std::uint32_t instance = 0;  // within the pool
  std::uint16_t lane = 0;
  TraceKind kind = TraceKind::kIteration;
  std::int64_t args[4] = {0, 0, 0, 0};
};

struct TraceOptions {
  std::int64_t limit = 200'000;     // spans kept
  std::optional<SimTime> from, to;  // keep spans that start in [from, to]
};

class TraceLog {
 public:
  explicit TraceLog(TraceOptions options);

  // Pools are added in the order of their PoolIds; `lanes` is the number of lanes per instance.
  void add_pool(std::string name, int instances, int lanes);

  bool wants(SimTime start) const {
    return (!options_.from || start >= *options_.from) && (!options_.to || start <= *options_.to);
  }
  void record(const TraceSpan& span) {
    if (spans_.size() < static_cast<std::size_t>(options_.limit)) [[likely]] {
      spans_.push_back(span);
    } else {
      record_past_limit(span);
    }
  }
  // After the last record: the kept spans in order of their start (ties as above).
  void finish();

  struct PoolTracks {
    std::string name;
    int instances = 0;
    int lanes = 1;
  };
  const std::vector<TraceSpan>& spans() const { return spans_; }
  const std::vector<PoolTracks>& pools() const { return pools_; }
  const TraceOptions& options() const { return options_; }
  std::int64_t dropped() const { return dropped_; }
  // The earliest start of a span that was not kept (when dropped() > 0).
  std::int64_t cut_at_ps() const { return cut_at_ps_; }

 private:
  // Keeps the `limit` first spans: a heap whose top is the last of them.
  void record_past_limit(const TraceSpan& span);

  TraceOptions options_;
  bool heap_ = false;  // spans_ is a heap (the limit was reached)
  std::vector<TraceSpan> spans_;
  std::vector<PoolTracks> pools_;
  std::int64_t dropped_ = 0;
  std::int64_t cut_at_ps_ = 0;
};

}  // namespace servesim::metrics
