// A lane's decode set (lane.h): the requests that emit a token every decode step, kept in
// aggregate so that a step costs O(1) plus O(log n) per request that finishes.
//
// Models: the decode half of vLLM's running batch. Per request the token accounting is implicit
// (request_state.h): the set keeps its step counter, the count and context sum of its members,
// how many need a new KV block at each step phase (step mod block size), a heap of the steps at
// which members emit their last token, and, for sliding-window / DSA models, the sums of contexts
// capped at the window or top-k (CappedContextSum). Also the first-token bookkeeping of the step
// in flight (fresh requests, members that joined since the last step: decode_gaps), a decode
// engine's held first response (hold_first_response: a fresh member's first token reaches the
// client only after its k-th step, with the tokens of the steps before it), the
// attention-DP ranks members live on (enable_rank_balance) and speculative decoding's per-step
// draws (enable_speculative: the lane then walks its running list each step and calls draw /
// keep_drawn per member; the capped sums are recomputed by that walk).
// Ignores: which blocks a member holds (counted by the lane's KvBlocks); the running list and
// prefilling requests (the lane's); preemption's choice of victim (the lane's).
// Invariants (check_invariants): count and context sums equal those recomputed from the members;
// every member is kDecoding with output left.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "core/time.h"
#include "models/operators.h"
#include "sim/cluster/request_state.h"
#include "sim/cluster/request_table.h"

namespace servesim::cluster {

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

class DecodeSet {
 public:
  // block_tokens: the lane's KV block size; window / top_k: the model's sliding window and DSA
  // top-k (0 when it has none).
  DecodeSet(RequestTable* requests, std::int64_t block_tokens, std::int64_t window, std::int64_t top_k);

  // Speculative decoding and attention-DP ranks (Lane::enable_speculative, enable_rank_balance);
  // both before any request joins.
  void enable_speculative(int draft_tokens, std::vector<double> reach, Rng rng);
  void enable_rank_balance(int ranks, bool least_kv);
  // Fresh members answer first after their k-th step (k > 1; not with speculative decoding): the
  // tokens of steps 1..k reach the client together when step k ends (TensorRT-LLM's generation
  // server, SchedulerConfig::first_response_step). A member with fewer tokens left answers at its
  // last step. Before any request joins.
  void hold_first_response(int k);
  // Fresh members whose first response is after a later step than the one in flight.
  bool holding() const { return held_count_ > 0; }
  bool speculative() const { return verify_width_ > 1; }
  int verify_width() const { return verify_width_; }

  std::uint32_t count() const { return decoding_; }
  std::uint64_t step() const { return step_; }
  std::int64_t window() const { return window_; }
  std::int64_t top_k() const { return top_k_; }
  // Whether the set keeps capped context sums (a window or top-k).
  bool capped() const { return capped_; }

  // Derived per-member figures (request_state.h).
  std::uint64_t steps_done(const RequestState& s) const { return step_ - s.join_step; }
  std::uint64_t decode_context(const RequestState& s) const { return s.prefill_target + steps_done(s) + s.accepted; }
  // The KV blocks a member holds of its own (not shared with the prefix cache).
  std::int64_t decode_blocks(const RequestState& s) const {
    return static_cast<std::int64_t>(blocks_for(decode_context(s))) - s.shared_blocks;
  }

  // A request whose prefill completed (or whose KV arrived: `fresh`, its first token is the next
  // step's) joins; `now` is when its latest token was emitted.
  void join(RequestId r, SimTime now, bool fresh);
  // A member leaves (it finished or its instance failed): its emitted tokens become explicit in
  // `generated`. Returns the blocks it held of its own, for the lane to free.
  std::int64_t leave(RequestId r);
  // A member is preempted: leave(), and its first-token bookkeeping undone (a fresh member is
  // no longer fresh; one that joined since the last step no longer counts there; else its latest
  // token was the last step's). Returns the blocks it held of its own.
  std::int64_t preempt(RequestId r);

