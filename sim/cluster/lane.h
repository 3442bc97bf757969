// A lane: one pipeline lane of an instance (a model replica on tp x pp chips, deployment.h), with
// its paged KV-cache blocks and its batch of requests.
//
// Lanes are vLLM's pipeline "virtual engines": with pp stages an instance keeps pp independent
// batches in flight, each with its own waiting queue, running set and 1/pp of the KV blocks
// (vLLM V0 Scheduler divides num_gpu_blocks by pipeline_parallel_size). With pp = 1 an instance
// has one lane. A lane is idle or has exactly one batch in flight.
//
// KV blocks are counted, not named (kv_blocks.h, the lane's KvBlocks): a request holds
// ceil(tokens / block) blocks, less those it shares with the lane's prefix cache when one is enabled (prefix_cache.h: a
// request whose leading segments are cached starts its prefill past them; the blocks of its prompt's whole segments
// join the cache when its prefill completes; unreferenced cached blocks are evicted, LRU, before a decode step preempts
// or when an admission needs room). Admission (FCFS, head of line) needs the request's prefill blocks plus the
// watermark free; a decode step that needs more blocks than are free preempts the most recently admitted running
// request (vLLM's recompute preemption): its blocks are freed and it goes back to the front of the waiting queue, to
// prefill its prompt and the tokens it already generated again.
//
// The decode set is kept in aggregate (count, context sum, blocks needed per step phase, a heap of
// finishing steps, and for sliding-window / DSA models the sum of contexts capped at the window or
// top-k), so a decode step costs O(1) plus O(log n) per request that finishes.
// Speculative decoding (enable_speculative) is the exception: a step's tokens per request are
// drawn, so the step walks the running list (O(running) per step: one uniform draw and a few
// integer operations per decoding request); the context sum stays an aggregate, the capped sums
// are recomputed by that walk.
// Invariants (checked by check_invariants): used blocks <= total blocks; used blocks = the sum of
// the blocks its requests hold; running = prefilling + decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <vector>

#include "core/check.h"
#include "core/ring_queue.h"
#include "core/rng.h"
#include "core/slab_allocator.h"
#include "core/time.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/cluster/kv_blocks.h"
#include "sim/cluster/prefix_cache.h"
#include "sim/cluster/request_state.h"
#include "sim/cluster/request_table.h"

namespace servesim::cluster {

// A request a decode step pushed out, and the tokens of work it lost (to be recomputed).
struct Preemption {
  RequestId request;
  std::uint32_t lost_tokens;
};

// The sum over the decode set of min(context, cap), while every context grows by one token per
// decode step: the requests still below the cap add one each per step, and a ring of counters
// indexed by step mod (cap + 1) says how many reach the cap at each step. O(1) per step, join and
// leave; cap + 1 counters of memory. A cap of 0 disables it.
class CappedContextSum {
 public:
  explicit CappedContextSum(std::int64_t cap = 0)
      : cap_(cap), ring_(cap > 0 ? static_cast<std::size_t>(cap) + 1 : 0, 0) {}
  bool enabled() const { return cap_ > 0; }
  // A request with `context` KV tokens joins at decode step `step`.
  void join(std::uint64_t context, std::uint64_t step);
  // It leaves at `step` with `context` tokens, having joined at join_step with join_context.
  void leave(std::uint64_t context, std::uint64_t join_context, std::uint64_t join_step);
  // Every member's context grew by one; `next_step` is the step counter after the advance.
  void advance(std::uint64_t next_step);
  // Sum of min(context + 1, cap): what the next decode step attends to (its new token included).
  std::int64_t attended() const { return static_cast<std::int64_t>(sum_ + below_); }
  std::uint64_t sum() const { return sum_; }
  std::int64_t cap() const { return cap_; }

  // The sums of steps ahead, while nobody joins or leaves: a copy of (sum, below) that step()
  // advances as advance() would, reading the ring without consuming it. Valid for up to cap
  // steps ahead (the ring holds the steps [now, now + cap]).
  struct Ahead {
    std::uint64_t sum = 0, below = 0;
    std::int64_t attended() const { return static_cast<std::int64_t>(sum + below); }
  };
  Ahead ahead() const { return Ahead{sum_, below_}; }
  void step(Ahead& a, std::uint64_t next_step) const {
    if (cap_ <= 0) return;
    a.sum += a.below;
    a.below -= ring_[slot(next_step)];
  }

 private:
  std::size_t slot(std::uint64_t step) const { return static_cast<std::size_t>(step % ring_.size()); }
  std::int64_t cap_;
  std::uint64_t sum_ = 0;    // sum of min(context, cap)
  std::uint64_t below_ = 0;  // members with context < cap
  std::vector<std::uint32_t> ring_;
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

  // Turns on prefix caching for this lane: at most capacity_blocks cached blocks; the request
  // table's prefix keys name each request's prefix segments (segment_tokens a multiple of the
  // block size).
  void enable_prefix_cache(std::int64_t capacity_blocks);
  const PrefixCache* prefix_cache() const { return cache_.get(); }
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
  int verify_width() const { return verify_width_; }
  // Drafts the decode step in flight accepts in all (its tokens beyond one per request); set when
  // the step is prepared.
  std::int64_t step_accepted() const { return step_accepted_; }

