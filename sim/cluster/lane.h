// A lane: one pipeline lane of an instance (a model replica on tp x pp chips, deployment.h), with
// its paged KV-cache blocks and its batch of requests.
//
// With pp stages an instance keeps pp batches (micro-batches) in flight, one per lane, each with
// its running set. With a shared pipeline queue (config.h, PipelineQueue; the default) the
// prompts wait on the instance and the lanes draw their blocks from the instance's one pool and
// prefix cache (one scheduler: vLLM V1, SGLang, TensorRT-LLM, Vidur); a lane's own queue holds
// only those it preempted and, while it forms a batch, those it was lent. Per lane, the lanes are
// vLLM V0's "virtual engines", each with its own waiting queue, prefix cache and 1/pp of the KV
// blocks (V0's Scheduler divides num_gpu_blocks by pipeline_parallel_size). With pp = 1 an
// instance has one lane. A lane is idle or has exactly one batch in flight.
//
// A lane composes three parts that own their state: its wait queues (wait_queue.h: waiting to be
// prefilled, and KV arrived waiting for a decode slot), its KV blocks (kv_blocks.h: counted, not
// named) and its decode set (decode_set.h: the decoding requests in aggregate, so a decode step
// costs O(1) plus O(log n) per request that finishes). The lane itself keeps the running list
// (admission order), the prefilling requests, the prefix cache and the batch in flight, and does
// what needs several parts at once: admission, preemption, the steps' block reservations.
//
// A request holds ceil(tokens / block) blocks, less those it shares with the lane's prefix cache
// when one is enabled (prefix_cache.h: a request whose leading segments are cached starts its
// prefill past them; the blocks of its prompt's whole segments join the cache when its prefill
// completes; unreferenced cached blocks are evicted, LRU, before a decode step preempts or when an
// admission needs room). Admission (FCFS, head of line) needs the request's prefill blocks plus the
// watermark free; a decode step that needs more blocks than are free preempts the most recently
// admitted running request (vLLM's recompute preemption): its blocks are freed and it goes back to
// the front of the waiting queue, to prefill its prompt and the tokens it already generated again.
// Speculative decoding (enable_speculative) walks the running list each step (O(running) per
// step: one uniform draw and a few integer operations per decoding request, DecodeSet::draw).
// Invariants (checked by check_invariants): used blocks <= total blocks; used blocks = the sum of
// the blocks its requests hold; running = prefilling + decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "core/slab_allocator.h"
#include "core/time.h"
#include "sim/cluster/decode_set.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/kv_blocks.h"
#include "sim/cluster/prefix_cache.h"
#include "sim/cluster/request_state.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/wait_queue.h"

namespace servesim::cluster {

// A request a decode step pushed out, and the tokens of work it lost (to be recomputed).
struct Preemption {
  RequestId request;
  std::uint32_t lost_tokens;
};

struct Chunk {
  RequestId request;
  std::uint32_t tokens;
};

// The batch a lane runs: every decoding request (when decodes are included) plus prompt chunks.
struct Batch {
  std::vector<Chunk> chunks;
  std::uint32_t decodes = 0;  // decoding requests in the batch (all of the lane's, or 0)
  std::int64_t prefill_tokens = 0;
  ComponentTimes components{};  // cost by component, summed over stages
  std::int64_t kv_wait_ps = 0;  // of it, waiting for KV sends on the all-to-all's queue (Dispatcher)
  // The decode-step formula's shared terms for this batch, when it was costed by that formula or
  // a decode run continues it (IterationCostModel::decode_steps).
  IterationCostModel::DecodeSteps steps{};
  void clear() {
    chunks.clear();
    decodes = 0;
    prefill_tokens = 0;
    kv_wait_ps = 0;
  }
  bool empty() const { return chunks.empty() && decodes == 0; }
};

class Lane {
 public:
  // window / top_k: the model's sliding window and DSA top-k (0 when it has none), for the capped
  // context sums in shape().
  Lane(RequestTable* requests, std::int64_t total_blocks, std::int64_t block_tokens, std::int64_t watermark_blocks,
       std::int64_t max_running, std::int64_t window = 0, std::int64_t top_k = 0);

