// The deployment a run serves with, built once from the config: pools of instances, each
// instance's lanes, and per pool its cost model, batch scheduler, router and load ledger.
//
// Models: a pool is one role (encode, prefill, decode or combined) with one parallel plan; its
// instances share the cost model (per-batch-size memo tables), the scheduler and the router. An
// instance is a model replica on its chips: pp lanes (pipeline virtual engines, lane.h) with
// their KV blocks, the times its pipeline stages are busy until, and whether it is up (failures
// bump its epoch, which makes its batches in flight stale). Encode instances have no lanes: a
// FIFO of requests and the batch in flight. Set-up also registers the pools with the recorder
// (components, plan, the tiers their groups cross) and, with a cluster, costs the collectives on
// the pool's placed groups.
// Ignores: per-instance cost tables for instances of one pool placed differently (the pool is
// costed at its slowest layout, README).
// Invariants: instances are numbered globally, a pool's contiguously from first_instance; a pool's
// load ledger has one entry per instance; an instance is in the dispatch list at most once
// (dispatch_pending).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/ring_queue.h"
#include "core/time.h"
#include "sim/cluster/agenda.h"
#include "sim/cluster/batch_scheduler.h"
#include "sim/cluster/config.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/lane.h"
#include "sim/cluster/load_ledger.h"
#include "sim/cluster/network.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/router.h"
#include "sim/cluster/run_observer.h"

namespace servesim::cluster {

struct Pool {
  const PoolConfig* config = nullptr;
  PoolRole role = PoolRole::kCombined;
  bool caching = false;      // its lanes have prefix caches
  bool kv_aware = false;     // its router reads the tokens of a request cached on each instance
  bool a2a_on_nics = false;  // its all-to-all and the flows share its chips' NICs (Dispatcher)
  // Its instances' waiting requests queue per instance, not per lane, and its lanes draw their KV
  // blocks from one pool per instance (PipelineQueue::kShared, pp > 1): Instance::shared_waiting,
  // Instance::kv_pool.
  bool shared_queue = false;
  // A prefill pool whose KV sends go on its all-to-all's queue (DisaggregationConfig::kv_queue_shared,
  // a2a_on_nics): seconds per byte of a chip's NIC (its share of the NIC), else 0.
  double kv_queue_s_per_byte = 0;
  double swap_s_per_token = 0;         // swap preemption: host-link seconds per KV token, 0 = off
  std::int64_t admissible_tokens = 0;  // the most KV tokens one request may hold on a lane
  PoolId metrics_id;
  std::unique_ptr<models::CostModel> encode_cost;  // encode pools
  std::unique_ptr<IterationCostModel> cost;
  std::unique_ptr<BatchScheduler> scheduler;
  std::unique_ptr<Router> router;
  LoadLedger load{0, LoadUnit::kRequests, false};
  std::uint32_t first_instance = 0;
  std::uint32_t local(std::uint32_t instance) const { return instance - first_instance; }
};

// When each pipeline stage of an instance finishes its current work. Stage 0, which every dispatch
// reads, is kept inline (in the instance's first cache line); the other stages, when pp > 1, in
// one allocation.
class StageTimes {
 public:
  void assign(std::size_t stages, SimTime t) {
    size_ = static_cast<std::uint32_t>(stages);
    first_ = t;
    rest_ = stages > 1 ? std::make_unique<SimTime[]>(stages - 1) : nullptr;
    for (std::size_t s = 1; s < stages; ++s) rest_[s - 1] = t;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  SimTime& front() { return first_; }
  const SimTime& front() const { return first_; }
  SimTime& operator[](std::size_t s) { return s == 0 ? first_ : rest_[s - 1]; }
  // Every stage is free at t.
  void fill(SimTime t) {
    first_ = t;
    for (std::size_t s = 1; s < size_; ++s) rest_[s - 1] = t;
  }

 private:
  SimTime first_;
  std::unique_ptr<SimTime[]> rest_;  // stages 1 .. size - 1
  std::uint32_t size_ = 0;
};

// Aligned to a cache line, with the fields every event of the instance reads (its pool, epoch,
// lanes, stage 0, dispatch state) in the first line: an event touches one line of it, not two or
// three (issue 28: at 10,000 instances each is a miss).
struct alignas(64) Instance {
  std::uint32_t pool = 0;
  std::uint32_t epoch = 0;  // bumped when a failure empties it
  std::vector<Lane> lanes;
  StageTimes stage_free;
  std::uint32_t next_lane = 0;  // dispatch rotation
  bool dispatch_pending = false;
  bool up = true;
  // The rest is read by some pools only.
  std::uint32_t next_assign = 0;  // lane assignment rotation for ties
  double nic_share = 0;           // of its chips' NICs, held for its all-to-all now
  std::uint32_t nic_group = 0;    // a2a_on_nics pools: its chips' NIC links (Network)
  // kv_queue_s_per_byte pools: the KV sends posted on the all-to-all's queue and not yet drained
  // (the most on one chip: Dispatcher::post_kv), and when the queue is free of those drained.
  double kv_posted_total = 0, kv_posted_max = 0;
  SimTime kv_posted_at;
  SimTime kv_queue_free;
  // Pools with a shared queue (Pool::shared_queue): the requests waiting for a lane to admit
  // them, FCFS (Dispatcher::form lends a lane the front), and the KV blocks its lanes share
  // (KvBlocks::share) and, with prefix caching, their one prefix cache (on the heap, so that the
  // lanes' pointers survive the instance's moves).
  RingQueue<RequestId> shared_waiting;
  std::unique_ptr<KvPool> kv_pool;
  std::unique_ptr<PrefixCache> prefix_cache;
  // Encode pools: the waiting requests and the batch in flight.
  RingQueue<RequestId> encode_waiting;
  std::vector<RequestId> encode_batch;
  bool encode_busy = false;
};

// KV sends on a prefill instance's all-to-all queue (Pool::kv_queue_s_per_byte > 0; README, "KV
// sends on the all-to-all's queue"). post_kv_send: one request's `bytes` of KV sends are posted at
// `at`. kv_queue_wait: what an iteration dispatched at `now` waits for them: the sends posted so
// far drain in order behind those before them, at the NIC's rate, from the busiest chip (a
// request's sends leave its attention-DP group's tp chips, and posts spread over the dp groups no
// better than evenly: max(largest, total / dp) / tp bytes); the iteration's all-to-all waits
// behind what is left at `now`.
void post_kv_send(Instance& inst, double bytes, SimTime at);
Duration kv_queue_wait(Instance& inst, const Pool& pool, SimTime now);

class Deployment {
 public:
  // `network` (may be null) carries transfers; `requests` is what the lanes read.
  Deployment(const SimulationConfig& config, RequestTable& requests, Network* network, RunObserver& observer,
             Agenda& agenda);

