#include "sim/cluster/router.h"

namespace servesim::cluster {

RoundRobinRouter::RoundRobinRouter(std::uint32_t instances)
    : loads_(instances, 0), down_(instances) {}

std::uint32_t RoundRobinRouter::pick() {
  if (down_.all()) return kNoInstance;
  std::uint32_t out = next_;
  while (down_.down[out]) out = out + 1 == loads_.size() ? 0 : out + 1;
  next_ = out + 1 == loads_.size() ? 0 : out + 1;
  return out;
}
void RoundRobinRouter::add_load(std::uint32_t instance, std::int64_t delta) {
  loads_[instance] += delta;
}
std::int64_t RoundRobinRouter::load(std::uint32_t instance) const { return loads_[instance]; }
void RoundRobinRouter::set_up(std::uint32_t instance, bool up) { down_.set_up(instance, up); }

LeastLoadedRouter::LeastLoadedRouter(std::uint32_t instances)
    : tree_(instances), down_(instances, 0) {}

std::uint32_t LeastLoadedRouter::pick() {
  const std::size_t i = tree_.argmin_from(cursor_);
  if (down_[i]) return kNoInstance;  // the least loaded is down: all are
  cursor_ = i + 1 == tree_.size() ? 0 : i + 1;
  return static_cast<std::uint32_t>(i);
}
void LeastLoadedRouter::add_load(std::uint32_t instance, std::int64_t delta) {
  if (delta != 0) tree_.set(instance, tree_.value(instance) + delta);
}
std::int64_t LeastLoadedRouter::load(std::uint32_t instance) const {
  return tree_.value(instance) - (down_[instance] ? kDown : 0);
}
void LeastLoadedRouter::set_up(std::uint32_t instance, bool up) {
  if (down_[instance] == !up) return;
  down_[instance] = !up;
  tree_.set(instance, tree_.value(instance) + (up ? -kDown : kDown));
}

PowerOfTwoRouter::PowerOfTwoRouter(std::uint32_t instances, std::uint64_t seed,
                                   std::string_view stream)
    : loads_(instances, 0), down_(instances), rng_(seed, stream) {}

std::uint32_t PowerOfTwoRouter::pick() {
  const auto n = static_cast<std::uint32_t>(loads_.size());
  if (down_.all()) return kNoInstance;
  auto draw = [&] {
    // A few draws find an up instance unless most are down; then the first up one after a draw.
    for (int k = 0; k < 8; ++k) {
      const auto i = static_cast<std::uint32_t>(rng_.uniform_int(0, n - 1));
      if (!down_.down[i]) return i;
    }
    std::uint32_t i = static_cast<std::uint32_t>(rng_.uniform_int(0, n - 1));
    while (down_.down[i]) i = i + 1 == n ? 0 : i + 1;
    return i;
  };
  const std::uint32_t a = draw();
  if (n == 1) return a;
  const std::uint32_t b = draw();
  return loads_[b] < loads_[a] ? b : a;
}
void PowerOfTwoRouter::add_load(std::uint32_t instance, std::int64_t delta) {
  loads_[instance] += delta;
}
std::int64_t PowerOfTwoRouter::load(std::uint32_t instance) const { return loads_[instance]; }
void PowerOfTwoRouter::set_up(std::uint32_t instance, bool up) { down_.set_up(instance, up); }

std::unique_ptr<Router> make_router(const RouterConfig& config, std::uint32_t instances,
                                    std::uint64_t seed, std::string_view stream) {
  switch (config.policy) {
    case RouterPolicy::kRoundRobin: return std::make_unique<RoundRobinRouter>(instances);
    case RouterPolicy::kLeastLoaded: return std::make_unique<LeastLoadedRouter>(instances);
    case RouterPolicy::kPowerOfTwo:
      return std::make_unique<PowerOfTwoRouter>(instances, seed, stream);
    case RouterPolicy::kFreeKv: return std::make_unique<FreeKvRouter>(instances);
    case RouterPolicy::kKvAware: return std::make_unique<KvAwareRouter>(instances);
  }
  return nullptr;
}

}  // namespace servesim::cluster
