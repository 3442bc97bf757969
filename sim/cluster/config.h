// Everything a run needs, as plain values: the loader (sim/scenario) fills it in and validates it,
// the simulation only reads it.
//
// A deployment is a set of pools; a pool is `instances` identical model replicas on one chip type
// with one parallel plan and one batch scheduler. This version serves every request on one pool of
// role "combined" (each instance prefills and decodes: aggregated serving); encode, prefill and
// decode pools come with the EPD issue.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/chip_spec.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/parallel_plan.h"
#include "sim/core/time.h"
#include "sim/core/units.h"
#include "sim/metrics/summary.h"
#include "topologies/placement.h"
#include "workloads/workload.h"

namespace servesim::cluster {

enum class SchedulerPolicy {
  kSarathi,      // chunked prefill: decodes first, prompt chunks fill the token budget
  kWholePrompt,  // vLLM V0 default: whole prompts in prefill-only iterations, else decode
};

struct SchedulerConfig {
  SchedulerPolicy policy = SchedulerPolicy::kSarathi;
  std::int64_t max_batch_size = 256;       // running sequences per pipeline lane (max_num_seqs)
  std::int64_t max_batched_tokens = 512;   // tokens per iteration (chunk size / token budget)
  std::int64_t max_queue = 0;              // waiting requests per instance; 0 = unbounded
};

struct KvCacheConfig {
  std::int64_t block_tokens = 16;
  double memory_utilization = 0.9;
  Bytes reserved{1.0 * kGiB};
  double watermark = 0.01;  // fraction of blocks kept free when admitting (vLLM)
};

enum class RouterPolicy { kRoundRobin, kLeastLoaded };
enum class LoadMetric { kOutstandingTokens, kOutstandingRequests };

struct RouterConfig {
  RouterPolicy policy = RouterPolicy::kLeastLoaded;
  LoadMetric load = LoadMetric::kOutstandingTokens;
};

struct PoolConfig {
  std::string name;
  std::string role = "combined";
  models::ChipSpec chip;
  models::ParallelPlan plan;
  int instances = 1;
  SchedulerConfig scheduler;
  KvCacheConfig kv_cache;
  RouterConfig router;
  std::int64_t max_model_len = 0;  // longest prompt + output served; longer requests are rejected
};

struct SimulationConfig {
  models::ModelSpec model;
  std::vector<PoolConfig> pools;
  workloads::WorkloadConfig workload;
  metrics::SloTargets slo;
  // Targets of each workload class, in class order; empty: every class is held to `slo`.
  std::vector<metrics::SloTargets> class_slo;
  std::uint64_t seed = 0;
  std::optional<Duration> horizon;  // stop here; unfinished requests count as in flight
};

// What a pool's memory leaves for the KV cache, in the units the block managers use. One block
// manager per pipeline lane: vLLM divides the blocks among its PP virtual engines.
struct PoolCapacity {
  models::MemoryPlan memory;
  std::int64_t blocks_per_lane = 0;
  std::int64_t watermark_blocks = 0;   // kept free when admitting
  std::int64_t admissible_tokens = 0;  // the longest request a lane can ever admit
};
PoolCapacity pool_capacity(const models::ModelSpec& model, const PoolConfig& pool);

// The links a chip of the pool sees, for placement and collective costs.
topologies::FabricSpec fabric_of(const models::ChipSpec& chip);

}  // namespace servesim::cluster
