#include "sim/cluster/lane.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::cluster {

void CappedContextSum::join(std::uint64_t context, std::uint64_t step) {
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

void CappedContextSum::leave(std::uint64_t context, std::uint64_t join_context, std::uint64_t join_step) {
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

void CappedContextSum::advance(std::uint64_t next_step) {
  if (cap_ <= 0) return;
  sum_ += below_;
  std::uint32_t& reached = ring_[slot(next_step)];
  below_ -= reached;
  reached = 0;
}

Lane::Lane(RequestTable* requests, std::int64_t total_blocks, std::int64_t block_tokens, std::int64_t watermark_blocks,
           std::int64_t max_running, std::int64_t window, std::int64_t top_k)
    : requests_(requests),
      max_running_(max_running),
      window_sum_(window),
      topk_sum_(top_k),
      window_(window),
      top_k_(top_k),
      capped_(window > 0 || top_k > 0),
      phase_count_(static_cast<std::size_t>(block_tokens), 0),
      blocks_(total_blocks, block_tokens, watermark_blocks) {}

void Lane::enqueue_back(RequestId r) {
  req(r).phase = Phase::kWaiting;
  waiting_.push_back(r);
}

std::uint32_t Lane::prefill_remaining(RequestId r) const { return req(r).prefill_target - req(r).prefilled; }

void Lane::enable_prefix_cache(std::int64_t capacity_blocks) {
  SERVESIM_CHECK(requests_->keeps_prefix_keys());
  cache_ = std::make_unique<PrefixCache>(capacity_blocks);
}

std::int64_t Lane::cached_prefix_tokens(const PrefixKeys& keys, std::uint32_t prefill_target) const {
  if (!cache_ || keys.segments == 0 || prefill_target == 0) return 0;
  // At least the last prompt token is prefilled (its logits give the next token).
  const std::uint32_t n = cache_->match(keys, (prefill_target - 1) / keys.segment_tokens).segments;
  return static_cast<std::int64_t>(n) * keys.segment_tokens;
}

RequestId Lane::try_admit_front() {
  if (waiting_.empty() || running_ >= max_running_) return RequestId();
  const RequestId r = waiting_.front();
  RequestState& s = req(r);
  std::uint32_t hit = 0, segment_tokens = 0;
  std::int64_t shared = 0;
  const bool swapped = s.swapped;  // its KV comes back from host memory: no cache lookup
  if (cache_ && !swapped) [[unlikely]] {
    const PrefixKeys& k = requests_->prefix_keys(r);
    if (k.segments > 0) {
      // The cached leading segments; room may come from evicting unreferenced cached blocks other
      // than those (pinned first).
      segment_tokens = k.segment_tokens;
      const PrefixCache::Match m = cache_->match(k, (s.prefill_target - 1) / segment_tokens);
      hit = m.segments;
      shared = static_cast<std::int64_t>(hit) * (segment_tokens / blocks_.block_tokens());
      const std::int64_t need = blocks_for(s.prefill_target) - shared;
      const std::int64_t room = blocks_.free() + cache_->evictable() - m.unreferenced_blocks;
      if (room - need < blocks_.watermark()) return RequestId();
      cache_->pin(k, hit);
      PrefixCacheStats& st = cache_->stats();
      ++st.lookups;
      st.lookup_tokens += s.prefill_target;
      if (hit > 0) ++st.hits;
      st.hit_tokens += static_cast<std::int64_t>(hit) * segment_tokens;
      hit_tokens_untaken_ += static_cast<std::int64_t>(hit) * segment_tokens;
    }
  }
  const std::int64_t need = blocks_for(s.prefill_target) - shared;
  if (blocks_.free() - need < blocks_.watermark() && !evict_cached(need + blocks_.watermark())) {
    return RequestId();
  }
  waiting_.pop_front();
  s.prefilled = hit * segment_tokens;  // the chunks attend over the cached context
  if (swapped) [[unlikely]] {
    // Its context's KV is swapped in; only the last token is computed (it emits the next one).
    s.prefilled = s.prefill_target - 1;
    swap_tokens_ += s.prefilled;
    s.swapped = false;
  }
  s.cached_segments = hit;
  s.shared_blocks = static_cast<std::uint32_t>(shared);
  s.phase = Phase::kPrefilling;
  blocks_.take(need);
  link_back(r);
  prefilling_.push_back(r);
  return r;
}

std::size_t Lane::phase_of(const RequestState& s) const {
  // (join_step - join_ctx) mod block, computed without going negative.
  const std::uint64_t b = blocks_.block_tokens();
  return static_cast<std::size_t>((s.join_step % b + b - s.prefill_target % b) % b);
}

std::int64_t Lane::decode_blocks(const RequestState& s) const { return own_blocks(s, decode_context(s)); }

void Lane::enable_speculative(int draft_tokens, std::vector<double> reach, Rng rng) {
  SERVESIM_CHECK(draft_tokens > 0 && reach.size() == static_cast<std::size_t>(draft_tokens));
  SERVESIM_CHECK_MSG(decoding_ == 0 && running_ == 0, "speculative decoding enabled on a busy lane");
  verify_width_ = draft_tokens + 1;
  reach_ = std::move(reach);
  spec_rng_ = rng;
  // Contexts grow by a drawn number of tokens: the capped sums are recomputed by each step's
  // walk instead of advanced by one (CappedContextSum).
  window_sum_ = CappedContextSum(0);
  topk_sum_ = CappedContextSum(0);
}

void Lane::enable_rank_balance(int ranks, bool least_kv) {
  SERVESIM_CHECK(ranks > 1);
  SERVESIM_CHECK_MSG(decoding_ == 0 && running_ == 0, "per-rank batches enabled on a busy lane");
  ranks_ = ranks;
  least_kv_ = least_kv;
  rank_count_.assign(static_cast<std::size_t>(ranks), 0);
  rank_ctx_.assign(static_cast<std::size_t>(ranks), 0);
}

bool Lane::busiest_rank_shape(const models::BatchShape& b, const Batch& batch, models::BatchShape& out) const {
  if (ranks_ == 0 || batch.decodes == 0) return false;
  std::size_t busy = 0;
  std::uint64_t most = 0;
  for (std::size_t k = 0; k < rank_ctx_.size(); ++k) {
    const std::uint64_t keys = rank_ctx_[k] + rank_count_[k];
    if (keys > most) {
      most = keys;
      busy = k;
    }
  }
  const auto ranks = static_cast<double>(ranks_);
  out = b;
  out.decode_kv_tokens = ranks * static_cast<double>(most);
  out.decode_seqs = b.decode_seqs / batch.decodes * rank_count_[busy] * ranks;
  const double share = b.decode_kv_tokens > 0 ? out.decode_kv_tokens / b.decode_kv_tokens : 0.0;
  out.decode_kv_window = b.decode_kv_window * share;
  out.decode_kv_topk = b.decode_kv_topk * share;
  return true;
}

std::uint32_t Lane::prepare_speculative_step(std::vector<Preemption>& preempted) {
  // One uniform per decoding request: accepted = the number of leading drafts i with
  // u < P(accepted >= i), at most what it has left to emit beyond the step's own token.
  std::int64_t need = 0;
  step_accepted_ = 0;
  spec_window_ = spec_topk_ = 0;
  const auto window = static_cast<std::uint64_t>(window_), top_k = static_cast<std::uint64_t>(top_k_);
  for (RequestId r = head_; r.valid(); r = req(r).next) {
    RequestState& s = req(r);
    if (s.phase != Phase::kDecoding) continue;
    const double u = spec_rng_.uniform01();
    std::uint32_t accepted = 0;
    while (accepted < reach_.size() && u < reach_[accepted]) ++accepted;
    const std::uint64_t ctx = decode_context(s);
    const std::uint64_t left = s.output - s.generated - steps_done(s) - s.accepted;  // >= 1
    accepted = static_cast<std::uint32_t>(std::min<std::uint64_t>(accepted, left - 1));
    s.gain = 1 + accepted;
    need += gain_blocks(s);
    step_accepted_ += accepted;
    if (window > 0) spec_window_ += std::min(ctx + 1, window);
    if (top_k > 0) spec_topk_ += std::min(ctx + 1, top_k);
  }
  while (need > blocks_.unused() && !evict_cached(need)) {
    SERVESIM_CHECK_MSG(tail_.valid(), "a decode step needs more KV blocks than the lane has");
    const RequestId victim = tail_;
    RequestState& v = req(victim);
    if (v.phase == Phase::kDecoding) {
      const std::uint64_t ctx = decode_context(v);
      need -= gain_blocks(v);
      step_accepted_ -= v.gain - 1;
      if (window > 0) spec_window_ -= std::min(ctx + 1, window);
      if (top_k > 0) spec_topk_ -= std::min(ctx + 1, top_k);
    }
    preempted.push_back(Preemption{victim, preempt(victim)});
  }
  blocks_.reserve_step(need);
  return decoding_;
}

bool Lane::evict_cached(std::int64_t need) {
  if (!cache_) return false;
  const std::int64_t short_by = need - blocks_.unused();
  if (short_by > 0) blocks_.give(cache_->evict(std::min(short_by, cache_->evictable())));
  return blocks_.unused() >= need;
}

void Lane::cache_prompt(RequestId r) {
  RequestState& s = req(r);
  const PrefixKeys& k = requests_->prefix_keys(r);
  if (k.segments == 0) return;
  const auto segment_blocks = static_cast<std::int64_t>(k.segment_tokens / blocks_.block_tokens());
  const std::uint32_t whole = std::min(k.segments, s.prefill_target / k.segment_tokens);
  const std::uint64_t* ids = k.ids();
  for (std::uint32_t i = s.cached_segments; i < whole; ++i) {
    std::int64_t evicted = 0;
    const PrefixCache::Insert res = cache_->insert(k.key(ids, i), segment_blocks, &evicted);
    blocks_.give(evicted);
    if (res == PrefixCache::Insert::kFull) break;
    if (res == PrefixCache::Insert::kShared) blocks_.give(segment_blocks);  // its copy is freed
    s.shared_blocks += static_cast<std::uint32_t>(segment_blocks);
    ++s.cached_segments;
  }
}

void Lane::drop_cached(RequestId r) {
  RequestState& s = req(r);
  if (s.cached_segments > 0) cache_->unpin(requests_->prefix_keys(r), s.cached_segments);
  s.cached_segments = 0;
  s.shared_blocks = 0;
}

std::uint32_t Lane::prepare_decode_step(std::vector<Preemption>& preempted) {
  if (verify_width_ > 1) [[unlikely]]
    return prepare_speculative_step(preempted);
  std::int64_t need = phase_count_[step_ % blocks_.block_tokens()];
  while (need > blocks_.unused() && !evict_cached(need)) {
    SERVESIM_CHECK_MSG(tail_.valid(), "a decode step needs more KV blocks than the lane has");
    const RequestId victim = tail_;
    preempted.push_back(Preemption{victim, preempt(victim)});
    need = phase_count_[step_ % blocks_.block_tokens()];
  }
  blocks_.reserve_step(need);
  return decoding_;
}

std::uint32_t Lane::preempt(RequestId r) {
  RequestState& s = req(r);
  std::uint32_t lost = 0;
  if (s.phase == Phase::kDecoding) {
    const std::uint64_t d = steps_done(s);
    leave_decode_set(r);
    if (d == 0 && s.generated == 0) {
      // A fresh request (its KV came from a prefill instance) before its first step.
      fresh_.erase(std::find(fresh_.begin(), fresh_.end(), r));
    } else if (d == 0) {
      // Joined since the last decode step: it is counted in joined_, under its first-token time.
      for (Joined& j : joined_) {
        if (j.at == s.last_token && j.count > 0) {
          --j.count;
          break;
        }
      }
    } else {
      s.last_token = last_decode_end_;
    }
    lost = s.prompt + s.generated;  // its whole context must be prefilled again
    if (swap_ && lost > 1) [[unlikely]] {
      // Swapped out: its context's KV (all but the token it computes next) goes to the host.
      s.swapped = true;
      swap_tokens_ += lost - 1;
      lost = 1;
    }
  } else {
    SERVESIM_CHECK(s.phase == Phase::kPrefilling);
    lost = s.prefilled;
    blocks_.give(own_blocks(s, s.prefill_target));
    if (s.shared_blocks > 0) drop_cached(r);
    prefilling_.erase(std::find(prefilling_.begin(), prefilling_.end(), r));
  }
  // Recompute: prefill the prompt and every token generated so far; the prefill emits the next.
  s.prefill_target = s.prompt + s.generated;
  s.prefilled = 0;
  s.phase = Phase::kWaiting;
  unlink(r);
  waiting_.push_front(r);
  return lost;
}

void Lane::leave_decode_set(RequestId r) {
  RequestState& s = req(r);
  const std::uint64_t d = steps_done(s);
  blocks_.give(decode_blocks(s));
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
  if (s.shared_blocks > 0) drop_cached(r);
}

models::BatchShape Lane::shape(const Batch& batch) const {
  models::BatchShape b;
  const auto decodes = static_cast<double>(batch.decodes);
  // Speculative decoding: w = 1 + k query tokens per decode sequence (iteration_cost.h), over the
  // same contexts.
  const double queries = decodes * verify_width_;
  b.decode_seqs = queries;
  b.decode_kv_tokens = batch.decodes > 0 ? static_cast<double>(decode_ctx_) + decodes : 0.0;
  b.prefill_tokens = static_cast<double>(batch.prefill_tokens);
  b.tokens = queries + b.prefill_tokens;
  b.prefill_chunks = static_cast<double>(batch.chunks.size());
  std::int64_t logits = static_cast<std::int64_t>(batch.decodes) * verify_width_;
  if (batch.decodes > 0 && capped_) {
    const bool spec = verify_width_ > 1;
    b.decode_kv_window = static_cast<double>(spec ? spec_window_ : window_sum_.attended());
    b.decode_kv_topk = static_cast<double>(spec ? spec_topk_ : topk_sum_.attended());
  }
  std::int64_t kv_tokens = 0;
  for (const Chunk& c : batch.chunks) {
    const RequestState& s = req(c.request);
    const double p = s.prefilled, n = c.tokens;
    b.prefill_pairs += n * (p + n);
    const std::int64_t kv = s.prefilled + c.tokens;
    kv_tokens += kv;
    if (capped_) {
      if (window_ > 0) {
        b.prefill_pairs_window += n * static_cast<double>(std::min(kv, window_));
        b.prefill_kv_window += static_cast<double>(std::min<std::int64_t>(kv, window_ + c.tokens));
      }
      if (top_k_ > 0) {
        b.prefill_pairs_topk += n * static_cast<double>(std::min(kv, top_k_));
        b.prefill_kv_topk += static_cast<double>(std::min<std::int64_t>(kv, top_k_ + c.tokens));
      }
    }
    if (s.prefilled + c.tokens == s.prefill_target) ++logits;
  }
  b.prefill_kv_tokens = static_cast<double>(kv_tokens);
  b.logits = static_cast<double>(logits);
  return b;
}

std::uint64_t Lane::lookahead_limit() const {
  std::uint64_t limit = UINT64_MAX;
  if (window_sum_.enabled()) limit = std::min(limit, static_cast<std::uint64_t>(window_sum_.cap()));
  if (topk_sum_.enabled()) limit = std::min(limit, static_cast<std::uint64_t>(topk_sum_.cap()));
  return limit;
}

Lane::DecodeLookahead::DecodeLookahead(const Lane& lane)
    : lane_(lane),
      ctx_(lane.decode_ctx_),
      step_(lane.step_),
      window_(lane.window_sum_.ahead()),
      topk_(lane.topk_sum_.ahead()) {}

models::BatchShape Lane::DecodeLookahead::next() {
  // As finish_decode_step: every context grows by one, the step counter and the capped sums
  // advance; then the shape as shape() computes it for a decode-only batch.
  ctx_ += lane_.decoding_;
  ++step_;
  lane_.window_sum_.step(window_, step_);
  lane_.topk_sum_.step(topk_, step_);
  models::BatchShape b;
  const auto decodes = static_cast<double>(lane_.decoding_);
  b.decode_seqs = decodes;
  b.decode_kv_tokens = static_cast<double>(ctx_) + decodes;
  b.tokens = decodes;
  b.logits = decodes;
  if (lane_.capped_) {
    b.decode_kv_window = static_cast<double>(window_.attended());
    b.decode_kv_topk = static_cast<double>(topk_.attended());
  }
  return b;
}

void Lane::finish_decode_step(std::vector<RequestId>& finished) {
  const std::uint64_t executed = step_;
  decode_ctx_ += decoding_ + static_cast<std::uint64_t>(step_accepted_);
  if (ranks_ > 0 && verify_width_ == 1) {
    for (std::size_t k = 0; k < rank_ctx_.size(); ++k) rank_ctx_[k] += rank_count_[k];
  }
  ++step_;
  window_sum_.advance(step_);
  topk_sum_.advance(step_);
  blocks_.end_step();
  if (verify_width_ > 1) [[unlikely]] {
    // Every decoding request keeps its step's tokens; those that reached their output length
    // leave (in admission order). Their finishing-heap entries, for later steps, go stale.
    for (RequestId r = head_; r.valid();) {
      RequestState& s = req(r);
      const RequestId next = s.next;
      if (s.phase == Phase::kDecoding) {
        s.accepted += s.gain - 1;
        if (ranks_ > 0) rank_ctx_[s.rank] += s.gain;
        s.gain = 0;
        if (s.generated + steps_done(s) + s.accepted == s.output) {
          leave_decode_set(r);
          s.phase = Phase::kDone;
          unlink(r);
          finished.push_back(r);
        }
      }
      r = next;
    }
    step_accepted_ = 0;
  }
  while (next_finish_step_ == executed) {
    const Finishing f = finishing_.top();
    finishing_.pop();
    next_finish_step_ = finishing_.empty() ? UINT64_MAX : finishing_.top().step;
    if (!requests_->has(f.request)) continue;  // preempted, then finished elsewhere: released
    RequestState& s = req(f.request);
    if (f.epoch != s.epoch || s.phase != Phase::kDecoding) continue;  // preempted meanwhile
    leave_decode_set(f.request);
    s.phase = Phase::kDone;
    unlink(f.request);
    finished.push_back(f.request);
  }
  // Entries are pushed for steps >= step_ and every step pops all of its own, stale or not.
  SERVESIM_CHECK(next_finish_step_ > executed);
}

void Lane::quiet_decode_steps(std::uint32_t steps, std::uint32_t decodes, SimTime last_end) {
  SERVESIM_CHECK(verify_width_ == 1 && joined_.empty() && fresh_.empty() && step_accepted_ == 0);
  if (!capped_ && ranks_ == 0 && steps > 0) {
    // Without capped sums or attention-DP ranks a step's effects are sums, so the steps are
    // applied at once: the same integers as the loop below. Step j (1-based) finishes step
    // step_ + j - 1, then its successor's preparation takes the blocks booked for it.
    SERVESIM_CHECK_MSG(next_finish_step_ >= step_ + steps, "a decode run's step before its last finished a request");
    SERVESIM_CHECK_MSG(decodes == decoding_, "a decode run's step changed its batch");
    std::int64_t taken = 0, last = 0;
    for (std::uint32_t j = 1; j <= steps; ++j) {
      last = phase_count_[(step_ + j) % blocks_.block_tokens()];
      taken += last;
    }
    decode_ctx_ += static_cast<std::uint64_t>(steps) * decoding_;
    step_ += steps;
    unbook(taken);
    blocks_.take_run_steps(taken, last);
    last_decode_end_ = last_end;
    return;
  }
  std::vector<RequestId> finished;  // stays empty (no allocation)
  std::vector<Preemption> preempted;
  for (std::uint32_t k = 0; k < steps; ++k) {
    finish_decode_step(finished);
    SERVESIM_CHECK_MSG(finished.empty(), "a decode run's step before its last finished a request");
    unbook(step_blocks_ahead(0));  // the next step takes the blocks booked for it
    const std::uint32_t d = prepare_decode_step(preempted);
    SERVESIM_CHECK_MSG(preempted.empty() && d == decodes, "a decode run's step changed its batch");
  }
  last_decode_end_ = last_end;  // decode_gaps' record of the last step (it joined nobody)
}

bool Lane::finish_chunk(const Chunk& c) {
  RequestState& s = req(c.request);
  s.prefilled += c.tokens;
  SERVESIM_CHECK(s.prefilled <= s.prefill_target);
  if (s.prefilled < s.prefill_target) return false;
  prefilling_.erase(std::find(prefilling_.begin(), prefilling_.end(), c.request));
  if (cache_) cache_prompt(c.request);
  return true;
}

void Lane::join_decode(RequestId r, SimTime now, bool fresh) {
  RequestState& s = req(r);
  SERVESIM_CHECK(s.generated < s.output);
  s.phase = Phase::kDecoding;
  s.join_step = step_;
  s.last_token = now;
  // The blocks allocated at admission, ceil(prefill_target / block), are decode_blocks() at zero
  // steps done: from here on they are accounted in aggregate.
  ++decoding_;
  decode_ctx_ += s.prefill_target;
  if (ranks_ > 0) {
    std::size_t rank = next_rank_;
    if (least_kv_) {
      rank = 0;
      for (std::size_t k = 1; k < rank_ctx_.size(); ++k) {
        if (rank_ctx_[k] < rank_ctx_[rank]) rank = k;
      }
    } else {
      next_rank_ = (next_rank_ + 1) % static_cast<std::uint32_t>(ranks_);
    }
    s.rank = static_cast<std::uint16_t>(rank);
    ++rank_count_[rank];
    rank_ctx_[rank] += s.prefill_target;
  }
  window_sum_.join(s.prefill_target, step_);
  topk_sum_.join(s.prefill_target, step_);
  ++phase_count_[phase_of(s)];
  const std::uint64_t last_step = step_ + (s.output - s.generated) - 1;
  finishing_.push(Finishing{last_step, r, s.epoch});
  next_finish_step_ = std::min(next_finish_step_, last_step);
  if (fresh) {
    fresh_.push_back(r);
  } else if (!joined_.empty() && joined_.back().at == now) {
    ++joined_.back().count;
  } else {
    joined_.push_back(Joined{now, 1});
  }
}

void Lane::hold_for_transfer(RequestId r) {
  RequestState& s = req(r);
  s.phase = Phase::kTransferring;
  unlink(r);
  blocks_.hold(own_blocks(s, s.prefill_target));
  held_.push_back(r);
}

void Lane::release_held(RequestId r) {
  RequestState& s = req(r);
  blocks_.release_held(own_blocks(s, s.prefill_target));
  if (s.shared_blocks > 0) drop_cached(r);
  held_.erase(std::find(held_.begin(), held_.end(), r));
}

void Lane::push_ready(RequestId r) {
  req(r).phase = Phase::kReady;
  ready_.push_back(r);
}

void Lane::admit_ready(std::vector<RequestId>& admitted) {
  while (!ready_.empty() && running_ < max_running_) {
    const RequestId r = ready_.front();
    ready_.pop_front();
    RequestState& s = req(r);
    blocks_.inbound_arrived(blocks_for(s.prefill_target));
    link_back(r);
    s.prefilled = s.prefill_target;
    // A re-queued request that had emitted tokens is not fresh: its next token is a gap sample.
    join_decode(r, s.generated == 0 ? last_decode_end_ : s.last_token, s.generated == 0);
    admitted.push_back(r);
  }
}

void Lane::evict_all(std::vector<RequestId>& out) {
  while (!waiting_.empty()) {
    req(waiting_.front()).swapped = false;  // the host memory of a failed instance is lost too
    out.push_back(waiting_.front());
    waiting_.pop_front();
  }
  while (!ready_.empty()) {
    out.push_back(ready_.front());
    ready_.pop_front();
  }
  // The instance's memory is gone, its prefix cache with it.
  if (cache_) cache_->clear();
  auto forget_cached = [&](RequestState& s) { s.cached_segments = s.shared_blocks = 0; };
  while (head_.valid()) {
    const RequestId r = head_;
    RequestState& s = req(r);
    forget_cached(s);
    if (s.phase == Phase::kDecoding) leave_decode_set(r);
    unlink(r);
    out.push_back(r);
  }
  for (const RequestId r : held_) {
    forget_cached(req(r));
    out.push_back(r);
  }
  held_.clear();
  prefilling_.clear();
  fresh_.clear();
  joined_.clear();
  while (!finishing_.empty()) finishing_.pop();
  next_finish_step_ = UINT64_MAX;
  std::fill(rank_count_.begin(), rank_count_.end(), 0);
  std::fill(rank_ctx_.begin(), rank_ctx_.end(), 0);
  blocks_.clear();
  step_accepted_ = 0;
  busy_ = false;
  batch_.clear();
}

void Lane::release(RequestId r) {
  RequestState& s = req(r);
  blocks_.give(own_blocks(s, s.prefill_target));
  if (s.shared_blocks > 0) drop_cached(r);
  s.phase = Phase::kDone;
  unlink(r);
}

void Lane::link_back(RequestId r) {
  RequestState& s = req(r);
  s.prev = tail_;
  s.next = RequestId();
  if (tail_.valid())
    req(tail_).next = r;
  else
    head_ = r;
  tail_ = r;
  ++running_;
}

void Lane::unlink(RequestId r) {
  RequestState& s = req(r);
  if (s.prev.valid())
    req(s.prev).next = s.next;
  else
    head_ = s.next;
  if (s.next.valid())
    req(s.next).prev = s.prev;
  else
    tail_ = s.prev;
  s.prev = s.next = RequestId();
  --running_;
}

void Lane::check_invariants() const {
  std::int64_t blocks = 0, running = 0, decoding = 0, prefilling = 0;
  std::uint64_t ctx = 0, ctx_window = 0, ctx_topk = 0;
  std::vector<std::uint32_t> phases(phase_count_.size(), 0);
  for (RequestId r = head_; r.valid(); r = req(r).next) {
    const RequestState& s = req(r);
    ++running;
    if (s.phase == Phase::kDecoding) {
      ++decoding;
      blocks += decode_blocks(s);
      ctx += decode_context(s);
      ctx_window += std::min<std::uint64_t>(decode_context(s), static_cast<std::uint64_t>(window_));
      ctx_topk += std::min<std::uint64_t>(decode_context(s), static_cast<std::uint64_t>(top_k_));
      SERVESIM_CHECK(s.generated + steps_done(s) + s.accepted < s.output);
      ++phases[phase_of(s)];
    } else {
      SERVESIM_CHECK(s.phase == Phase::kPrefilling);
      ++prefilling;
      blocks += own_blocks(s, s.prefill_target);
    }
  }
  SERVESIM_CHECK(running == running_);
  SERVESIM_CHECK(decoding == decoding_);
  SERVESIM_CHECK(prefilling == static_cast<std::int64_t>(prefilling_.size()));
  SERVESIM_CHECK(ctx == decode_ctx_);
  if (ranks_ > 0) {
    std::vector<std::uint32_t> count(rank_count_.size(), 0);
    std::vector<std::uint64_t> rank_ctx(rank_ctx_.size(), 0);
    for (RequestId r = head_; r.valid(); r = req(r).next) {
      const RequestState& s = req(r);
      if (s.phase != Phase::kDecoding) continue;
      ++count[s.rank];
      rank_ctx[s.rank] += decode_context(s);
    }
    SERVESIM_CHECK(count == rank_count_);
    SERVESIM_CHECK(rank_ctx == rank_ctx_);
  }
  if (window_sum_.enabled()) SERVESIM_CHECK(ctx_window == window_sum_.sum());
  if (topk_sum_.enabled()) SERVESIM_CHECK(ctx_topk == topk_sum_.sum());
  SERVESIM_CHECK(phases == phase_count_);
  // Between prepare_decode_step and finish_decode_step the step's new blocks are reserved but not
  // yet part of any request's derived count.
  SERVESIM_CHECK(blocks_.held() >= 0 && blocks_.inbound() >= 0);
  blocks += blocks_.held() + blocks_.inbound();
  if (cache_) {
    cache_->check_invariants();
    blocks += cache_->blocks();
  }
  SERVESIM_CHECK_MSG(blocks + blocks_.step_reserved() == blocks_.used(),
                     "used " + std::to_string(blocks_.used()) + " blocks, requests hold " + std::to_string(blocks) +
                         " + " + std::to_string(blocks_.step_reserved()) + " reserved for the step");
  SERVESIM_CHECK(blocks_.used() <= blocks_.total() && blocks_.used() >= 0);
  SERVESIM_CHECK(running_ <= max_running_);
}

}  // namespace servesim::cluster
