// The figures a run reports, computed once at the end from RunMetrics.
//
// Definitions (all over the whole run, [0, end]):
//   TTFT = first token - arrival; E2E = completion - arrival (completed requests);
//   TPOT = (completion - first token) / (output tokens - 1), for completed requests with more than
//   one output token; ITL = the gap before each token after the first, over every such token.
//   Throughput counts every token emitted, including by requests still in flight at the end;
//   input tokens count each request's prompt once, when it reaches its first token.
//   SLO attainment = requests that met every given target / requests that finished (completed or
//   rejected; a rejection misses every target); goodput = requests that met them / end. Each
//   request is held to its own class's targets; the overall figures cover the classes that have
//   targets (null when none has).
//   Per class: the same counts, TTFT / TPOT / E2E, completed requests per second and SLO figures
//   (ITL and token throughput stay whole-run figures: a decode iteration reports its tokens in
//   aggregate, not per request). Without registered classes, every record is one class "default"
//   held to the targets passed to summarize.
//   Steady throughput: over the middle half of the run's first tokens, the window (from, to]
//   between the first tokens of the requests ranked ceil(n/4) and ceil(3n/4) by first-token time
//   (n = requests with a first token; no window when n < 4 or it has no length). Input = prompt
//   tokens of the requests whose first token falls in it; output = tokens emitted in it, each
//   request's first token at its first-token time and its other output - 1 tokens spread evenly
//   over (first token, completion] (in-flight requests count their first token only); both / the
//   window's length. A saturated or closed-loop run's rates without its fill and drain: what a
//   published "tokens/s per node while prefilling / decoding" is compared with.
//   Pool utilization = stage-busy time / (instances x stages x end); breakdown shares use the same
//   denominator, so the components and "idle" add up to 1.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"
#include "sim/metrics/histogram.h"
#include "sim/metrics/recorder.h"

namespace servesim::metrics {

struct PoolSummary {
  std::string name;
  std::string role;
  int instances = 0;
  int chips = 0;
  double utilization = 0;
  std::vector<std::pair<std::string, double>> breakdown;  // component -> share; ends with idle
  double kv_cache_peak_fraction = 0;
  std::int64_t preemptions = 0;
  std::int64_t iterations = 0;
  std::array<int, 6> plan{1, 1, 1, 1, 1, 1};  // tp, pp, dp, ep, moe_tp, cp
  std::vector<GroupTier> groups;
  struct KvTransfer {
    std::int64_t transfers = 0;
    double bytes = 0, mean_ms = 0, exposed_mean_ms = 0;
    double overhead_fraction = 0;  // exposed transfer time / TTFT, over the transferred requests
  };
  std::optional<KvTransfer> kv_transfer;  // pools that sent or received KV caches
  // Pools with a prefix cache: the counts, hit_rate = hits / lookups and hit_token_fraction =
  // hit tokens / looked-up prompt tokens (the share of prefill work the cache saved).
  struct PrefixCache {
    PrefixCacheCounts counts;
    double hit_rate = 0, hit_token_fraction = 0;
  };
  std::optional<PrefixCache> prefix_cache;
};

struct ClassSummary {
  std::string name;
  int priority = 0;
  SloTargets slo;
  std::int64_t arrived = 0, completed = 0, rejected = 0, in_flight = 0;
  Distribution ttft_ms, tpot_ms, e2e_ms;
  double requests_per_s = 0;  // completed
  std::optional<double> slo_attainment;
  std::optional<double> goodput_requests_per_s;
  std::int64_t skipped_trace_rows = 0;
};

struct Summary {
  std::int64_t arrived = 0, completed = 0, rejected = 0, in_flight = 0;
  std::array<std::int64_t, static_cast<std::size_t>(RejectReason::kCount)> rejected_by_reason{};
  double input_tokens_per_s = 0;
  double output_tokens_per_s = 0;
  double requests_per_s = 0;  // completed requests
  double output_tokens_per_s_per_chip = 0;
  // The steady window (above); all zero without one.
  double steady_from_s = 0, steady_to_s = 0;
  double steady_input_tokens_per_s = 0, steady_output_tokens_per_s = 0;
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
  std::optional<double> slo_attainment;
  std::optional<double> goodput_requests_per_s;
  std::vector<PoolSummary> pools;
  std::vector<ClassSummary> classes;
  std::int64_t lost = 0, requeued = 0;  // failures
  // The mean TTFT by part (TtftPart names, non-zero parts only; they sum to ttft_ms.mean) and the
  // mean TPOT split by the decode iterations' components, token-weighted, plus nothing else: the
  // shares of the decoding pool's decode-token-weighted iteration time, times the mean TPOT (so
  // they sum to tpot_ms.mean).
  std::vector<std::pair<std::string, double>> ttft_breakdown_ms, tpot_breakdown_ms;
  double simulated_s = 0;
};

// `slo` holds the records to account when no class was registered (RunMetrics::classes empty).
Summary summarize(const RunMetrics& m, SimTime end, const SloTargets& slo);

}  // namespace servesim::metrics