  // Attention-DP per-rank batches (config.h AttentionDpBalance): the lane's decoding requests
  // live on `ranks` dp ranks, each assigned when it joins the decode set (least_kv: the rank with
  // the fewest KV tokens of decoding requests, ties to the lowest; else in turn) and kept there.
  // Per rank: the request count and context sum, updated in O(ranks) per step. Must be called
  // before any request joins.
  void enable_rank_balance(int ranks, bool least_kv);
  // The decode part of `b` (this lane's shape of `batch`) as the busiest rank sees it: that rank's
  // queries and keys times the rank count, so that the per-chip operators (which divide by dp)
  // give its work. The busiest rank is the one with the most keys to read (contexts plus new
  // tokens); its capped window / top-k sums are taken in proportion to its keys. False without
  // per-rank batches or decodes.
  bool busiest_rank_shape(const models::BatchShape& b, const Batch& batch, models::BatchShape& out) const;

  // --- queue and admission (used by batch schedulers) ---
  void enqueue_back(RequestId r);
  bool has_waiting() const { return !waiting_.empty(); }
  std::uint32_t prefill_target_of_front() const { return req(waiting_.front()).prefill_target; }
  std::size_t waiting() const { return waiting_.size(); }
  RequestId front_waiting() const { return waiting_.front(); }
  void pop_waiting_front() { waiting_.pop_front(); }
  // Admits the head of the waiting queue when the batch-size cap and the KV blocks allow it
  // (prefill blocks + watermark free); returns the request, or an invalid id.
  RequestId try_admit_front();
  const std::vector<RequestId>& prefilling() const { return prefilling_; }
  std::uint32_t prefill_remaining(RequestId r) const;
  std::uint32_t decoding() const { return decoding_; }
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
  // A prompt chunk ran; returns true when the request's prefill is complete.
  bool finish_chunk(const Chunk& c);
  // A request whose prefill completed and that has tokens left to generate joins the decode set;
  // `now` is when its latest token was emitted.
  void join_decode(RequestId r, SimTime now, bool fresh = false);
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
  void push_ready(RequestId r);
  std::size_t ready() const { return ready_.size(); }
  bool can_admit_ready() const { return !ready_.empty() && running_ < max_running_; }
  // Admits ready requests while the batch-size cap allows, appending them to `admitted`.
  void admit_ready(std::vector<RequestId>& admitted);
  // Fresh requests in the decode step in flight (their first token), cleared by clear_fresh.
  const std::vector<RequestId>& fresh() const { return fresh_; }
  void clear_fresh() { fresh_.clear(); }
  // Failures: every request the lane holds (waiting, ready, running, held), in that order; the
  // lane is emptied (blocks, aggregates, batch) as if new.
  void evict_all(std::vector<RequestId>& out);

  // Inter-token gaps of the decode step that ended at `now`: calls gap(duration, count), for the
  // step's requests that are not fresh.
  template <class F>
  void decode_gaps(SimTime now, std::uint32_t decodes, F&& gap);

  const KvBlocks& blocks() const { return blocks_; }
  std::int64_t total_blocks() const { return blocks_.total(); }
  std::int64_t used_blocks() const { return blocks_.used(); }
  std::int64_t cached_blocks() const { return cache_ ? cache_->blocks() : 0; }
  std::int64_t peak_used_blocks() const { return blocks_.peak_used(); }
  std::int64_t unfinished() const { return static_cast<std::int64_t>(waiting_.size()) + running_; }
  // Recomputes every aggregate from the requests and CHECKs it (tests and debug runs).
  void check_invariants() const;

  // --- multi-step decode runs (Simulation: several decode steps in one event) ---
  // The decode step in flight is step 0; step k > 0 of a run is the k-th after it, planned while
  // nobody joins or leaves the decode set. What step k's preparation will reserve (blocks):
  std::int64_t step_blocks_ahead(std::uint64_t k) const { return phase_count_[(step_ + k) % blocks_.block_tokens()]; }
  // Steps until the first decoding request emits its last token (0: step 0 does).
  std::uint64_t steps_to_first_finish() const { return next_finish_step_ - step_; }
  // How many steps ahead the capped sums can be looked at (UINT64_MAX without caps).
  std::uint64_t lookahead_limit() const;
  // Whether the lane keeps capped context sums (a window or top-k): without them a decode run's
  // steps differ only in their contexts' sum (IterationCostModel::decode_run).
  bool capped() const { return capped_; }
  // The shape of decode-only steps 1, 2, ... of a run: next() returns the following step's, the
  // aggregates advanced exactly as finish_decode_step will advance them.
  class DecodeLookahead {
   public:
    explicit DecodeLookahead(const Lane& lane);
    models::BatchShape next();

   private:
    const Lane& lane_;
    std::uint64_t ctx_, step_;
    CappedContextSum::Ahead window_, topk_;
  };

