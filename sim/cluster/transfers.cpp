#include "sim/cluster/transfers.h"

#include <algorithm>

namespace servesim::cluster {

Transfers::Transfers(const SimulationConfig& config, Deployment& deployment, Network* network, RequestTable& requests,
                     Lifecycle& lifecycle, RunObserver& observer, Agenda& agenda)
    : deployment_(deployment),
      network_(network),
      requests_(requests),
      lifecycle_(lifecycle),
      observer_(observer),
      agenda_(agenda),
      kv_transfer_bytes_(config.model),
      kv_setup_(config.disaggregation.kv_setup),
      embedding_bytes_per_token_(config.disaggregation.embedding_bytes_per_token > 0
                                     ? config.disaggregation.embedding_bytes_per_token
                                     : 2.0 * config.model.hidden),  // bf16 embeddings
      layers_(std::max(1, config.model.layers)),
      streamed_(config.disaggregation.kv_transfer == KvTransferMode::kLayerStreamed) {
  SERVESIM_CHECK(kv_transfer_bytes_(1) == config.model.kv_transfer_bytes(1));
}

void Transfers::start(RequestId r, std::uint32_t from, std::uint32_t to, double bytes, Network::FlowKind kind) {
  const Pool& a = deployment_.pool_of(from);
  const Pool& b = deployment_.pool_of(to);
  const topologies::ClusterPlacement& placement = *deployment_.placement();
  Journey& j = requests_.journey(r);
  j.flows = static_cast<std::uint16_t>(
      j.flows + network_->start_transfer(
                    r, j.epoch, kind,
                    placement.chips(static_cast<int>(deployment_.instance(from).pool), static_cast<int>(a.local(from))),
                    a.config->plan,
                    placement.chips(static_cast<int>(deployment_.instance(to).pool), static_cast<int>(b.local(to))),
                    b.config->plan, bytes));
}

void Transfers::send_embeddings(RequestId r, std::uint32_t from, std::uint32_t to) {
  Journey& j = requests_.journey(r);
  j.target = to;
  start(r, from, to, embedding_bytes_per_token_ * j.image_tokens, Network::kEmbeddingFlow);
}

void Transfers::begin_kv(RequestId r, double total, double bytes) {
  Journey& j = requests_.journey(r);
  j.transferred = true;
  j.kv_bytes = total;
  j.transfer_start = agenda_.now();
  // On an all-to-all queue, a layer-streamed deployment has posted every layer but the last as
  // the chunks ran (Dispatcher), also for a request whose KV could not stream (no decode room
  // then): only the last layer's share is left to post, after the prefill; else all of it.
  if (!j.streamed) post_kv_queue(r, streamed_ ? total / layers_ : total);
  send_kv(r, bytes);
}

void Transfers::post_kv_queue(RequestId r, double bytes) {
  const std::uint32_t from = requests_[r].instance;
  if (deployment_.pool_of(from).kv_queue_s_per_byte > 0) [[unlikely]]
    post_kv_send(deployment_.instance(from), bytes, agenda_.now());
}

void Transfers::send_kv(RequestId r, double bytes) {
  Journey& j = requests_.journey(r);
  // The engine's fixed hand-off comes first: the data moves when it ends, with every part
  // started meanwhile (a streamed transfer's last layer).
  if (kv_setup_.ps() > 0 && !j.setup_done) {
    j.setup_bytes += bytes;
    if (!j.setup_pending) {
      j.setup_pending = true;
      agenda_.schedule(agenda_.now() + kv_setup_, KvSetupDone{static_cast<std::uint32_t>(r.index()), j.epoch});
    }
    return;
  }
  start(r, requests_[r].instance, j.target, bytes, Network::kKvFlow);
}

bool Transfers::setup_done(const KvSetupDone& e) {
  const RequestId r(e.request);
  if (!requests_.in_flight(r)) return false;  // lost to a failure meanwhile
  Journey& j = requests_.journey(r);
  if (j.epoch != e.epoch || !j.setup_pending) return false;  // a failure restarted its transfer
  j.setup_pending = false;
  j.setup_done = true;
  const double bytes = j.setup_bytes;
  j.setup_bytes = 0;
  send_kv(r, bytes);
  return true;
}

void Transfers::prefills_started(std::span<const RequestId> started) {
  if (!streamed_) return;
  for (const RequestId r : started) {
    Journey& j = requests_.journey(r);
    // A request no decode lane could hold is not placed: prefill_done rejects it.
    if (j.streamed || !awaiting_.empty() || !decode_admissible(r) || !place_decode(r)) continue;
    // Layer-streamed: every layer but the last moves while the prompt is prefilled.
    const double total = kv_transfer_bytes_(requests_[r].prefill_target);
    j.streamed = true;
    begin_kv(r, total, total * (layers_ - 1) / layers_);
    network_->reschedule();
  }
}

void Transfers::prefill_done(RequestId r, Lane& lane) {
  RequestState& s = requests_[r];
  Journey& j = requests_.journey(r);
  Pool& pool = deployment_.pool_of(s.instance);
  lane.hold_for_transfer(r);
  pool.load.left(pool.local(s.instance), 0);
  j.prefill_end = agenda_.now();
  j.in_prefill = false;
  const double total = kv_transfer_bytes_(s.prefill_target);
  if (j.streamed) {
    // The last layer's share leaves now; the rest has been moving since the first chunk.
    post_kv_queue(r, total / layers_);
    send_kv(r, total / layers_);
    network_->reschedule();
    return;
  }
  if (!decode_admissible(r)) {
    observer_.changing(s.instance, lane, agenda_.now(), [&] { lane.release_held(r); });
    lifecycle_.reject(r, metrics::RejectReason::kNoCapacity);
    return;
  }
  if (!awaiting_.empty() || !place_decode(r)) {
    awaiting_.push_back(r);
    return;
  }
  begin_kv(r, total, total);
  network_->reschedule();
}

void Transfers::drain_awaiting() {
  bool started = false;
  while (!awaiting_.empty()) {
    const RequestId r = awaiting_.front();
    if (requests_[r].phase != Phase::kTransferring) {  // a failure took it meanwhile
      awaiting_.pop_front();
      continue;
    }
    if (!place_decode(r)) break;
    awaiting_.pop_front();
    requests_.advance(r, metrics::TtftPart::kQueueing, agenda_.now());
    const double total = kv_transfer_bytes_(requests_[r].prefill_target);
    begin_kv(r, total, total);
    started = true;
  }
  if (started) network_->reschedule();
}

bool Transfers::decode_admissible(RequestId r) const {
  const RequestState& s = requests_[r];
  return static_cast<std::int64_t>(s.prefill_target) + s.output - s.generated <= deployment_.decode().admissible_tokens;
}

bool Transfers::place_decode(RequestId r) {
  Pool& pool = deployment_.decode();
  const std::int64_t block = pool.config->kv_cache.block_tokens;
  const std::int64_t need = (static_cast<std::int64_t>(requests_[r].prefill_target) + block - 1) / block;
  const std::uint32_t local = pool.router->pick(RouteQuery{pool.load});
  if (local == kNoInstance) return false;
  const std::uint32_t index = pool.first_instance + local;
  Instance& inst = deployment_.instance(index);
  std::uint32_t best = 0;
  for (std::uint32_t l = 1; l < inst.lanes.size(); ++l) {
    if (inst.lanes[l].free_blocks() > inst.lanes[best].free_blocks()) best = l;
  }
  Lane& lane = inst.lanes[best];
  bool reserved = false;
  observer_.changing(index, lane, agenda_.now(), [&] { reserved = lane.reserve_inbound(need); });
  if (!reserved) return false;
  Journey& j = requests_.journey(r);
  j.flows_reserved = true;
  j.target = index;
  j.target_lane = static_cast<std::uint16_t>(best);
  deployment_.note_free_kv(index);
  return true;
}

Transfers::Arrival Transfers::arrived(const topologies::FlowDone& d) {
  const RequestId r = Network::request_of(d);
  if (!requests_.in_flight(r)) return {};  // lost to a failure: its flows were stale
  Journey& j = requests_.journey(r);
  if (!Network::same_epoch(Network::epoch_of(d), j.epoch)) return {};  // a failure made it stale
  SERVESIM_CHECK(j.flows > 0);
  if (--j.flows > 0) return {};
  const RequestState& s = requests_[r];
  if (s.phase == Phase::kDone) return {};
  if (Network::kind_of(d) == Network::kEmbeddingFlow) {
    requests_.advance(r, metrics::TtftPart::kEmbeddingTransfer, agenda_.now());
    return Arrival{Arrival::kEmbeddings, r, j.target};
  }
  // A streamed transfer's bulk may land before the prefill ends; it is done with the last layer.
  if (s.phase != Phase::kTransferring) return {};
  return Arrival{Arrival::kKv, r, j.target};
}

void Transfers::deliver(RequestId r) {
  RequestState& s = requests_[r];
  Journey& j = requests_.journey(r);
  const SimTime now = agenda_.now();
  Lane& held_on = deployment_.instance(s.instance).lanes[s.lane];
  observer_.changing(s.instance, held_on, now, [&] { held_on.release_held(r); });
  // Its blocks are free again: a request waiting for blocks there may now be admitted (a lane
  // with nothing waiting has nothing to start, and a dispatch would find an empty batch).
  if (held_on.has_waiting() || !held_on.prefilling().empty() ||
      !deployment_.instance(s.instance).shared_waiting.empty())
    deployment_.request_dispatch(s.instance);
  requests_.advance(r, metrics::TtftPart::kKvTransferExposed, now);
  j.transfer_end = now;
  j.flows_reserved = false;
  Pool& pool = deployment_.pool_of(j.target);
  observer_.trace([&] {
    return RunObserver::transfer_span(pool.metrics_id, pool.local(j.target), j.transfer_start, now, r, j.kv_bytes,
                                      j.ttft[static_cast<std::size_t>(metrics::TtftPart::kKvTransferExposed)]);
  });
  s.instance = j.target;
  s.lane = j.target_lane;
  deployment_.instance(j.target).lanes[j.target_lane].push_ready(r);
  pool.load.routed(pool.local(j.target), s.output - s.generated);
  observer_.routed(r, pool.metrics_id, j.target);
  deployment_.request_dispatch(j.target);
}

}  // namespace servesim::cluster
