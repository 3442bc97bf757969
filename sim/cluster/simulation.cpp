#include "sim/cluster/simulation.h"

#include <algorithm>

#include "models/operators.h"

namespace servesim::cluster {
namespace {

// One step of the fingerprint: a 64-bit multiply-xorshift mix (from splitmix64's finaliser).
std::uint64_t fingerprint_step(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}
}  // namespace

Simulation::Simulation(const SimulationConfig& config, metrics::Recorder& recorder)
    : config_(config), recorder_(recorder) {
  for (const PoolConfig& pc : config_.pools) {
    Pool pool;
    pool.config = &pc;
    pool.cost = std::make_unique<IterationCostModel>(config_.model, pc.chip, pc.plan,
                                                     pc.moe_routing, pc.cost_model,
                                                     pc.scheduler.max_batched_tokens);
    pool.scheduler = make_batch_scheduler(pc.scheduler);
    pool.router = make_router(pc.router, static_cast<std::uint32_t>(pc.instances));
    pool.first_instance = static_cast<std::uint32_t>(instances_.size());

    metrics::PoolInfo info;
    info.name = pc.name;
    info.role = pc.role;
    info.instances = pc.instances;
    info.chips = pc.instances * pc.plan.chips();
    info.stages = pc.plan.pp;
    for (std::size_t k = 0; k < models::kOpKinds; ++k) {
      info.components.emplace_back(models::op_kind_name(static_cast<models::OpKind>(k)));
    }
    const PoolCapacity cap = pool_capacity(config_.model, pc);
    SERVESIM_CHECK_MSG(cap.blocks_per_lane > 0, "pool " + pc.name + " has no KV blocks");
    info.kv_blocks = cap.blocks_per_lane * pc.plan.pp * pc.instances;
    pool.metrics_id = recorder_.add_pool(std::move(info));
    for (int i = 0; i < pc.instances; ++i) {
      Instance inst;
      inst.pool = static_cast<std::uint32_t>(pools_.size());
      for (int l = 0; l < pc.plan.pp; ++l) {
        inst.lanes.emplace_back(&requests_, cap.blocks_per_lane, pc.kv_cache.block_tokens,
                                cap.watermark_blocks, pc.scheduler.max_batch_size,
                                config_.model.window.window, config_.model.dsa.top_k);
      }
      inst.stage_free.assign(static_cast<std::size_t>(pc.plan.pp), SimTime::zero());
      instances_.push_back(std::move(inst));
    }
    stage_ps_.resize(std::max<std::size_t>(stage_ps_.size(), static_cast<std::size_t>(pc.plan.pp)));
    pools_.push_back(std::move(pool));
  }
  series_ = recorder_.time_series();
  trace_ = recorder_.trace_log();
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
    recorder_.expect_requests(config_.workload.requests);
  }
}

Simulation::~Simulation() = default;

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

  RunResult result;
  const SimTime horizon =
      config_.horizon ? SimTime::zero() + *config_.horizon : SimTime::never();
  while (!queue_.empty()) {
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
  if (series_) series_->finish(result.end);
  if (progress_) publish_progress(result.events);

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
  if (keep_inputs_) inputs_.push_back(in);
  recorder_.request_arrived(RequestId(r), now_, in.prompt_tokens, in.output_tokens, in.class_id);
  schedule_arrivals();  // the stream's next open-loop arrival
  route(r);
}

void Simulation::route(std::uint32_t r) {
  RequestState& s = requests_[r];
  Pool& pool = pools_.front();
  if (static_cast<std::int64_t>(s.prompt) + s.output > pool.config->max_model_len) {
    reject(r, metrics::RejectReason::kExceedsMaxModelLen);
    return;
  }
  const std::uint32_t local = pool.router->pick();
  const std::uint32_t index = pool.first_instance + local;
  Instance& inst = instances_[index];
  if (pool.config->scheduler.max_queue > 0) {
    std::int64_t waiting = 0;
    for (const Lane& l : inst.lanes) waiting += static_cast<std::int64_t>(l.waiting());
    if (waiting >= pool.config->scheduler.max_queue) {
      reject(r, metrics::RejectReason::kQueueFull);
      return;
    }
  }
  // The lane with the fewest unfinished requests (vLLM assigns virtual engines this way); ties
  // rotate.
  std::uint32_t best = inst.next_assign % static_cast<std::uint32_t>(inst.lanes.size());
  for (std::uint32_t k = 1; k < inst.lanes.size(); ++k) {
    const std::uint32_t l = (inst.next_assign + k) % static_cast<std::uint32_t>(inst.lanes.size());
    if (inst.lanes[l].unfinished() < inst.lanes[best].unfinished()) best = l;
  }
  inst.next_assign = best + 1;
  s.instance = index;
  s.lane = static_cast<std::uint16_t>(best);
  inst.lanes[best].enqueue_back(r);
  if (series_) [[unlikely]] series_->gauges_changed(pool.metrics_id, now_, 1, 0, 0);
  pool.router->add_load(local, load_units(pool, s.prompt + s.output, 1));
  recorder_.request_routed(RequestId(r), pool.metrics_id, InstanceId(index));
  if (!inst.dispatch_pending && inst.stage_free.front() <= now_) {
    inst.dispatch_pending = true;
    schedule(now_, DispatchRequested{index});
  }
}

