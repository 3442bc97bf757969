// What a run prints and writes: the JSON report (schema servesim.report/1, keys in
// ../DESIGN.md's contract and reports/README.md), the human summary table, and the per-request CSV.
//
// The report is a pure function of the resolved scenario and the run's figures, so the same
// scenario and seed give byte-identical JSON; the host measurements (wall time, events per second,
// peak memory) are the only exception and are null when RunInfo leaves them out.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "sim/metrics/recorder.h"
#include "sim/metrics/summary.h"

namespace servesim::reports {

inline constexpr const char* kReportSchema = "servesim.report/1";

struct RunInfo {
  std::string name;
  std::uint64_t events = 0;
  std::uint64_t fingerprint = 0;  // of the event stream (hex in the report)
  std::optional<double> wall_s;   // host measurements: absent in reproducible mode
  std::optional<double> peak_rss_mb;
  std::vector<Diagnostic> warnings;  // problems the scenario accepted (report key `warnings`)
  // Per pool: "pool: chip (where its figures come from: a calibration profile, or the preset's
  // sources and which efficiencies were transferred)"; the summary table prints them.
  std::vector<std::string> chips;
  // Per pool, in pool order: which of its chip's figures are measured (models::ChipSpec::
  // calibration: "calibrated: ...", "transferred: ...", "borrowed: ...", "uncalibrated: ...");
  // report key pools[].calibration, and a line of the summary table each.
  std::vector<std::string> calibration;
};

nlohmann::ordered_json build_report(const nlohmann::ordered_json& resolved_scenario, const metrics::Summary& summary,
                                    const RunInfo& run);

// The run over time (report key `time_series`, only when asked for): bucket width, the cluster's
// arrivals and rejections per bucket, per pool completions, output tokens and the time-weighted
// mean of waiting requests, running requests and KV-cache occupancy (fraction of the pool's
// blocks), and per link its utilization. Layout in reports/README.md.
nlohmann::ordered_json time_series_json(const metrics::TimeSeries& series);

// A few lines for a terminal.
std::string summary_table(const metrics::Summary& summary, const metrics::SloTargets& slo, const RunInfo& run);

// requests.csv, one row per request (id, times in seconds, token counts, status, reject reason,
// preemptions, instance, class, TTFT parts and decode time): the header when it is built, then a
// row per record as RunMetrics hands them over (in id order, as each request finishes: set it as
// the metrics' RequestSink before the run), so the table is written while the run goes.
// Rows are buffered and handed to `write` about 1 MiB at a time; finish() hands over the rest.
class RequestsCsv final : public metrics::RequestSink {
 public:
  explicit RequestsCsv(std::function<void(std::string_view)> write);
  ~RequestsCsv() override = default;
  void request(std::uint32_t id, const metrics::RequestRecord& r,
               const std::vector<metrics::ClassInfo>& classes) override;
  void finish();
  // Rows handed over so far.
  std::int64_t rows() const { return rows_; }

 private:
  std::function<void(std::string_view)> write_;
  std::string buffer_;
  std::int64_t rows_ = 0;
};

// The same table from metrics that kept every record (RunMetrics::Records::kKeep).
void write_requests_csv(std::ostream& out, const metrics::RunMetrics& metrics);

}  // namespace servesim::reports
