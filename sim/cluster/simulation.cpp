#include "sim/cluster/simulation.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <span>

#include "models/operators.h"
#include "sim/cluster/comm_cost.h"
#include "core/recent_cache.h"

namespace servesim::cluster {
namespace {

// Simulation::rank_flows_symmetric's inputs, in full (equal keys: equal inputs, no hashing): the
// fabric's content id (equal ids: equal fabrics, Fabric::content_id), then the exchanging pools'
// plans, instance counts and chips (`more`).
struct SymmetryKey {
  std::vector<std::uint64_t> words;
  bool operator==(const SymmetryKey&) const = default;
};

template <class More>
SymmetryKey symmetry_key(const topologies::Fabric& fabric, More&& more) {
  SymmetryKey key;
  key.words.push_back(fabric.content_id());
  more(key.words);
  return key;
}

// The answers of the check for the last few inputs: at most 8 of them and 2^23 key words (64 MiB)
// in all.
RecentCache<SymmetryKey, int>& symmetry_cache() {
  static RecentCache<SymmetryKey, int> cache(8, std::size_t{1} << 23,
                                             [](const SymmetryKey& k, const int&) { return k.words.size(); });
  return cache;
}

// One step of the fingerprint: a 64-bit multiply-xorshift mix (from splitmix64's finaliser).
std::uint64_t fingerprint_step(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}
}  // namespace

Simulation::Simulation(const SimulationConfig& config, metrics::Recorder& recorder)
    : config_(config), recorder_(recorder) {
  for (std::size_t p = 0; p < config_.pools.size(); ++p) {
    const PoolConfig& pc = config_.pools[p];
    const int at = static_cast<int>(p);
    switch (pc.kind) {
      case PoolRole::kEncode: encode_pool_ = at; break;
      case PoolRole::kPrefill: prefill_pool_ = at; disaggregated_ = true; break;
      case PoolRole::kDecode: decode_pool_ = at; break;
      case PoolRole::kCombined: prefill_pool_ = at; break;
    }
  }
  SERVESIM_CHECK_MSG(prefill_pool_ >= 0, "a deployment needs a prefill or combined pool");
  SERVESIM_CHECK_MSG(disaggregated_ == (decode_pool_ >= 0),
                     "a prefill pool needs a decode pool and the other way round");
  // Transfers need a network: the scenario's cluster, or one built from the chips' figures.
  if (disaggregated_ || encode_pool_ >= 0 || (config_.cluster && !config_.cluster->faults.empty())) {
    if (!config_.cluster) default_cluster_ = default_cluster(config_.pools);
    const ClusterConfig& cc = config_.cluster ? *config_.cluster : *default_cluster_;
    placement_ = &cc.placement;
    fabric_ = std::make_unique<topologies::Fabric>(*cc.fabric);
    // Link utilization is read only into a time series (record_link_usage).
    topologies::FlowNetwork::Options net_options;
    net_options.track_utilization = recorder_.time_series() != nullptr;
    net_ = std::make_unique<topologies::FlowNetwork>(*fabric_, net_options);
    const SimTime fault_end =
        config_.horizon ? SimTime::zero() + *config_.horizon : SimTime::zero() + kMaxFaultTime;
    faults_ = topologies::fault_timeline(*fabric_, cc.faults, fault_end, config_.seed);
  } else if (config_.cluster) {
    placement_ = &config_.cluster->placement;
  }
  for (const PoolConfig& pc : config_.pools) {
    Pool pool;
    pool.config = &pc;
    pool.role = pc.kind;
    pool.free_kv = pc.router.policy == RouterPolicy::kFreeKv;
    pool.caching = pc.prefix_cache.enabled && pc.kind != PoolRole::kEncode;
    pool.kv_aware = pc.router.policy == RouterPolicy::kKvAware;
    SERVESIM_CHECK_MSG(!pool.kv_aware || pool.caching, "kv_aware routing needs the pool's prefix cache");
    caching_ = caching_ || pool.caching;
    pool.cost = std::make_unique<IterationCostModel>(config_.model, pc.chip, pc.plan,
                                                     pc.moe_routing, pc.cost_model,
                                                     pc.scheduler.max_batched_tokens);
    pool.cost->set_two_batch_overlap(pc.two_batch_overlap);
    // DeepEP's low-latency kernels in decode pools, its normal ones elsewhere (comm_cost.h).
    pool.cost->set_dispatch_kernel(pc.kind == PoolRole::kDecode ? models::DispatchKernel::kPerExpert
                                                                : models::DispatchKernel::kPerRank);
    // A scenario with `cluster:` costs the collectives on the pool's placed groups.
    if (config_.cluster && pc.kind != PoolRole::kEncode) {
      if (auto placed = placed_groups(static_cast<int>(pools_.size()), pc)) pool.cost->set_placed_groups(std::move(*placed));
    }
    // The expert all-to-all leaves the scale-up domain: it shares the NICs with the flows
    // (pp = 1: with pipelined micro-batches an instance's iterations overlap).
    pool.a2a_on_nics = net_ && config_.disaggregation.a2a_contention && pc.kind != PoolRole::kEncode &&
                       pc.plan.pp == 1 && pool.cost->a2a_on_nics();
    const SpeculativeConfig& spec = pc.speculative;
    std::vector<double> reach;  // P(accepted >= i): products of the conditional rates
    if (spec.enabled() && pc.kind != PoolRole::kEncode) {
      pool.cost->set_speculative(spec.draft_tokens, pc.scheduler.max_batch_size);
      double p = 1;
      for (const double a : spec.acceptance) reach.push_back(p *= a);
    }
    if (pc.kind == PoolRole::kEncode) pool.encode_cost = models::make_cost_model(pc.cost_model, pc.chip);
    pool.scheduler = make_batch_scheduler(pc.scheduler);
    pool.router = make_router(pc.router, static_cast<std::uint32_t>(pc.instances), config_.seed,
                              "router/" + pc.name);
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
    info.groups = group_tiers(pc, static_cast<int>(pools_.size()), pool.cost->placed_groups());
    const PoolCapacity cap = pc.kind == PoolRole::kEncode ? PoolCapacity{} : pool_capacity(config_.model, pc);
    SERVESIM_CHECK_MSG(pc.kind == PoolRole::kEncode || cap.blocks_per_lane > 0,
                       "pool " + pc.name + " has no KV blocks");
    pool.admissible_tokens = cap.admissible_tokens;
    if (pc.scheduler.preemption == PreemptionMode::kSwap && pc.kind != PoolRole::kEncode) {
      // Each chip copies its own shard of the KV over its own host link, all in parallel.
      SERVESIM_CHECK_MSG(pc.chip.host_bandwidth.bytes_per_s > 0, "swap needs the chip's host_bandwidth");
      pool.swap_s_per_token = cap.memory.kv_bytes_per_token / pc.chip.host_bandwidth.bytes_per_s;
    }
    info.kv_blocks = cap.blocks_per_lane * pc.plan.pp * pc.instances;
    pool.metrics_id = recorder_.add_pool(std::move(info));
    for (int i = 0; i < pc.instances; ++i) {
      Instance inst;
      inst.pool = static_cast<std::uint32_t>(pools_.size());
      for (int l = 0; l < pc.plan.pp && pc.kind != PoolRole::kEncode; ++l) {
        inst.lanes.emplace_back(&requests_, cap.blocks_per_lane, pc.kv_cache.block_tokens,
                                cap.watermark_blocks, pc.scheduler.max_batch_size,
                                config_.model.window.window, config_.model.dsa.top_k);
        if (pool.swap_s_per_token > 0) inst.lanes.back().enable_swap();
        if (pc.attention_dp != AttentionDpBalance::kEven && pc.plan.dp > 1) {
          inst.lanes.back().enable_rank_balance(pc.plan.dp,
                                                pc.attention_dp == AttentionDpBalance::kLeastKv);
        }
        if (!reach.empty()) {
          inst.lanes.back().enable_speculative(
              spec.draft_tokens, reach,
              Rng(config_.seed, "speculative/" + pc.name + "/" + std::to_string(i) + "/" +
                                    std::to_string(l)));
        }
        if (pool.caching) {
          inst.lanes.back().enable_prefix_cache(
              static_cast<std::int64_t>(pc.prefix_cache.capacity_fraction *
                                        static_cast<double>(cap.blocks_per_lane)),
              &prefix_keys_);
        }
      }
      inst.stage_free.assign(static_cast<std::size_t>(pc.plan.pp), SimTime::zero());
      if (pool.a2a_on_nics) {
        // Its chips' NIC links (both directions), booked together for the all-to-all.
        std::vector<topologies::LinkId> nics;
        for (const topologies::ChipId c : placement_->chips(static_cast<int>(pools_.size()), i)) {
          for (const topologies::LinkId l : {fabric_->attachment_up(c, topologies::Plane::kScaleOut),
                                             fabric_->attachment_down(c, topologies::Plane::kScaleOut)}) {
            if (l.valid()) nics.push_back(l);
          }
        }
        inst.nic_group = net_->add_reserve_group(nics);
      }
      instances_.push_back(std::move(inst));
    }
    stage_ps_.resize(std::max<std::size_t>(stage_ps_.size(), static_cast<std::size_t>(pc.plan.pp)));
    if (pool.free_kv) {
      for (int i = 0; i < pc.instances; ++i) {
        pool.router->set_load(static_cast<std::uint32_t>(i), -cap.blocks_per_lane);
      }
    }
    pools_.push_back(std::move(pool));
  }
  series_ = recorder_.time_series();
  trace_ = recorder_.trace_log();
  flow_ranks_ = rank_flows_symmetric();
  if (decode_pool_ >= 0) {
    const Pool& dp = pools_[static_cast<std::size_t>(decode_pool_)];
    // Runs assume one token per request per step and an even split over the dp ranks: off with
    // speculative decoding or per-rank batches.
    runs_ = config_.decode_steps_per_event > 1 && !series_ && !trace_ && dp.free_kv &&
            dp.config->plan.pp == 1 && !dp.config->speculative.enabled() &&
            dp.config->attention_dp == AttentionDpBalance::kEven && !dp.a2a_on_nics;
  }
  const auto& classes = config_.workload.classes;
  SERVESIM_CHECK(config_.class_slo.empty() || config_.class_slo.size() == classes.size());
  for (std::size_t i = 0; i < classes.size(); ++i) {
    metrics::ClassInfo info;
    info.name = classes[i].name;
    info.priority = classes[i].priority;
    info.slo = config_.class_slo.empty() ? config_.slo : config_.class_slo[i];
    if (const auto* t = std::get_if<workloads::TraceReplay>(&classes[i].arrivals)) {
      if (t->scan) info.skipped_trace_rows = t->scan->bad_rows;
    }
    recorder_.add_class(std::move(info));
  }
  const SimTime end = config_.horizon ? SimTime::zero() + *config_.horizon : SimTime::never();
  source_ = std::make_unique<workloads::RequestSource>(config_.workload, config_.seed, end);
  keep_inputs_ = !source_->plain();
  if (config_.workload.requests > 0) {
    requests_.reserve(static_cast<std::size_t>(config_.workload.requests));
    if (keep_inputs_) inputs_.reserve(static_cast<std::size_t>(config_.workload.requests));
    if (caching_) prefix_keys_.reserve(static_cast<std::size_t>(config_.workload.requests));
    recorder_.expect_requests(config_.workload.requests);
  }
}

Simulation::~Simulation() = default;

std::optional<IterationCostModel::PlacedGroups> Simulation::placed_groups(int pool, const PoolConfig& pc) const {
  const ClusterConfig& cc = *config_.cluster;
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
      for (int r = 0; r < stage; ++r) {
        const std::array<topologies::ChipId, 2> pair{chips[static_cast<std::size_t>(s * stage + r)],
                                                     chips[static_cast<std::size_t>((s + 1) * stage + r)]};
        note(pair);
      }
    }
    out.pp_hops.push_back(place_group(distinct, cache, cc.spec.comm, share));
  }
  return out;
}

