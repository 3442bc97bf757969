// Admission and routing: which instance a request waits on, and whether it is admitted at all.
//
// Models: a new or re-queued request's first stage: the encode pool when it has images to encode
// (and has generated nothing yet), else the prefill (or combined) pool. The pool's router picks an
// instance over the pool's load ledger (router.h, load_ledger.h); kv_aware routing is told the
// tokens of the request's prefix cached on each instance. The instance puts the request on its
// lane with the fewest unfinished requests (ties rotate; with prefix caches, the lane holding most
// of the prompt), or on its own queue when the pool's is shared (config.h, PipelineQueue), and is
// dispatched at once when idle. Rejections, each with its reason: longer than max_model_len, the
// instance's waiting queue at max_queue, no instance of the stage up.
// Ignores: admission inside an instance (KV blocks, batch caps): the batch scheduler's (dispatch).
// Invariants: a routed request is on exactly one instance's queue, and that instance's ledger
// counts it; no allocation per request (the cached-token buffer is reused).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cluster/deployment.h"
#include "sim/cluster/lifecycle.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/run_observer.h"

namespace servesim::cluster {

class Admission {
 public:
  Admission(Deployment& deployment, RequestTable& requests, Lifecycle& lifecycle, RunObserver& observer, Agenda& agenda)
      : deployment_(deployment), requests_(requests), lifecycle_(lifecycle), observer_(observer), agenda_(agenda) {}

  // A new or re-queued request enters its first stage.
  void enter(RequestId r);
  // Picks r's prefill (or combined) instance; kNoInstance after rejecting r.
  std::uint32_t route_prefill(RequestId r);
  // r joins the waiting queue of prefill instance `index`, or is routed again when that instance
  // went down while its embeddings were on their way.
  void enqueue_prefill(RequestId r, std::uint32_t index);

 private:
  void route_encode(RequestId r);
  // The lane of `inst` r waits on (per-lane queues): the one with the fewest unfinished requests.
  std::uint32_t pick_lane(Instance& inst, const Pool& pool, RequestId r);
  // The pool's router's pick for r (local index), told the tokens cached on each instance when it
  // reads them.
  std::uint32_t pick(Pool& pool, RequestId r);

  Deployment& deployment_;
  RequestTable& requests_;
  Lifecycle& lifecycle_;
  RunObserver& observer_;
  Agenda& agenda_;
  std::vector<std::int64_t> cached_;  // per instance of the pool being routed to (kv_aware)
};

}  // namespace servesim::cluster
