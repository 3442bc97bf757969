#include "reports/trace.h"

#include <cinttypes>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/version.h"

namespace servesim::reports {
namespace {

// Picoseconds as microseconds with six decimals, exactly.
std::string us(std::int64_t ps) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%06" PRId64, ps / 1'000'000, ps % 1'000'000);
  return buf;
}

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// Tracks of a pool: one per (instance, lane) for iterations, tid 1 + instance x lanes + lane;
// after them two per instance, for its KV transfers in and its failures.
std::size_t track_of(const metrics::TraceSpan& s, const metrics::TraceLog::PoolTracks& pool) {
  const auto lanes = static_cast<std::size_t>(pool.lanes);
  const auto instances = static_cast<std::size_t>(pool.instances);
  if (s.kind == metrics::TraceKind::kIteration) return s.instance * lanes + s.lane;
  // 2 x instance in size_t: instance < pool.instances (an int), so the uint32 product never
  // wrapped and the value is the same.
  return instances * lanes + 2 * std::size_t{s.instance} + (s.kind == metrics::TraceKind::kTransfer ? 0 : 1);
}

const char* span_name(const metrics::TraceSpan& s) {
  if (s.kind != metrics::TraceKind::kIteration) return nullptr;
  const bool decode = s.args[0] > 0, prefill = s.args[1] > 0;
  return decode && prefill ? "mixed" : decode ? "decode" : "prefill";
}

}  // namespace

void write_trace(std::ostream& out, const metrics::TraceLog& log, const std::string& scenario_name) {
  const auto& opts = log.options();
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"servesim\",\"version\":"
      << quoted(std::string(servesim_version())) << ",\"commit\":" << quoted(std::string(servesim_commit()))
      << ",\"scenario\":" << quoted(scenario_name) << ",\"span_limit\":" << opts.limit
      << ",\"window_from_s\":" << (opts.from ? nlohmann::json(opts.from->to_seconds()).dump() : "null")
      << ",\"window_to_s\":" << (opts.to ? nlohmann::json(opts.to->to_seconds()).dump() : "null")
      << ",\"spans_kept\":" << log.spans().size() << ",\"spans_dropped\":" << log.dropped()
      << ",\"truncated\":" << (log.dropped() > 0 ? "true" : "false");
  if (log.dropped() > 0) {
    out << ",\"cut_at_s\":" << nlohmann::json(static_cast<double>(log.cut_at_ps()) * 1e-12).dump();
  }
  out << "},\n\"traceEvents\":[\n";

  // Name the processes, and the threads that have spans.
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  std::vector<std::vector<bool>> used(log.pools().size());
  for (std::size_t p = 0; p < log.pools().size(); ++p) {
    const auto& pool = log.pools()[p];
    used[p].assign(static_cast<std::size_t>(pool.instances) * (static_cast<std::size_t>(pool.lanes) + 2), false);
  }
  for (const auto& s : log.spans()) {
    if (s.kind != metrics::TraceKind::kTransfer) used[s.pool][track_of(s, log.pools()[s.pool])] = true;
  }
  for (std::size_t p = 0; p < log.pools().size(); ++p) {
    const auto& pool = log.pools()[p];
    sep();
    out << "{\"ph\":\"M\",\"pid\":" << p + 1
        << ",\"name\":\"process_name\",\"args\":{\"name\":" << quoted("pool " + pool.name)
        << "}},\n{\"ph\":\"M\",\"pid\":" << p + 1
        << ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":" << p + 1 << "}}";
    for (std::size_t t = 0; t < used[p].size(); ++t) {
      if (!used[p][t]) continue;
      const std::size_t lanes = static_cast<std::size_t>(pool.lanes);
      const std::size_t regular = static_cast<std::size_t>(pool.instances) * lanes;
      const std::size_t inst = t < regular ? t / lanes : (t - regular) / 2;
      const std::size_t lane = t < regular ? t % lanes : 0;
      const std::string name = "instance " + std::to_string(inst) +
                               (t >= regular     ? ((t - regular) % 2 == 0 ? " KV transfers in" : " failures")
                                : pool.lanes > 1 ? " lane " + std::to_string(lane)
                                                 : std::string());
      out << ",\n{\"ph\":\"M\",\"pid\":" << p + 1 << ",\"tid\":" << t + 1
          << ",\"name\":\"thread_name\",\"args\":{\"name\":" << quoted(name) << "}},\n{\"ph\":\"M\",\"pid\":" << p + 1
          << ",\"tid\":" << t + 1 << ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" << t + 1 << "}}";
    }
  }
  std::size_t transfers = 0;
  for (const auto& s : log.spans()) {
    sep();
    const std::size_t tid = track_of(s, log.pools()[s.pool]) + 1;
    const auto& names = metrics::trace_arg_names(s.kind);
    std::string args = "{";
    for (std::size_t a = 0; a < names.size(); ++a) {
      if (names[a].empty()) continue;
      args += (args.size() > 1 ? "," : "") + ('"' + std::string(names[a]) + "\":" + std::to_string(s.args[a]));
    }
    args += "}";
    if (s.kind == metrics::TraceKind::kTransfer) {
      // KV transfers into one instance overlap without nesting, which complete events on one
      // track may not (the viewer drops them): each is an async slice of its own, begin and end,
      // on the instance's "KV transfers in" async track (one id per transfer).
      const std::string id = std::to_string(++transfers);
      const std::string name = quoted("KV in, instance " + std::to_string(s.instance));
      out << "{\"ph\":\"b\",\"pid\":" << s.pool + 1 << ",\"tid\":" << tid << ",\"name\":" << name
          << ",\"cat\":\"transfer\",\"id\":" << id << ",\"ts\":" << us(s.start_ps) << ",\"args\":" << args
          << "},\n{\"ph\":\"e\",\"pid\":" << s.pool + 1 << ",\"tid\":" << tid << ",\"name\":" << name
          << ",\"cat\":\"transfer\",\"id\":" << id << ",\"ts\":" << us(s.end_ps) << "}";
      continue;
    }
    const char* name = span_name(s);
    out << "{\"ph\":\"X\",\"pid\":" << s.pool + 1 << ",\"tid\":" << tid << ",\"name\":\""
        << (name ? name : metrics::trace_kind_name(s.kind).data()) << "\",\"cat\":\""
        << metrics::trace_kind_name(s.kind) << "\",\"ts\":" << us(s.start_ps)
        << ",\"dur\":" << us(s.end_ps - s.start_ps) << ",\"args\":" << args << "}";
  }
  if (log.dropped() > 0) {
    sep();
    out << "{\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"name\":"
        << quoted("trace cut: the limit of " + std::to_string(opts.limit) + " spans was reached; " +
                  std::to_string(log.dropped()) + " later spans are not in this file (--trace-limit)")
        << ",\"ts\":" << us(log.cut_at_ps()) << "}";
  }
  out << "\n]}\n";
}

}  // namespace servesim::reports