std::vector<metrics::GroupTier> Simulation::group_tiers(const PoolConfig& pc, int pool,
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
  const topologies::Fabric* fab =
      fabric_ ? fabric_.get() : config_.cluster ? config_.cluster->fabric.get() : nullptr;
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
      g.domain_chips = config_.cluster ? config_.cluster->spec.scale_up.domain_chips
                                       : default_cluster_->spec.scale_up.domain_chips;
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
        leaves = (k.model == models::Group::kTp ? placed->tp
                  : k.model == models::Group::kEp ? placed->moe : placed->cp).leaves_domain();
      }
      g.leaves_domain = leaves;
    }
    g.tier = g.ranks <= 1 ? "none" : g.leaves_domain ? "scale_out" : "scale_up";
    out.push_back(std::move(g));
  }
  return out;
}

std::int64_t Simulation::load_units(const Pool& pool, std::int64_t tokens, std::int64_t requests) {
  return pool.config->router.load == LoadMetric::kOutstandingTokens ? tokens : requests;
}

std::int64_t Simulation::instance_load(std::uint32_t instance) const {
  const Pool& pool = pools_[instances_[instance].pool];
  return pool.router->load(instance - pool.first_instance);
}

void Simulation::schedule_arrivals() {
  for (const workloads::Arrival& a : arrivals_) schedule(a.time, RequestArrived{a.stream});
  arrivals_.clear();
}

RunResult Simulation::run() {
  ScopedCheckContext scoped(&check_context_);
  // The source stops at the workload's request counts and at the horizon.
  source_->start(arrivals_);
  schedule_arrivals();
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    schedule(faults_[i].at, FaultOccurred{static_cast<std::uint32_t>(i)});
  }

  RunResult result;
  const SimTime horizon =
      config_.horizon ? SimTime::zero() + *config_.horizon : SimTime::never();
  constexpr auto kDispatchPriority = static_cast<std::uint8_t>(Event(DispatchRequested{}).index());
  while (true) {
    // Dispatches requested at now_ run where their events would: after every event at now_ of a
    // lower priority class, in request order, before the rest (no queue round trip).
    if (!dispatches_.empty() && (queue_.empty() || queue_.top().time > now_ ||
                                 queue_.top().priority() > kDispatchPriority)) {
      const std::uint32_t index = dispatches_.front();
      dispatches_.pop_front();
      check_context_.event_name = "DispatchRequested";
      handle(DispatchRequested{index});
      if (paranoid_) check_all();
      continue;
    }
    if (queue_.empty()) break;
    if (queue_.top().time > horizon) {
      result.reached_horizon = true;
      break;
    }
    const auto entry = queue_.pop();
    SERVESIM_CHECK_MSG(entry.time >= now_, "time went back");
    now_ = entry.time;
    check_context_.now = now_;
    check_context_.event_name = event_name(entry.payload);
    check_context_.event_sequence = entry.sequence();
    ++result.events;
    result.fingerprint = fingerprint_step(result.fingerprint, static_cast<std::uint64_t>(now_.ps()));
    result.fingerprint = fingerprint_step(result.fingerprint,
                                          (std::uint64_t{entry.priority()} << 56) ^ event_ids(entry.payload));
    std::visit([this](const auto& e) { handle(e); }, entry.payload);
    if (paranoid_) check_all();
    if ((result.events & 4095) == 0 && progress_) [[unlikely]] publish_progress(result.events);
  }
  result.end = result.reached_horizon ? horizon : now_;
  if (runs_) {
    // Steps that ended within the window count, as their events would have.
    const Pool& dp = pools_[static_cast<std::size_t>(decode_pool_)];
    for (int i = 0; i < dp.config->instances; ++i) {
      settle_run(dp.first_instance + static_cast<std::uint32_t>(i), result.end);
    }
  }
  if (series_ && net_) [[unlikely]] record_link_usage(result.end);
  if (series_) series_->finish(result.end);
  if (progress_) publish_progress(result.events);

  for (const Pool& pool : pools_) {
    if (!pool.caching) continue;
    metrics::PrefixCacheCounts c;
    for (int i = 0; i < pool.config->instances; ++i) {
      for (const Lane& lane : instances_[pool.first_instance + static_cast<std::uint32_t>(i)].lanes) {
        c.add(lane.prefix_cache()->stats());
      }
    }
    recorder_.prefix_cache(pool.metrics_id, c);
  }
  for (const Pool& pool : pools_) {
    for (int i = 0; i < pool.config->instances; ++i) {
      for (const Lane& lane : instances_[pool.first_instance + static_cast<std::uint32_t>(i)].lanes) {
        recorder_.kv_usage_peak(pool.metrics_id, static_cast<double>(lane.peak_used_blocks()) /
                                                     static_cast<double>(lane.total_blocks()));
      }
    }
  }
  return result;
}

void Simulation::handle(const RequestArrived& e) {
  const auto r = static_cast<std::uint32_t>(requests_.size());
  const workloads::Request in = source_->take(e.stream, now_, arrivals_);
  RequestState s;
  s.prompt = in.prompt_tokens;
  s.output = in.output_tokens;
  s.prefill_target = s.prompt;
  s.stream = in.stream;
  s.cls = in.class_id;
  requests_.push_back(s);
  Journey j;
  j.mark = j.arrival = now_;
  // With an encode pool the images become prompt tokens (the model's vision encoder); without
  // one they are not modelled (the aggregated mode's behaviour).
  if (encode_pool_ >= 0 && in.images > 0 && config_.model.vision) {
    std::int64_t tokens = 0;
    for (std::size_t i = 0; i < in.images; ++i) {
      const workloads::ImageSize im = source_->image(in, i);
      tokens += config_.model.vision->image_tokens(im.width, im.height);
    }
    j.image_tokens = static_cast<std::uint32_t>(tokens);
  }
  if (free_journeys_.empty()) {
    requests_.back().journey = static_cast<std::uint32_t>(journeys_.size());
    journeys_.push_back(j);
  } else {
    requests_.back().journey = free_journeys_.back();
    free_journeys_.pop_back();
    journeys_[requests_.back().journey] = j;
  }
  if (keep_inputs_) inputs_.push_back(in);
  if (caching_) [[unlikely]] prefix_keys_.push_back(prefix_keys_of(in));
  recorder_.request_arrived(RequestId(r), now_, in.prompt_tokens, in.output_tokens, in.class_id);
  schedule_arrivals();  // the stream's next open-loop arrival
  enter(r);
}

void Simulation::enter(std::uint32_t r) {
  if (journey(r).image_tokens > 0 && requests_[r].generated == 0) {
    route_encode(r);
    return;
  }
  const std::uint32_t index = pick_prefill(r);
  if (index != kNoInstance) enqueue_prefill(r, index);
}

std::uint32_t Simulation::pick_prefill(std::uint32_t r) {
  RequestState& s = requests_[r];
  Pool& pool = pools_[static_cast<std::size_t>(prefill_pool_)];
  const std::int64_t tokens = static_cast<std::int64_t>(s.prompt) + journey(r).image_tokens;
  if (tokens + s.output > pool.config->max_model_len) {
    reject(r, metrics::RejectReason::kExceedsMaxModelLen);
    return kNoInstance;
  }
  const std::uint32_t local = pool.kv_aware ? pick_kv_aware(pool, r) : pool.router->pick();
  if (local == kNoInstance) {
    reject(r, metrics::RejectReason::kNoCapacity);
    return kNoInstance;
  }
  const std::uint32_t index = pool.first_instance + local;
  const Instance& inst = instances_[index];
  if (pool.config->scheduler.max_queue > 0) {
    std::int64_t waiting = 0;
    for (const Lane& l : inst.lanes) waiting += static_cast<std::int64_t>(l.waiting());
    if (waiting >= pool.config->scheduler.max_queue) {
      reject(r, metrics::RejectReason::kQueueFull);
      return kNoInstance;
    }
  }
  return index;
}

