// The self-contained HTML report: one file with inline CSS and SVG charts (reports/svg.h), no
// scripts, fonts or anything else fetched from the network, so it opens from disk anywhere.
//
// Sections: the headline figures (requests, throughput, latency percentiles, SLO); latency CDFs
// (TTFT, TPOT, E2E; log x axis when the values span more than two decades); throughput and queue
// lengths over time; KV-cache occupancy over time; per-pool utilization and time breakdown as
// stacked bars; the requests with the longest TTFT as stacked bars of their TTFT parts and decode
// time; the busiest links' utilization over time, or an explicit "no link data in this
// run"; and the resolved scenario. Figures come from the JSON report (so the page and report.json
// always agree) plus the per-request latencies for the CDFs.
// Deterministic: equal inputs give byte-identical HTML (no timestamps; host figures only when the
// report has them).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/metrics/recorder.h"

namespace servesim::reports {

// Empirical CDF points (value, fraction of requests at or below it), at most ~500 per metric,
// and the requests with the longest TTFT with where their time went (metrics::TtftPart parts,
// then "decode": first token to completion), ms.
struct RequestTime {
  std::string label;       // "#17 (1,024 + 256 tokens)"
  std::vector<double> ms;  // kTtftParts parts, then decode
};
struct LatencyCdfs {
  std::vector<std::pair<double, double>> ttft_ms, tpot_ms, e2e_ms;
  std::vector<RequestTime> slowest_ttft;  // at most kSlowestRequests, longest TTFT first
};
inline constexpr std::size_t kSlowestRequests = 20;
LatencyCdfs latency_cdfs(const metrics::RunMetrics& metrics);

// `report` is the JSON report; its `time_series` key feeds the charts over time (without it, those
// sections say that the run recorded no time series).
std::string html_report(const nlohmann::ordered_json& report, const LatencyCdfs& cdfs);

}  // namespace servesim::reports
