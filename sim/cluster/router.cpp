#include "sim/cluster/router.h"

namespace servesim::cluster {

std::uint32_t RoundRobinRouter::pick(const RouteQuery& query) {
  const LoadLedger& loads = query.loads;
  if (loads.all_down()) return kNoInstance;
  std::uint32_t out = next_;
  while (!loads.up(out)) out = out + 1 == loads.size() ? 0 : out + 1;
  next_ = out + 1 == loads.size() ? 0 : out + 1;
  return out;
}

std::uint32_t LeastLoadedRouter::pick(const RouteQuery& query) {
  const std::uint32_t i = query.loads.least_from(cursor_);
  if (i == kNoInstance) return kNoInstance;
  cursor_ = i + 1 == query.loads.size() ? 0 : i + 1;
  return i;
}

std::uint32_t KvAwareRouter::pick(const RouteQuery& query) {
  if (query.cached.empty()) return LeastLoadedRouter::pick(query);
  const LoadLedger& loads = query.loads;
  const std::size_t n = loads.size();
  std::uint32_t best = kNoInstance;
  std::int64_t best_score = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = cursor_ + k < n ? cursor_ + k : cursor_ + k - n;
    const auto u = static_cast<std::uint32_t>(i);
    if (!loads.up(u)) continue;
    const std::int64_t score = loads.load(u) + query.work - query.cached[i];
    if (best == kNoInstance || score < best_score) {
      best = u;
      best_score = score;
    }
  }
  if (best != kNoInstance) cursor_ = best + 1 == n ? 0 : best + 1;
  return best;
}

std::uint32_t PowerOfTwoRouter::pick(const RouteQuery& query) {
  const LoadLedger& loads = query.loads;
  const std::uint32_t n = loads.size();
  if (loads.all_down()) return kNoInstance;
  auto draw = [&] {
    // A few draws find an up instance unless most are down; then the first up one after a draw.
    for (int k = 0; k < 8; ++k) {
      const auto i = static_cast<std::uint32_t>(rng_.uniform_int(0, n - 1));
      if (loads.up(i)) return i;
    }
    std::uint32_t i = static_cast<std::uint32_t>(rng_.uniform_int(0, n - 1));
    while (!loads.up(i)) i = i + 1 == n ? 0 : i + 1;
    return i;
  };
  const std::uint32_t a = draw();
  if (n == 1) return a;
  const std::uint32_t b = draw();
  return loads.load(b) < loads.load(a) ? b : a;
}

std::unique_ptr<Router> make_router(const RouterConfig& config, std::uint64_t seed, std::string_view stream) {
  switch (config.policy) {
    case RouterPolicy::kRoundRobin: return std::make_unique<RoundRobinRouter>();
    case RouterPolicy::kLeastLoaded: return std::make_unique<LeastLoadedRouter>();
    case RouterPolicy::kPowerOfTwo: return std::make_unique<PowerOfTwoRouter>(seed, stream);
    case RouterPolicy::kFreeKv: return std::make_unique<FreeKvRouter>();
    case RouterPolicy::kKvAware: return std::make_unique<KvAwareRouter>();
  }
  return nullptr;
}

LoadLedger make_ledger(const RouterConfig& config, std::uint32_t instances) {
  const LoadUnit unit = config.policy == RouterPolicy::kFreeKv          ? LoadUnit::kFreeBlocks
                        : config.load == LoadMetric::kOutstandingTokens ? LoadUnit::kTokens
                                                                        : LoadUnit::kRequests;
  const bool ordered = config.policy == RouterPolicy::kLeastLoaded || config.policy == RouterPolicy::kFreeKv ||
                       config.policy == RouterPolicy::kKvAware;
  return LoadLedger(instances, unit, ordered);
}

}  // namespace servesim::cluster