void Simulation::enqueue_prefill(std::uint32_t r, std::uint32_t index) {
  RequestState& s = requests_[r];
  Instance& inst = instances_[index];
  Pool& pool = pools_[inst.pool];
  const std::uint32_t local = index - pool.first_instance;
  if (!inst.up) {  // it failed while the embeddings were on their way: route again
    const std::uint32_t again = pick_prefill(r);
    if (again != kNoInstance) enqueue_prefill(r, again);
    return;
  }
  // A re-queued request prefills everything it had (recompute); image tokens are prompt tokens.
  s.prefill_target = s.prompt + journey(r).image_tokens + s.generated;
  s.prefilled = 0;
  // The lane with the fewest unfinished requests (vLLM assigns virtual engines this way); ties
  // rotate.
  std::uint32_t best = inst.next_assign % static_cast<std::uint32_t>(inst.lanes.size());
  for (std::uint32_t k = 1; k < inst.lanes.size(); ++k) {
    const std::uint32_t l = (inst.next_assign + k) % static_cast<std::uint32_t>(inst.lanes.size());
    if (inst.lanes[l].unfinished() < inst.lanes[best].unfinished()) best = l;
  }
  if (pool.caching && inst.lanes.size() > 1) [[unlikely]] {
    // With prefix caches the lane holding most of the prompt wins; ties keep the choice above.
    std::int64_t most = inst.lanes[best].cached_prefix_tokens(prefix_keys_[r], s.prefill_target);
    for (std::uint32_t l = 0; l < inst.lanes.size(); ++l) {
      const std::int64_t c = inst.lanes[l].cached_prefix_tokens(prefix_keys_[r], s.prefill_target);
      if (c > most) {
        most = c;
        best = l;
      }
    }
  }
  inst.next_assign = best + 1;
  s.instance = index;
  s.lane = static_cast<std::uint16_t>(best);
  inst.lanes[best].enqueue_back(r);
  if (series_) [[unlikely]] series_->gauges_changed(pool.metrics_id, now_, 1, 0, 0);
  const std::int64_t work = s.prefill_target + (pool.role == PoolRole::kCombined ? s.output - s.generated : 0);
  add_load(pool, local, load_units(pool, work, 1));
  recorder_.request_routed(RequestId(r), pool.metrics_id, InstanceId(index));
  schedule_dispatch(index);
}

PrefixKeys Simulation::prefix_keys_of(const workloads::Request& in) const {
  PrefixKeys k;
  if (in.hash_ids > 0) {
    // Mooncake hash ids: one segment per id, the trace's block_tokens each; whole ones only.
    const auto bt = static_cast<std::uint32_t>(source_->block_tokens(in.class_id));
    k.ring = &source_->ids();
    k.handle = in.extra;
    k.segment_tokens = bt;
    k.segments = std::min(in.hash_ids, in.prompt_tokens / bt);
    return k;
  }
  // One KV block per segment: the shared prompt's, then (in a session) the conversation's.
  const auto b = static_cast<std::uint32_t>(
      pools_[static_cast<std::size_t>(prefill_pool_)].config->kv_cache.block_tokens);
  k.segment_tokens = b;
  if (in.prefix_id != workloads::kNoId32) {
    k.prefix_key = prefix_key_mix(2, in.prefix_id);
    k.prefix_segments = in.prefix_tokens / b;
    k.segments = k.prefix_segments;
  }
  if (in.session != workloads::kNoId64) {
    k.session_key = prefix_key_mix(3, in.session);
    k.segments = in.prompt_tokens / b;
  }
  return k;
}

std::uint32_t Simulation::pick_kv_aware(Pool& pool, std::uint32_t r) {
  auto& router = static_cast<KvAwareRouter&>(*pool.router);
  const PrefixKeys& k = prefix_keys_[r];
  if (k.segments == 0) return router.pick();
  const RequestState& s = requests_[r];
  const std::uint32_t target = s.prompt + journey(r).image_tokens + s.generated;
  return router.pick_for(target, [&](std::uint32_t local) {
    std::int64_t most = 0;
    for (const Lane& l : instances_[pool.first_instance + local].lanes) {
      most = std::max(most, l.cached_prefix_tokens(k, target));
    }
    return most;
  });
}

void Simulation::schedule_dispatch(std::uint32_t index) {
  Instance& inst = instances_[index];
  if (!inst.dispatch_pending && (inst.stage_free.empty() || inst.stage_free.front() <= now_)) {
    inst.dispatch_pending = true;
    dispatches_.push_back(index);  // run as a DispatchRequested event at now_ (see run())
  }
}

void Simulation::route_encode(std::uint32_t r) {
  Pool& pool = pools_[static_cast<std::size_t>(encode_pool_)];
  const std::uint32_t local = pool.router->pick();
  if (local == kNoInstance) {
    reject(r, metrics::RejectReason::kNoCapacity);
    return;
  }
  const std::uint32_t index = pool.first_instance + local;
  Instance& inst = instances_[index];
  if (pool.config->scheduler.max_queue > 0 &&
      static_cast<std::int64_t>(inst.encode_waiting.size()) >= pool.config->scheduler.max_queue) {
    reject(r, metrics::RejectReason::kQueueFull);
    return;
  }
  RequestState& s = requests_[r];
  s.phase = Phase::kEncoding;
  s.instance = index;
  inst.encode_waiting.push_back(r);
  add_load(pool, local, load_units(pool, journey(r).image_tokens, 1));
  recorder_.request_routed(RequestId(r), pool.metrics_id, InstanceId(index));
  schedule_dispatch(index);
}

void Simulation::try_encode(std::uint32_t index) {
  Instance& inst = instances_[index];
  if (inst.encode_busy || inst.encode_waiting.empty() || !inst.up) return;
  Pool& pool = pools_[inst.pool];
  // One batch: requests in arrival order while the batch-size cap and the token budget (image
  // tokens) allow; the first always goes.
  inst.encode_batch.clear();
  images_.clear();
  std::int64_t tokens = 0;
  while (!inst.encode_waiting.empty() &&
         static_cast<std::int64_t>(inst.encode_batch.size()) < pool.config->scheduler.max_batch_size) {
    const std::uint32_t r = inst.encode_waiting.front();
    const std::int64_t t = journey(r).image_tokens;
    if (!inst.encode_batch.empty() && tokens + t > pool.config->scheduler.max_batched_tokens) break;
    inst.encode_waiting.pop_front();
    tokens += t;
    inst.encode_batch.push_back(r);
    advance(r, metrics::TtftPart::kQueueing);
    const workloads::Request& in = inputs_[r];
    for (std::size_t i = 0; i < in.images; ++i) {
      const workloads::ImageSize im = source_->image(in, i);
      images_.push_back(models::ImageSize{im.width, im.height});
    }
  }
  const double seconds = models::encode_seconds(*config_.model.vision, images_, pool.config->plan.tp,
                                                *pool.encode_cost);
  const Duration d = Duration::picoseconds(static_cast<std::int64_t>(seconds * 1e12 + 0.5));
  inst.encode_busy = true;
  const std::int64_t ps = d.ps();
  recorder_.iteration(pool.metrics_id, &ps);
  schedule(now_ + d, EncodeFinished{index, inst.epoch});
}

void Simulation::handle(const EncodeFinished& e) {
  Instance& inst = instances_[e.instance];
  if (e.epoch != inst.epoch) return;  // the instance failed meanwhile
  inst.encode_busy = false;
  Pool& pool = pools_[inst.pool];
  const double per_token = config_.disaggregation.embedding_bytes_per_token > 0
                               ? config_.disaggregation.embedding_bytes_per_token
                               : 2.0 * config_.model.hidden;  // bf16 embeddings
  for (const std::uint32_t r : inst.encode_batch) {
    advance(r, metrics::TtftPart::kEncode);
    add_load(pool, e.instance - pool.first_instance,
             load_units(pool, -static_cast<std::int64_t>(journey(r).image_tokens), -1));
    const std::uint32_t target = pick_prefill(r);
    if (target == kNoInstance) continue;
    journey(r).target = target;
    start_flows(r, e.instance, target, 0, per_token * journey(r).image_tokens, kEmbeddingFlow);
  }
  inst.encode_batch.clear();
  reschedule_network();
  try_encode(e.instance);
}

void Simulation::start_flows(std::uint32_t r, std::uint32_t src, std::uint32_t dst,
                             std::uint32_t dst_lane, double bytes, FlowKind kind) {
  (void)dst_lane;
  // KV and embeddings move between the TP ranks of one attention-DP group at each end (the
  // request's group: its id modulo dp), rank t to rank t, in min(tp_src, tp_dst) flows.
  const Instance& a = instances_[src];
  const Instance& b = instances_[dst];
  const int pa = static_cast<int>(a.pool), pb = static_cast<int>(b.pool);
  const models::ParallelPlan& plan_a = pools_[a.pool].config->plan;
  const models::ParallelPlan& plan_b = pools_[b.pool].config->plan;
  const auto chips_a = placement_->chips(pa, static_cast<int>(src - pools_[a.pool].first_instance));
  const auto chips_b = placement_->chips(pb, static_cast<int>(dst - pools_[b.pool].first_instance));
  SERVESIM_CHECK_MSG(!chips_a.empty() && !chips_b.empty(), "an instance without chips moves data");
  const int k = std::max(1, std::min(plan_a.tp, plan_b.tp));
  const std::size_t ga = (r % static_cast<std::uint32_t>(plan_a.dp)) * static_cast<std::size_t>(plan_a.tp);
  const std::size_t gb = (r % static_cast<std::uint32_t>(plan_b.dp)) * static_cast<std::size_t>(plan_b.tp);
  Journey& j = journey(r);
  const int flows = flow_ranks_ > 0 ? 1 : k;  // rank pair 0 stands for all (rank_flows_symmetric)
  for (int t = 0; t < flows; ++t) {
    const auto ca = chips_a[(ga + static_cast<std::size_t>(t)) % chips_a.size()];
    const auto cb = chips_b[(gb + static_cast<std::size_t>(t)) % chips_b.size()];
    net_->start(now_, ca, cb, std::max(bytes / k, 1.0),
                (std::uint64_t{r} << 8) | (std::uint64_t{j.epoch & 63u} << 2) | kind, r);
    ++j.flows;
  }
}

