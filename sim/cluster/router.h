// Routers: which instance of a pool serves an arriving request.
//
// RoundRobinRouter cycles through the instances. LeastLoadedRouter picks the instance with the
// least outstanding work: tokens (prompt tokens still to prefill plus output tokens still to
// generate, which the simulator knows exactly: an upper bound on what a real router that estimates
// output lengths can do) or requests (unfinished requests). Ties go to the first tied instance
// after the previous pick, so equal instances take turns instead of the lowest id taking all.
// Loads are kept in a MinTree: O(log n) per update, O(log n) per pick.
#pragma once

#include <cstdint>
#include <memory>

#include "sim/cluster/config.h"
#include "sim/core/min_tree.h"

namespace servesim::cluster {

class Router {
 public:
  virtual ~Router() = default;
  // The index (within the pool) of the instance for the next request.
  virtual std::uint32_t pick() = 0;
  // The load of instance i changed by delta (in the unit of the router's load metric).
  virtual void add_load(std::uint32_t instance, std::int64_t delta) = 0;
  virtual std::int64_t load(std::uint32_t instance) const = 0;
};

class RoundRobinRouter final : public Router {
 public:
  explicit RoundRobinRouter(std::uint32_t instances);
  std::uint32_t pick() override;
  void add_load(std::uint32_t instance, std::int64_t delta) override;
  std::int64_t load(std::uint32_t instance) const override;

 private:
  std::uint32_t next_ = 0;
  std::vector<std::int64_t> loads_;
};

class LeastLoadedRouter final : public Router {
 public:
  explicit LeastLoadedRouter(std::uint32_t instances);
  std::uint32_t pick() override;
  void add_load(std::uint32_t instance, std::int64_t delta) override;
  std::int64_t load(std::uint32_t instance) const override;

 private:
  MinTree tree_;
  std::size_t cursor_ = 0;
};

std::unique_ptr<Router> make_router(const RouterConfig& config, std::uint32_t instances);

}  // namespace servesim::cluster