  // The parts (read only; the lane changes them).
  const WaitQueue& queue() const { return queue_; }
  const KvBlocks& blocks() const { return blocks_; }
  const DecodeSet& decode_set() const { return decode_; }

  // Turns on prefix caching for this lane: at most capacity_blocks cached blocks; the request
  // table's prefix keys name each request's prefix segments (segment_tokens a multiple of the
  // block size).
  void enable_prefix_cache(std::int64_t capacity_blocks);
  // Or uses `cache`, its instance's, which the lanes sharing a KV pool share (after
  // share_blocks): its blocks are the pool's (KvBlocks::to_cache).
  void share_prefix_cache(PrefixCache* cache);
  const PrefixCache* prefix_cache() const { return cache_; }
  // The prefix cache this lane owns (null when it has none or shares its instance's).
  const PrefixCache* own_prefix_cache() const { return own_cache_.get(); }
  // Prompt tokens a request with these keys and prefill target would find cached here (read only;
  // routers).
  std::int64_t cached_prefix_tokens(const PrefixKeys& keys, std::uint32_t prefill_target) const;
  // Prompt tokens that admissions skipped thanks to the cache since the last call (the router's
  // outstanding work drops by them).
  std::int64_t take_hit_tokens() {
    const std::int64_t t = hit_tokens_untaken_;
    hit_tokens_untaken_ = 0;
    return t;
  }

  // The lane draws its KV blocks from `pool`, which its instance's lanes share, keeping
  // `watermark` blocks of it free (KvBlocks::share); before any request joins.
  void share_blocks(KvPool* pool, std::int64_t watermark) { blocks_.share(pool, watermark); }

  // Swap preemption (config.h, PreemptionMode::kSwap): decoding victims keep their KV in host
  // memory and are re-admitted with it, prefilling only their last token.
  void enable_swap() { swap_ = true; }
  // KV tokens copied over the host link (out and in) since the last call.
  std::int64_t take_swap_tokens() {
    const std::int64_t t = swap_tokens_;
    swap_tokens_ = 0;
    return t;
  }

  // Speculative decoding (config.h SpeculativeConfig): every decode step verifies draft_tokens (k)
  // drafts per decoding request, which emits 1 + accepted tokens, accepted drawn per request per
  // step from `rng` with P(accepted >= i) = reach[i - 1] (the product of the first i conditional
  // rates), never past the request's output length. Must be called before any request joins.
  void enable_speculative(int draft_tokens, std::vector<double> reach, Rng rng);
  int verify_width() const { return decode_.verify_width(); }

  // Attention-DP per-rank batches (config.h AttentionDpBalance): the lane's decoding requests
  // live on `ranks` dp ranks, each assigned when it joins the decode set (least_kv: the rank with
  // the fewest KV tokens of decoding requests, ties to the lowest; else in turn) and kept there
  // (DecodeSet::busiest_rank_shape). Must be called before any request joins.
  void enable_rank_balance(int ranks, bool least_kv);
  // A fresh request's first response after its k-th decode step (DecodeSet::hold_first_response).
  void hold_first_response(int k);
  // A fresh request answers with the prefill's token when it is admitted (first_response_step 0):
  // admit_ready hands it back unjoined, for the dispatcher to emit that token and then join it.
  void answer_on_admit() { answer_on_admit_ = true; }

