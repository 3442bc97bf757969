#include "sim/cluster/config.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::cluster {

std::string_view pool_role_name(PoolRole r) {
  switch (r) {
    case PoolRole::kCombined: return "combined";
    case PoolRole::kEncode: return "encode";
    case PoolRole::kPrefill: return "prefill";
    case PoolRole::kDecode: return "decode";
  }
  return "?";
}

ClusterConfig default_cluster(const std::vector<PoolConfig>& pools, topologies::FabricCache* fabrics) {
  SERVESIM_CHECK(!pools.empty());
  const models::ChipSpec& first = pools.front().chip;
  topologies::ClusterSpec spec;
  spec.name = "default";
  spec.chip = first.name;
  double nic = first.scale_out_bandwidth.bytes_per_s;
  for (const PoolConfig& p : pools) nic = std::min(nic, p.chip.scale_out_bandwidth.bytes_per_s);
  const int domain = std::max(1, first.scale_up_domain);
  spec.node_chips = std::min(8, domain);
  if (domain % spec.node_chips != 0) spec.node_chips = 1;
  // Room for packing: an instance smaller than a node takes the next divisor of the node size
  // (pack aligns it), a bigger one whole nodes; pack keeps an instance of at most a domain inside
  // one domain, so where its whole nodes do not divide the domain, each domain holds
  // domain / chips of them and the rest of it stays free (one more domain for the other pools'
  // instances that share the first).
  int chips = 0;
  for (const PoolConfig& p : pools) {
    int c = p.plan.chips();
    if (c >= spec.node_chips) {
      c = (c + spec.node_chips - 1) / spec.node_chips * spec.node_chips;
      if (c < domain && domain % c != 0) {
        const int per_domain = domain / c;
        chips += ((p.instances + per_domain - 1) / per_domain + 1) * domain;
        continue;
      }
    } else {
      while (spec.node_chips % c != 0) ++c;
    }
    chips += p.instances * c;
  }
  spec.nodes_per_rack = 1;
  spec.scale_up.kind = domain > 1 ? topologies::ScaleUpKind::kSwitch : topologies::ScaleUpKind::kNone;
  spec.scale_up.domain_chips = domain;
  spec.scale_up.chip_bandwidth = first.scale_up_bandwidth;
  spec.scale_up.hop_latency = first.efficiency.collective_latency;
  spec.scale_out.present = true;
  spec.scale_out.tiers = 2;
  spec.scale_out.rail_optimized = true;
  spec.scale_out.chips_per_nic = 1;
  spec.scale_out.nic_bandwidth = Bandwidth{nic};
  spec.scale_out.link_bandwidth = Bandwidth{nic};
  spec.scale_out.hosts_per_leaf = 64;
  spec.scale_out.leaves_per_pod = 64;
  spec.scale_out.hop_latency = first.scale_out_latency;
  spec.scale_out.routing = topologies::Routing::kAdaptive;
  spec.source = "default: built from the chip figures (no cluster section)";
  spec.chips = topologies::round_up_chips(spec, std::max(chips, 1));
  const auto problems = topologies::validate_cluster(spec);
  SERVESIM_CHECK_MSG(problems.empty(), problems.empty() ? "" : problems.front().key + ": " + problems.front().message);
  ClusterConfig out;
  out.spec = spec;
  out.fabric = topologies::shared_fabric(spec, fabrics);
  std::vector<topologies::PoolPlacementSpec> specs;
  for (const PoolConfig& p : pools) {
    topologies::PoolPlacementSpec ps;
    ps.name = p.name;
    ps.shape = instance_shape(p.plan);
    ps.instances = p.instances;
    ps.policy = topologies::PlacementPolicy::kPack;
    ps.on_violation = topologies::ViolationAction::kWarn;
    specs.push_back(ps);
  }
  out.placement = topologies::place_pools(*out.fabric, specs);
  return out;
}

models::MemoryConfig memory_config(const PoolConfig& pool) {
  models::MemoryConfig mc;
  mc.memory_utilization = pool.kv_cache.memory_utilization;
  mc.reserved = pool.kv_cache.reserved;
  mc.max_batched_tokens = pool.scheduler.max_batched_tokens;
  mc.max_sequences = pool.scheduler.max_batch_size;
  mc.block_tokens = pool.kv_cache.block_tokens;
  mc.routing = pool.moe_routing;
  mc.load_mtp = pool.speculative.enabled();  // the MTP module drafts: its weights are resident
  return mc;
}

PoolCapacity pool_capacity(const models::ModelSpec& model, const PoolConfig& pool) {
  PoolCapacity cap;
  cap.memory = models::plan_memory(model, pool.chip, pool.plan, memory_config(pool));
  const std::int64_t block = pool.kv_cache.block_tokens;
  const std::int64_t group_blocks = cap.memory.kv_tokens_per_group / block;
  const std::int64_t blocks = group_blocks * pool.plan.dp;
  cap.blocks_per_lane = blocks / pool.plan.pp;
  cap.watermark_blocks = static_cast<std::int64_t>(pool.kv_cache.watermark * static_cast<double>(cap.blocks_per_lane));
  const bool pooled = shares_pipeline_lanes(pool);
  cap.manager_blocks = pooled ? cap.blocks_per_lane * pool.plan.pp : cap.blocks_per_lane;
  cap.manager_watermark_blocks =
      pooled ? static_cast<std::int64_t>(pool.kv_cache.watermark * static_cast<double>(cap.manager_blocks))
             : cap.watermark_blocks;
  // One request lives in one dp group: its share of the manager's blocks, less the watermark.
  const std::int64_t group_manager_blocks = pooled ? group_blocks : group_blocks / pool.plan.pp;
  // (With dp = 1 this is the manager's blocks less the watermark; with dp > 1, one group's share
  // unless the pooled manager's watermark leaves less.)
  cap.admissible_tokens = std::min(group_manager_blocks, cap.manager_blocks - cap.manager_watermark_blocks) * block;
  return cap;
}

bool shares_pipeline_lanes(const PoolConfig& pool) {
  return pool.scheduler.pipeline_queue == PipelineQueue::kShared && pool.plan.pp > 1 &&
         (pool.kind == PoolRole::kCombined || pool.kind == PoolRole::kPrefill) && !pool.scheduler.form_ahead;
}

topologies::FabricSpec fabric_of(const models::ChipSpec& chip) {
  topologies::FabricSpec f;
  f.scale_up_domain = chip.scale_up_domain;
  f.scale_up = {chip.scale_up_bandwidth, chip.efficiency.collective_latency, chip.efficiency.collective_bandwidth};
  f.scale_out = {chip.scale_out_bandwidth, chip.scale_out_latency, chip.efficiency.collective_bandwidth};
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
