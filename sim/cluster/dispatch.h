// Dispatch: what an instance runs next, what it costs, and what happens when it ends.
//
// Models: when an instance is free (its first pipeline stage idle, it is up), its lanes are
// tried in rotation; the first with work forms a batch: admission control first (a request whose
// TTFT budget passed before its prefill began leaves, ttft_budget), decode lanes admit requests
// whose KV arrived (straight into the decode set), then the pool's batch scheduler picks the batch
// (batch_scheduler.h; it may preempt). The cost model prices the batch per pipeline stage
// (iteration_cost.h; decode-only batches on one stage by the decode-step formula a decode run
// reuses; swap-in/out copies on the first stage), and the stages are booked: stage k starts when
// stage k - 1 hands over and stage k is free. One BatchFinished at the last stage's end, and with
// pp > 1 one StageFreed when the first stage frees. A pool whose expert all-to-all leaves the
// scale-up domain holds its share of its chips' NICs from the dispatch to the iteration's end.
// When the batch ends: decode tokens are emitted (one gap sample per first-token time and count),
// finished requests leave, completed prompt chunks emit their token and join the decode set (a
// prefill pool's leave for their transfer: the caller's), the load ledger drops by the work done.
// Encode instances batch waiting requests in arrival order up to max_batch_size requests and
// max_batched_tokens image tokens; the batch takes models::encode_seconds of all its images.
// Ignores: host scheduling overheads beyond the cost model's; an instance's lanes other than the
// one it dispatches (one batch per dispatch).
// Invariants: a lane is idle or has exactly one batch in flight; the TTFT segment clock of every
// request in a batch advances at its dispatch and end (README, "Attribution"); no allocation per
// dispatch once the scratch buffers are warm.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/time.h"
#include "sim/cluster/agenda.h"
#include "sim/cluster/deployment.h"
#include "sim/cluster/lifecycle.h"
#include "sim/cluster/network.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/run_observer.h"
#include "workloads/source.h"

namespace servesim::cluster {

inline constexpr std::uint32_t kNoLane = 0xffffffffu;

class Dispatcher {
 public:
  Dispatcher(const SimulationConfig& config, Deployment& deployment, Network* network, RequestTable& requests,
             const workloads::RequestSource& source, Lifecycle& lifecycle, RunObserver& observer, Agenda& agenda);

  // --- dispatch ---
  // Instance i may start a batch now. An encode instance starts its encode batch (kNoLane); any
  // other forms the batch of its first lane with work and returns that lane, or kNoLane (down,
  // busy, or nothing to run).
  std::uint32_t form(std::uint32_t i);
  // The requests whose prefill the formed batch begins, on a prefill pool (their KV may start to
  // leave: Transfers::prefills_started).
  std::span<const RequestId> started() const { return started_; }
  // The formed batch of lane l, priced and its stages booked.
  struct Priced {
    SimTime end;               // when its last stage ends
    double tokens = 0;         // tokens in the batch (the all-to-all's NIC time)
    bool decode_step = false;  // costed by the decode-step formula (the batch's steps are set)
    bool preempted = false;    // its formation preempted requests
  };
  Priced price(std::uint32_t i, std::uint32_t l);
  // The batch runs until `end` (its own end, or a decode run's last step's): its BatchFinished
  // carries the instance's decode-run generation `run`.
  void launch(std::uint32_t i, std::uint32_t l, const Priced& priced, SimTime end, std::uint32_t run);

  // --- completion ---
  // The batch of lane e.lane ended: its iteration is recorded and its decode step applied.
  Lane& batch_ended(const BatchFinished& e);
  // A prompt chunk of the ended batch ran; true when a prefill pool's request finished its prefill
  // (its KV transfer is the caller's).
  bool chunk_ended(std::uint32_t i, Lane& lane, const Chunk& c);
  // After the chunks: the ledger drops by the work done. True for a decode instance (requests
  // waiting for decode room may try again).
  bool batch_done(std::uint32_t i, const Lane& lane);

  // --- encode pools ---
  // The encode batch ended (false when the instance failed meanwhile): its requests' embeddings
  // are ready (Instance::encode_batch, cleared by the caller after routing them).
  bool encode_done(const EncodeFinished& e);
  void try_encode(std::uint32_t i);

 private:
  // Swap preemption: the host-link copies the lane's form_batch started join its iteration.
  void add_swap_time(const Pool& pool, Lane& lane, Batch& batch);
  // A pool with a shared queue (config.h, PipelineQueue::kShared): lends the lane about to form a
  // batch the front of its instance's queue, as many as it could admit (its batch-size cap less
  // its running requests, and no more than the token budget reaches: every admission takes a
  // token of it); returns how many. take_back returns those it did not admit to the queue's front,
  // in order (they are the last of the lane's waiting queue: admission takes from the front).
  std::size_t lend(Instance& inst, const Pool& pool, Lane& lane);
  // Decode pools answering on admission (SchedulerConfig::first_response_step 0): each request of
  // answering_ emits the prefill's token now, then decodes the rest (or is done).
  void answer_admitted(Pool& pool, std::uint32_t index, Lane& lane);
  // A request of `lane` emitted a token: it is done when that was its last (its blocks freed, the
  // load ledger told), else it joins the lane's decode set.
  void complete_or_decode(Pool& pool, std::uint32_t index, Lane& lane, RequestId r, SimTime now);
  void take_back(Instance& inst, Lane& lane, std::size_t lent);
  // KV sends on the all-to-all's queue (Pool::kv_queue_s_per_byte): a layer-streamed batch posts
  // its chunks' KV (all layers' but the last), and the iteration waits for what is queued.
  void add_kv_queue_wait(const Pool& pool, Instance& inst, Batch& batch);

  Deployment& deployment_;
  Network* network_;
  RequestTable& requests_;
  const workloads::RequestSource& source_;
  Lifecycle& lifecycle_;
  RunObserver& observer_;
  Agenda& agenda_;
  const models::ModelSpec& model_;
  models::KvTransferSize kv_transfer_bytes_;  // model_'s, read once
  std::optional<Duration> ttft_budget_;
  bool streamed_;  // layer-streamed KV transfers
  // Scratch buffers reused by every event (no allocation per event once warm).
  std::vector<RequestId> admitted_, answering_, finished_, started_;
  std::vector<Preemption> preempted_;
  std::vector<std::int64_t> stage_ps_;
  std::vector<models::ImageSize> images_;
  std::int64_t done_tokens_ = 0, emitted_ = 0;  // of the batch being completed
};

}  // namespace servesim::cluster