// Whether one flow per transfer (rank pair 0, carrying bytes / k) stands exactly for its k rank-pair
// flows: returns k then, 0 otherwise. It does when, for every pair of instances that exchange data
// (encode -> prefill, prefill -> decode) and every attention-DP group at both ends:
//  - every transfer has the same k >= 2 rank pairs;
//  - rank t's route is a copy of rank 0's: as many hops, each of the same capacity and class (so
//    the flows' caps are equal too);
//  - its first and last hops are the endpoint chips' own links, and every hop between them a bundle
//    (adaptive routing: the route does not depend on the flow label);
//  - no other resource on any route can ever bind: the first-hop capacities of the distinct source
//    chips whose routes cross it (or the last-hop capacities of the destination chips) add up to no
//    more than its capacity, so the flows through it can never fill it.
// Then flows meet only at endpoint links; rank t's flows only at the links of the instances' rank-t
// chips, and two transfers share a rank-t endpoint link exactly when they share the rank-0 one (same
// instance and group). The k rank systems are copies of one another, so the max-min rates of a
// transfer's k flows are equal at every instant (the allocation is unique) and they end together.
// Faults break the symmetry (a chip or link of one rank fails) and ECMP gives each rank pair its own
// hashed path, so neither qualifies. Routes are enumerated once, when the simulation is built;
// beyond kMaxSymmetryRoutes the check gives up and every rank pair flows. The process keeps the
// answers for its last few inputs (symmetry_cache; serve asks again for every hypothesis).
int Simulation::rank_flows_symmetric() const {
  constexpr std::size_t kMaxSymmetryRoutes = std::size_t{1} << 20;
  if (!net_ || config_.flow_per_rank_pair || !faults_.empty() ||
      fabric_->routing() != topologies::Routing::kAdaptive) {
    return 0;
  }
  struct Exchange {
    int from, to;
  };
  std::vector<Exchange> exchanges;
  if (encode_pool_ >= 0) exchanges.push_back({encode_pool_, prefill_pool_});
  if (disaggregated_) exchanges.push_back({prefill_pool_, decode_pool_});
  int k = 0;
  std::size_t routes = 0;
  for (const Exchange& x : exchanges) {
    const PoolConfig& a = *pools_[static_cast<std::size_t>(x.from)].config;
    const PoolConfig& b = *pools_[static_cast<std::size_t>(x.to)].config;
    const int kx = std::max(1, std::min(a.plan.tp, b.plan.tp));
    if (k != 0 && kx != k) return 0;
    k = kx;
    routes += static_cast<std::size_t>(a.instances) * static_cast<std::size_t>(a.plan.dp) *
              static_cast<std::size_t>(b.instances) * static_cast<std::size_t>(b.plan.dp) *
              static_cast<std::size_t>(kx);
  }
  if (k < 2 || routes > kMaxSymmetryRoutes) return 0;

  // The answer is a function of what the check reads (SymmetryKey): a serve session builds a
  // simulation per hypothesis, mostly on the same cluster and placement, and asks once.
  const SymmetryKey key = symmetry_key(*fabric_, [&](std::vector<std::uint64_t>& w) {
    for (const Exchange& x : exchanges) {
      for (const int p : {x.from, x.to}) {
        const PoolConfig& pc = *pools_[static_cast<std::size_t>(p)].config;
        w.push_back(static_cast<std::uint64_t>(p));
        w.push_back(static_cast<std::uint64_t>(pc.plan.tp) << 32 | static_cast<std::uint32_t>(pc.plan.dp));
        w.push_back(static_cast<std::uint64_t>(pc.instances));
        for (int i = 0; i < pc.instances; ++i) {
          const auto chips = placement_->chips(p, i);
          w.push_back(chips.size());
          for (const topologies::ChipId c : chips) w.push_back(c.value);
        }
      }
    }
  });
  if (const std::optional<int> known = symmetry_cache().find(key)) return *known;
  const auto check = [&]() -> int {
    const topologies::Fabric& fabric = *fabric_;
    // The exchanging pools' chips, numbered 0.. in pool, instance, chip order (to mark which chips'
    // routes cross a resource), and each instance's chips.
    std::vector<std::vector<std::span<const topologies::ChipId>>> chips(pools_.size());
    std::vector<std::vector<std::uint32_t>> first_chip(pools_.size());
    std::uint32_t numbered = 0;
    for (const Exchange& x : exchanges) {
      for (const int p : {x.from, x.to}) {
        const auto pool = static_cast<std::size_t>(p);
        if (!chips[pool].empty()) continue;
        for (int i = 0; i < pools_[pool].config->instances; ++i) {
          chips[pool].push_back(placement_->chips(p, i));
          first_chip[pool].push_back(numbered);
          numbered += static_cast<std::uint32_t>(chips[pool].back().size());
        }
      }
    }
    // Per resource met inside a route: the summed first-hop capacity of the distinct source chips
    // whose routes cross it, the same of the destination chips' last hops, and which chips counted.
    const std::size_t words = (numbered + 63) / 64;
    std::vector<std::uint32_t> slot_of(fabric.resource_count(), ~std::uint32_t{0});
    std::vector<std::uint32_t> slot_resource;
    std::vector<double> src_sum, dst_sum;
    std::vector<std::uint64_t> src_seen, dst_seen;
    const auto count = [&](std::vector<std::uint64_t>& seen, std::vector<double>& sum, std::uint32_t slot,
                           std::uint32_t chip, double capacity) {
      std::uint64_t& word = seen[slot * words + chip / 64];
      const std::uint64_t bit = std::uint64_t{1} << (chip % 64);
      if ((word & bit) != 0) return;
      word |= bit;
      sum[slot] += capacity;
    };
    // Every resource's capacity and class, read once (the loop below asks millions of times).
    std::vector<double> capacity_of(fabric.resource_count());
    std::vector<topologies::LinkClass> class_of(fabric.resource_count());
    for (std::uint32_t res = 0; res < capacity_of.size(); ++res) {
      capacity_of[res] = fabric.resource_capacity(res);
      class_of[res] = fabric.resource_class(res);
    }
    topologies::Route first_rank, route;
    for (const Exchange& x : exchanges) {
      const auto pa = static_cast<std::size_t>(x.from), pb = static_cast<std::size_t>(x.to);
      const PoolConfig& a = *pools_[pa].config;
      const PoolConfig& b = *pools_[pb].config;
      for (int i = 0; i < a.instances; ++i) {
        const auto chips_a = chips[pa][static_cast<std::size_t>(i)];
        for (int g = 0; g < a.plan.dp; ++g) {
          for (int j = 0; j < b.instances; ++j) {
            const auto chips_b = chips[pb][static_cast<std::size_t>(j)];
            for (int h = 0; h < b.plan.dp; ++h) {
              for (int t = 0; t < k; ++t) {
                // The chips start_flows pairs: rank t of the request's group at each end.
                const std::size_t ia = (static_cast<std::size_t>(g) * static_cast<std::size_t>(a.plan.tp) +
                                        static_cast<std::size_t>(t)) % chips_a.size();
                const std::size_t ib = (static_cast<std::size_t>(h) * static_cast<std::size_t>(b.plan.tp) +
                                        static_cast<std::size_t>(t)) % chips_b.size();
                const topologies::ChipId src = chips_a[ia], dst = chips_b[ib];
                topologies::Route& r = t == 0 ? first_rank : route;
                if (!fabric.flow_route(src, dst, 0, r) || r.hops < 2) return 0;
                const topologies::LinkId head = r.links[0], tail = r.links[r.hops - 1u];
                if (fabric.is_bundle(head.value) || fabric.is_bundle(tail.value) ||
                    fabric.link(head).from.value != src.value || fabric.link(tail).to.value != dst.value) {
                  return 0;
                }
                if (t > 0) {
                  if (r.hops != first_rank.hops) return 0;
                  for (std::uint8_t hop = 0; hop < r.hops; ++hop) {
                    const std::uint32_t u = r.links[hop].value, v = first_rank.links[hop].value;
                    if (u != v && (capacity_of[u] != capacity_of[v] || class_of[u] != class_of[v])) {
                      return 0;
                    }
                  }
                }
                const double src_capacity = capacity_of[head.value];
                const double dst_capacity = capacity_of[tail.value];
                const std::uint32_t src_number = first_chip[pa][static_cast<std::size_t>(i)] + static_cast<std::uint32_t>(ia);
                const std::uint32_t dst_number = first_chip[pb][static_cast<std::size_t>(j)] + static_cast<std::uint32_t>(ib);
                for (std::uint8_t hop = 1; hop + 1 < r.hops; ++hop) {
                  const std::uint32_t res = r.links[hop].value;
                  // A switch link inside a route is an ECMP path (no bundles here, or a scale-up
                  // mesh): it depends on the flow label, which this check does not enumerate.
                  if (!fabric.is_bundle(res)) return 0;
                  if (slot_of[res] == ~std::uint32_t{0}) {
                    slot_of[res] = static_cast<std::uint32_t>(slot_resource.size());
                    slot_resource.push_back(res);
                    src_sum.push_back(0);
                    dst_sum.push_back(0);
                    src_seen.resize(src_seen.size() + words, 0);
                    dst_seen.resize(dst_seen.size() + words, 0);
                  }
                  count(src_seen, src_sum, slot_of[res], src_number, src_capacity);
                  count(dst_seen, dst_sum, slot_of[res], dst_number, dst_capacity);
                }
              }
            }
          }
        }
      }
    }
    for (std::size_t slot = 0; slot < slot_resource.size(); ++slot) {
      if (std::min(src_sum[slot], dst_sum[slot]) > capacity_of[slot_resource[slot]]) return 0;
    }
    return k;
  };
  const int result = check();
  symmetry_cache().keep(key, result);
  return result;
}

