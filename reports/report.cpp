#include "reports/report.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "core/units.h"
#include "core/version.h"

namespace servesim::reports {
namespace {

using Json = nlohmann::ordered_json;

Json distribution(const metrics::Distribution& d) {
  Json j = Json::object();
  j["mean"] = d.mean;
  j["p50"] = d.p50;
  j["p90"] = d.p90;
  j["p99"] = d.p99;
  j["count"] = d.count;
  return j;
}

template <class T>
Json optional_value(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string thousands(double v) { return format_count(std::llround(v)); }

}  // namespace

Json build_report(const Json& resolved_scenario, const metrics::Summary& s, const RunInfo& run) {
  Json report = Json::object();
  report["schema"] = kReportSchema;
  report["servesim"] = {{"version", std::string(servesim_version())}, {"commit", std::string(servesim_commit())}};
  report["scenario"] = resolved_scenario;
  Json warnings = Json::array();
  for (const auto& w : run.warnings) {
    Json j = Json::object();
    j["file"] = w.file;
    j["line"] = w.line;
    j["column"] = w.column;
    j["path"] = w.path;
    j["message"] = w.message;
    warnings.push_back(j);
  }
  report["warnings"] = warnings;

  Json summary = Json::object();
  Json requests = Json::object();
  requests["arrived"] = s.arrived;
  requests["completed"] = s.completed;
  requests["rejected"] = s.rejected;
  requests["in_flight"] = s.in_flight;
  Json reasons = Json::object();
  for (std::size_t i = 1; i < s.rejected_by_reason.size(); ++i) {
    reasons[std::string(metrics::reject_reason_name(static_cast<metrics::RejectReason>(i)))] = s.rejected_by_reason[i];
  }
  requests["rejected_by_reason"] = reasons;
  if (s.lost > 0) requests["lost"] = s.lost;
  if (s.requeued > 0) requests["requeued"] = s.requeued;
  summary["requests"] = requests;

  Json throughput = Json::object();
  throughput["input_tokens_per_s"] = s.input_tokens_per_s;
  throughput["output_tokens_per_s"] = s.output_tokens_per_s;
  throughput["requests_per_s"] = s.requests_per_s;
  throughput["output_tokens_per_s_per_chip"] = s.output_tokens_per_s_per_chip;
  throughput["steady_from_s"] = s.steady_from_s;
  throughput["steady_to_s"] = s.steady_to_s;
  throughput["steady_input_tokens_per_s"] = s.steady_input_tokens_per_s;
  throughput["steady_output_tokens_per_s"] = s.steady_output_tokens_per_s;
  summary["throughput"] = throughput;
  summary["ttft_ms"] = distribution(s.ttft_ms);
  summary["tpot_ms"] = distribution(s.tpot_ms);
  summary["itl_ms"] = distribution(s.itl_ms);
  summary["e2e_ms"] = distribution(s.e2e_ms);
  // Additive breakdowns: the parts sum to ttft_ms.mean and tpot_ms.mean.
  Json ttft_parts = Json::object();
  for (const auto& [part, ms] : s.ttft_breakdown_ms) ttft_parts[part] = ms;
  summary["ttft_breakdown_ms"] = ttft_parts;
  Json tpot_parts = Json::object();
  for (const auto& [part, ms] : s.tpot_breakdown_ms) tpot_parts[part] = ms;
  summary["tpot_breakdown_ms"] = tpot_parts;
  Json slo = Json::object();
  slo["attainment"] = optional_value(s.slo_attainment);
  slo["goodput_requests_per_s"] = optional_value(s.goodput_requests_per_s);
  summary["slo"] = slo;
  // Per request class (tenant): its own counts, latencies and SLO figures.
  Json classes = Json::array();
  for (const auto& c : s.classes) {
    Json cj = Json::object();
    cj["name"] = c.name;
    cj["priority"] = c.priority;
    Json cr = Json::object();
    cr["arrived"] = c.arrived;
    cr["completed"] = c.completed;
    cr["rejected"] = c.rejected;
    cr["in_flight"] = c.in_flight;
    cj["requests"] = cr;
    cj["requests_per_s"] = c.requests_per_s;
    cj["ttft_ms"] = distribution(c.ttft_ms);
    cj["tpot_ms"] = distribution(c.tpot_ms);
    cj["e2e_ms"] = distribution(c.e2e_ms);
    auto target_ms = [](const std::optional<Duration>& d) {
      return d ? Json(static_cast<double>(d->ps()) / 1e9) : Json(nullptr);
    };
    Json cs = Json::object();
    cs["ttft_ms"] = target_ms(c.slo.ttft);
    cs["tpot_ms"] = target_ms(c.slo.tpot);
    cs["e2e_ms"] = target_ms(c.slo.e2e);
    cs["attainment"] = optional_value(c.slo_attainment);
    cs["goodput_requests_per_s"] = optional_value(c.goodput_requests_per_s);
    cj["slo"] = cs;
    cj["skipped_trace_rows"] = c.skipped_trace_rows;
    classes.push_back(cj);
  }
  summary["classes"] = classes;
  report["summary"] = summary;

  Json pools = Json::array();
  for (std::size_t pi = 0; pi < s.pools.size(); ++pi) {
    const auto& p = s.pools[pi];
    Json pj = Json::object();
    pj["name"] = p.name;
    pj["role"] = p.role;
    pj["instances"] = p.instances;
    pj["chips"] = p.chips;
    if (pi < run.calibration.size()) pj["calibration"] = run.calibration[pi];
    pj["utilization"] = p.utilization;
    Json breakdown = Json::object();
    for (const auto& [component, share] : p.breakdown) breakdown[component] = share;
    pj["breakdown"] = breakdown;
    pj["kv_cache_peak_fraction"] = p.kv_cache_peak_fraction;
    pj["preemptions"] = p.preemptions;
    pj["iterations"] = p.iterations;
    Json plan = Json::object();
    static constexpr const char* kPlanKeys[] = {"tp", "pp", "dp", "ep", "moe_tp", "cp"};
    for (std::size_t i = 0; i < p.plan.size(); ++i) plan[kPlanKeys[i]] = p.plan[i];
    pj["plan"] = plan;
    Json groups = Json::object();
    for (const auto& g : p.groups) {
      Json gj = Json::object();
      gj["ranks"] = g.ranks;
      gj["leaves_domain"] = g.leaves_domain;
      gj["tier"] = g.tier;
      gj["domain_chips"] = g.domain_chips;
      groups[g.group] = gj;
    }
    pj["groups"] = groups;
    if (p.kv_transfer) {
      Json kt = Json::object();
      kt["transfers"] = p.kv_transfer->transfers;
      kt["bytes"] = p.kv_transfer->bytes;
      kt["mean_ms"] = p.kv_transfer->mean_ms;
      kt["exposed_mean_ms"] = p.kv_transfer->exposed_mean_ms;
      kt["overhead_fraction"] = p.kv_transfer->overhead_fraction;
      pj["kv_transfer"] = kt;
    }
    if (p.prefix_cache) {
      const metrics::PrefixCacheCounts& c = p.prefix_cache->counts;
      Json pc = Json::object();
      pc["lookups"] = c.lookups;
      pc["hits"] = c.hits;
      pc["hit_rate"] = p.prefix_cache->hit_rate;
      pc["lookup_tokens"] = c.lookup_tokens;
      pc["hit_tokens"] = c.hit_tokens;
      pc["hit_token_fraction"] = p.prefix_cache->hit_token_fraction;
      pc["inserted_blocks"] = c.inserted_blocks;
      pc["evicted_blocks"] = c.evicted_blocks;
      pc["capacity_blocks"] = c.capacity_blocks;
      pj["prefix_cache"] = pc;
    }
    pools.push_back(pj);
  }
  report["pools"] = pools;

  Json sim = Json::object();
  sim["events"] = run.events;
  char fp[17];
  std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(run.fingerprint));
  sim["fingerprint"] = fp;
  sim["simulated_s"] = s.simulated_s;
  sim["wall_s"] = optional_value(run.wall_s);
  sim["events_per_s"] =
      run.wall_s && *run.wall_s > 0 ? Json(static_cast<double>(run.events) / *run.wall_s) : Json(nullptr);
  sim["peak_rss_mb"] = optional_value(run.peak_rss_mb);
  report["simulation"] = sim;
  return report;
}

Json time_series_json(const metrics::TimeSeries& ts) {
  using TS = metrics::TimeSeries;
  const std::size_t n = ts.buckets();
  // Six significant digits keep the arrays readable; the values are means over a bucket anyway.
  auto round6 = [](double v) {
    if (v == 0 || !std::isfinite(v)) return 0.0;
    const double scale = std::pow(10.0, 5 - std::floor(std::log10(std::abs(v))));
    return std::round(v * scale) / scale;
  };
  auto counts = [&](const std::array<std::int64_t, TS::kMaxBuckets>& a) {
    Json j = Json::array();
    for (std::size_t i = 0; i < n; ++i) j.push_back(a[i]);
    return j;
  };
  Json out = Json::object();
  out["bucket_s"] = static_cast<double>(ts.width_ps()) * 1e-12;
  out["buckets"] = n;
  out["end_s"] = ts.end().to_seconds();
  out["gauges"] = "time-weighted mean over each bucket";
  out["arrivals"] = counts(ts.arrivals());
  out["rejections"] = counts(ts.rejections());
  Json pools = Json::array();
  for (const TS::PoolSeries& p : ts.pools()) {
    Json pj = Json::object();
    pj["name"] = p.name;
    pj["completions"] = counts(p.counters[TS::kCompletions]);
    pj["output_tokens"] = counts(p.counters[TS::kOutputTokens]);
    Json waiting = Json::array(), running = Json::array(), kv = Json::array();
    for (std::size_t i = 0; i < n; ++i) {
      waiting.push_back(round6(ts.gauge_mean(p, TS::kWaiting, i)));
      running.push_back(round6(ts.gauge_mean(p, TS::kRunning, i)));
      kv.push_back(p.kv_blocks > 0 ? round6(ts.gauge_mean(p, TS::kKvBlocks, i) / static_cast<double>(p.kv_blocks))
                                   : 0.0);
    }
    pj["waiting"] = waiting;
    pj["running"] = running;
    pj["kv_occupancy"] = kv;
    pools.push_back(pj);
  }
  out["pools"] = pools;
  Json links = Json::array();
  for (const TS::LinkSeries& l : ts.links()) {
    Json lj = Json::object();
    lj["name"] = l.name;
    Json u = Json::array();
    for (std::size_t i = 0; i < n; ++i) {
      const double len_s = static_cast<double>(ts.bucket_length_ps(i)) * 1e-12;
      u.push_back(len_s > 0 ? round6(l.bytes[i] / (l.capacity_bytes_per_s * len_s)) : 0.0);
    }
    lj["utilization"] = u;
    links.push_back(lj);
  }
  out["links"] = links;
  return out;
}

std::string summary_table(const metrics::Summary& s, const metrics::SloTargets& slo, const RunInfo& run) {
  std::string out;
  out += "servesim: " + run.name + "\n";
  out += "  requests    arrived " + thousands(static_cast<double>(s.arrived)) + ", completed " +
         thousands(static_cast<double>(s.completed)) + ", rejected " + thousands(static_cast<double>(s.rejected)) +
         ", in flight " + thousands(static_cast<double>(s.in_flight)) + "\n";
  // Every rejection reason with its count and the key that admits more (the JSON has the counts
  // in summary.requests.rejected_by_reason).
  for (std::size_t i = 1; i < s.rejected_by_reason.size(); ++i) {
    const std::int64_t n = s.rejected_by_reason[i];
    if (n == 0) continue;
    const auto reason = static_cast<metrics::RejectReason>(i);
    const char* why = "";
    switch (reason) {
      case metrics::RejectReason::kExceedsMaxModelLen:
        why =
            "prompt + output longer than the pool's context: raise deployment.pools[N].max_model_len (up to "
            "the model's max_context) or cap the lengths (workload lengths.max_total_tokens)";
        break;
      case metrics::RejectReason::kQueueFull:
        why =
            "an instance's waiting queue was full: raise deployment.pools[N].scheduler.max_queue (0 = unbounded) "
            "or add instances";
        break;
      case metrics::RejectReason::kTtftBudget:
        why = "still waiting for prefill after deployment.admission.ttft_budget: raise it or add capacity";
        break;
      case metrics::RejectReason::kNoCapacity:
        why =
            "no instance of a stage was up, or its KV cache could never hold the request: add instances or "
            "KV memory (deployment.pools[N].kv_cache)";
        break;
      case metrics::RejectReason::kLostToFailure:
        why = "its instance failed with deployment.failures.policy lose: use requeue";
        break;
      default: break;
    }
    out += "  rejected    " + thousands(static_cast<double>(n)) + " " +
           std::string(metrics::reject_reason_name(reason)) + ": " + why + "\n";
  }
  out += "  throughput  " + fmt("%.2f", s.requests_per_s) + " req/s, input " + thousands(s.input_tokens_per_s) +
         " tok/s, output " + thousands(s.output_tokens_per_s) + " tok/s (" +
         fmt("%.1f", s.output_tokens_per_s_per_chip) + " tok/s per chip)\n";
  out += "  latency ms        mean        p50        p90        p99\n";
  auto row = [&](const char* name, const metrics::Distribution& d) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "    %-6s %11.2f %10.2f %10.2f %10.2f\n", name, d.mean, d.p50, d.p90, d.p99);
    out += buf;
  };
  row("TTFT", s.ttft_ms);
  row("TPOT", s.tpot_ms);
  row("ITL", s.itl_ms);
  row("E2E", s.e2e_ms);
  if (!s.ttft_breakdown_ms.empty()) {
    out += "  TTFT parts ";
    for (const auto& [part, ms] : s.ttft_breakdown_ms) {
      if (ms >= 0.005) out += " " + part + " " + fmt("%.2f", ms);
    }
    out += " (ms, mean)\n";
  }
  if (s.lost > 0 || s.requeued > 0) {
    out += "  failures    lost " + thousands(static_cast<double>(s.lost)) + ", re-queued " +
           thousands(static_cast<double>(s.requeued)) + "\n";
  }
  if (s.slo_attainment) {
    std::string targets;
    auto add = [&](const char* name, const std::optional<Duration>& d) {
      if (!d) return;
      targets += (targets.empty() ? "" : ", ") + std::string(name) + " <= " + fmt("%g", d->to_ms()) + " ms";
    };
    add("TTFT", slo.ttft);
    add("TPOT", slo.tpot);
    add("E2E", slo.e2e);
    out += "  SLO         " + targets + ": attainment " + fmt("%.1f", 100.0 * *s.slo_attainment) + "%, goodput " +
           fmt("%.2f", *s.goodput_requests_per_s) + " req/s\n";
  }
  for (const std::string& c : run.chips) out += "  chip        " + c + "\n";
  for (std::size_t i = 0; i < run.calibration.size() && i < s.pools.size(); ++i) {
    out += "  calibration " + s.pools[i].name + ": " + run.calibration[i] + "\n";
  }
  if (s.classes.size() > 1) {
    out += "  class          priority  completed   rejected  TTFT p99 ms  TPOT p99 ms     SLO\n";
    for (const auto& c : s.classes) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "    %-12s %8d %10s %10s %12.2f %12.2f %7s\n", c.name.c_str(), c.priority,
                    thousands(static_cast<double>(c.completed)).c_str(),
                    thousands(static_cast<double>(c.rejected)).c_str(), c.ttft_ms.p99, c.tpot_ms.p99,
                    c.slo_attainment ? (fmt("%.1f", 100.0 * *c.slo_attainment) + "%").c_str() : "-");
      out += buf;
    }
  }
  for (const auto& c : s.classes) {
    if (c.skipped_trace_rows > 0) {
      out += "  trace       class " + c.name + ": skipped " + thousands(static_cast<double>(c.skipped_trace_rows)) +
             " bad rows (skip_bad_rows)\n";
    }
  }
  for (const auto& p : s.pools) {
    out += "  pool " + p.name + " (" + p.role + "): " + std::to_string(p.instances) + " instances, " +
           std::to_string(p.chips) + " chips, utilization " + fmt("%.1f", 100.0 * p.utilization) + "%, KV peak " +
           fmt("%.1f", 100.0 * p.kv_cache_peak_fraction) + "%, preemptions " +
           thousands(static_cast<double>(p.preemptions)) + "\n    time:";
    for (const auto& [component, share] : p.breakdown) {
      if (share >= 0.0005) out += " " + component + " " + fmt("%.1f", 100.0 * share) + "%";
    }
    out += "\n";
    if (p.kv_transfer) {
      out += "    KV transfer: " + thousands(static_cast<double>(p.kv_transfer->transfers)) + " transfers, " +
             fmt("%.1f", p.kv_transfer->bytes / 1e9) + " GB, mean " + fmt("%.2f", p.kv_transfer->mean_ms) +
             " ms, exposed " + fmt("%.2f", p.kv_transfer->exposed_mean_ms) + " ms (" +
             fmt("%.1f", 100.0 * p.kv_transfer->overhead_fraction) + "% of their TTFT)\n";
    }
    if (p.prefix_cache) {
      const metrics::PrefixCacheCounts& c = p.prefix_cache->counts;
      out += "    prefix cache: " + thousands(static_cast<double>(c.hits)) + " hits of " +
             thousands(static_cast<double>(c.lookups)) + " lookups (" + fmt("%.1f", 100.0 * p.prefix_cache->hit_rate) +
             "%), " + thousands(static_cast<double>(c.hit_tokens)) + " prompt tokens not prefilled (" +
             fmt("%.1f", 100.0 * p.prefix_cache->hit_token_fraction) + "%), " +
             thousands(static_cast<double>(c.evicted_blocks)) + " blocks evicted\n";
    }
  }
  out += "  simulation  " + thousands(static_cast<double>(run.events)) + " events, " + fmt("%.1f", s.simulated_s) +
         " s simulated";
  if (run.wall_s) {
    out += " in " + fmt("%.3f", *run.wall_s) + " s wall (" +
           fmt("%.2f", static_cast<double>(run.events) / *run.wall_s / 1e6) + " M events/s)";
  }
  if (run.peak_rss_mb) out += ", peak RSS " + fmt("%.0f", *run.peak_rss_mb) + " MB";
  out += "\n";
  out += "  build       " + version_line() + "\n";
  return out;
}