  std::vector<Pool>& pools() { return pools_; }
  const std::vector<Pool>& pools() const { return pools_; }
  std::vector<Instance>& instances() { return instances_; }
  const std::vector<Instance>& instances() const { return instances_; }
  Instance& instance(std::uint32_t i) { return instances_[i]; }
  Pool& pool_of(std::uint32_t instance) { return pools_[instances_[instance].pool]; }
  const Pool& pool_of(std::uint32_t instance) const { return pools_[instances_[instance].pool]; }
  // The pools by role (-1 when absent); `prefill` is the combined pool in an aggregated deployment.
  int encode_pool() const { return encode_pool_; }
  int prefill_pool() const { return prefill_pool_; }
  int decode_pool() const { return decode_pool_; }
  Pool& prefill() { return pools_[static_cast<std::size_t>(prefill_pool_)]; }
  Pool& decode() { return pools_[static_cast<std::size_t>(decode_pool_)]; }
  Pool& encode() { return pools_[static_cast<std::size_t>(encode_pool_)]; }
  bool disaggregated() const { return decode_pool_ >= 0; }
  // Where each pool's instances live (the scenario's cluster, or the default one); null for an
  // aggregated deployment without a cluster.
  const topologies::ClusterPlacement* placement() const { return placement_; }

  // Instance i is dispatched at now, unless a request is pending or its first stage is busy (an
  // event that frees it will dispatch it).
  void request_dispatch(std::uint32_t i) {
    Instance& inst = instances_[i];
    if (!inst.dispatch_pending && (inst.stage_free.empty() || inst.stage_free.front() <= agenda_.now())) {
      inst.dispatch_pending = true;
      agenda_.dispatch_soon(i);
    }
  }
  // A decode placement pool's ledger holds the negated free blocks of each instance's roomiest lane.
  void note_free_kv(std::uint32_t i) {
    Pool& pool = pool_of(i);
    if (pool.load.unit() != LoadUnit::kFreeBlocks) return;
    std::int64_t free = 0;
    for (const Lane& l : instances_[i].lanes) free = std::max(free, l.free_blocks());
    pool.load.free_blocks(pool.local(i), free);
  }

  // Every up instance's load ledger against a recount of the requests on it (paranoid runs).
  void check_loads(const RequestTable& requests) const;

 private:
  // The report's groups (tp, dp, ep, cp, pp): ranks, whether one spans two scale-up domains, the
  // tier; with placed groups, from the layouts the collectives are costed on.
  std::vector<metrics::GroupTier> group_tiers(const SimulationConfig& config, const PoolConfig& pc, int pool,
                                              const IterationCostModel::PlacedGroups* placed) const;

  Agenda& agenda_;
  const Network* network_;
  std::vector<Pool> pools_;
  std::vector<Instance> instances_;
  int encode_pool_ = -1, prefill_pool_ = -1, decode_pool_ = -1;
  const topologies::ClusterPlacement* placement_ = nullptr;
};

}  // namespace servesim::cluster