  // --- queue and admission (used by batch schedulers) ---
  void enqueue_back(RequestId r) { queue_.push_back(r); }
  bool has_waiting() const { return !queue_.empty(); }
  std::uint32_t prefill_target_of_front() const { return req(queue_.front()).prefill_target; }
  std::size_t waiting() const { return queue_.size(); }
  RequestId front_waiting() const { return queue_.front(); }
  void pop_waiting_front() { queue_.pop_front(); }
  // The last waiting request, taken off the queue (a shared queue's request the lane was lent and
  // did not admit: Dispatcher::form).
  RequestId pop_waiting_back() { return queue_.pop_back(); }
  // Admits the head of the waiting queue when the batch-size cap and the KV blocks allow it
  // (prefill blocks + watermark free); returns the request, or an invalid id.
  RequestId try_admit_front();
  const std::vector<RequestId>& prefilling() const { return prefilling_; }
  std::uint32_t prefill_remaining(RequestId r) const { return req(r).prefill_target - req(r).prefilled; }
  std::uint32_t decoding() const { return decode_.count(); }
  std::int64_t running() const { return running_; }

  // Reserves the blocks the next decode step needs, preempting the most recently admitted running
  // requests while they are short. Appends preempted requests to `preempted`. Returns the number of
  // decodes the step runs.
  std::uint32_t prepare_decode_step(std::vector<Preemption>& preempted);

  // --- batch lifecycle (used by the simulation) ---
  // The aggregate shape of `batch` for the cost model.
  models::BatchShape shape(const Batch& batch) const;
  bool busy() const { return busy_; }
  void set_busy(bool b) { busy_ = b; }
  Batch& batch() { return batch_; }
  const Batch& batch() const { return batch_; }

  // After the batch's decode step ran: advances the step and returns the requests that produced
  // their last token in it (in step, then id order), removed from the lane.
  void finish_decode_step(std::vector<RequestId>& finished);
  // `steps` decode steps of `decodes` requests with nobody joining, leaving, preempted or drafting
  // (a decode run's steps after the first that a settle applies, DecodeRuns::settle), the last
  // ending at `last_end`: the state that as many rounds of decode_gaps (whose gaps the caller
  // records), finish_decode_step, unbook(step_blocks_ahead(0)) and prepare_decode_step leave.
  // CHECKs that no request finishes or is preempted and that each step keeps `decodes`.
  void quiet_decode_steps(std::uint32_t steps, std::uint32_t decodes, SimTime last_end);
  // Inter-token gaps of the decode step that ended at `now` (DecodeSet::decode_gaps), and the
  // fresh requests of that step (their first token), cleared by clear_fresh.
  template <class F>
  void decode_gaps(SimTime now, std::uint32_t decodes, F&& gap) {
    decode_.decode_gaps(now, decodes, std::forward<F>(gap));
  }
  // Calls answer(r, tokens) per fresh request of that step (DecodeSet::answer_fresh).
  template <class F>
  void answer_fresh(F&& answer) {
    decode_.answer_fresh(std::forward<F>(answer));
  }
  void clear_fresh() { decode_.clear_fresh(); }
  // A prompt chunk ran; returns true when the request's prefill is complete.
  bool finish_chunk(const Chunk& c);
  // A request whose prefill completed and that has tokens left to generate joins the decode set;
  // `now` is when its latest token was emitted.
  void join_decode(RequestId r, SimTime now, bool fresh = false) { decode_.join(r, now, fresh); }
  // Removes a request that finished during prefill (its only token was the prefill's).
  void release(RequestId r);

