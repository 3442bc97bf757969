// Transfers between pools: image embeddings (encode -> prefill) and KV caches (prefill -> decode).
//
// Models: a request whose prefill ends on a prefill instance keeps its KV blocks there
// (Lane::hold_for_transfer) until its KV cache has reached a decode instance. The decode pool's
// router picks the instance (free_kv: the most free blocks), whose roomiest lane reserves the
// prompt's blocks (reserve_inbound, above the watermark); with no room the request waits in a FIFO
// (awaiting), retried whenever a decode iteration ends. A request whose KV could never fit a decode
// lane is rejected (no_capacity). KV bytes = prefill tokens x ModelSpec::kv_bytes_per_token,
// moved as Network::start_transfer flows. KvTransferMode::kAfterPrefill sends all of it when the
// prefill ends; kLayerStreamed reserves the decode room at the first chunk and sends (L - 1)/L of
// the bytes then, the last layer's 1/L when the prefill ends. When every flow of a transfer has
// arrived, the request joins the decode lane's ready queue (deliver). Embeddings (image tokens x
// embedding_bytes_per_token, default hidden x 2 B) flow to the request's prefill instance.
// Ignores: the prefill compute that would be needed before layer l's KV exists (the first L - 1
// layers' bytes flow from the first chunk: optimistic by at most one layer's compute).
// Invariants: one place starts a KV transfer (begin_kv); a request's flows in flight are counted
// in its journey and carry its journey epoch, so a failure makes them stale.
#pragma once

#include <cstdint>
#include <span>

#include "core/ring_queue.h"
#include "sim/cluster/deployment.h"
#include "sim/cluster/lifecycle.h"
#include "sim/cluster/network.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/run_observer.h"

namespace servesim::cluster {

class Transfers {
 public:
  Transfers(const SimulationConfig& config, Deployment& deployment, Network* network, RequestTable& requests,
            Lifecycle& lifecycle, RunObserver& observer, Agenda& agenda);

  // r's embeddings leave encode instance `from` for prefill instance `to` (the caller reschedules
  // the network).
  void send_embeddings(RequestId r, std::uint32_t from, std::uint32_t to);
  // The prefills of these requests began (their first chunks are in a batch being dispatched):
  // layer-streamed KV starts to leave.
  void prefills_started(std::span<const RequestId> started);
  // r's prefill ended on prefill lane `lane`: its KV goes to a decode instance, or waits.
  void prefill_done(RequestId r, Lane& lane);
  // A request whose KV is intact on its prefill instance needs a decode instance (again).
  void await(RequestId r) { awaiting_.push_back(r); }
  // Requests waiting for decode room try again, in order.
  void drain_awaiting();
  bool awaiting_none() const { return awaiting_.empty(); }

  // What a finished flow completed.
  struct Arrival {
    enum Kind : std::uint8_t { kNothing, kEmbeddings, kKv } kind = kNothing;
    RequestId request;
    std::uint32_t target = kNoInstance;  // the prefill (embeddings) or decode (KV) instance
  };
  Arrival arrived(const topologies::FlowDone& d);
  // r's KV has arrived at its decode instance: it joins the lane's ready queue.
  void deliver(RequestId r);
  // A transfer's fixed hand-off ended: its data starts moving. False when the event is stale (a
  // failure restarted or ended the transfer); else the caller reschedules the network.
  bool setup_done(const KvSetupDone& e);

 private:
  // Whether a decode lane could ever hold r's prompt and output (Pool::admissible_tokens).
  bool decode_admissible(RequestId r) const;
  // Reserves KV room on a decode instance (the journey's target); false when none has it.
  bool place_decode(RequestId r);
  // The one place a KV transfer starts: `bytes` of its `total` bytes leave now (after the
  // engine's hand-off, when it has one).
  void begin_kv(RequestId r, double total, double bytes);
  void send_kv(RequestId r, double bytes);
  // r's prefill instance posts `bytes` of KV sends on its all-to-all's queue, when its pool puts
  // them there (Pool::kv_queue_s_per_byte).
  void post_kv_queue(RequestId r, double bytes);
  void start(RequestId r, std::uint32_t from, std::uint32_t to, double bytes, Network::FlowKind kind);
  Deployment& deployment_;
  Network* network_;
  RequestTable& requests_;
  Lifecycle& lifecycle_;
  RunObserver& observer_;
  Agenda& agenda_;
  models::KvTransferSize kv_transfer_bytes_;
  Duration kv_setup_;  // DisaggregationConfig::kv_setup
  double embedding_bytes_per_token_ = 0;
  int layers_ = 1;
  bool streamed_ = false;          // KvTransferMode::kLayerStreamed
  RingQueue<RequestId> awaiting_;  // prefilled, waiting for decode KV room
};

}  // namespace servesim::cluster