void Simulation::reschedule_network() {
  if (!net_) return;
  const SimTime t = net_->next_completion();
  if (t == SimTime::never() || t >= net_due_) return;  // the live event comes first (or none due)
  net_due_ = t;
  schedule(std::max(t, now_), NetworkDue{++net_generation_});
}

void Simulation::handle(const NetworkDue& e) {
  if (e.generation != net_generation_) return;
  net_due_ = SimTime::never();
  flow_done_.clear();
  net_->complete_until(now_, flow_done_);
  for (const topologies::FlowDone& d : flow_done_) flow_done(d);
  reschedule_network();
}

void Simulation::flow_done(const topologies::FlowDone& d) {
  const auto r = static_cast<std::uint32_t>(d.tag >> 8);
  const auto kind = static_cast<FlowKind>(d.tag & 3);
  if (requests_[r].journey == kNoRequest) return;  // lost to a failure: its flows were stale
  Journey& j = journey(r);
  if (((d.tag >> 2) & 63u) != (j.epoch & 63u)) return;  // a failure made it stale
  SERVESIM_CHECK(j.flows > 0);
  if (--j.flows > 0) return;
  RequestState& s = requests_[r];
  if (s.phase == Phase::kDone) return;
  if (kind == kEmbeddingFlow) {
    advance(r, metrics::TtftPart::kEmbeddingTransfer);
    enqueue_prefill(r, j.target);
    return;
  }
  // A streamed transfer's bulk may land before the prefill ends; it is done with the last layer.
  if (s.phase == Phase::kTransferring) kv_arrived(r);
}

bool Simulation::place_decode(std::uint32_t r) {
  Pool& pool = pools_[static_cast<std::size_t>(decode_pool_)];
  const RequestState& s = requests_[r];
  const std::int64_t block = pool.config->kv_cache.block_tokens;
  const std::int64_t need = (static_cast<std::int64_t>(s.prefill_target) + block - 1) / block;
  const std::uint32_t local = pool.router->pick();
  if (local == kNoInstance) return false;
  const std::uint32_t index = pool.first_instance + local;
  Instance& inst = instances_[index];

  std::uint32_t best = 0;
  for (std::uint32_t l = 1; l < inst.lanes.size(); ++l) {
    if (inst.lanes[l].free_blocks() > inst.lanes[best].free_blocks()) best = l;
  }
  bool reserved = false;
  changing(index, inst.lanes[best], [&] { reserved = inst.lanes[best].reserve_inbound(need); });
  if (!reserved) return false;
  Journey& j = journey(r);
  j.flows_reserved = true;
  j.target = index;
  j.target_lane = static_cast<std::uint16_t>(best);
  note_free_kv(index);
  return true;
}

void Simulation::note_free_kv(std::uint32_t index) {
  Instance& inst = instances_[index];
  Pool& pool = pools_[inst.pool];
  if (!pool.free_kv) return;
  std::int64_t free = 0;
  for (const Lane& l : inst.lanes) free = std::max(free, l.free_blocks());
  pool.router->set_load(index - pool.first_instance, -free);
}

void Simulation::start_kv_flows(std::uint32_t r, double bytes) {
  Journey& j = journey(r);
  start_flows(r, requests_[r].instance, j.target, j.target_lane, bytes, kKvFlow);
}

void Simulation::prefill_done(std::uint32_t r, Lane& lane) {
  RequestState& s = requests_[r];
  Journey& j = journey(r);
  Pool& pool = pools_[instances_[s.instance].pool];
  lane.hold_for_transfer(r);
  add_load(pool, s.instance - pool.first_instance, load_units(pool, 0, -1));
  j.prefill_end = now_;
  j.in_prefill = false;
  const double total = static_cast<double>(s.prefill_target) *
                       static_cast<double>(config_.model.kv_bytes_per_token());
  if (j.streamed) {
    // The last layer's share leaves now; the rest has been moving since the first chunk.
    start_kv_flows(r, total / std::max(1, config_.model.layers));
    reschedule_network();
    return;
  }
  const Pool& decode = pools_[static_cast<std::size_t>(decode_pool_)];
  if (static_cast<std::int64_t>(s.prefill_target) + s.output - s.generated > decode.admissible_tokens) {
    changing(s.instance, lane, [&] { lane.release_held(r); });
    reject(r, metrics::RejectReason::kNoCapacity);
    return;
  }
  if (!awaiting_decode_.empty() || !place_decode(r)) {
    awaiting_decode_.push_back(r);
    return;
  }
  j.kv_bytes = total;
  j.transfer_start = now_;
  j.transferred = true;
  start_kv_flows(r, total);
  reschedule_network();
}

void Simulation::drain_awaiting() {
  bool started = false;
  while (!awaiting_decode_.empty()) {
    const std::uint32_t r = awaiting_decode_.front();
    if (requests_[r].phase != Phase::kTransferring) {  // a failure took it meanwhile
      awaiting_decode_.pop_front();
      continue;
    }
    if (!place_decode(r)) break;
    awaiting_decode_.pop_front();
    Journey& j = journey(r);
    advance(r, metrics::TtftPart::kQueueing);
    j.kv_bytes = static_cast<double>(requests_[r].prefill_target) *
                 static_cast<double>(config_.model.kv_bytes_per_token());
    j.transfer_start = now_;
    j.transferred = true;
    start_kv_flows(r, j.kv_bytes);
    started = true;
  }
  if (started) reschedule_network();
}

void Simulation::kv_arrived(std::uint32_t r) {
  RequestState& s = requests_[r];
  Journey& j = journey(r);
  Instance& src = instances_[s.instance];
  Lane& held_on = src.lanes[s.lane];
  changing(s.instance, held_on, [&] { held_on.release_held(r); });
  // Its blocks are free again: a request waiting for blocks there may now be admitted (a lane
  // with nothing waiting has nothing to start, and a dispatch would find an empty batch).
  if (held_on.has_waiting() || !held_on.prefilling().empty()) schedule_dispatch(s.instance);
  advance(r, metrics::TtftPart::kKvTransferExposed);
  j.transfer_end = now_;
  j.flows_reserved = false;
  Instance& dst = instances_[j.target];
  Pool& pool = pools_[dst.pool];
  if (trace_ && trace_->wants(j.transfer_start)) [[unlikely]] {
    const std::int64_t exposed = j.ttft[static_cast<std::size_t>(metrics::TtftPart::kKvTransferExposed)];
    trace_->record(metrics::TraceSpan{j.transfer_start.ps(), now_.ps(), pool.metrics_id.value,
                                      j.target - pool.first_instance, 0, metrics::TraceKind::kTransfer,
                                      {r, static_cast<std::int64_t>(j.kv_bytes), exposed / 1000, 0}});
  }
  s.instance = j.target;
  s.lane = j.target_lane;
  if (dst.run.size > 0) cut_run(j.target);  // it joins after the step in flight
  dst.lanes[j.target_lane].push_ready(r);
  add_load(pool, j.target - pool.first_instance, load_units(pool, s.output - s.generated, 1));
  recorder_.request_routed(RequestId(r), pool.metrics_id, InstanceId(j.target));
  schedule_dispatch(j.target);
}

void Simulation::first_token_of(std::uint32_t r, bool disaggregated, SimTime at) {
  recorder_.first_token(RequestId(r), at);
  Journey& j = journey(r);
  if (!j.ttft_done) {
    advance(r, disaggregated ? metrics::TtftPart::kFirstDecode : metrics::TtftPart::kPrefill, at);
    j.ttft_done = true;
    recorder_.ttft_parts(RequestId(r), j.ttft.data());
    if (j.transferred) {
      std::int64_t ttft = 0;
      for (const std::int64_t v : j.ttft) ttft += v;
      const Duration exposed = Duration::picoseconds(
          j.ttft[static_cast<std::size_t>(metrics::TtftPart::kKvTransferExposed)]);
      const Duration transfer = j.transfer_end - j.transfer_start;
      for (const int p : {prefill_pool_, decode_pool_}) {
        recorder_.kv_transfer(pools_[static_cast<std::size_t>(p)].metrics_id, j.kv_bytes, transfer,
                              exposed, Duration::picoseconds(ttft));
      }
    }
  }
  if (source_->wants_first_token()) {
    SERVESIM_CHECK(at == now_);  // decode runs carry no fresh requests for such sources
    source_->first_token(source_view(r), now_, arrivals_);
    schedule_arrivals();
  }
}

void Simulation::reject(std::uint32_t r, metrics::RejectReason reason) {
  requests_[r].phase = Phase::kDone;
  recorder_.request_rejected(RequestId(r), now_, reason);
  release_journey(r);
  client_done(r, false);
}

void Simulation::release_journey(std::uint32_t r) {
  RequestState& s = requests_[r];
  SERVESIM_CHECK(s.journey != kNoRequest);
  free_journeys_.push_back(s.journey);
  s.journey = kNoRequest;
}

void Simulation::complete(std::uint32_t r) {
  RequestState& s = requests_[r];
  SERVESIM_CHECK(s.phase == Phase::kDone && s.generated == s.output);
  recorder_.request_completed(RequestId(r), now_);
  release_journey(r);
  Pool& pool = pools_[instances_[s.instance].pool];
  add_load(pool, s.instance - pool.first_instance, load_units(pool, 0, -1));
  client_done(r, true);
}

workloads::Request Simulation::source_view(std::uint32_t r) const {
  if (keep_inputs_) return inputs_[r];
  workloads::Request q;  // a plain request: no ids to release, no identity
  q.stream = requests_[r].stream;
  q.class_id = requests_[r].cls;
  return q;
}

void Simulation::client_done(std::uint32_t r, bool completed) {
  source_->finished(source_view(r), now_, completed, arrivals_);
  schedule_arrivals();
}