  // Derived per-request figures while decoding (see request_state.h).
  std::uint64_t steps_done(const RequestState& s) const { return step_ - s.join_step; }
  std::uint64_t decode_context(const RequestState& s) const { return s.prefill_target + steps_done(s) + s.accepted; }
  std::int64_t decode_blocks(const RequestState& s) const;

 private:
  struct Finishing {
    std::uint64_t step;
    RequestId request;
    std::uint32_t epoch;
    bool operator>(const Finishing& o) const { return step != o.step ? step > o.step : request > o.request; }
  };
  struct Joined {  // requests that joined since the last decode step, by first-token time
    SimTime at;
    std::int64_t count;
  };

  RequestState& req(RequestId r) { return (*requests_)[r]; }
  const RequestState& req(RequestId r) const { return (*requests_)[r]; }
  void link_back(RequestId r);
  void unlink(RequestId r);
  // Returns the tokens of work lost.
  std::uint32_t preempt(RequestId r);
  // Takes a decoding request out of the aggregates (finished or preempted): frees its blocks and
  // makes its emitted tokens explicit in `generated`.
  void leave_decode_set(RequestId r);
  std::uint32_t blocks_for(std::uint64_t tokens) const { return blocks_.blocks_for(tokens); }
  std::size_t phase_of(const RequestState& s) const;
  // Prefix caching: the blocks a request holds of its own (not shared with the cache) for
  // `tokens` tokens; the cache's segments of r's whole prompt segments after its prefill; the
  // release of its references; eviction of unreferenced cached blocks until `need` are free.
  std::int64_t own_blocks(const RequestState& s, std::uint64_t tokens) const {
    return static_cast<std::int64_t>(blocks_for(tokens)) - s.shared_blocks;
  }
  // Speculative decoding: prepare_decode_step's walk (draws, blocks, capped sums), and the blocks
  // a decoding request's drawn tokens take.
  std::uint32_t prepare_speculative_step(std::vector<Preemption>& preempted);
  std::int64_t gain_blocks(const RequestState& s) const {
    const std::uint64_t ctx = decode_context(s);
    return static_cast<std::int64_t>(blocks_for(ctx + s.gain)) - blocks_for(ctx);
  }
  void cache_prompt(RequestId r);
  void drop_cached(RequestId r);
  bool evict_cached(std::int64_t need);

  RequestTable* requests_;
  RingQueue<RequestId> waiting_;
  std::vector<RequestId> prefilling_;
  RequestId head_, tail_;  // running list, admission order
  std::int64_t running_ = 0;
  std::int64_t max_running_;

  // Decode set aggregates.
  std::uint32_t decoding_ = 0;
  std::uint64_t decode_ctx_ = 0;  // sum of KV tokens of decoding requests
  CappedContextSum window_sum_, topk_sum_;
  std::int64_t window_ = 0, top_k_ = 0;
  bool capped_ = false;     // either sum enabled
  std::uint64_t step_ = 0;  // decode steps executed
  std::vector<std::uint32_t> phase_count_;
  std::priority_queue<Finishing, std::vector<Finishing>, std::greater<>> finishing_;
  std::uint64_t next_finish_step_ = UINT64_MAX;  // finishing_.top().step, kept in the hot struct
  std::vector<Joined> joined_;
  SimTime last_decode_end_;

  KvBlocks blocks_;

  bool busy_ = false;
  Batch batch_;

  RingQueue<RequestId> ready_;
  std::vector<RequestId> fresh_;
  std::vector<RequestId> held_;  // prefilled requests whose KV is being sent (failures evict them)

  std::unique_ptr<PrefixCache> cache_;  // null: no prefix caching
  std::int64_t hit_tokens_untaken_ = 0;
  bool swap_ = false;
  std::int64_t swap_tokens_ = 0;

  // Attention-DP ranks (0: the batch splits evenly) and their decoding requests and contexts.
  int ranks_ = 0;
  bool least_kv_ = true;
  std::uint32_t next_rank_ = 0;
  std::vector<std::uint32_t> rank_count_;
  std::vector<std::uint64_t> rank_ctx_;

  int verify_width_ = 1;       // 1 + draft tokens; 1 without speculative decoding
  std::vector<double> reach_;  // P(accepted >= i), i = 1 .. draft tokens
  Rng spec_rng_{0};
  std::int64_t step_accepted_ = 0;
  // Sums of min(context + 1, cap) of the step in flight (speculative lanes; window, top-k).
  std::uint64_t spec_window_ = 0, spec_topk_ = 0;
};

template <class F>
void Lane::decode_gaps(SimTime now, std::uint32_t decodes, F&& gap) {
  std::int64_t rest = static_cast<std::int64_t>(decodes) - static_cast<std::int64_t>(fresh_.size());
  for (const Joined& j : joined_) {
    if (j.count > 0) gap(now - j.at, j.count);
    rest -= j.count;
  }
  if (rest > 0) gap(now - last_decode_end_, rest);
  joined_.clear();
  last_decode_end_ = now;
}

}  // namespace servesim::cluster
