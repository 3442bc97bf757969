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
  cap.watermark_blocks =
      static_cast<std::int64_t>(pool.kv_cache.watermark * static_cast<double>(cap.blocks_per_lane));
  cap.admissible_tokens = (cap.blocks_per_lane - cap.watermark_blocks) * pool.kv_cache.block_tokens;
  return cap;
}

topologies::FabricSpec fabric_of(const models::ChipSpec& chip) {
  topologies::FabricSpec f;
  f.scale_up_domain = chip.scale_up_domain;
  f.scale_up = {chip.scale_up_bandwidth, chip.efficiency.collective_latency,
                chip.efficiency.collective_bandwidth};
  f.scale_out = {chip.scale_out_bandwidth, chip.scale_out_latency,
                 chip.efficiency.collective_bandwidth};
  return f;
}

topologies::InstanceShape instance_shape(const models::ParallelPlan& plan) {
  topologies::InstanceShape s;
  s.tp = plan.tp;
  s.pp = plan.pp;
  // With the models issue's plan: s.dp = plan.dp, s.cp = plan.cp, s.ep = plan.ep,
  // s.moe_tp = plan.moe_tp (the same rank layout, models/parallel_plan.h).
  s.moe_tp = s.tp * s.dp / s.ep;
  return s;
}

}  // namespace servesim::cluster
