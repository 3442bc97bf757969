#include "sim/metrics/summary.h"

#include "sim/core/check.h"

namespace servesim::metrics {

Summary summarize(const RunMetrics& m, SimTime end, const SloTargets& slo) {
  Summary s;
  s.simulated_s = end.to_seconds();
  const double span = s.simulated_s > 0 ? s.simulated_s : 1.0;

  std::vector<double> ttft, tpot, e2e;
  std::int64_t met = 0;
  for (const RequestRecord& r : m.requests()) {
    ++s.arrived;
    if (r.first_token != SimTime::never()) ttft.push_back((r.first_token - r.arrival).to_ms());
    switch (r.status) {
      case RequestStatus::kInFlight:
        ++s.in_flight;
        continue;
      case RequestStatus::kRejected:
        ++s.rejected;
        ++s.rejected_by_reason[static_cast<std::size_t>(r.reject_reason)];
        continue;
      case RequestStatus::kCompleted:
        ++s.completed;
        break;
    }
    const Duration e2e_d = r.completion - r.arrival;
    const Duration ttft_d = r.first_token - r.arrival;
    e2e.push_back(e2e_d.to_ms());
    std::optional<double> tpot_s;
    if (r.output_tokens > 1) {
      tpot_s = (r.completion - r.first_token).to_seconds() / static_cast<double>(r.output_tokens - 1);
      tpot.push_back(*tpot_s * 1e3);
    }
    bool ok = true;
    if (slo.ttft && ttft_d > *slo.ttft) ok = false;
    if (slo.e2e && e2e_d > *slo.e2e) ok = false;
    if (slo.tpot && tpot_s && *tpot_s > slo.tpot->to_seconds()) ok = false;
    if (ok) ++met;
  }
  SERVESIM_CHECK(s.arrived == s.completed + s.rejected + s.in_flight);

  s.ttft_ms = summarize(ttft);
  s.tpot_ms = summarize(tpot);
  s.e2e_ms = summarize(e2e);
  s.itl_ms = m.inter_token_gaps().summary();  // in seconds
  for (double* v : {&s.itl_ms.mean, &s.itl_ms.p50, &s.itl_ms.p90, &s.itl_ms.p99}) *v *= 1e3;

  s.input_tokens_per_s = static_cast<double>(m.input_tokens()) / span;
  s.output_tokens_per_s = static_cast<double>(m.output_tokens()) / span;
  s.requests_per_s = static_cast<double>(s.completed) / span;
  if (slo.any()) {
    const std::int64_t finished = s.completed + s.rejected;
    s.slo_attainment = finished > 0 ? static_cast<double>(met) / static_cast<double>(finished) : 0.0;
    s.goodput_requests_per_s = static_cast<double>(met) / span;
  }

  int chips = 0;
  for (const auto& p : m.pools()) {
    PoolSummary ps;
    ps.name = p.info.name;
    ps.role = p.info.role;
    ps.instances = p.info.instances;
    ps.chips = p.info.chips;
    chips += p.info.chips;
    const double capacity_ps =
        static_cast<double>(p.info.instances) * p.info.stages * static_cast<double>(end.ps());
    std::int64_t busy = 0;
    for (std::size_t i = 0; i < p.component_ps.size(); ++i) {
      busy += p.component_ps[i];
      const double share = capacity_ps > 0 ? static_cast<double>(p.component_ps[i]) / capacity_ps : 0;
      ps.breakdown.emplace_back(p.info.components[i], share);
    }
    ps.utilization = capacity_ps > 0 ? static_cast<double>(busy) / capacity_ps : 0;
    ps.breakdown.emplace_back("idle", 1.0 - ps.utilization);
    ps.kv_cache_peak_fraction = p.kv_peak_fraction;
    ps.preemptions = p.preemptions;
    ps.iterations = p.iterations;
    s.pools.push_back(std::move(ps));
  }
  s.output_tokens_per_s_per_chip = chips > 0 ? s.output_tokens_per_s / chips : 0;
  return s;
}

}  // namespace servesim::metrics