void Simulation::handle(const BatchFinished& e) {
  Instance& inst = instances_[e.instance];
  if (e.epoch != inst.epoch) return;  // the instance failed while this batch ran
  if (e.run != inst.run.generation) return;  // the run was cut: a later event ends it
  if (inst.run.size > 0) {
    // The run's last step ended: apply the ones before it; this event handles the last.
    settle_run(e.instance, now_);
    end_run(e.instance);
  }
  Pool& pool = pools_[inst.pool];
  Lane& lane = inst.lanes[e.lane];
  lane.set_busy(false);
  Batch& batch = lane.batch();
  recorder_.iteration(pool.metrics_id, batch.components.data());
  if (series_) [[unlikely]] {
    gauges_before_ = lane_gauges(lane);
    gauged_lane_ = &lane;
  }
  std::int64_t emitted = batch.decodes;

  std::int64_t done_tokens = 0;
  if (batch.decodes > 0) {
    const std::int64_t accepted = decode_step_ended(lane, now_);
    recorder_.decode_iteration(pool.metrics_id, batch.components.data(), batch.decodes + accepted);
    done_tokens += batch.decodes + accepted;
    emitted += accepted;
    for (const std::uint32_t r : finished_) complete(r);
  }
  for (const Chunk& c : batch.chunks) {
    done_tokens += c.tokens;
    if (!journey(c.request).ttft_done) advance(c.request, metrics::TtftPart::kPrefill);
    if (!lane.finish_chunk(c)) continue;
    journey(c.request).in_prefill = false;
    if (pool.role == PoolRole::kPrefill) {  // no token: its decode instance emits the first
      prefill_done(c.request, lane);
      continue;
    }
    RequestState& s = requests_[c.request];
    // The prefill emits a token: the first, or the next one after a recompute.
    if (s.generated == 0) {
      first_token_of(c.request, false, now_);
    } else {
      recorder_.inter_token_gap(now_ - s.last_token, 1);
    }
    ++s.generated;
    ++done_tokens;
    ++emitted;
    if (s.generated == s.output) {
      lane.release(c.request);
      complete(c.request);
    } else {
      lane.join_decode(c.request, now_);
    }
  }
  add_load(pool, e.instance - pool.first_instance, load_units(pool, -done_tokens, 0));
  if (series_) [[unlikely]] {
    series_->output_tokens(pool.metrics_id, now_, emitted);
    note_gauges(pool, lane);
    gauged_lane_ = nullptr;
  }
  if (pool.role == PoolRole::kDecode) {
    note_free_kv(e.instance);
    if (!awaiting_decode_.empty()) drain_awaiting();
  }
  try_dispatch(e.instance);
}

SimTime Simulation::plan_run(std::uint32_t index, Lane& lane, SimTime first_end, bool steps_ready) {
  Instance& inst = instances_[index];
  Pool& pool = pools_[inst.pool];
  Instance::DecodeRun& run = inst.run;
  // Steps 0 .. k - 1, where step k - 1 is the first in which a request emits its last token (or
  // the cap, decode_steps_per_event), and every step's KV blocks are free now (nobody else takes
  // blocks before a cut). The run's length depends on nothing else: it books its steps' blocks,
  // and what the free-KV router and inbound reservations see is the free blocks after them, so a
  // run length chosen for speed (planning fewer steps when runs tend to be cut) would change the
  // answers.
  const auto cap = static_cast<std::uint64_t>(config_.decode_steps_per_event);
  const std::uint64_t limit = std::min({cap, lane.steps_to_first_finish() + 1, lane.lookahead_limit()});
  if (limit < 2) return first_end;
  if (run.ends.size() < limit) {
    run.ends.resize(static_cast<std::size_t>(limit));
    run.parts.resize(static_cast<std::size_t>(limit));
  }
  run.ends[0] = first_end;
  // The steps whose blocks are free now (what they need does not depend on their times).
  std::int64_t free = lane.free_blocks();
  std::int64_t booked = 0;
  std::uint32_t k = 1;
  for (; k < limit; ++k) {
    const std::int64_t need = lane.step_blocks_ahead(k);
    if (need > free) break;  // that step preempts: it is dispatched on its own
    free -= need;
    booked += need;
  }
  if (k < 2) return first_end;
  // The steps' costs (iteration_cost.h): what they share once, then their contexts' terms. They
  // have no all-to-all stretch (cost()'s nic_share below 1): runs are off for a pool whose all-to-all
  // shares its NICs with the flows.
  SERVESIM_CHECK(!pool.a2a_on_nics);
  if (!steps_ready) run.steps = pool.cost->decode_steps(static_cast<std::int64_t>(lane.batch().decodes));
  Lane::DecodeLookahead ahead(lane);
  SimTime t = first_end;
  if (!lane.capped()) {
    // Only the contexts grow: the cost model walks the steps from the first one's shape.
    t = pool.cost->decode_run(run.steps, ahead.next(), k - 1, t, run.ends.data() + 1, run.parts.data() + 1);
  } else {
    for (std::uint32_t j = 1; j < k; ++j) {
      t = t + Duration::picoseconds(pool.cost->decode_step(run.steps, ahead.next(), run.parts[j]));
      run.ends[j] = t;
    }
  }
  run.size = k;
  run.applied = 0;
  ++run.generation;
  lane.book(booked);
  return t;
}

std::int64_t Simulation::decode_step_ended(Lane& lane, SimTime end) {
  const std::uint32_t decodes = lane.batch().decodes;
  // Speculative decoding: the accepted drafts are emitted with the step's own tokens (gaps of 0).
  const std::int64_t accepted = lane.step_accepted();
  lane.decode_gaps(end, decodes, [this](Duration gap, std::int64_t count) {
    recorder_.inter_token_gap(gap, count);
  });
  if (accepted > 0) recorder_.inter_token_gap(Duration::zero(), accepted);
  // Requests whose KV came from a prefill instance: this step emitted their first token.
  for (const std::uint32_t r : lane.fresh()) first_token_of(r, true, end);
  lane.clear_fresh();
  finished_.clear();
  lane.finish_decode_step(finished_);
  return accepted;
}

void Simulation::apply_run_step(Lane& lane, Instance::DecodeRun& run) {
  // What handle(BatchFinished) and try_dispatch do for a decode-only step with nobody joining or
  // leaving (the router's load is free KV, published by settle_run; the recorder's iteration
  // sums, by settle_run too).
  decode_step_ended(lane, run.ends[run.applied]);
  SERVESIM_CHECK_MSG(finished_.empty(), "a decode run's step before its last finished a request");
  lane.unbook(lane.step_blocks_ahead(0));  // the next step takes the blocks booked for it
  preempted_.clear();
  const std::uint32_t decodes = lane.prepare_decode_step(preempted_);
  SERVESIM_CHECK_MSG(preempted_.empty() && decodes == lane.batch().decodes,
                     "a decode run's step changed its batch");
  ++run.applied;
}

void Simulation::settle_run(std::uint32_t index, SimTime t) {
  Instance& inst = instances_[index];
  Instance::DecodeRun& run = inst.run;
  if (run.applied + 1 >= run.size || run.ends[run.applied] > t) return;
  const Pool& pool = pools_[inst.pool];
  Lane& lane = inst.lanes.front();
  Batch& batch = lane.batch();
  // The batch's components are the step in flight's (step `applied`). The steps applied here go
  // to the recorder as one sum: integer sums, the same totals as one call per step.
  ComponentTimes sum = batch.components;
  const std::uint32_t first = run.applied;
  apply_run_step(lane, run);  // the batch's step: it may carry fresh requests and joins
  // The steps after it join and free nobody: their gaps (one per request each, in step order, as
  // decode_gaps reports them), then their effects on the lane in one call.
  std::uint32_t last = run.applied;
  while (last + 1 < run.size && run.ends[last] <= t) ++last;
  if (last > run.applied) {
    const std::uint32_t decodes = batch.decodes;
    recorder_.inter_token_gaps(std::span<const SimTime>(run.ends.data() + run.applied - 1, last - run.applied + 1),
                               decodes);
    lane.quiet_decode_steps(last - run.applied, decodes, run.ends[last - 1]);
    run.applied = last;
  }
  // Steps first + 1 .. applied - 1 join the sum (step `applied` is the one in flight now).
  pool.cost->add_steps_components(run.steps, run.parts.data() + first + 1, run.applied - first - 1, sum);
  const std::int64_t steps = run.applied - first;
  recorder_.iterations(pool.metrics_id, sum.data(), steps);
  recorder_.decode_iterations(pool.metrics_id, sum.data(), batch.decodes, steps);
  pool.cost->step_components(run.steps, run.parts[run.applied], batch.components);
}

void Simulation::cut_run(std::uint32_t index) {
  settle_run(index, now_);
  Instance& inst = instances_[index];
  Instance::DecodeRun& run = inst.run;
  if (run.applied + 1 == run.size) return;  // the step in flight is its last already
  // The steps after the one in flight will not run: their booked blocks are free again.
  Lane& lane = inst.lanes.front();
  std::int64_t unbooked = 0;
  for (std::uint32_t k = 1; k < run.size - run.applied; ++k) unbooked += lane.step_blocks_ahead(k);
  lane.unbook(unbooked);
  // The event that would have ended the run leaves the queue where it can (else it pops stale).
  const std::uint32_t cut = run.generation;
  const std::uint32_t epoch = inst.epoch;
  queue_.erase(run.ends[run.size - 1], priority_of(Event(BatchFinished{})), [&](const Event& ev) {
    const auto* b = std::get_if<BatchFinished>(&ev);
    return b != nullptr && b->instance == index && b->run == cut && b->epoch == epoch;
  });
  run.size = run.applied + 1;
  ++run.generation;
  inst.stage_free.front() = run.ends[run.applied];
  schedule(run.ends[run.applied], BatchFinished{index, 0, inst.epoch, run.generation});
  note_free_kv(index);
}

void Simulation::end_run(std::uint32_t index) {
  Instance::DecodeRun& run = instances_[index].run;
  run.size = 0;
  run.applied = 0;
}

void Simulation::handle(const StageFreed& e) { try_dispatch(e.instance); }

void Simulation::handle(const DispatchRequested& e) {
  instances_[e.instance].dispatch_pending = false;
  try_dispatch(e.instance);
}