  // --- a decode step ---
  // Blocks the next step's members need (non-speculative: those at the step's block phase).
  std::int64_t step_blocks() const { return step_blocks_ahead(0); }
  // Speculative steps: begin_draws(), then draw() per member in admission order (the step's tokens
  // 1 + accepted; returns the blocks they take), undraw() for a member then preempted.
  void begin_draws();
  std::int64_t draw(RequestState& s);
  std::int64_t undraw(const RequestState& s);
  // Drafts the step in flight accepts in all (its tokens beyond one per member).
  std::int64_t step_accepted() const { return step_accepted_; }
  // The step ran: every context grows (by one, plus the drafts accepted), the step counter and
  // capped sums advance. Returns the step that ran.
  std::uint64_t advance();
  // Speculative steps, after advance(), per member in admission order: it keeps its step's
  // tokens; true when it reached its output length (the lane then removes it). end_draws() after.
  bool keep_drawn(RequestState& s);
  void end_draws() { step_accepted_ = 0; }
  // After advance(): the next member whose last token was step `executed` (in id order); false
  // when there is none left (the lane removes each).
  bool pop_finished(std::uint64_t executed, RequestId& r);
  // `steps` steps of the members with nobody joining, leaving or drafting, at once (a decode run,
  // Lane::quiet_decode_steps): returns the blocks their preparations took in all and the last's.
  struct Taken {
    std::int64_t all = 0, last = 0;
  };
  Taken quiet_steps(std::uint32_t steps);
  // Whether quiet_steps applies (no capped sums, no ranks: a step's effects are sums).
  bool steps_are_sums() const { return !capped_ && ranks_ == 0; }
  // Nothing joined, is fresh or drafts (a decode run's later steps may be applied).
  bool quiet() const {
    return verify_width_ == 1 && joined_.empty() && fresh_.empty() && held_count_ == 0 && step_accepted_ == 0;
  }

  // The decode part of a batch with `decodes` of the members: queries, contexts (plus the new
  // tokens) and capped sums for the cost model.
  models::BatchShape shape(std::uint32_t decodes) const;
  // The decode part of `b` as the busiest attention-DP rank sees it: that rank's queries and keys
  // times the rank count, so that the per-chip operators (which divide by dp) give its work. The
  // busiest rank is the one with the most keys to read (contexts plus new tokens); its capped
  // window / top-k sums are taken in proportion to its keys. False without ranks or decodes.
  bool busiest_rank_shape(const models::BatchShape& b, std::uint32_t decodes, models::BatchShape& out) const;

  // --- first tokens and inter-token gaps ---
  // Fresh members in the step in flight (their first token), cleared by clear_fresh.
  const std::vector<RequestId>& fresh() const { return fresh_; }
  // The step in flight ended: calls answer(r, tokens) per fresh member, `tokens` the tokens that
  // reach the client with its first one (1 unless its first response was held).
  template <class F>
  void answer_fresh(F&& answer);
  // After answer_fresh: the next step's fresh members are the held ones due then.
  void clear_fresh();
  // When the last decode step ended (set by decode_gaps, or by a decode run's settled steps).
  SimTime last_end() const { return last_decode_end_; }
  void set_last_end(SimTime t) { last_decode_end_ = t; }
  // Inter-token gaps of the decode step that ended at `now`: calls gap(duration, count), for the
  // step's `decodes` members that are not fresh.
  template <class F>
  void decode_gaps(SimTime now, std::uint32_t decodes, F&& gap);

  // --- multi-step decode runs ---
  // The step in flight is step 0; step k > 0 is the k-th after it, planned while nobody joins or
  // leaves. What step k's preparation will reserve (blocks):
  std::int64_t step_blocks_ahead(std::uint64_t k) const { return phase_count_[(step_ + k) % block_tokens_]; }
  // Steps until the first member emits its last token (0: step 0 does).
  std::uint64_t steps_to_first_finish() const { return next_finish_step_ - step_; }
  // How many steps ahead the capped sums can be looked at (UINT64_MAX without caps).
  std::uint64_t lookahead_limit() const;
  // The shape of decode-only steps 1, 2, ... of a run: next() returns the following step's, the
  // aggregates advanced exactly as advance() will advance them.
  class Lookahead {
   public:
    explicit Lookahead(const DecodeSet& set);
    models::BatchShape next();

