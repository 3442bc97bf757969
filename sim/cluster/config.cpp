#include "sim/cluster/config.h"

#include <algorithm>

namespace servesim::cluster {

models::MemoryConfig memory_config(const PoolConfig& pool) {
  models::MemoryConfig mc;
  mc.memory_utilization = pool.kv_cache.memory_utilization;
  mc.reserved = pool.kv_cache.reserved;
  mc.max_batched_tokens = pool.scheduler.max_batched_tokens;
  mc.max_sequences = pool.scheduler.max_batch_size;
  mc.block_tokens = pool.kv_cache.block_tokens;
  mc.routing = pool.moe_routing;
  return mc;
}

PoolCapacity pool_capacity(const models::ModelSpec& model, const PoolConfig& pool) {
  PoolCapacity cap;
  cap.memory = models::plan_memory(model, pool.chip, pool.plan, memory_config(pool));
  const std::int64_t block = pool.kv_cache.block_tokens;
  const std::int64_t group_blocks = cap.memory.kv_tokens_per_group / block;
  const std::int64_t blocks = group_blocks * pool.plan.dp;
  cap.blocks_per_lane = blocks / pool.plan.pp;
  cap.watermark_blocks =
      static_cast<std::int64_t>(pool.kv_cache.watermark * static_cast<double>(cap.blocks_per_lane));
  // One request lives in one dp group: its share of the lane's blocks, less the watermark.
  const std::int64_t group_lane_blocks = group_blocks / pool.plan.pp;
  cap.admissible_tokens = (std::min(group_lane_blocks, cap.blocks_per_lane) - cap.watermark_blocks) *
                          block;
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
  // The same rank layout as models/parallel_plan.h: tp fastest, then dp, cp, pp.
  s.tp = plan.tp;
  s.dp = plan.dp;
  s.cp = plan.cp;
  s.pp = plan.pp;
  s.ep = plan.ep;
  // Dense models leave moe_tp at 1; the placement wants the MoE group's split either way.
  s.moe_tp = s.tp * s.dp / s.ep;
  return s;
}

}  // namespace servesim::cluster
