// A request's milestones, as the workload and the recorder hear of them: arrival, first token,
// completion, rejection.
//
// Models: requests enter through the workload's RequestSource (workloads/source.h): one
// RequestArrived event per Arrival the source hands out; at the event the source makes the
// request, which goes to the request table (its hot state, its journey, and what else the run
// keeps of it). The source hears about first tokens (staggered closed-loop starts) and finished
// requests (closed-loop clients and sessions send their next request then), and every arrival it
// hands out in return is scheduled. With an encode pool and a vision model, a request's images
// become prompt tokens (VisionSpec::image_tokens); without one they are not modelled.
// Ignores: where a request is served (the serving collaborators decide; this only records).
// Invariants: every request ends completed or rejected exactly once, or is in flight at the
// horizon; its journey is released when it ends.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/cluster/agenda.h"
#include "sim/cluster/config.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/run_observer.h"
#include "workloads/source.h"

namespace servesim::cluster {

class Lifecycle {
 public:
  Lifecycle(const SimulationConfig& config, workloads::RequestSource& source, RequestTable& requests,
            RunObserver& observer, Agenda& agenda);
  // Disaggregated: a request's KV transfer is reported to its prefill and decode pools.
  void set_transfer_pools(PoolId prefill, PoolId decode) {
    prefill_pool_ = prefill;
    decode_pool_ = decode;
  }
  // Prefix keys are computed at arrival for segments of `block_tokens` (the prefill pool's KV
  // block) unless the trace gives hash ids.
  void set_prefix_block(std::uint32_t block_tokens) { prefix_block_ = block_tokens; }

  // The run starts: the source's first arrivals are scheduled.
  void start();
  // The arrival of stream `stream` fires: the source makes the request.
  RequestId arrive(std::uint32_t stream);
  // r emitted its first token at `at` (now, or a decode run's step before now); `disaggregated`:
  // on a decode instance after its KV arrived.
  void first_token(RequestId r, bool disaggregated, SimTime at);
  void complete(RequestId r);
  void reject(RequestId r, metrics::RejectReason reason);

  bool wants_first_token() const { return source_.wants_first_token(); }
  std::int64_t issued() const { return source_.issued(); }

 private:
  PrefixKeys prefix_keys_of(const workloads::Request& in) const;
  // What the source needs back about request r (finished, first_token).
  workloads::Request source_view(RequestId r) const;
  void client_done(RequestId r, bool completed);
  // Schedules the arrivals the source handed out into arrivals_, and clears it.
  void schedule_arrivals();

  const models::ModelSpec& model_;
  bool encodes_images_ = false;
  workloads::RequestSource& source_;
  RequestTable& requests_;
  RunObserver& observer_;
  Agenda& agenda_;
  PoolId prefill_pool_, decode_pool_;
  std::uint32_t prefix_block_ = 0;
  std::vector<workloads::Arrival> arrivals_;
};

}  // namespace servesim::cluster