void Simulation::try_dispatch(std::uint32_t index) {
  Instance& inst = instances_[index];
  Pool& pool = pools_[inst.pool];
  if (pool.role == PoolRole::kEncode) {
    try_encode(index);
    return;
  }
  if (!inst.up) return;
  if (inst.stage_free.front() > now_) return;  // a StageFreed or BatchFinished event will come
  const auto lanes = static_cast<std::uint32_t>(inst.lanes.size());
  for (std::uint32_t k = 0; k < lanes; ++k) {
    const std::uint32_t l = (inst.next_lane + k) % lanes;
    Lane& lane = inst.lanes[l];
    if (lane.busy()) continue;
    Batch& batch = lane.batch();
    batch.clear();
    preempted_.clear();
    if (series_) [[unlikely]] {
      gauges_before_ = lane_gauges(lane);
      gauged_lane_ = &lane;
    }
    if (config_.admission.ttft_budget) [[unlikely]] {
      // Admission control: a request whose TTFT budget passed before its prefill began leaves.
      const Duration budget = *config_.admission.ttft_budget;
      while (lane.has_waiting()) {
        const std::uint32_t r = lane.front_waiting();
        const Journey& j = journey(r);
        if (requests_[r].generated > 0 || j.ttft_done || now_ - j.arrival <= budget) break;
        lane.pop_waiting_front();
        add_load(pool, index - pool.first_instance,
                 load_units(pool, -static_cast<std::int64_t>(requests_[r].prefill_target) -
                                      (pool.role == PoolRole::kCombined ? requests_[r].output : 0),
                            -1));
        reject(r, metrics::RejectReason::kTtftBudget);
      }
    }
    // Decode lanes take requests whose KV arrived first. When the step preempted everything it
    // ran (a lane short of blocks) and ready requests could now be admitted, form it again, so
    // that an idle lane never keeps requests it could run.
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (lane.ready() > 0) {
        admitted_.clear();
        lane.admit_ready(admitted_);
        for (const std::uint32_t r : admitted_) {
          if (!journey(r).ttft_done) advance(r, metrics::TtftPart::kQueueing);
        }
      }
      pool.scheduler->form_batch(lane, batch, preempted_);
      if (!batch.empty() || lane.ready() == 0 || !lane.can_admit_ready()) break;
    }
    // Prefix-cache hits: the cached prompt tokens are work the instance will not do.
    if (pool.caching) [[unlikely]] add_load(pool, index - pool.first_instance, load_units(pool, -lane.take_hit_tokens(), 0));
    if (series_) [[unlikely]] {
      note_gauges(pool, lane);
      gauged_lane_ = nullptr;
    }
    std::int64_t lost = 0;
    for (const Preemption& p : preempted_) {
      recorder_.request_preempted(RequestId(p.request), pool.metrics_id);
      lost += p.lost_tokens;
      Journey& j = journey(p.request);
      if (!j.ttft_done) {
        advance(p.request, j.in_prefill ? metrics::TtftPart::kPrefillInterference
                                        : metrics::TtftPart::kQueueing);
        j.in_prefill = false;
        j.preempted = true;
      }
    }
    if (lost > 0) add_load(pool, index - pool.first_instance, load_units(pool, lost, 0));
    if (batch.empty()) continue;
    for (const Chunk& c : batch.chunks) {
      Journey& j = journey(c.request);
      if (j.ttft_done) continue;
      if (j.in_prefill) {
        advance(c.request, metrics::TtftPart::kPrefillInterference);
        continue;
      }
      advance(c.request, j.preempted ? metrics::TtftPart::kPreemption : metrics::TtftPart::kQueueing);
      j.preempted = false;
      j.in_prefill = true;
      if (pool.role == PoolRole::kPrefill &&
          config_.disaggregation.kv_transfer == KvTransferMode::kLayerStreamed && !j.streamed &&
          awaiting_decode_.empty() && place_decode(c.request)) {
        // Layer-streamed: every layer but the last moves while the prompt is prefilled.
        const RequestState& s = requests_[c.request];
        const double total = static_cast<double>(s.prefill_target) *
                             static_cast<double>(config_.model.kv_bytes_per_token());
        const int layers = std::max(1, config_.model.layers);
        j.streamed = true;
        j.transferred = true;
        j.kv_bytes = total;
        j.transfer_start = now_;
        start_kv_flows(c.request, total * (layers - 1) / layers);
        reschedule_network();
      }
    }

    const models::BatchShape shape = lane.shape(batch);
    const auto sequences = static_cast<std::int64_t>(batch.decodes + batch.chunks.size());
    models::BatchShape busiest;
    const bool uneven = lane.busiest_rank_shape(shape, batch, busiest);
    const bool nics_shared = pool.a2a_on_nics && nics_carry_flows(index);
    // Context parallelism only for long prompts: the chunks the CP ranks split.
    models::BatchShape cp_part;
    const std::int64_t cp_min = pool.config->cp_min_tokens;
    if (cp_min > 0 && !batch.chunks.empty()) [[unlikely]] {
      for (const Chunk& c : batch.chunks) {
        const RequestState& s = requests_[c.request];
        if (static_cast<std::int64_t>(s.prefill_target) < cp_min) continue;
        cp_part.prefill_tokens += c.tokens;
        cp_part.prefill_kv_tokens += static_cast<double>(s.prefilled) + c.tokens;
      }
    }
    // A decode-only batch on one stage, with no busiest rank, all-to-all stretch or drafts: the
    // decode-run step formula (iteration_cost.h: cost()'s picoseconds and components, tested
    // against it), whose shared terms a run planned on this step then reuses.
    const bool decode_step = batch.chunks.empty() && batch.decodes > 0 && !uneven && !nics_shared &&
                             pool.cost->stages() == 1 && pool.cost->verify_width() == 1;
    if (decode_step) {
      Instance::DecodeRun& run = inst.run;
      run.steps = pool.cost->decode_steps(sequences);
      IterationCostModel::DecodeStepParts parts;
      stage_ps_[0] = pool.cost->decode_step(run.steps, shape, parts);
      pool.cost->step_components(run.steps, parts, batch.components);
    } else {
      pool.cost->cost(shape, sequences, stage_ps_.data(), batch.components, uneven ? &busiest : nullptr,
                      1.0, cp_min > 0 ? &cp_part : nullptr);
      if (nics_shared) [[unlikely]] {
        // The all-to-all's share of the NICs from the flows on them over this iteration (pp = 1).
        const double share = a2a_nic_share(index, stage_ps_[0]);
        if (share < 1.0) {
          pool.cost->cost(shape, sequences, stage_ps_.data(), batch.components, uneven ? &busiest : nullptr,
                          share, cp_min > 0 ? &cp_part : nullptr);
        }
      }
    }
    if (pool.swap_s_per_token > 0) [[unlikely]] add_swap_time(pool, lane, batch);
    // Pipeline: stage k starts when stage k - 1 handed over and stage k finished its previous
    // micro-batch.
    SimTime t = now_;
    for (std::size_t s = 0; s < inst.stage_free.size(); ++s) {
      t = std::max(t, inst.stage_free[s]) + Duration::picoseconds(stage_ps_[s]);
      inst.stage_free[s] = t;
    }
    if (trace_) [[unlikely]] trace_iteration(pool, index, l, t);
    if (runs_ && pool.role == PoolRole::kDecode && batch.chunks.empty() && preempted_.empty() &&
        lane.ready() == 0 && !lane.has_waiting() &&
        (lane.fresh().empty() || !source_->wants_first_token())) {
      t = plan_run(index, lane, t, decode_step);
      inst.stage_free.front() = t;
    }
    if (pool.a2a_on_nics) [[unlikely]] {
      // Its NICs carry the all-to-all for its duty cycle in this iteration (README).
      const double nic_ps = static_cast<double>(pool.cost->a2a_nic_ps(static_cast<std::int64_t>(shape.tokens)));
      book_a2a(index, nic_ps / static_cast<double>((t - now_).ps()));
    }
    lane.set_busy(true);
    inst.next_lane = l + 1;
    schedule(t, BatchFinished{index, l, inst.epoch, inst.run.generation});
    if (inst.stage_free.size() > 1) schedule(inst.stage_free.front(), StageFreed{index});
    if (pool.role == PoolRole::kDecode) note_free_kv(index);
    return;
  }
  if (pool.a2a_on_nics) [[unlikely]] book_a2a(index, 0.0);  // idle: no all-to-all
  if (pool.role == PoolRole::kDecode) note_free_kv(index);
}

bool Simulation::nics_carry_flows(std::uint32_t index) const {
  return net_->group_carries(instances_[index].nic_group);
}

double Simulation::a2a_nic_share(std::uint32_t index, std::int64_t iteration_ps) {
  // Every rank waits for the slowest at each layer: the NIC whose flows leave it the least.
  net_->group_traffic(now_, instances_[index].nic_group, nic_traffic_);
  double share = 1.0;
  for (const auto& t : nic_traffic_) share = std::min(share, cluster::a2a_nic_share(t, static_cast<double>(iteration_ps) * 1e-12));
  return share;
}

void Simulation::book_a2a(std::uint32_t index, double share) {
  Instance& inst = instances_[index];
  // An all-to-all NIC-bound through a whole iteration would leave the flows nothing: they keep
  // 1% (a bound that only an iteration of nothing but NIC-bound all-to-all reaches).
  share = std::min(share, 0.99);
  if (share == inst.nic_share) return;
  inst.nic_share = share;
  // With no flow on its NICs the share is only recorded (the flows that come read it).
  if (net_->reserve_group(now_, inst.nic_group, share)) reschedule_network();
}

void Simulation::add_swap_time(const Pool& pool, Lane& lane, Batch& batch) {
  const std::int64_t tokens = lane.take_swap_tokens();
  if (tokens == 0) return;
  // KV tokens x bytes per token per chip / host bandwidth (config.h, PreemptionMode::kSwap).
  const auto ps = static_cast<std::int64_t>(static_cast<double>(tokens) * pool.swap_s_per_token * 1e12 + 0.5);
  stage_ps_[0] += ps;
  batch.components[static_cast<std::size_t>(models::OpKind::kSwap)] += ps;
}