   private:
    const DecodeSet& set_;
    std::uint64_t ctx_, step_;
    CappedContextSum::Ahead window_, topk_;
  };

  // Failures: the members have left (leave); forgets the step's bookkeeping.
  void clear();
  // Recomputes the aggregates from `members` (every decoding request of the lane) and CHECKs them.
  void check_invariants(const std::vector<RequestId>& members) const;

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

  // Removes a fresh or held member from its list (preempted before its first response).
  void unlist_fresh(RequestId r);
  RequestState& req(RequestId r) { return (*requests_)[r]; }
  const RequestState& req(RequestId r) const { return (*requests_)[r]; }
  std::uint32_t blocks_for(std::uint64_t tokens) const {
    return static_cast<std::uint32_t>((tokens + block_tokens_ - 1) / block_tokens_);
  }
  std::size_t phase_of(const RequestState& s) const {
    // (join_step - join_ctx) mod block, computed without going negative.
    const std::uint64_t b = block_tokens_;
    return static_cast<std::size_t>((s.join_step % b + b - s.prefill_target % b) % b);
  }
  // The blocks a member's drawn tokens take.
  std::int64_t gain_blocks(const RequestState& s) const {
    const std::uint64_t ctx = decode_context(s);
    return static_cast<std::int64_t>(blocks_for(ctx + s.gain)) - blocks_for(ctx);
  }

  RequestTable* requests_;
  std::uint64_t block_tokens_;
  std::uint32_t decoding_ = 0;
  std::uint64_t decode_ctx_ = 0;  // sum of KV tokens of members
  CappedContextSum window_sum_, topk_sum_;
  std::int64_t window_ = 0, top_k_ = 0;
  bool capped_ = false;     // either sum enabled
  std::uint64_t step_ = 0;  // decode steps executed
  std::vector<std::uint32_t> phase_count_;
  std::priority_queue<Finishing, std::vector<Finishing>, std::greater<>> finishing_;
  std::uint64_t next_finish_step_ = UINT64_MAX;  // finishing_.top().step, kept in the hot struct
  std::vector<Joined> joined_;
  SimTime last_decode_end_;
  std::vector<RequestId> fresh_;
  // hold_first_response: held_[j] answers after the step j + 1 steps after the one in flight.
  std::vector<std::vector<RequestId>> held_;
  std::size_t held_count_ = 0;

  // Attention-DP ranks (0: the batch splits evenly) and their members and contexts.
  int ranks_ = 0;
  bool least_kv_ = true;
  std::uint32_t next_rank_ = 0;
  std::vector<std::uint32_t> rank_count_;
  std::vector<std::uint64_t> rank_ctx_;

