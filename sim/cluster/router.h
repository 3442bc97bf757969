// Routers: which instance of a pool serves an arriving request.
//
// RoundRobinRouter cycles through the instances. LeastLoadedRouter picks the instance with the
// least outstanding work: tokens (prompt tokens still to prefill plus output tokens still to
// generate, which the simulator knows exactly: an upper bound on what a real router that estimates
// output lengths can do) or requests (unfinished requests). Ties go to the first tied instance
// after the previous pick, so equal instances take turns instead of the lowest id taking all.
// Loads are kept in a MinTree: O(log n) per update, O(log n) per pick.
// PowerOfTwoRouter draws two instances from its seeded stream and takes the less loaded one
// (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", 2001): O(1) per pick.
// FreeKvRouter (decode placement) is a LeastLoadedRouter whose load the simulation sets to the
// negated free KV blocks of each instance: the pick has the most room.
// KvAwareRouter (Qin et al., "Mooncake: Trading More Storage for Less Computation", FAST 2025,
// section 5.1, Algorithm 1: for every prefill instance the conductor estimates TTFT as its queueing
// time plus the prefill time of the request's part not in that instance's cache, and picks the
// smallest): here both times are counted in tokens, score = outstanding tokens of the instance +
// prompt tokens to prefill - tokens cached there, the lowest wins (ties rotate). O(instances x
// prefix segments) per request; no allocation. Without a prefix it is least-loaded. Mooncake's
// hot-prefix replication and cache migration between instances are not modelled.
// Every router skips instances marked down (failures); pick returns kNoInstance when all are.
#pragma once

#include <cstdint>
#include <memory>

#include "sim/cluster/config.h"
#include "sim/cluster/request_state.h"
#include "core/min_tree.h"
#include "core/rng.h"

namespace servesim::cluster {


// Which instances are down, and how many.
struct DownSet {
  explicit DownSet(std::uint32_t n) : down(n, 0) {}
  void set_up(std::uint32_t i, bool up) {
    if (down[i] == !up) return;
    down[i] = !up;
    if (up) --count; else ++count;
  }
  bool all() const { return count == down.size(); }
  std::vector<std::uint8_t> down;
  std::uint32_t count = 0;
};

class Router {
 public:
  virtual ~Router() = default;
  // The index (within the pool) of the instance for the next request.
  virtual std::uint32_t pick() = 0;
  // The load of instance i changed by delta (in the unit of the router's load metric).
  virtual void add_load(std::uint32_t instance, std::int64_t delta) = 0;
  virtual std::int64_t load(std::uint32_t instance) const = 0;
  void set_load(std::uint32_t instance, std::int64_t value) { add_load(instance, value - load(instance)); }
  // Failures: a down instance is never picked.
  virtual void set_up(std::uint32_t instance, bool up) = 0;
};

class RoundRobinRouter final : public Router {
 public:
  explicit RoundRobinRouter(std::uint32_t instances);
  std::uint32_t pick() override;
  void add_load(std::uint32_t instance, std::int64_t delta) override;
  std::int64_t load(std::uint32_t instance) const override;
  void set_up(std::uint32_t instance, bool up) override;

 private:
  std::uint32_t next_ = 0;
  std::vector<std::int64_t> loads_;
  DownSet down_;
};

class LeastLoadedRouter : public Router {
 public:
  explicit LeastLoadedRouter(std::uint32_t instances);
  std::uint32_t pick() override;
  void add_load(std::uint32_t instance, std::int64_t delta) override;
  std::int64_t load(std::uint32_t instance) const override;
  void set_up(std::uint32_t instance, bool up) override;

 protected:
  // A down instance's tree value carries this offset (its load stays readable).
  static constexpr std::int64_t kDown = std::int64_t{1} << 60;
  MinTree tree_;
  std::vector<std::uint8_t> down_;
  std::size_t cursor_ = 0;
};

class FreeKvRouter final : public LeastLoadedRouter {
 public:
  using LeastLoadedRouter::LeastLoadedRouter;
};

class KvAwareRouter final : public LeastLoadedRouter {
 public:
  using LeastLoadedRouter::LeastLoadedRouter;
  // The instance minimising load + work - cached(i), where `work` is the request's prompt tokens
  // to prefill and cached(i) the tokens of it instance i holds.
  template <class Cached>
  std::uint32_t pick_for(std::int64_t work, Cached&& cached) {
    const std::size_t n = tree_.size();
    std::uint32_t best = kNoInstance;
    std::int64_t best_score = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = cursor_ + k < n ? cursor_ + k : cursor_ + k - n;
      if (down_[i]) continue;
      const auto u = static_cast<std::uint32_t>(i);
      const std::int64_t score = tree_.value(i) + work - cached(u);
      if (best == kNoInstance || score < best_score) {
        best = u;
        best_score = score;
      }
    }
    if (best != kNoInstance) cursor_ = best + 1 == n ? 0 : best + 1;
    return best;
  }
};

class PowerOfTwoRouter final : public Router {
 public:
  PowerOfTwoRouter(std::uint32_t instances, std::uint64_t seed, std::string_view stream);
  std::uint32_t pick() override;
  void add_load(std::uint32_t instance, std::int64_t delta) override;
  std::int64_t load(std::uint32_t instance) const override;
  void set_up(std::uint32_t instance, bool up) override;

 private:
  std::vector<std::int64_t> loads_;
  DownSet down_;
  Rng rng_;
};

// `seed` and `stream` name the power-of-two router's random stream.
std::unique_ptr<Router> make_router(const RouterConfig& config, std::uint32_t instances,
                                    std::uint64_t seed = 0, std::string_view stream = "router");

}  // namespace servesim::cluster
