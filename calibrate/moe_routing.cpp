#include "calibrate/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <tuple>

#include "core/rng.h"

namespace servesim::calibrate {
namespace {

// Inverse-CDF sample of a power law with exponent alpha on [lo, hi] (helper.py sample_power_law).
double sample_power_law(Rng& rng, double alpha, double lo, double hi) {
  const double u = rng.uniform01();
  const double a = 1 - alpha;
  return std::pow((std::pow(hi, a) - std::pow(lo, a)) * u + std::pow(lo, a), 1 / a);
}

// helper.py _round_robin_adjust_per_rank: `remaining` single steps, one per rank in turn, each to
// the rank's valid expert with the least (step +1) or most (step -1) tokens, the first on ties.
void round_robin(std::vector<long long>& c, int ep, long long remaining, long long bound, int step) {
  const std::size_t per = c.size() / static_cast<std::size_t>(ep);
  while (remaining > 0) {
    bool progressed = false;
    for (int r = 0; r < ep && remaining > 0; ++r) {
      std::size_t best = per;
      for (std::size_t i = 0; i < per; ++i) {
        const long long v = c[static_cast<std::size_t>(r) * per + i];
        const bool valid = step > 0 ? v < bound : v > 0;
        if (!valid) continue;
        if (best == per) {
          best = i;
        } else {
          const long long b = c[static_cast<std::size_t>(r) * per + best];
          if (step > 0 ? v < b : v > b) best = i;
        }
      }
      if (best == per) continue;
      c[static_cast<std::size_t>(r) * per + best] += step;
      --remaining;
      progressed = true;
    }
    if (!progressed) break;
  }
}

// One draw of helper.py _generate_power_law_distribution: rank 0's expert counts.
std::vector<int> power_law_counts(Rng& rng, int tokens, int experts, int top_k, int ep, double alpha) {
  const bool many = static_cast<long long>(tokens) * top_k > experts;
  std::vector<double> x(static_cast<std::size_t>(experts));
  double sum = 0;
  for (double& v : x) {
    v = many ? sample_power_law(rng, alpha, 1, tokens * 0.8) : sample_power_law(rng, alpha, 0.01, 2);
    sum += v;
  }
  const long long target = static_cast<long long>(tokens) * top_k;
  std::vector<long long> c(x.size());
  long long overflow = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    c[i] = static_cast<long long>(std::nearbyint(x[i] / sum * static_cast<double>(target)));  // half to even
    if (c[i] > tokens) {
      overflow += c[i] - tokens;
      c[i] = tokens;
    }
  }
  if (overflow > 0) round_robin(c, ep, overflow, tokens, +1);
  const long long delta = target - std::accumulate(c.begin(), c.end(), 0LL);
  if (delta > 0) round_robin(c, ep, delta, tokens, +1);
  if (delta < 0) round_robin(c, ep, -delta, tokens, -1);
  const std::size_t per = static_cast<std::size_t>(experts / ep);
  std::size_t busiest = 0;
  long long most = -1;
  for (std::size_t r = 0; r < static_cast<std::size_t>(ep); ++r) {
    const long long s = std::accumulate(c.begin() + static_cast<std::ptrdiff_t>(r * per),
                                        c.begin() + static_cast<std::ptrdiff_t>((r + 1) * per), 0LL);
    if (s > most) {
      most = s;
      busiest = r;
    }
  }
  std::vector<int> out(per);
  for (std::size_t i = 0; i < per; ++i) out[i] = static_cast<int>(c[busiest * per + i]);
  return out;
}

}  // namespace

std::vector<int> aiconfigurator_balanced_counts(int tokens, int experts, int top_k, int ep) {
  std::vector<int> all(static_cast<std::size_t>(experts), 0);
  const int stride = (experts + top_k - 1) / top_k;
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < top_k; ++j) {
      long long e = 0;
      if (tokens >= stride) {
        e = (static_cast<long long>(t) + static_cast<long long>(j) * stride) % experts;
      } else {
        const double v = std::fmod(static_cast<double>(t) * stride / tokens + static_cast<double>(j) * stride,
                                   static_cast<double>(experts));
        e = static_cast<long long>(v);
      }
      ++all[static_cast<std::size_t>(e)];
    }
  }
  all.resize(static_cast<std::size_t>(experts / ep));
  return all;
}

models::MoeRankLoad rank_load_of(const std::vector<int>& counts, double tokens) {
  models::MoeRankLoad r;
  r.tokens = tokens;
  for (int c : counts) {
    if (c <= 0) continue;
    r.pairs += c;
    r.active += 1;
  }
  if (r.active == 0) return r;
  const double tile = models::moe_tile_rows(r.pairs / r.active);
  for (int c : counts) {
    if (c > 0) r.padded_rows += std::ceil(c / tile) * tile;
  }
  return r;
}

std::optional<models::MoeRankLoad> aiconfigurator_rank_load(int tokens, int experts, int top_k, int ep,
                                                            std::string_view distribution) {
  if (tokens <= 0 || experts <= 0 || top_k <= 0 || top_k > experts || ep <= 0 || experts % ep != 0) {
    return std::nullopt;
  }
  if (distribution.empty() || distribution == "balanced") {
    return rank_load_of(aiconfigurator_balanced_counts(tokens, experts, top_k, ep), tokens);
  }
  constexpr std::string_view kPower = "power_law_";
  if (distribution.rfind(kPower, 0) != 0) return std::nullopt;
  double alpha = 0;
  try {
    alpha = std::stod(std::string(distribution.substr(kPower.size())));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!(alpha > 0) || std::abs(alpha - 1) < 1e-9) return std::nullopt;
  // Memoised: each configuration recurs once per format and plan with the same ep.
  using Key = std::tuple<int, int, int, int, double>;
  static std::mutex mutex;
  static std::map<Key, models::MoeRankLoad> memo;
  const Key key{tokens, experts, top_k, ep, alpha};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }
  Rng rng(1, "calibrate.moe_routing/" + std::to_string(tokens) + "/" + std::to_string(experts) + "/" +
                 std::to_string(top_k) + "/" + std::to_string(ep) + "/" + std::string(distribution));
  models::MoeRankLoad mean;
  for (int d = 0; d < kMoeRoutingDraws; ++d) {
    const models::MoeRankLoad one = rank_load_of(power_law_counts(rng, tokens, experts, top_k, ep, alpha), tokens);
    mean.pairs += one.pairs / kMoeRoutingDraws;
    mean.active += one.active / kMoeRoutingDraws;
    mean.padded_rows += one.padded_rows / kMoeRoutingDraws;
  }
  mean.tokens = tokens;
  std::lock_guard<std::mutex> lock(mutex);
  memo.emplace(key, mean);
  return mean;
}

}  // namespace servesim::calibrate
