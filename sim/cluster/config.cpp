#include "sim/cluster/config.h"

namespace servesim::cluster {

PoolCapacity pool_capacity(const models::ModelSpec& model, const PoolConfig& pool) {
  models::MemoryConfig mc;
  mc.memory_utilization = pool.kv_cache.memory_utilization;
  mc.reserved = pool.kv_cache.reserved;
  mc.max_batched_tokens = pool.scheduler.max_batched_tokens;
  mc.max_sequences = pool.scheduler.max_batch_size;
  PoolCapacity cap;
  cap.memory = models::plan_memory(model, pool.chip, pool.plan, mc);
  const std::int64_t blocks = cap.memory.kv_tokens / pool.kv_cache.block_tokens;
  cap.blocks_per_lane = blocks / pool.plan.pp;
  cap.tokens_per_lane = cap.blocks_per_lane * pool.kv_cache.block_tokens;
  return cap;
}

}  // namespace servesim::cluster
