#include "sim/cluster/router.h"

namespace servesim::cluster {

RoundRobinRouter::RoundRobinRouter(std::uint32_t instances) : loads_(instances, 0) {}

std::uint32_t RoundRobinRouter::pick() {
  const std::uint32_t out = next_;
  next_ = next_ + 1 == loads_.size() ? 0 : next_ + 1;
  return out;
}
void RoundRobinRouter::add_load(std::uint32_t instance, std::int64_t delta) {
  loads_[instance] += delta;
}
std::int64_t RoundRobinRouter::load(std::uint32_t instance) const { return loads_[instance]; }

LeastLoadedRouter::LeastLoadedRouter(std::uint32_t instances) : tree_(instances) {}

std::uint32_t LeastLoadedRouter::pick() {
  const std::size_t i = tree_.argmin_from(cursor_);
  cursor_ = i + 1 == tree_.size() ? 0 : i + 1;
  return static_cast<std::uint32_t>(i);
}
void LeastLoadedRouter::add_load(std::uint32_t instance, std::int64_t delta) {
  if (delta != 0) tree_.set(instance, tree_.value(instance) + delta);
}
std::int64_t LeastLoadedRouter::load(std::uint32_t instance) const { return tree_.value(instance); }

std::unique_ptr<Router> make_router(const RouterConfig& config, std::uint32_t instances) {
  switch (config.policy) {
    case RouterPolicy::kRoundRobin: return std::make_unique<RoundRobinRouter>(instances);
    case RouterPolicy::kLeastLoaded: return std::make_unique<LeastLoadedRouter>(instances);
  }
  return nullptr;
}

}  // namespace servesim::cluster
