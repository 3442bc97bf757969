#include "sim/cluster/deployment.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>

#include "models/operators.h"
#include "sim/cluster/comm_cost.h"

namespace servesim::cluster {
namespace {

// The pool's groups on the scenario's cluster graph (describe_group over every instance), or none
// when the placement has no instance of it.
std::optional<IterationCostModel::PlacedGroups> placed_groups(const ClusterConfig& cc, int pool, const PoolConfig& pc) {
  const topologies::ClusterPlacement& placement = cc.placement;
  if (pool >= placement.pools()) return std::nullopt;
  const topologies::Fabric& fabric = *cc.fabric;
  const topologies::InstanceShape shape = instance_shape(pc.plan);
  topologies::CollectiveCostCache cache(cc.spec.comm);
  // The whole NIC: the expert dispatch, the one all-to-all that shares it with the flows, is costed
  // at its share by its per-tier split (comm_cost.h).
  const double share = 1.0;
  std::vector<topologies::GroupLayout> distinct;
  auto note = [&](std::span<const topologies::ChipId> chips) {
    const topologies::GroupLayout g = topologies::describe_group(fabric, chips);
    if (std::find(distinct.begin(), distinct.end(), g) == distinct.end()) distinct.push_back(g);
  };
  auto collect = [&](topologies::GroupKind kind) {
    distinct.clear();
    for (int i = 0; i < placement.instances(pool); ++i) {
      if (placement.chips(pool, i).empty()) continue;
      for (int k = 0; k < topologies::group_count(shape, kind); ++k) note(placement.group(pool, i, kind, k));
    }
    return place_group(distinct, cache, cc.spec.comm, share);
  };
  IterationCostModel::PlacedGroups out;
  out.tp = collect(topologies::GroupKind::kTp);
  if (out.tp.layouts.empty()) return std::nullopt;  // no instance placed
  out.moe = collect(topologies::GroupKind::kMoe);
  out.cp = collect(topologies::GroupKind::kCp);
  const int stage = shape.stage_chips();
  for (int s = 0; s + 1 < shape.pp; ++s) {
    distinct.clear();
    for (int i = 0; i < placement.instances(pool); ++i) {
      const auto chips = placement.chips(pool, i);
      if (chips.empty()) continue;
      // Stage s's first chip, in size_t: s + 1 < pp, so (s + 1) x stage + r < the instance's chips.
      const std::size_t at = static_cast<std::size_t>(s) * static_cast<std::size_t>(stage);
      for (std::size_t r = 0; r < static_cast<std::size_t>(stage); ++r) {
        const std::array<topologies::ChipId, 2> pair{chips[at + r], chips[at + static_cast<std::size_t>(stage) + r]};
        note(pair);
      }
    }
    out.pp_hops.push_back(place_group(distinct, cache, cc.spec.comm, share));
  }
  return out;
}

}  // namespace

void post_kv_send(Instance& inst, double bytes, SimTime at) {
  inst.kv_posted_total += bytes;
  inst.kv_posted_max = std::max(inst.kv_posted_max, bytes);
  inst.kv_posted_at = std::max(inst.kv_posted_at, at);
}

Duration kv_queue_wait(Instance& inst, const Pool& pool, SimTime now) {
  if (inst.kv_posted_total > 0) {
    const models::ParallelPlan& plan = pool.config->plan;
    const double busiest = std::max(inst.kv_posted_max, inst.kv_posted_total / plan.dp) / plan.tp;
    // NOLINTNEXTLINE(bugprone-incorrect-roundings): kept as to_ps (iteration_cost.cpp) rounds, reports must not move
    const auto ps = static_cast<std::int64_t>(busiest * pool.kv_queue_s_per_byte * 1e12 + 0.5);
    inst.kv_queue_free = std::max(inst.kv_queue_free, inst.kv_posted_at) + Duration::picoseconds(ps);
    inst.kv_posted_total = inst.kv_posted_max = 0;
  }
  return inst.kv_queue_free > now ? inst.kv_queue_free - now : Duration{};
}

Deployment::Deployment(const SimulationConfig& config, RequestTable& requests, Network* network, RunObserver& observer,
                       Agenda& agenda)
    : agenda_(agenda), network_(network) {
  for (std::size_t p = 0; p < config.pools.size(); ++p) {
    const int at = static_cast<int>(p);
    switch (config.pools[p].kind) {
      case PoolRole::kEncode: encode_pool_ = at; break;
      case PoolRole::kPrefill: prefill_pool_ = at; break;
      case PoolRole::kDecode: decode_pool_ = at; break;
      case PoolRole::kCombined: prefill_pool_ = at; break;
    }
  }
  SERVESIM_CHECK_MSG(prefill_pool_ >= 0, "a deployment needs a prefill or combined pool");
  SERVESIM_CHECK_MSG(
      (config.pools[static_cast<std::size_t>(prefill_pool_)].kind == PoolRole::kPrefill) == (decode_pool_ >= 0),
      "a prefill pool needs a decode pool and the other way round");
  placement_ = network != nullptr ? &network->cluster().placement
               : config.cluster   ? &config.cluster->placement
                                  : nullptr;
  for (const PoolConfig& pc : config.pools) {
    const int index = static_cast<int>(pools_.size());
    Pool pool;
    pool.config = &pc;
    pool.role = pc.kind;
    pool.caching = pc.prefix_cache.enabled && pc.kind != PoolRole::kEncode;
    pool.kv_aware = pc.router.policy == RouterPolicy::kKvAware;
    pool.shared_queue = shares_pipeline_lanes(pc);
    SERVESIM_CHECK_MSG(!pool.kv_aware || pool.caching, "kv_aware routing needs the pool's prefix cache");
    pool.cost = std::make_unique<IterationCostModel>(config.model, pc.chip, pc.plan, pc.moe_routing, pc.cost_model,
                                                     pc.scheduler.max_batched_tokens);
    pool.cost->set_two_batch_overlap(pc.two_batch_overlap);
    // DeepEP's low-latency kernels in decode pools, its normal ones elsewhere (comm_cost.h).
    pool.cost->set_dispatch_kernel(pc.kind == PoolRole::kDecode ? models::DispatchKernel::kPerExpert
                                                                : models::DispatchKernel::kPerRank);
    // A scenario with `cluster:` costs the collectives on the pool's placed groups.
    if (config.cluster && pc.kind != PoolRole::kEncode) {
      if (auto placed = placed_groups(*config.cluster, index, pc)) pool.cost->set_placed_groups(std::move(*placed));
    }
    // The expert all-to-all leaves the scale-up domain: it shares the NICs with the flows
    // (pp = 1: with pipelined micro-batches an instance's iterations overlap).
    pool.a2a_on_nics = network != nullptr && config.disaggregation.a2a_contention && pc.kind != PoolRole::kEncode &&
                       pc.plan.pp == 1 && pool.cost->a2a_on_nics();
    if (pool.a2a_on_nics && pc.kind == PoolRole::kPrefill && config.disaggregation.kv_queue_shared) {
      const topologies::ScaleOutSpec& out = network->cluster().spec.scale_out;
      pool.kv_queue_s_per_byte = out.chips_per_nic / out.nic_bandwidth.bytes_per_s;
    }
    const SpeculativeConfig& spec = pc.speculative;
    std::vector<double> reach;  // P(accepted >= i): products of the conditional rates
    if (spec.enabled() && pc.kind != PoolRole::kEncode) {
      pool.cost->set_speculative(spec.draft_tokens, pc.scheduler.max_batch_size);
      double p = 1;
      for (const double a : spec.acceptance) reach.push_back(p *= a);
    }
    if (pc.kind == PoolRole::kEncode) pool.encode_cost = models::make_cost_model(pc.cost_model, pc.chip);
    pool.scheduler = make_batch_scheduler(pc.scheduler);
    pool.router = make_router(pc.router, config.seed, "router/" + pc.name);
    pool.load = make_ledger(pc.router, static_cast<std::uint32_t>(pc.instances));
    pool.first_instance = static_cast<std::uint32_t>(instances_.size());

    metrics::PoolInfo info;
    info.name = pc.name;
    info.role = pc.role;
    info.instances = pc.instances;
    info.chips = pc.instances * pc.plan.chips();
    info.stages = pc.plan.pp;
    if (pc.kind == PoolRole::kEncode) {
      info.components.emplace_back("vision_encoder");
    } else {
      for (std::size_t k = 0; k < models::kOpKinds; ++k) {
        info.components.emplace_back(models::op_kind_name(static_cast<models::OpKind>(k)));
      }
    }
    info.plan = {pc.plan.tp, pc.plan.pp, pc.plan.dp, pc.plan.ep, pc.plan.moe_tp, pc.plan.cp};
    info.groups = group_tiers(config, pc, index, pool.cost->placed_groups());
    const PoolCapacity cap = pc.kind == PoolRole::kEncode ? PoolCapacity{} : pool_capacity(config.model, pc);
    SERVESIM_CHECK_MSG(pc.kind == PoolRole::kEncode || cap.blocks_per_lane > 0,
                       "pool " + pc.name + " has no KV blocks");
    pool.admissible_tokens = cap.admissible_tokens;
    if (pc.scheduler.preemption == PreemptionMode::kSwap && pc.kind != PoolRole::kEncode) {
      // Each chip copies its own shard of the KV over its own host link, all in parallel.
      SERVESIM_CHECK_MSG(pc.chip.host_bandwidth.bytes_per_s > 0, "swap needs the chip's host_bandwidth");
      pool.swap_s_per_token = cap.memory.kv_bytes_per_token / pc.chip.host_bandwidth.bytes_per_s;
    }
    info.kv_blocks = cap.blocks_per_lane * pc.plan.pp * pc.instances;
    pool.metrics_id = observer.recorder().add_pool(std::move(info));
    // A shared queue is one scheduler per instance: its lanes draw from one pool of the
    // instance's blocks (vLLM V1's KV cache manager, Vidur's replica scheduler) and one prefix
    // cache; the block manager's figures are the pool's (PoolCapacity::manager_blocks).
    const auto cache_blocks =
        static_cast<std::int64_t>(pc.prefix_cache.capacity_fraction * static_cast<double>(cap.manager_blocks));
    for (int i = 0; i < pc.instances; ++i) {
      Instance inst;
      inst.pool = static_cast<std::uint32_t>(index);
      if (pool.shared_queue) {
        inst.kv_pool = std::make_unique<KvPool>(KvPool{cap.manager_blocks});
        if (pool.caching) inst.prefix_cache = std::make_unique<PrefixCache>(cache_blocks);
      }
      for (int l = 0; l < pc.plan.pp && pc.kind != PoolRole::kEncode; ++l) {
        inst.lanes.emplace_back(&requests, cap.blocks_per_lane, pc.kv_cache.block_tokens, cap.watermark_blocks,
                                pc.scheduler.max_batch_size, config.model.window_cap(), config.model.topk_cap());
        Lane& lane = inst.lanes.back();
        if (inst.kv_pool) lane.share_blocks(inst.kv_pool.get(), cap.manager_watermark_blocks);
        if (pool.swap_s_per_token > 0) lane.enable_swap();
        if (pc.attention_dp != AttentionDpBalance::kEven && pc.plan.dp > 1) {
          lane.enable_rank_balance(pc.plan.dp, pc.attention_dp == AttentionDpBalance::kLeastKv);
        }
        if (!reach.empty()) {
          lane.enable_speculative(
              spec.draft_tokens, reach,
              Rng(config.seed, "speculative/" + pc.name + "/" + std::to_string(i) + "/" + std::to_string(l)));
        }
        if (pc.scheduler.first_response_step > 1) lane.hold_first_response(pc.scheduler.first_response_step);
        if (pc.scheduler.first_response_step == 0 && pc.kind == PoolRole::kDecode) lane.answer_on_admit();
        if (inst.prefix_cache) {
          lane.share_prefix_cache(inst.prefix_cache.get());
        } else if (pool.caching) {
          lane.enable_prefix_cache(cache_blocks);
        }
      }
      inst.stage_free.assign(static_cast<std::size_t>(pc.plan.pp), SimTime::zero());
      // Its chips' NIC links (both directions), booked together for the all-to-all.
      if (pool.a2a_on_nics) inst.nic_group = network->add_nic_group(placement_->chips(index, i));
      instances_.push_back(std::move(inst));
      observer.add_instance(pool.metrics_id);
    }
    if (pool.load.unit() == LoadUnit::kFreeBlocks) {
      for (int i = 0; i < pc.instances; ++i) pool.load.free_blocks(static_cast<std::uint32_t>(i), cap.manager_blocks);
    }
    pools_.push_back(std::move(pool));
  }
}

std::vector<metrics::GroupTier> Deployment::group_tiers(const SimulationConfig& config, const PoolConfig& pc, int pool,
                                                        const IterationCostModel::PlacedGroups* placed) const {
  std::vector<metrics::GroupTier> out;
  const struct {
    const char* name;
    models::Group model;
    topologies::GroupKind topo;
  } kinds[] = {{"tp", models::Group::kTp, topologies::GroupKind::kTp},
               {"dp", models::Group::kDp, topologies::GroupKind::kDp},
               {"ep", models::Group::kEp, topologies::GroupKind::kEp},
               {"cp", models::Group::kCp, topologies::GroupKind::kCp},
               {"pp", models::Group::kPp, topologies::GroupKind::kPp}};
  const topologies::InstanceShape shape = instance_shape(pc.plan);
  const topologies::Fabric* fab = network_ != nullptr ? &network_->fabric()
                                  : config.cluster    ? config.cluster->fabric.get()
                                                      : nullptr;
  for (const auto& k : kinds) {
    metrics::GroupTier g;
    g.group = k.name;
    g.ranks = topologies::group_size(shape, k.topo);
    if (placement_ != nullptr && pool < placement_->pools() && placement_->instances(pool) > 0 &&
        !placement_->chips(pool, 0).empty() && fab != nullptr) {
      // On the placed chips: does any group of instance 0 span two scale-up domains?
      bool leaves = false;
      for (int i = 0; i < topologies::group_count(shape, k.topo) && !leaves; ++i) {
        const auto chips = placement_->group(pool, 0, k.topo, i);
        for (const auto c : chips) leaves = leaves || !fab->same_domain(c, chips.front());
      }
      g.leaves_domain = leaves;
      g.domain_chips =
          config.cluster ? config.cluster->spec.scale_up.domain_chips : network_->cluster().spec.scale_up.domain_chips;
    } else {
      g.domain_chips = pc.chip.scale_up_domain;
      g.leaves_domain = group_span(pc.plan, k.model, pc.chip.scale_up_domain).leaves_domain;
    }
    if (placed != nullptr && k.model != models::Group::kDp) {
      // What the collectives are costed on: every instance's groups of the kind (for pp, the hops).
      bool leaves = false;
      if (k.model == models::Group::kPp) {
        for (const PlacedGroup& h : placed->pp_hops) leaves = leaves || h.leaves_domain();
      } else {
        leaves = (k.model == models::Group::kTp   ? placed->tp
                  : k.model == models::Group::kEp ? placed->moe
                                                  : placed->cp)
                     .leaves_domain();
      }
      g.leaves_domain = leaves;
    }
    g.tier = g.ranks <= 1 ? "none" : g.leaves_domain ? "scale_out" : "scale_up";
    out.push_back(std::move(g));
  }
  return out;
}

void Deployment::check_loads(const RequestTable& requests) const {
  // The recount: tokens still to prefill (one for a swapped-out request, whose KV comes back from
  // host memory) plus, where the request will decode (a combined or decode instance), output
  // tokens still to generate; image tokens on an encode instance. Prefilled requests whose KV is on
  // its way count nowhere, nor do embeddings in flight.
  std::vector<std::int64_t> tokens(instances_.size(), 0), count(instances_.size(), 0);
  for (RequestId r(0); r.value < requests.size(); ++r.value) {
    if (!requests.in_flight(r)) continue;
    const RequestState& s = requests[r];
    const Journey& j = requests.journey(r);
    std::int64_t work = 0;
    switch (s.phase) {
      case Phase::kEncoding:
        if (j.target != kNoInstance) continue;  // its embeddings are on their way
        work = j.image_tokens;
        break;
      case Phase::kWaiting:
      case Phase::kPrefilling:
        work = s.swapped ? 1 : s.prefill_target - s.prefilled;
        // A combined or decode instance (a preempted decode request recomputes there) then decodes.
        if (pool_of(s.instance).role != PoolRole::kPrefill) work += s.output - s.generated;
        break;
      case Phase::kReady: work = s.output - s.generated; break;
      case Phase::kDecoding: {
        const Lane& lane = instances_[s.instance].lanes[s.lane];
        work = static_cast<std::int64_t>(s.output) - s.generated -
               static_cast<std::int64_t>(lane.decode_set().steps_done(s)) - s.accepted;
        break;
      }
      default: continue;
    }
    tokens[s.instance] += work;
    ++count[s.instance];
  }
  for (const Pool& pool : pools_) {
    for (std::uint32_t local = 0; local < pool.load.size(); ++local) {
      const std::uint32_t i = pool.first_instance + local;
      if (!instances_[i].up) continue;
      std::int64_t expect = 0;
      switch (pool.load.unit()) {
        case LoadUnit::kTokens: expect = tokens[i]; break;
        case LoadUnit::kRequests: expect = count[i]; break;
        case LoadUnit::kFreeBlocks:
          for (const Lane& l : instances_[i].lanes) expect = std::max(expect, l.free_blocks());
          expect = -expect;
          break;
      }
      SERVESIM_CHECK_MSG(pool.load.load(local) == expect, "instance " + std::to_string(i) + " load " +
                                                              std::to_string(pool.load.load(local)) +
                                                              ", its requests add up to " + std::to_string(expect));
    }
  }
}

}  // namespace servesim::cluster