  int verify_width_ = 1;       // 1 + draft tokens; 1 without speculative decoding
  std::vector<double> reach_;  // P(accepted >= i), i = 1 .. draft tokens
  Rng spec_rng_{0};
  std::int64_t step_accepted_ = 0;
  // Sums of min(context + 1, cap) of the step in flight (speculative; window, top-k).
  std::uint64_t spec_window_ = 0, spec_topk_ = 0;
};

inline void CappedContextSum::join(std::uint64_t context, std::uint64_t step) {
  if (cap_ <= 0) return;
  const auto cap = static_cast<std::uint64_t>(cap_);
  if (context >= cap) {
    sum_ += cap;
    return;
  }
  sum_ += context;
  ++below_;
  ++ring_[slot(step + cap - context)];  // the step at which its context reaches the cap
}

inline void CappedContextSum::leave(std::uint64_t context, std::uint64_t join_context, std::uint64_t join_step) {
  if (cap_ <= 0) return;
  const auto cap = static_cast<std::uint64_t>(cap_);
  if (context >= cap) {
    sum_ -= cap;
    return;
  }
  sum_ -= context;
  --below_;
  --ring_[slot(join_step + cap - join_context)];
}

inline void CappedContextSum::advance(std::uint64_t next_step) {
  if (cap_ <= 0) return;
  sum_ += below_;
  std::uint32_t& reached = ring_[slot(next_step)];
  below_ -= reached;
  reached = 0;
}

inline std::int64_t DecodeSet::leave(RequestId r) {
  RequestState& s = req(r);
  const std::uint64_t d = steps_done(s);
  const std::int64_t blocks = decode_blocks(s);
  decode_ctx_ -= s.prefill_target + d + s.accepted;
  if (ranks_ > 0) {
    --rank_count_[s.rank];
    rank_ctx_[s.rank] -= s.prefill_target + d + s.accepted;
  }
  window_sum_.leave(s.prefill_target + d, s.prefill_target, s.join_step);
  topk_sum_.leave(s.prefill_target + d, s.prefill_target, s.join_step);
  --decoding_;
  --phase_count_[phase_of(s)];
  ++s.epoch;                                                  // its finishing-heap entry is now stale
  s.generated += static_cast<std::uint32_t>(d) + s.accepted;  // what it emitted becomes explicit again
  s.accepted = s.gain = 0;
  return blocks;
}

inline std::uint64_t DecodeSet::advance() {
  const std::uint64_t executed = step_;
  decode_ctx_ += decoding_ + static_cast<std::uint64_t>(step_accepted_);
  if (ranks_ > 0 && verify_width_ == 1) {
    for (std::size_t k = 0; k < rank_ctx_.size(); ++k) rank_ctx_[k] += rank_count_[k];
  }
  ++step_;
  window_sum_.advance(step_);
  topk_sum_.advance(step_);
  return executed;
}

inline bool DecodeSet::pop_finished(std::uint64_t executed, RequestId& r) {
  while (next_finish_step_ == executed) {
    const Finishing f = finishing_.top();
    finishing_.pop();
    next_finish_step_ = finishing_.empty() ? UINT64_MAX : finishing_.top().step;
    if (!requests_->has(f.request)) continue;  // preempted, then finished elsewhere: released
    const RequestState& s = req(f.request);
    if (f.epoch != s.epoch || s.phase != Phase::kDecoding) continue;  // preempted meanwhile
    r = f.request;
    return true;
  }
  // Entries are pushed for steps >= step_ and every step pops all of its own, stale or not.
  SERVESIM_CHECK(next_finish_step_ > executed);
  return false;
}

template <class F>
void DecodeSet::answer_fresh(F&& answer) {
  if (held_.empty()) {  // nothing is ever held: each fresh member's step emits its first token alone
    for (const RequestId r : fresh_) answer(r, std::int64_t{1});
    return;
  }
  for (const RequestId r : fresh_) {
    RequestState& s = req(r);
    // The step in flight emits one token; the steps done since it joined, and the tokens of a
    // stint before a preemption that were never answered, come with it.
    answer(r, static_cast<std::int64_t>(steps_done(s)) + (s.first_response_due ? s.generated : 0) + 1);
    s.first_response_due = false;
  }
}

template <class F>
void DecodeSet::decode_gaps(SimTime now, std::uint32_t decodes, F&& gap) {
  // Fresh and held members have emitted nothing yet: no gap.
  std::int64_t rest = static_cast<std::int64_t>(decodes) - static_cast<std::int64_t>(fresh_.size()) -
                      static_cast<std::int64_t>(held_count_);
  for (const Joined& j : joined_) {
    if (j.count > 0) gap(now - j.at, j.count);
    rest -= j.count;
  }
  if (rest > 0) gap(now - last_decode_end_, rest);
  joined_.clear();
  last_decode_end_ = now;
}

}  // namespace servesim::cluster
