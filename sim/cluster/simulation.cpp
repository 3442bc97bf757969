#include "sim/cluster/simulation.h"

#include "topologies/rank_flow_symmetry.h"

namespace servesim::cluster {
namespace {

// One step of the fingerprint: a 64-bit multiply-xorshift mix (from splitmix64's finaliser).
std::uint64_t fingerprint_step(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}

// The run's end: its horizon, or the clock's limit (core/time.h) when it has none.
SimTime horizon_of(const SimulationConfig& config) {
  return SimTime::zero() + config.horizon.value_or(config.clock_limit);
}

bool caches_prefixes(const SimulationConfig& config) {
  for (const PoolConfig& pc : config.pools) {
    if (pc.prefix_cache.enabled && pc.kind != PoolRole::kEncode) return true;
  }
  return false;
}

// How many rank pairs one flow of a transfer stands for (topologies/rank_flow_symmetry.h), or 0:
// every rank pair flows when the run has faults or asks for it.
int symmetric_flow_ranks(const SimulationConfig& config, const Deployment& d, const Network& network) {
  if (config.flow_per_rank_pair || !network.faults().empty()) return 0;
  std::vector<topologies::Exchange> exchanges;
  const auto side = [&](int p) {
    const PoolConfig& pc = *d.pools()[static_cast<std::size_t>(p)].config;
    return topologies::ExchangePool{p, pc.plan.tp, pc.plan.dp, pc.instances};
  };
  if (d.encode_pool() >= 0) exchanges.push_back({side(d.encode_pool()), side(d.prefill_pool())});
  if (d.disaggregated()) exchanges.push_back({side(d.prefill_pool()), side(d.decode_pool())});
  return topologies::rank_flows_symmetric(network.fabric(), *d.placement(), exchanges, config.caches.symmetry);
}

}  // namespace

Simulation::Simulation(const SimulationConfig& config, metrics::Recorder& recorder)
    : config_(config),
      observer_(recorder),
      source_(std::make_unique<workloads::RequestSource>(config_.workload, config_.seed, horizon_of(config_),
                                                         config_.caches.draws)),
      requests_(!source_->plain(), caches_prefixes(config_)),
      network_(Network::needed(config_) ? std::make_unique<Network>(config_, observer_.records_series(),
                                                                    config_.horizon ? SimTime::zero() + *config_.horizon
                                                                                    : SimTime::zero() + kMaxFaultTime,
                                                                    agenda_)
                                        : nullptr),
      deployment_(config_, requests_, network_.get(), observer_, agenda_),
      lifecycle_(config_, *source_, requests_, observer_, agenda_),
      admission_(deployment_, requests_, lifecycle_, observer_, agenda_),
      transfers_(config_, deployment_, network_.get(), requests_, lifecycle_, observer_, agenda_),
      runs_(config_, deployment_, lifecycle_, observer_, agenda_),
      dispatcher_(config_, deployment_, network_.get(), requests_, *source_, lifecycle_, observer_, agenda_),
      failures_(config_, deployment_, network_.get(), requests_, lifecycle_, observer_, agenda_),
      horizon_(horizon_of(config_)) {
  if (network_) network_->set_flow_ranks(symmetric_flow_ranks(config_, deployment_, *network_));
  lifecycle_.set_prefix_block(static_cast<std::uint32_t>(deployment_.prefill().config->kv_cache.block_tokens));
  if (deployment_.disaggregated()) {
    lifecycle_.set_transfer_pools(deployment_.prefill().metrics_id, deployment_.decode().metrics_id);
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
    observer_.recorder().add_class(std::move(info));
  }
  if (config_.workload.requests > 0) observer_.recorder().expect_requests(config_.workload.requests);
}

Simulation::~Simulation() = default;

RunResult Simulation::run() {
  ScopedCheckContext scoped(&check_context_);
  lifecycle_.start();  // the source's first arrivals
  failures_.start();   // the fault timeline
  RunResult result;
  while (true) {
    const SimTime was = agenda_.now();
    const Agenda::Next next = agenda_.next(horizon_);
    if (next.kind == Agenda::Next::kEnd) {
      result.reached_horizon = next.horizon;
      break;
    }
    if (next.kind == Agenda::Next::kDispatch) {
      check_context_.event_name = "DispatchRequested";
      handle(DispatchRequested{next.instance});
    } else {
      if (const auto* b = std::get_if<BatchFinished>(&next.entry.payload)) {
        if (!live(*b)) {
          agenda_.withdraw(was);  // a cancelled batch end is not an event of the run
          continue;
        }
        if (runs_.provisional(*b)) {
          agenda_.refile(next.entry, runs_.extend(b->instance), was);  // a decode run's next costs
          ++result.refiled;
          continue;
        }
      }
      fire(next.entry, result);
      if (budget_ != nullptr && (result.events & 4095) == 0 &&
          !budget_->allows(agenda_.now(), requests_.size(), requests_.held(), result.events)) [[unlikely]] {
        break;  // the budget is spent: the run ends here, as at a horizon
      }
      if (settle_ != nullptr && (result.events & 255) == 0 && settle_->settled()) [[unlikely]] {
        result.settled = true;
        break;  // the verdict cannot change: the run ends here, as at a horizon
      }
    }
    if (paranoid_) check_all();
  }
  finish(result);
  return result;
}

void Simulation::fire(const EventQueue<Event>::Entry& entry, RunResult& result) {
  check_context_.now = entry.time;
  check_context_.event_name = event_name(entry.payload);
  check_context_.event_sequence = entry.sequence();
  ++result.events;
  result.fingerprint = fingerprint_step(result.fingerprint, static_cast<std::uint64_t>(entry.time.ps()));
  result.fingerprint =
      fingerprint_step(result.fingerprint, (std::uint64_t{entry.priority()} << 56) ^ event_ids(entry.payload));
  std::visit([this](const auto& e) { handle(e); }, entry.payload);
  if (observer_.wants_progress(result.events)) [[unlikely]] {
    observer_.publish(result.events, agenda_.now(), lifecycle_.issued());
  }
}

void Simulation::finish(RunResult& result) {
  result.end = result.reached_horizon ? horizon_ : agenda_.now();
  runs_.settle_all(result.end);  // steps that ended within the window count, as their events would have
  observer_.finish(result.end, network_ ? &network_->flows() : nullptr, network_ ? &network_->fabric() : nullptr,
                   flow_ranks() > 0 ? static_cast<double>(flow_ranks()) : 1.0);
  observer_.final_progress(result.events, agenda_.now(), lifecycle_.issued());
  for (const Pool& pool : deployment_.pools()) {
    if (!pool.caching) continue;
    metrics::PrefixCacheCounts c;
    for (int i = 0; i < pool.config->instances; ++i) {
      const Instance& inst = deployment_.instances()[pool.first_instance + static_cast<std::uint32_t>(i)];
      if (inst.prefix_cache) c.add(inst.prefix_cache->stats());  // its lanes share it: counted once
      for (const Lane& lane : inst.lanes) {
        if (lane.own_prefix_cache()) c.add(lane.own_prefix_cache()->stats());
      }
    }
    observer_.prefix_cache(pool.metrics_id, c);
  }
  for (const Pool& pool : deployment_.pools()) {
    for (int i = 0; i < pool.config->instances; ++i) {
      for (const Lane& lane : deployment_.instances()[pool.first_instance + static_cast<std::uint32_t>(i)].lanes) {
        observer_.kv_peak(pool.metrics_id, lane);
      }
    }
  }
}

void Simulation::handle(const RequestArrived& e) { admission_.enter(lifecycle_.arrive(e.stream)); }

void Simulation::handle(const DispatchRequested& e) {
  deployment_.instance(e.instance).dispatch_pending = false;
  dispatch(e.instance);
}

void Simulation::dispatch(std::uint32_t i) {
  const std::uint32_t lane = dispatcher_.form(i);
  if (lane == kNoLane) return;
  transfers_.prefills_started(dispatcher_.started());  // layer-streamed KV leaves with the first chunk
  const Dispatcher::Priced priced = dispatcher_.price(i, lane);
  Lane& l = deployment_.instance(i).lanes[lane];
  const SimTime end =
      runs_.eligible(i, l, priced.preempted) ? runs_.plan(i, l, priced.end, priced.decode_step) : priced.end;
  dispatcher_.launch(i, lane, priced, end, runs_.generation(i));
}

bool Simulation::live(const BatchFinished& e) const {
  return e.epoch == deployment_.instances()[e.instance].epoch  // else the instance failed meanwhile
         && e.run == runs_.generation(e.instance);             // else the run was cut: a later event ends it
}

void Simulation::handle(const BatchFinished& e) {
  runs_.finish(e.instance);  // a run's last step ended: the steps before it are applied first
  Lane& lane = dispatcher_.batch_ended(e);
  for (const Chunk& c : lane.batch().chunks) {
    if (dispatcher_.chunk_ended(e.instance, lane, c)) transfers_.prefill_done(c.request, lane);
  }
  if (dispatcher_.batch_done(e.instance, lane)) transfers_.drain_awaiting();
  dispatch(e.instance);
}

void Simulation::handle(const EncodeFinished& e) {
  if (!dispatcher_.encode_done(e)) return;
  std::vector<RequestId>& batch = deployment_.instance(e.instance).encode_batch;
  for (const RequestId r : batch) {
    const std::uint32_t to = admission_.route_prefill(r);
    if (to != kNoInstance) transfers_.send_embeddings(r, e.instance, to);
  }
  batch.clear();
  network_->reschedule();
  dispatcher_.try_encode(e.instance);
}

void Simulation::handle(const NetworkDue& e) {
  if (!network_->live(e)) return;
  for (const topologies::FlowDone& d : network_->complete()) {
    const Transfers::Arrival a = transfers_.arrived(d);
    if (a.kind == Transfers::Arrival::kEmbeddings) {
      admission_.enqueue_prefill(a.request, a.target);
    } else if (a.kind == Transfers::Arrival::kKv) {
      runs_.cut(a.target);  // it joins after the step in flight
      transfers_.deliver(a.request);
    }
  }
  network_->reschedule();
}

void Simulation::handle(const FaultOccurred& e) {
  for (const std::uint32_t i : failures_.struck(e)) {
    runs_.stop(i);  // the steps that ended before the failure emitted their tokens
    for (const Failures::Requeued& q : failures_.fail(i)) {
      // Its KV intact on its prefill instance, it only needs another decode instance.
      if (q.held_elsewhere) {
        transfers_.await(q.request);
      } else {
        admission_.enter(q.request);
      }
    }
    transfers_.drain_awaiting();
  }
  failures_.cut_links();
}

void Simulation::handle(const KvSetupDone& e) {
  if (transfers_.setup_done(e)) network_->reschedule();
}

void Simulation::handle(const InstanceRepaired& e) {
  if (failures_.repair(e)) transfers_.drain_awaiting();
}

bool Simulation::drained() const {
  for (const Instance& inst : deployment_.instances()) {
    if (!inst.encode_waiting.empty() || inst.encode_busy || !inst.shared_waiting.empty()) return false;
    for (const Lane& lane : inst.lanes) {
      if (lane.unfinished() != 0 || lane.ready() != 0 || lane.used_blocks() != lane.cached_blocks() || lane.busy()) {
        return false;
      }
    }
  }
  return transfers_.awaiting_none() && (!network_ || network_->flows().active_flows() == 0);
}

void Simulation::check_all() const {
  for (const Instance& inst : deployment_.instances()) {
    std::int64_t used = 0, booked = 0;
    for (const Lane& lane : inst.lanes) {
      lane.check_invariants();
      used += lane.used_blocks();
      booked += lane.booked_blocks();
    }
    if (inst.kv_pool) {
      // The shared pool's counts are the sums of its lanes' parts, its used with the blocks of the
      // instance's prefix cache.
      const std::int64_t cached = inst.prefix_cache ? inst.prefix_cache->blocks() : 0;
      SERVESIM_CHECK(inst.kv_pool->cached == cached);
      SERVESIM_CHECK_MSG(inst.kv_pool->used == used + cached && inst.kv_pool->booked == booked,
                         "a shared KV pool's counts differ from its lanes' sums");
      SERVESIM_CHECK(inst.kv_pool->used <= inst.kv_pool->total);
    }
  }
  deployment_.check_loads(requests_);
}

}  // namespace servesim::cluster
