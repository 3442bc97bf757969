#include "sim/metrics/settle_watch.h"

#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "core/units.h"

namespace servesim::metrics {
namespace {

std::string count(double n) { return format_count(static_cast<std::int64_t>(n)); }

}  // namespace

void SettleWatch::add_class(ClassInfo info) {
  slo_.push_back(info.slo);
  inner_.add_class(std::move(info));
}

void SettleWatch::expect_requests(std::int64_t n) {
  expected_ = n;
  if (n > 0) seen_.reserve(static_cast<std::size_t>(n));
  inner_.expect_requests(n);
}

void SettleWatch::request_arrived(RequestId id, SimTime t, std::int64_t prompt_tokens, std::int64_t output_tokens,
                                  std::uint16_t class_id) {
  SERVESIM_CHECK(id.value >= seen_.size());
  while (seen_.size() < id.value) seen_.release(seen_.push_back(Seen{}));  // ids it never saw
  seen_.push_back(Seen{t, SimTime::never(), output_tokens, class_id});
  inner_.request_arrived(id, t, prompt_tokens, output_tokens, class_id);
}

void SettleWatch::request_rejected(RequestId id, SimTime t, RejectReason reason) {
  inner_.request_rejected(id, t, reason);
  if (slo_of(seen_[id.value].class_id).any()) missed_slo();
  seen_.release(id.value);
}

void SettleWatch::first_token(RequestId id, SimTime t) {
  inner_.first_token(id, t);
  Seen& s = seen_[id.value];
  s.first = t;
  add(SettleRule::Metric::kTtft, (t - s.arrival).to_ms());
}

void SettleWatch::request_completed(RequestId id, SimTime t) {
  inner_.request_completed(id, t);
  const Seen& s = seen_[id.value];
  const CompletedLatencies l = completed_latencies(s.arrival, s.first, t, static_cast<std::uint32_t>(s.output_tokens));
  add(SettleRule::Metric::kE2e, l.e2e.to_ms());
  if (l.tpot_s) add(SettleRule::Metric::kTpot, *l.tpot_s * 1e3);
  if (const SloTargets& slo = slo_of(s.class_id); slo.any() && !l.meets(slo)) missed_slo();
  seen_.release(id.value);
}

void SettleWatch::add(SettleRule::Metric metric, double ms) {
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const SettleRule& r = rules_[i];
    if (r.metric != metric) continue;
    if (r.quantile < 0) {
      broken_[i] += ms;
    } else if (ms > r.limit || (r.strict && ms == r.limit)) {
      broken_[i] += 1;
    }
  }
}

void SettleWatch::missed_slo() {
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].metric == SettleRule::Metric::kAttainment) broken_[i] += 1;
  }
}

std::optional<SettleWatch::Settled> SettleWatch::settled() const {
  if (expected_ <= 0) return std::nullopt;
  const auto n = static_cast<double>(expected_);
  char buf[320];
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const SettleRule& r = rules_[i];
    const double b = broken_[i];
    if (r.metric == SettleRule::Metric::kAttainment) {
      // Attainment over the requests judged is at most (n - missed) / n; it breaks `>= a` below a.
      const double best = (n - b) / n;
      if (best < r.limit || (r.strict && best == r.limit)) {
        std::snprintf(buf, sizeof buf,
                      "%s cannot hold: %s of at most %s requests already missed their SLO targets (at best "
                      "%.4g%%)",
                      r.text.c_str(), count(b).c_str(), count(n).c_str(), best * 100);
        return Settled{i, buf};
      }
    } else if (r.quantile < 0) {
      // A small margin keeps the floating sum's rounding from settling a mean that ends at the limit.
      const double floor_ms = r.limit * n * (1 + 1e-9);
      if (b > floor_ms || (r.strict && b == floor_ms)) {
        std::snprintf(buf, sizeof buf,
                      "%s cannot hold: the values recorded already sum to %.6g ms, more than %.6g ms over at most "
                      "%s requests",
                      r.text.c_str(), b, r.limit * n, count(n).c_str());
        return Settled{i, buf};
      }
    } else {
      const double need = n - std::floor(r.quantile * (n - 1));
      if (b >= need) {
        std::snprintf(buf, sizeof buf,
                      "%s cannot hold: %s of at most %s requests already %s %.6g ms (the quantile is past the "
                      "limit from %s on)",
                      r.text.c_str(), count(b).c_str(), count(n).c_str(), r.strict ? "at or above" : "above", r.limit,
                      count(need).c_str());
        return Settled{i, buf};
      }
    }
  }
  return std::nullopt;
}

}  // namespace servesim::metrics