RequestsCsv::RequestsCsv(std::function<void(std::string_view)> write) : write_(std::move(write)) {
  // Then where its time went: the parts of its TTFT (metrics::TtftPart) and its decode time
  // (first token to completion), ms, empty where it has no first token / no completion.
  buffer_ =
      "id,arrival_s,first_token_s,completion_s,prompt_tokens,output_tokens,status,"
      "reject_reason,preemptions,instance,class";
  for (std::size_t k = 0; k < metrics::kTtftParts; ++k) {
    buffer_ += ',';
    buffer_ += metrics::ttft_part_name(static_cast<metrics::TtftPart>(k));
    buffer_ += "_ms";
  }
  buffer_ += ",decode_ms\n";
}

void RequestsCsv::finish() {
  if (!buffer_.empty()) write_(buffer_);
  buffer_.clear();
}

void RequestsCsv::request(std::uint32_t id, const metrics::RequestRecord& r,
                          const std::vector<metrics::ClassInfo>& classes) {
  std::string& row_ = buffer_;
  auto t = [&](SimTime v) {
    if (v != SimTime::never()) row_ += fmt("%.9f", v.to_seconds());
    row_ += ',';
  };
  const char* status = r.status == metrics::RequestStatus::kCompleted  ? "completed"
                       : r.status == metrics::RequestStatus::kRejected ? "rejected"
                                                                       : "in_flight";
  row_ += std::to_string(id);
  row_ += ',';
  t(r.arrival);
  t(r.first_token);
  t(r.completion);
  row_ += std::to_string(r.prompt_tokens) + ',' + std::to_string(r.output_tokens) + ',' + status + ',';
  if (r.status == metrics::RequestStatus::kRejected) row_ += metrics::reject_reason_name(r.reject_reason);
  row_ += ',' + std::to_string(r.preemptions) + ',' + std::to_string(r.instance) + ',';
  row_ += r.class_id < classes.size() ? std::string_view(classes[r.class_id].name) : std::string_view("default");
  const bool first = r.first_token != SimTime::never();
  for (const float ms : r.ttft_parts_ms) {
    row_ += ',';
    if (first) row_ += fmt("%.6f", ms);
  }
  row_ += ',';
  if (first && r.status == metrics::RequestStatus::kCompleted)
    row_ += fmt("%.6f", (r.completion - r.first_token).to_ms());
  row_ += '\n';
  ++rows_;
  if (buffer_.size() >= (std::size_t{1} << 20)) {
    write_(buffer_);
    buffer_.clear();
  }
}

void write_requests_csv(std::ostream& out, const metrics::RunMetrics& m) {
  RequestsCsv csv([&](std::string_view text) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
  const std::vector<metrics::RequestRecord>& records = m.requests();
  for (std::size_t i = 0; i < records.size(); ++i) csv.request(static_cast<std::uint32_t>(i), records[i], m.classes());
  csv.finish();
}

}  // namespace servesim::reports