void Simulation::reject(std::uint32_t r, metrics::RejectReason reason) {
  requests_[r].phase = Phase::kDone;
  recorder_.request_rejected(RequestId(r), now_, reason);
  client_done(r, false);
}

void Simulation::complete(std::uint32_t r) {
  RequestState& s = requests_[r];
  SERVESIM_CHECK(s.phase == Phase::kDone && s.generated == s.output);
  recorder_.request_completed(RequestId(r), now_);
  Pool& pool = pools_[instances_[s.instance].pool];
  pool.router->add_load(s.instance - pool.first_instance, load_units(pool, 0, -1));
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
  Pool& pool = pools_[inst.pool];
  Lane& lane = inst.lanes[e.lane];
  lane.set_busy(false);
  Batch& batch = lane.batch();
  recorder_.iteration(pool.metrics_id, batch.components.data());
  if (series_) [[unlikely]] gauges_before_ = lane_gauges(lane);
  std::int64_t emitted = batch.decodes;

  std::int64_t done_tokens = 0;
  if (batch.decodes > 0) {
    lane.decode_gaps(now_, batch.decodes, [this](Duration gap, std::int64_t count) {
      recorder_.inter_token_gap(gap, count);
    });
    done_tokens += batch.decodes;
    finished_.clear();
    lane.finish_decode_step(finished_);
    for (const std::uint32_t r : finished_) complete(r);
  }
  for (const Chunk& c : batch.chunks) {
    done_tokens += c.tokens;
    if (!lane.finish_chunk(c)) continue;
    RequestState& s = requests_[c.request];
    // The prefill emits a token: the first, or the next one after a recompute.
    if (s.generated == 0) {
      recorder_.first_token(RequestId(c.request), now_);
      if (source_->wants_first_token()) {
        source_->first_token(source_view(c.request), now_, arrivals_);
        schedule_arrivals();
      }
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
  pool.router->add_load(e.instance - pool.first_instance, load_units(pool, -done_tokens, 0));
  if (series_) [[unlikely]] {
    series_->output_tokens(pool.metrics_id, now_, emitted);
    note_gauges(pool, lane);
  }
  try_dispatch(e.instance);
}

void Simulation::handle(const StageFreed& e) { try_dispatch(e.instance); }

void Simulation::handle(const DispatchRequested& e) {
  instances_[e.instance].dispatch_pending = false;
  try_dispatch(e.instance);
}

void Simulation::try_dispatch(std::uint32_t index) {
  Instance& inst = instances_[index];
  if (inst.stage_free.front() > now_) return;  // a StageFreed or BatchFinished event will come
  Pool& pool = pools_[inst.pool];
  const auto lanes = static_cast<std::uint32_t>(inst.lanes.size());
  for (std::uint32_t k = 0; k < lanes; ++k) {
    const std::uint32_t l = (inst.next_lane + k) % lanes;
    Lane& lane = inst.lanes[l];
    if (lane.busy()) continue;
    Batch& batch = lane.batch();
    batch.clear();
    preempted_.clear();
    if (series_) [[unlikely]] gauges_before_ = lane_gauges(lane);
    pool.scheduler->form_batch(lane, batch, preempted_);
    if (series_) [[unlikely]] note_gauges(pool, lane);
    std::int64_t lost = 0;
    for (const Preemption& p : preempted_) {
      recorder_.request_preempted(RequestId(p.request), pool.metrics_id);
      lost += p.lost_tokens;
    }
    if (lost > 0) pool.router->add_load(index - pool.first_instance, load_units(pool, lost, 0));
    if (batch.empty()) continue;

    const models::BatchShape shape = lane.shape(batch);
    const auto sequences = static_cast<std::int64_t>(batch.decodes + batch.chunks.size());
    pool.cost->cost(shape, sequences, stage_ps_.data(), batch.components);
    // Pipeline: stage k starts when stage k - 1 handed over and stage k finished its previous
    // micro-batch.
    SimTime t = now_;
    for (std::size_t s = 0; s < inst.stage_free.size(); ++s) {
      t = std::max(t, inst.stage_free[s]) + Duration::picoseconds(stage_ps_[s]);
      inst.stage_free[s] = t;
    }
    if (trace_) [[unlikely]] trace_iteration(pool, index, l, t);
    lane.set_busy(true);
    inst.next_lane = l + 1;
    schedule(t, BatchFinished{index, l});
    if (inst.stage_free.size() > 1) schedule(inst.stage_free.front(), StageFreed{index});
    return;
  }
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
    for (const Lane& lane : inst.lanes) {
      if (lane.unfinished() != 0 || lane.used_blocks() != 0 || lane.busy()) return false;
    }
  }
  return true;
}

void Simulation::check_all() const {
  for (const Instance& inst : instances_) {
    for (const Lane& lane : inst.lanes) lane.check_invariants();
  }
}

}  // namespace servesim::cluster