  // --- disaggregation ---
  std::int64_t free_blocks() const { return blocks_.free(); }
  // Blocks booked by a multi-step decode run for its later steps (taken by their preparation;
  // counted as used by admission, reservations and free_blocks(), not by the decode steps).
  void book(std::int64_t blocks) { blocks_.book(blocks); }
  void unbook(std::int64_t blocks) { blocks_.unbook(blocks); }
  std::int64_t booked_blocks() const { return blocks_.booked(); }
  // Prefill lanes: a request whose prefill completed leaves the running set but keeps its blocks
  // until its KV cache has been sent (release_held).
  void hold_for_transfer(RequestId r);
  void release_held(RequestId r);
  // Decode lanes: blocks reserved for a KV cache on its way in (reserve_inbound needs them free,
  // above the watermark); the request then waits in the ready queue until admit_ready takes it
  // straight into the decode set, as a fresh request whose first token its first step emits.
  bool reserve_inbound(std::int64_t blocks) { return blocks_.reserve_inbound(blocks); }
  void cancel_inbound(std::int64_t blocks) { blocks_.cancel_inbound(blocks); }
  void push_ready(RequestId r) { queue_.push_ready(r); }
  std::size_t ready() const { return queue_.ready(); }
  bool can_admit_ready() const { return queue_.ready() > 0 && running_ < max_running_; }
  // Admits ready requests while the batch-size cap allows, appending them to `admitted`; with
  // answer_on_admit, the fresh ones go to `answering` instead, admitted but not decoding yet.
  void admit_ready(std::vector<RequestId>& admitted, std::vector<RequestId>& answering);
  // Failures: every request the lane holds (waiting, ready, running, held), in that order; the
  // lane is emptied (blocks, aggregates, batch) as if new.
  void evict_all(std::vector<RequestId>& out);

  std::int64_t total_blocks() const { return blocks_.total(); }
  std::int64_t used_blocks() const { return blocks_.used(); }
  // The cached blocks counted in this lane's used (its own cache's; a shared cache's are the pool's).
  std::int64_t cached_blocks() const { return own_cache_ ? own_cache_->blocks() : 0; }
  std::int64_t peak_used_blocks() const { return blocks_.peak_used(); }
  std::int64_t unfinished() const { return static_cast<std::int64_t>(queue_.size()) + running_; }
  // Recomputes every aggregate from the requests and CHECKs it (tests and debug runs).
  void check_invariants() const;

 private:
  RequestState& req(RequestId r) { return (*requests_)[r]; }
  const RequestState& req(RequestId r) const { return (*requests_)[r]; }
  void link_back(RequestId r);
  void unlink(RequestId r);
  // Returns the tokens of work lost.
  std::uint32_t preempt(RequestId r);
  // Takes a decoding request out of the decode set (finished, preempted or evicted: the blocks
  // DecodeSet::leave / preempt returns) and frees its blocks and cache references.
  void free_decoded(RequestId r, std::int64_t blocks);
  std::uint32_t blocks_for(std::uint64_t tokens) const { return blocks_.blocks_for(tokens); }
  // Prefix caching: the blocks a request holds of its own (not shared with the cache) for
  // `tokens` tokens; the cache's segments of r's whole prompt segments after its prefill; the
  // release of its references; eviction of unreferenced cached blocks until `need` are free.
  std::int64_t own_blocks(const RequestState& s, std::uint64_t tokens) const {
    return static_cast<std::int64_t>(blocks_for(tokens)) - s.shared_blocks;
  }
  // Speculative decoding: prepare_decode_step's walk (draws, blocks, capped sums).
  std::uint32_t prepare_speculative_step(std::vector<Preemption>& preempted);
  // A request produced its last token: it leaves the decode set and the running list.
  void finish(RequestId r, std::vector<RequestId>& finished);
  void cache_prompt(RequestId r);
  void drop_cached(RequestId r);
  bool evict_cached(std::int64_t need);

  RequestTable* requests_;
  WaitQueue queue_;
  std::vector<RequestId> prefilling_;
  RequestId head_, tail_;  // running list, admission order
  std::int64_t running_ = 0;
  std::int64_t max_running_;

  DecodeSet decode_;
  KvBlocks blocks_;

  bool busy_ = false;
  Batch batch_;

  std::vector<RequestId> held_;  // prefilled requests whose KV is being sent (failures evict them)

  std::unique_ptr<PrefixCache> own_cache_;  // the lane's own prefix cache, if it has one
  PrefixCache* cache_ = nullptr;            // the one it uses (own or shared); null: no prefix caching
  std::int64_t hit_tokens_untaken_ = 0;
  bool swap_ = false;
  bool answer_on_admit_ = false;  // answer_on_admit()
  std::int64_t swap_tokens_ = 0;
};

}  // namespace servesim::cluster