void Simulation::record_link_usage(SimTime end) {
  // The flow network's bytes per link class over time (its own bins), as one time-series link
  // per class with the class's total capacity: what the report's busiest links show.
  net_->account_until(end);
  std::array<double, static_cast<std::size_t>(topologies::LinkClass::kCount)> capacity{};
  for (std::size_t l = 0; l < fabric_->link_count(); ++l) {
    const topologies::Link& link = fabric_->link(topologies::LinkId(static_cast<std::uint32_t>(l)));
    capacity[static_cast<std::size_t>(link.link_class)] += link.bandwidth_bytes_per_s;
  }
  for (std::size_t c = 0; c < capacity.size(); ++c) {
    const auto cls = static_cast<topologies::LinkClass>(c);
    const topologies::LinkUsageSeries& u = net_->class_usage(cls);
    if (capacity[c] <= 0 || u.bytes.empty()) continue;
    const std::uint32_t id = series_->add_link(std::string(topologies::link_class_name(cls)) +
                                                   " links (all)", capacity[c]);
    for (std::size_t b = 0; b < u.bytes.size(); ++b) {
      const SimTime from = SimTime::zero() + Duration::picoseconds(u.bin.ps() * static_cast<std::int64_t>(b));
      if (from >= end) break;
      const SimTime to = std::min(end, from + u.bin);
      // One flow per transfer stood for flow_ranks_ copies on links of the same classes.
      const double copies = flow_ranks_ > 0 ? static_cast<double>(flow_ranks_) : 1.0;
      if (u.bytes[b] > 0) series_->link_bytes(id, from, to, u.bytes[b] * copies);
    }
  }
}

// --- failures ---

void Simulation::handle(const FaultOccurred& e) {
  const topologies::FaultEvent& f = faults_[e.index];
  const topologies::FaultEffect effect = topologies::fault_effect(*fabric_, f.target);
  if (f.up) {
    net_->recover(now_, effect.links);
    reschedule_network();
    return;
  }
  // The instances on the touched chips go down for the repair time; then the network drops the
  // links and the dead chips' flows (those are the failed instances' requests, handled above).
  const SimTime repair_at = now_ + config_.failures.repair;
  for (const topologies::InstanceRef& ref : placement_->instances_on(effect.touched_chips)) {
    const std::uint32_t index = pools_[static_cast<std::size_t>(ref.pool)].first_instance +
                                static_cast<std::uint32_t>(ref.instance);
    if (instances_[index].up) fail_instance(index, repair_at);
  }
  flow_done_.clear();
  net_->fail(now_, effect.links, effect.dead_chips, flow_done_);
  reschedule_network();
}

void Simulation::fail_instance(std::uint32_t index, SimTime repair_at) {
  Instance& inst = instances_[index];
  Pool& pool = pools_[inst.pool];
  const std::uint32_t local = index - pool.first_instance;
  if (inst.run.size > 0) {
    settle_run(index, now_);  // the steps that ended before the failure emitted their tokens
    end_run(index);
  }
  inst.up = false;
  ++inst.epoch;
  if (pool.a2a_on_nics) book_a2a(index, 0.0);
  pool.router->set_up(local, false);
  evicted_.clear();
  for (Lane& lane : inst.lanes) changing(index, lane, [&] { lane.evict_all(evicted_); });
  for (const std::uint32_t r : inst.encode_batch) evicted_.push_back(r);
  inst.encode_batch.clear();
  inst.encode_busy = false;
  while (!inst.encode_waiting.empty()) {
    evicted_.push_back(inst.encode_waiting.front());
    inst.encode_waiting.pop_front();
  }
  for (std::size_t s = 0; s < inst.stage_free.size(); ++s) inst.stage_free[s] = now_;
  // Requests whose KV is on its way to this (decode) instance: its reservation went with it.
  // Prefilled ones are affected; ones still prefilling (streamed) send after their prefill.
  if (pool.role == PoolRole::kDecode) {
    for (std::uint32_t r = 0; r < requests_.size(); ++r) {
      const RequestState& s = requests_[r];
      if (s.journey == kNoRequest) continue;  // no longer in flight
      Journey& j = journey(r);
      if (j.target != index || !j.flows_reserved) continue;
      if (s.phase == Phase::kTransferring) {
        evicted_.push_back(r);
      } else if (s.phase == Phase::kPrefilling) {
        ++j.epoch;
        j.flows = 0;
        j.flows_reserved = j.streamed = j.transferred = false;
        j.target = kNoInstance;
      }
    }
  }
  schedule(repair_at, InstanceRepaired{index});
  const bool lose = config_.failures.policy == FailurePolicy::kLose;
  for (const std::uint32_t r : evicted_) {
    failed_log_.push_back(r);
    RequestState& s = requests_[r];
    Journey& j = journey(r);
    // Flows still moving for it are stale from here on (its tag's epoch).
    ++j.epoch;
    j.flows = 0;
    if (!j.ttft_done) {
      advance(r, j.in_prefill ? metrics::TtftPart::kPrefillInterference : metrics::TtftPart::kQueueing);
    }
    j.in_prefill = false;
    const bool held_elsewhere = s.phase == Phase::kTransferring && s.instance != index;
    if (s.instance == index && j.target != kNoInstance && j.flows_reserved) {
      // Prefilled (or streaming) here, its KV was going to a live decode instance: give that
      // room back.
      Instance& dst = instances_[j.target];
      const std::int64_t block = pools_[dst.pool].config->kv_cache.block_tokens;
      if (dst.up) {
        Lane& lane = dst.lanes[j.target_lane];
        changing(j.target, lane, [&] { lane.cancel_inbound((s.prefill_target + block - 1) / block); });
        note_free_kv(j.target);
      }
    }
    j.flows_reserved = false;
    j.streamed = false;
    j.transferred = false;
    j.target = kNoInstance;
    if (lose) {
      if (held_elsewhere) {
        Lane& lane = instances_[s.instance].lanes[s.lane];
        changing(s.instance, lane, [&] { lane.release_held(r); });
        schedule_dispatch(s.instance);
      }
      reject(r, metrics::RejectReason::kLostToFailure);
      continue;
    }
    recorder_.request_requeued(RequestId(r));
    if (held_elsewhere) {
      // Its KV is intact on its prefill instance: it only needs another decode instance.
      awaiting_decode_.push_back(r);
      continue;
    }
    s.phase = Phase::kNew;
    s.prefilled = 0;
    enter(r);
  }
  if (trace_ && trace_->wants(now_)) [[unlikely]] {
    trace_->record(metrics::TraceSpan{now_.ps(), repair_at.ps(), pool.metrics_id.value, local, 0,
                                      metrics::TraceKind::kFailure,
                                      {static_cast<std::int64_t>(evicted_.size()), lose ? 1 : 0, 0, 0}});
  }
  if (!awaiting_decode_.empty()) drain_awaiting();
}

void Simulation::handle(const InstanceRepaired& e) {
  Instance& inst = instances_[e.instance];
  Pool& pool = pools_[inst.pool];
  const std::uint32_t local = e.instance - pool.first_instance;
  inst.up = true;
  pool.router->set_up(local, true);
  // The repair replaced what failed: the instance's chips and their links are back.
  const int p = static_cast<int>(inst.pool);
  for (const topologies::ChipId c : placement_->chips(p, static_cast<int>(local))) {
    const auto effect =
        topologies::fault_effect(*fabric_, topologies::FaultTarget{topologies::FaultKind::kChip, c.value});
    net_->recover(now_, effect.links);
  }
  reschedule_network();
  if (pool.free_kv) {
    note_free_kv(e.instance);
  } else {
    pool.router->set_load(local, 0);
  }
  schedule_dispatch(e.instance);
  if (pool.role == PoolRole::kDecode && !awaiting_decode_.empty()) drain_awaiting();
}

Simulation::LaneGauges Simulation::lane_gauges(const Lane& lane) {
  return LaneGauges{static_cast<std::int64_t>(lane.waiting()), lane.running(), lane.used_blocks()};
}

void Simulation::trace_iteration(const Pool& pool, std::uint32_t index, std::uint32_t lane,
                                 SimTime end) {
  if (!trace_->wants(now_)) return;
  const Batch& batch = instances_[index].lanes[lane].batch();
  trace_->record(metrics::TraceSpan{now_.ps(), end.ps(), pool.metrics_id.value,
                                    index - pool.first_instance, static_cast<std::uint16_t>(lane),
                                    metrics::TraceKind::kIteration,
                                    {batch.decodes, static_cast<std::int64_t>(batch.chunks.size()),
                                     batch.prefill_tokens, static_cast<std::int64_t>(preempted_.size())}});
}

void Simulation::note_gauges(const Pool& pool, const Lane& lane) {
  const LaneGauges& before = gauges_before_;
  const LaneGauges after = lane_gauges(lane);
  series_->gauges_changed(pool.metrics_id, now_, after.waiting - before.waiting,
                          after.running - before.running, after.kv_blocks - before.kv_blocks);
}

void Simulation::publish_progress(std::uint64_t events) {
  progress_->now_ps.store(now_.ps(), std::memory_order_relaxed);
  progress_->arrivals.store(source_->issued(), std::memory_order_relaxed);
  progress_->events.store(static_cast<std::int64_t>(events), std::memory_order_relaxed);
}

bool Simulation::drained() const {
  for (const Instance& inst : instances_) {
    if (!inst.encode_waiting.empty() || inst.encode_busy) return false;
    for (const Lane& lane : inst.lanes) {
      if (lane.unfinished() != 0 || lane.ready() != 0 ||
          lane.used_blocks() != lane.cached_blocks() || lane.busy()) {
        return false;
      }
    }
  }
  return awaiting_decode_.empty() && (!net_ || net_->active_flows() == 0);
}

void Simulation::check_all() const {
  for (const Instance& inst : instances_) {
    for (const Lane& lane : inst.lanes) lane.check_invariants();
  }
}

}  // namespace servesim::cluster
