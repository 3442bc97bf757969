#include "sim/metrics/summary.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "core/check.h"

namespace servesim::metrics {
namespace {

// The latencies of one set of requests, and how many met their targets.
struct Samples {
  std::vector<double> ttft, tpot, e2e;
  std::int64_t arrived = 0, completed = 0, rejected = 0, in_flight = 0, met = 0;
};

// Adds one record to `s`, counting it in `met` when it completed within every target of `slo`.
void account(const RequestTimes& r, const SloTargets& slo, Samples& s) {
  ++s.arrived;
  if (r.first_token != SimTime::never()) s.ttft.push_back((r.first_token - r.arrival).to_ms());
  switch (r.status) {
    case RequestStatus::kInFlight: ++s.in_flight; return;
    case RequestStatus::kRejected: ++s.rejected; return;
    case RequestStatus::kCompleted: ++s.completed; break;
  }
  const CompletedLatencies l = completed_latencies(r.arrival, r.first_token, r.completion, r.output_tokens);
  s.e2e.push_back(l.e2e.to_ms());
  if (l.tpot_s) s.tpot.push_back(*l.tpot_s * 1e3);
  if (l.meets(slo)) ++s.met;
}

// The (first token, request index) pairs of the requests that have a first token, in std::sort's
// order (the pairs are distinct): counted into about n / 4 buckets of equal width by time, placed,
// and each bucket (a handful of pairs) sorted. O(n) for times spread over a span, where std::sort
// of a million pairs took ~0.15 s; pairs of equal time share a bucket, so a skewed run costs
// O(n log n). No copy of the pairs: they are placed straight from the records.
std::vector<std::pair<SimTime, std::uint32_t>> by_first_token(const IdChunks<RequestTimes>& requests) {
  std::vector<std::pair<SimTime, std::uint32_t>> out;
  std::size_t n = 0;
  std::int64_t lo = 0, hi = 0;
  for (std::uint32_t i = 0; i < requests.size(); ++i) {
    const SimTime t = requests[i].first_token;
    if (t == SimTime::never()) continue;
    lo = n == 0 ? t.ps() : std::min(lo, t.ps());
    hi = n == 0 ? t.ps() : std::max(hi, t.ps());
    ++n;
  }
  if (n == 0) return out;
  const auto range = static_cast<std::uint64_t>(hi - lo);
  const auto range_bits = static_cast<int>(std::bit_width(range));
  const auto n_bits = static_cast<int>(std::bit_width(std::max<std::size_t>(n / 4, 1)));
  const int shift = range_bits > n_bits ? range_bits - n_bits : 0;
  const std::size_t buckets = static_cast<std::size_t>(range >> shift) + 1;  // <= n / 2 + 1
  auto bucket = [&](SimTime t) { return static_cast<std::size_t>(static_cast<std::uint64_t>(t.ps() - lo) >> shift); };
  // Per bucket its count, then where it starts, then (after placing) where it ends.
  std::vector<std::uint32_t> end(buckets, 0);
  for (std::uint32_t i = 0; i < requests.size(); ++i) {
    if (requests[i].first_token != SimTime::never()) ++end[bucket(requests[i].first_token)];
  }
  std::uint32_t sum = 0;
  for (std::uint32_t& e : end) sum += std::exchange(e, sum);
  out.resize(n);  // sized exactly: at a million requests, growth would take 50 MB
  for (std::uint32_t i = 0; i < requests.size(); ++i) {
    const SimTime t = requests[i].first_token;
    if (t != SimTime::never()) out[end[bucket(t)]++] = {t, i};
  }
  std::uint32_t begin = 0;
  for (const std::uint32_t e : end) {
    if (e - begin > 1) std::sort(out.begin() + begin, out.begin() + e);
    begin = e;
  }
  return out;
}

// The steady window's rates (summary.h): fills s.steady_*.
void steady_throughput(const RunMetrics& m, Summary& s) {
  const auto& requests = m.times();
  const std::vector<std::pair<SimTime, std::uint32_t>> firsts = by_first_token(requests);
  const std::size_t n = firsts.size();
  if (n < 4) return;
  const SimTime from = firsts[(n + 3) / 4 - 1].first;
  const SimTime to = firsts[(3 * n + 3) / 4 - 1].first;
  if (!(from < to)) return;
  const double width = (to - from).to_seconds();
  double input = 0, output = 0;
  for (const auto& [first, i] : firsts) {
    const RequestTimes& r = requests[i];
    if (from < first && first <= to) {
      input += r.prompt_tokens;
      output += 1;
    }
    if (r.status != RequestStatus::kCompleted || r.output_tokens <= 1 || !(first < r.completion)) continue;
    // The other tokens, evenly over (first, completion]: the share of that span inside the window.
    const SimTime lo = std::max(first, from), hi = std::min(r.completion, to);
    if (!(lo < hi)) continue;
    output += static_cast<double>(r.output_tokens - 1) * (hi - lo).to_seconds() / (r.completion - first).to_seconds();
  }
  s.steady_from_s = from.to_seconds();
  s.steady_to_s = to.to_seconds();
  s.steady_input_tokens_per_s = input / width;
  s.steady_output_tokens_per_s = output / width;
}

}  // namespace

Summary summarize(const RunMetrics& m, SimTime end, const SloTargets& slo) {
  Summary s;
  s.simulated_s = end.to_seconds();
  const double span = s.simulated_s > 0 ? s.simulated_s : 1.0;

  std::vector<ClassInfo> classes = m.classes();
  if (classes.empty()) classes.push_back(ClassInfo{"default", 0, slo, 0});
  const bool several = classes.size() > 1;
  Samples all;
  std::vector<Samples> per_class(several ? classes.size() : 0);
  std::int64_t met = 0, judged = 0;  // over classes with targets
  for (std::uint32_t i = 0; i < m.times().size(); ++i) {
    const RequestTimes& r = m.times()[i];
    const ClassInfo& c = classes[r.class_id];
    const std::int64_t met_before = all.met;
    account(r, c.slo, all);
    if (several) account(r, c.slo, per_class[r.class_id]);
    if (r.status == RequestStatus::kRejected) {
      ++s.rejected_by_reason[static_cast<std::size_t>(r.reject_reason)];
    }
    if (c.slo.any() && r.status != RequestStatus::kInFlight) {
      ++judged;
      met += all.met - met_before;
    }
  }
  s.arrived = all.arrived;
  s.completed = all.completed;
  s.rejected = all.rejected;
  s.in_flight = all.in_flight;
  SERVESIM_CHECK(s.arrived == s.completed + s.rejected + s.in_flight);

  auto fill_class = [&](ClassSummary& cs, Samples& x, const ClassInfo& info) {
    cs.name = info.name;
    cs.priority = info.priority;
    cs.slo = info.slo;
    cs.skipped_trace_rows = info.skipped_trace_rows;
    cs.arrived = x.arrived;
    cs.completed = x.completed;
    cs.rejected = x.rejected;
    cs.in_flight = x.in_flight;
    cs.ttft_ms = summarize(x.ttft);
    cs.tpot_ms = summarize(x.tpot);
    cs.e2e_ms = summarize(x.e2e);
    cs.requests_per_s = static_cast<double>(x.completed) / span;
    if (info.slo.any()) {
      const std::int64_t finished = x.completed + x.rejected;
      cs.slo_attainment = finished > 0 ? static_cast<double>(x.met) / static_cast<double>(finished) : 0.0;
      cs.goodput_requests_per_s = static_cast<double>(x.met) / span;
    }
  };
  s.classes.resize(classes.size());
  if (several) {
    for (std::size_t i = 0; i < classes.size(); ++i) fill_class(s.classes[i], per_class[i], classes[i]);
  } else {
    fill_class(s.classes[0], all, classes[0]);
  }
  // The whole run: one class's figures are its own (computed once, above).
  if (several) {
    s.ttft_ms = summarize(all.ttft);
    s.tpot_ms = summarize(all.tpot);
    s.e2e_ms = summarize(all.e2e);
  } else {
    s.ttft_ms = s.classes[0].ttft_ms;
    s.tpot_ms = s.classes[0].tpot_ms;
    s.e2e_ms = s.classes[0].e2e_ms;
  }
  s.itl_ms = m.inter_token_gaps().summary();  // in seconds
  for (double* v : {&s.itl_ms.mean, &s.itl_ms.p50, &s.itl_ms.p90, &s.itl_ms.p99}) *v *= 1e3;

  // The samples' memory goes before the steady window takes its own.
  all = Samples{};
  per_class = {};
  s.input_tokens_per_s = static_cast<double>(m.input_tokens()) / span;
  s.output_tokens_per_s = static_cast<double>(m.output_tokens()) / span;
  s.requests_per_s = static_cast<double>(s.completed) / span;
  steady_throughput(m, s);
  bool any_targets = false;
  for (const ClassInfo& c : classes) any_targets = any_targets || c.slo.any();
  if (any_targets) {
    s.slo_attainment = judged > 0 ? static_cast<double>(met) / static_cast<double>(judged) : 0.0;
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
    const double capacity_ps = static_cast<double>(p.info.instances) * p.info.stages * static_cast<double>(end.ps());
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
    ps.plan = p.info.plan;
    ps.groups = p.info.groups;
    if (p.transfers > 0) {
      PoolSummary::KvTransfer kt;
      const auto n = static_cast<double>(p.transfers);
      kt.transfers = p.transfers;
      kt.bytes = p.transfer_bytes;
      kt.mean_ms = p.transfer_ps / n / 1e9;
      kt.exposed_mean_ms = p.exposed_ps / n / 1e9;
      kt.overhead_fraction = p.transferred_ttft_ps > 0 ? p.exposed_ps / p.transferred_ttft_ps : 0;
      ps.kv_transfer = kt;
    }
    if (p.prefix_cache) {
      PoolSummary::PrefixCache pc;
      pc.counts = *p.prefix_cache;
      const PrefixCacheCounts& c = pc.counts;
      pc.hit_rate = c.lookups > 0 ? static_cast<double>(c.hits) / static_cast<double>(c.lookups) : 0;
      pc.hit_token_fraction =
          c.lookup_tokens > 0 ? static_cast<double>(c.hit_tokens) / static_cast<double>(c.lookup_tokens) : 0;
      ps.prefix_cache = pc;
    }
    s.pools.push_back(std::move(ps));
  }
  s.lost = s.rejected_by_reason[static_cast<std::size_t>(RejectReason::kLostToFailure)];
  s.requeued = m.requeued();
  // TTFT parts: means over the requests that reported them (every request with a first token).
  if (m.ttft_part_requests() > 0) {
    const auto n = static_cast<double>(m.ttft_part_requests());
    for (std::size_t i = 0; i < kTtftParts; ++i) {
      const double v = m.ttft_part_sums()[i];
      if (v > 0) s.ttft_breakdown_ms.emplace_back(ttft_part_name(static_cast<TtftPart>(i)), v / n / 1e9);
    }
  }
  // TPOT: the pools whose iterations emitted decode tokens, token-weighted together.
  {
    std::vector<std::pair<std::string, double>> parts;
    double total = 0;
    for (const auto& p : m.pools()) {
      for (std::size_t i = 0; i < p.decode_weighted_ps.size(); ++i) {
        const auto v = static_cast<double>(p.decode_weighted_ps[i]);
        if (v <= 0) continue;
        total += v;
        auto it =
            std::find_if(parts.begin(), parts.end(), [&](const auto& x) { return x.first == p.info.components[i]; });
        if (it == parts.end())
          parts.emplace_back(p.info.components[i], v);
        else
          it->second += v;
      }
    }
    if (total > 0 && s.tpot_ms.count > 0) {
      for (auto& [name, v] : parts) s.tpot_breakdown_ms.emplace_back(name, v / total * s.tpot_ms.mean);
    }
  }
  s.output_tokens_per_s_per_chip = chips > 0 ? s.output_tokens_per_s / chips : 0;
  return s;
}

}  // namespace servesim::metrics
