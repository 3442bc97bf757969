// Routers: which instance of a pool serves an arriving request.
//
// A router is a policy over the pool's LoadLedger (load_ledger.h: what each instance has
// outstanding, which are up); it keeps only its own state (a cursor, a random stream). Every
// router skips instances that are down; pick returns kNoInstance when all are.
// RoundRobinRouter cycles through the instances. LeastLoadedRouter picks the instance with the
// least outstanding work (the ledger's unit: tokens or requests). Ties go to the first tied
// instance after the previous pick, so equal instances take turns instead of the lowest id taking
// all: O(1) per pick on the ledger's MinTree.
// PowerOfTwoRouter draws two instances from its seeded stream and takes the less loaded one
// (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", 2001): O(1) per pick.
// FreeKvRouter (decode placement) is a LeastLoadedRouter over a ledger of negated free KV blocks:
// the pick has the most room.
// KvAwareRouter (Qin et al., "Mooncake: Trading More Storage for Less Computation", FAST 2025,
// section 5.1, Algorithm 1: for every prefill instance the conductor estimates TTFT as its queueing
// time plus the prefill time of the request's part not in that instance's cache, and picks the
// smallest): here both times are counted in tokens, score = outstanding tokens of the instance +
// prompt tokens to prefill - tokens cached there, the lowest wins (ties rotate). O(instances) per
// request given the cached tokens (which the caller finds, O(prefix segments) per instance); no
// allocation. Without a prefix it is least-loaded. Mooncake's hot-prefix replication and cache
// migration between instances are not modelled.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "core/rng.h"
#include "sim/cluster/config.h"
#include "sim/cluster/load_ledger.h"
#include "sim/cluster/request_state.h"

namespace servesim::cluster {

// What a router is asked: the pool's loads, and what it knows of the request.
struct RouteQuery {
  const LoadLedger& loads;
  std::int64_t work = 0;                   // prompt tokens the request brings to prefill
  std::span<const std::int64_t> cached{};  // per instance, the tokens of it cached there; empty: none
};

class Router {
 public:
  virtual ~Router() = default;
  // The index (within the pool) of the instance for the request, or kNoInstance.
  virtual std::uint32_t pick(const RouteQuery& query) = 0;
};

class RoundRobinRouter final : public Router {
 public:
  std::uint32_t pick(const RouteQuery& query) override;

 private:
  std::uint32_t next_ = 0;
};

class LeastLoadedRouter : public Router {
 public:
  std::uint32_t pick(const RouteQuery& query) override;

 protected:
  std::size_t cursor_ = 0;
};

class FreeKvRouter final : public LeastLoadedRouter {};

class KvAwareRouter final : public LeastLoadedRouter {
 public:
  // The instance minimising load + work - cached(i) when the query names cached tokens; the least
  // loaded otherwise.
  std::uint32_t pick(const RouteQuery& query) override;
};

class PowerOfTwoRouter final : public Router {
 public:
  PowerOfTwoRouter(std::uint64_t seed, std::string_view stream) : rng_(seed, stream) {}
  std::uint32_t pick(const RouteQuery& query) override;

 private:
  Rng rng_;
};

// `seed` and `stream` name the power-of-two router's random stream.
std::unique_ptr<Router> make_router(const RouterConfig& config, std::uint64_t seed = 0,
                                    std::string_view stream = "router");
// The ledger a router of this config reads: its unit, and whether it needs the least-loaded order.
LoadLedger make_ledger(const RouterConfig& config, std::uint32_t instances);

}  // namespace servesim::cluster
