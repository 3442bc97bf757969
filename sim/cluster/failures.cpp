#include "sim/cluster/failures.h"

namespace servesim::cluster {

Failures::Failures(const SimulationConfig& config, Deployment& deployment, Network* network, RequestTable& requests,
                   Lifecycle& lifecycle, RunObserver& observer, Agenda& agenda)
    : deployment_(deployment),
      network_(network),
      requests_(requests),
      lifecycle_(lifecycle),
      observer_(observer),
      agenda_(agenda),
      repair_(config.failures.repair),
      lose_(config.failures.policy == FailurePolicy::kLose) {}

void Failures::start() {
  if (network_ == nullptr) return;
  const auto& faults = network_->faults();
  for (std::size_t i = 0; i < faults.size(); ++i) {
    agenda_.schedule(faults[i].at, FaultOccurred{static_cast<std::uint32_t>(i)});
  }
}

const std::vector<std::uint32_t>& Failures::struck(const FaultOccurred& e) {
  const topologies::FaultEvent& f = network_->faults()[e.index];
  effect_ = topologies::fault_effect(network_->fabric(), f.target);
  struck_.clear();
  down_ = !f.up;
  if (f.up) {
    network_->recover(effect_.links);
    network_->reschedule();
    return struck_;
  }
  // The instances on the touched chips go down for the repair time; then the network drops the
  // links and the dead chips' flows (those are the failed instances' requests).
  for (const topologies::InstanceRef& ref : deployment_.placement()->instances_on(effect_.touched_chips)) {
    const std::uint32_t i = deployment_.pools()[static_cast<std::size_t>(ref.pool)].first_instance +
                            static_cast<std::uint32_t>(ref.instance);
    if (deployment_.instance(i).up) struck_.push_back(i);
  }
  return struck_;
}

void Failures::cut_links() {
  if (down_) network_->fail(effect_.links, effect_.dead_chips);
}

const std::vector<Failures::Requeued>& Failures::fail(std::uint32_t index) {
  const SimTime now = agenda_.now();
  const SimTime repair_at = now + repair_;
  Instance& inst = deployment_.instance(index);
  Pool& pool = deployment_.pool_of(index);
  const std::uint32_t local = pool.local(index);
  inst.up = false;
  ++inst.epoch;
  if (pool.a2a_on_nics) network_->hold_nics(inst.nic_group, inst.nic_share, 0.0);
  pool.load.set_up(local, false);
  pool.load.clear(local);
  evicted_.clear();
  for (Lane& lane : inst.lanes) observer_.changing(index, lane, now, [&] { lane.evict_all(evicted_); });
  if (!inst.shared_waiting.empty()) {
    observer_.dequeued(pool.metrics_id, now, static_cast<std::int64_t>(inst.shared_waiting.size()));
    while (!inst.shared_waiting.empty()) evicted_.push_back(inst.shared_waiting.pop_front());
  }
  for (const RequestId r : inst.encode_batch) evicted_.push_back(r);
  inst.encode_batch.clear();
  inst.encode_busy = false;
  while (!inst.encode_waiting.empty()) evicted_.push_back(inst.encode_waiting.pop_front());
  inst.stage_free.fill(now);
  // Requests whose KV is on its way to this (decode) instance: its reservation went with it.
  // Prefilled ones are affected; ones still prefilling (streamed) send after their prefill.
  if (pool.role == PoolRole::kDecode) {
    for (RequestId r(0); r.value < requests_.size(); ++r.value) {
      if (!requests_.in_flight(r)) continue;
      Journey& j = requests_.journey(r);
      if (j.target != index || !j.flows_reserved) continue;
      const Phase phase = requests_[r].phase;
      if (phase == Phase::kTransferring) {
        evicted_.push_back(r);
      } else if (phase == Phase::kPrefilling) {
        j.restart_transfer();
        j.flows_reserved = j.streamed = j.transferred = false;
        j.target = kNoInstance;
      }
    }
  }
  agenda_.schedule(repair_at, InstanceRepaired{index});
  requeued_.clear();
  for (const RequestId r : evicted_) {
    hit_.push_back(r);
    RequestState& s = requests_[r];
    Journey& j = requests_.journey(r);
    // Flows still moving for it are stale from here on (its tag's epoch), and its hand-off.
    j.restart_transfer();
    if (!j.ttft_done) {
      requests_.advance(r, j.in_prefill ? metrics::TtftPart::kPrefillInterference : metrics::TtftPart::kQueueing, now);
    }
    j.in_prefill = false;
    const bool held_elsewhere = s.phase == Phase::kTransferring && s.instance != index;
    if (s.instance == index && j.target != kNoInstance && j.flows_reserved) {
      // Prefilled (or streaming) here, its KV was going to a live decode instance: give that
      // room back.
      Instance& dst = deployment_.instance(j.target);
      const std::int64_t block = deployment_.pool_of(j.target).config->kv_cache.block_tokens;
      if (dst.up) {
        Lane& lane = dst.lanes[j.target_lane];
        observer_.changing(j.target, lane, now, [&] { lane.cancel_inbound((s.prefill_target + block - 1) / block); });
        deployment_.note_free_kv(j.target);
      }
    }
    j.flows_reserved = false;
    j.streamed = false;
    j.transferred = false;
    j.target = kNoInstance;
    if (lose_) {
      if (held_elsewhere) {
        Lane& lane = deployment_.instance(s.instance).lanes[s.lane];
        observer_.changing(s.instance, lane, now, [&] { lane.release_held(r); });
        deployment_.request_dispatch(s.instance);
      }
      lifecycle_.reject(r, metrics::RejectReason::kLostToFailure);
      continue;
    }
    observer_.requeued(r);
    if (!held_elsewhere) {
      s.phase = Phase::kNew;
      s.prefilled = 0;
    }
    requeued_.push_back(Requeued{r, held_elsewhere});
  }
  observer_.trace(
      [&] { return RunObserver::failure_span(pool.metrics_id, local, now, repair_at, evicted_.size(), lose_); });
  return requeued_;
}

bool Failures::repair(const InstanceRepaired& e) {
  Instance& inst = deployment_.instance(e.instance);
  Pool& pool = deployment_.pool_of(e.instance);
  const std::uint32_t local = pool.local(e.instance);
  inst.up = true;
  pool.load.set_up(local, true);
  // The repair replaced what failed: the instance's chips and their links are back.
  const int p = static_cast<int>(inst.pool);
  for (const topologies::ChipId c : deployment_.placement()->chips(p, static_cast<int>(local))) {
    const auto effect =
        topologies::fault_effect(network_->fabric(), topologies::FaultTarget{topologies::FaultKind::kChip, c.value});
    network_->recover(effect.links);
  }
  network_->reschedule();
  if (pool.load.unit() == LoadUnit::kFreeBlocks) {
    deployment_.note_free_kv(e.instance);
  } else {
    pool.load.clear(local);
  }
  deployment_.request_dispatch(e.instance);
  return pool.role == PoolRole::kDecode;
}

}  // namespace servesim::cluster
