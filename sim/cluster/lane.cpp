#include "sim/cluster/lane.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::cluster {

Lane::Lane(RequestTable* requests, std::int64_t total_blocks, std::int64_t block_tokens, std::int64_t watermark_blocks,
           std::int64_t max_running, std::int64_t window, std::int64_t top_k)
    : requests_(requests),
      queue_(requests),
      max_running_(max_running),
      decode_(requests, block_tokens, window, top_k),
      blocks_(total_blocks, block_tokens, watermark_blocks) {}

void Lane::enable_prefix_cache(std::int64_t capacity_blocks) {
  SERVESIM_CHECK(requests_->keeps_prefix_keys());
  own_cache_ = std::make_unique<PrefixCache>(capacity_blocks);
  cache_ = own_cache_.get();
}

void Lane::share_prefix_cache(PrefixCache* cache) {
  SERVESIM_CHECK(requests_->keeps_prefix_keys());
  SERVESIM_CHECK_MSG(blocks_.pool() != nullptr, "a shared prefix cache needs a shared KV pool");
  cache_ = cache;
}

std::int64_t Lane::cached_prefix_tokens(const PrefixKeys& keys, std::uint32_t prefill_target) const {
  if (!cache_ || keys.segments == 0 || prefill_target == 0) return 0;
  // At least the last prompt token is prefilled (its logits give the next token).
  const std::uint32_t n = cache_->match(keys, (prefill_target - 1) / keys.segment_tokens).segments;
  return static_cast<std::int64_t>(n) * keys.segment_tokens;
}

RequestId Lane::try_admit_front() {
  if (queue_.empty() || running_ >= max_running_) return RequestId();
  const RequestId r = queue_.front();
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
  queue_.pop_front();
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

void Lane::enable_speculative(int draft_tokens, std::vector<double> reach, Rng rng) {
  SERVESIM_CHECK_MSG(running_ == 0, "speculative decoding enabled on a busy lane");
  decode_.enable_speculative(draft_tokens, std::move(reach), rng);
}

void Lane::hold_first_response(int k) {
  SERVESIM_CHECK_MSG(running_ == 0, "held first responses enabled on a busy lane");
  decode_.hold_first_response(k);
}

void Lane::enable_rank_balance(int ranks, bool least_kv) {
  SERVESIM_CHECK_MSG(running_ == 0, "per-rank batches enabled on a busy lane");
  decode_.enable_rank_balance(ranks, least_kv);
}

std::uint32_t Lane::prepare_speculative_step(std::vector<Preemption>& preempted) {
  std::int64_t need = 0;
  decode_.begin_draws();
  for (RequestId r = head_; r.valid(); r = req(r).next) {
    RequestState& s = req(r);
    if (s.phase == Phase::kDecoding) need += decode_.draw(s);
  }
  while (need > blocks_.unused() && !evict_cached(need)) {
    SERVESIM_CHECK_MSG(tail_.valid(), "a decode step needs more KV blocks than the lane has");
    const RequestId victim = tail_;
    const RequestState& v = req(victim);
    if (v.phase == Phase::kDecoding) need -= decode_.undraw(v);
    preempted.push_back(Preemption{victim, preempt(victim)});
  }
  blocks_.reserve_step(need);
  return decode_.count();
}

bool Lane::evict_cached(std::int64_t need) {
  if (!cache_) return false;
  const std::int64_t short_by = need - blocks_.unused();
  if (short_by > 0) blocks_.cache_freed(cache_->evict(std::min(short_by, cache_->evictable())));
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
    blocks_.cache_freed(evicted);
    if (res == PrefixCache::Insert::kFull) break;
    if (res == PrefixCache::Insert::kShared) blocks_.give(segment_blocks);     // its copy is freed
    if (res == PrefixCache::Insert::kAdded) blocks_.to_cache(segment_blocks);  // its copy is the cache's
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
  if (decode_.speculative()) [[unlikely]]
    return prepare_speculative_step(preempted);
  std::int64_t need = decode_.step_blocks();
  while (need > blocks_.unused() && !evict_cached(need)) {
    SERVESIM_CHECK_MSG(tail_.valid(), "a decode step needs more KV blocks than the lane has");
    const RequestId victim = tail_;
    preempted.push_back(Preemption{victim, preempt(victim)});
    need = decode_.step_blocks();
  }
  blocks_.reserve_step(need);
  return decode_.count();
}

std::uint32_t Lane::preempt(RequestId r) {
  RequestState& s = req(r);
  std::uint32_t lost = 0;
  if (s.phase == Phase::kDecoding) {
    free_decoded(r, decode_.preempt(r));
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
  unlink(r);
  queue_.push_front(r);
  return lost;
}

void Lane::free_decoded(RequestId r, std::int64_t blocks) {
  blocks_.give(blocks);
  if (req(r).shared_blocks > 0) drop_cached(r);
}

models::BatchShape Lane::shape(const Batch& batch) const {
  models::BatchShape b = decode_.shape(batch.decodes);
  b.prefill_tokens = static_cast<double>(batch.prefill_tokens);
  b.tokens = b.decode_seqs + b.prefill_tokens;
  b.prefill_chunks = static_cast<double>(batch.chunks.size());
  std::int64_t logits = static_cast<std::int64_t>(batch.decodes) * decode_.verify_width();
  const std::int64_t window = decode_.window(), top_k = decode_.top_k();
  std::int64_t kv_tokens = 0;
  for (const Chunk& c : batch.chunks) {
    const RequestState& s = req(c.request);
    kv_tokens += s.prefilled + c.tokens;
    models::add_chunk_pairs(b, s.prefilled, c.tokens, window, top_k);
    if (s.prefilled + c.tokens == s.prefill_target) ++logits;
  }
  b.prefill_kv_tokens = static_cast<double>(kv_tokens);
  b.logits = static_cast<double>(logits);
  return b;
}

void Lane::finish(RequestId r, std::vector<RequestId>& finished) {
  free_decoded(r, decode_.leave(r));
  req(r).phase = Phase::kDone;
  unlink(r);
  finished.push_back(r);
}

void Lane::finish_decode_step(std::vector<RequestId>& finished) {
  const std::uint64_t executed = decode_.advance();
  blocks_.end_step();
  if (decode_.speculative()) [[unlikely]] {
    // Every decoding request keeps its step's tokens; those that reached their output length
    // leave (in admission order). Their finishing-heap entries, for later steps, go stale.
    for (RequestId r = head_; r.valid();) {
      RequestState& s = req(r);
      const RequestId next = s.next;
      if (s.phase == Phase::kDecoding && decode_.keep_drawn(s)) finish(r, finished);
      r = next;
    }
    decode_.end_draws();
  }
  RequestId r;
  while (decode_.pop_finished(executed, r)) finish(r, finished);
}

void Lane::quiet_decode_steps(std::uint32_t steps, std::uint32_t decodes, SimTime last_end) {
  SERVESIM_CHECK(decode_.quiet());
  if (decode_.steps_are_sums() && steps > 0) {
    // A step's effects are sums, so the steps are applied at once: the same integers as the loop
    // below.
    SERVESIM_CHECK_MSG(decodes == decode_.count(), "a decode run's step changed its batch");
    const DecodeSet::Taken taken = decode_.quiet_steps(steps);
    unbook(taken.all);
    blocks_.take_run_steps(taken.all, taken.last);
    decode_.set_last_end(last_end);
    return;
  }
  std::vector<RequestId> finished;  // stays empty (no allocation)
  std::vector<Preemption> preempted;
  for (std::uint32_t k = 0; k < steps; ++k) {
    finish_decode_step(finished);
    SERVESIM_CHECK_MSG(finished.empty(), "a decode run's step before its last finished a request");
    unbook(decode_.step_blocks_ahead(0));  // the next step takes the blocks booked for it
    const std::uint32_t d = prepare_decode_step(preempted);
    SERVESIM_CHECK_MSG(preempted.empty() && d == decodes, "a decode run's step changed its batch");
  }
  decode_.set_last_end(last_end);  // decode_gaps' record of the last step (it joined nobody)
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

void Lane::admit_ready(std::vector<RequestId>& admitted, std::vector<RequestId>& answering) {
  while (queue_.ready() > 0 && running_ < max_running_) {
    const RequestId r = queue_.front_ready();
    queue_.pop_ready();
    RequestState& s = req(r);
    blocks_.inbound_arrived(blocks_for(s.prefill_target));
    link_back(r);
    s.prefilled = s.prefill_target;
    // A re-queued request that had emitted tokens is not fresh: its next token is a gap sample.
    const bool fresh = s.generated == 0 || s.first_response_due;
    if (fresh && answer_on_admit_ && s.generated == 0) {
      answering.push_back(r);  // the dispatcher emits the prefill's token, then joins it
      continue;
    }
    decode_.join(r, fresh ? decode_.last_end() : s.last_token, fresh);
    admitted.push_back(r);
  }
}

void Lane::evict_all(std::vector<RequestId>& out) {
  queue_.evict_all(out);
  // The instance's memory is gone, its prefix cache with it (a shared one: cleared by the first of
  // its lanes, its blocks given back to the pool).
  if (cache_) {
    blocks_.cache_freed(cache_->blocks());
    cache_->clear();
  }
  auto forget_cached = [&](RequestState& s) { s.cached_segments = s.shared_blocks = 0; };
  while (head_.valid()) {
    const RequestId r = head_;
    RequestState& s = req(r);
    forget_cached(s);
    if (s.phase == Phase::kDecoding) decode_.leave(r);
    unlink(r);
    out.push_back(r);
  }
  for (const RequestId r : held_) {
    forget_cached(req(r));
    out.push_back(r);
  }
  held_.clear();
  prefilling_.clear();
  decode_.clear();
  blocks_.clear();
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
  std::int64_t blocks = 0, running = 0, prefilling = 0;
  std::vector<RequestId> decoding;
  for (RequestId r = head_; r.valid(); r = req(r).next) {
    const RequestState& s = req(r);
    ++running;
    if (s.phase == Phase::kDecoding) {
      decoding.push_back(r);
      blocks += decode_.decode_blocks(s);
    } else {
      SERVESIM_CHECK(s.phase == Phase::kPrefilling);
      ++prefilling;
      blocks += own_blocks(s, s.prefill_target);
    }
  }
  SERVESIM_CHECK(running == running_);
  SERVESIM_CHECK(prefilling == static_cast<std::int64_t>(prefilling_.size()));
  decode_.check_invariants(decoding);
  // Between prepare_decode_step and finish_decode_step the step's new blocks are reserved but not
  // yet part of any request's derived count.
  SERVESIM_CHECK(blocks_.held() >= 0 && blocks_.inbound() >= 0);
  blocks += blocks_.held() + blocks_.inbound();
  if (cache_) cache_->check_invariants();
  blocks += cached_blocks();
  SERVESIM_CHECK_MSG(blocks + blocks_.step_reserved() == blocks_.used(),
                     "used " + std::to_string(blocks_.used()) + " blocks, requests hold " + std::to_string(blocks) +
                         " + " + std::to_string(blocks_.step_reserved()) + " reserved for the step");
  SERVESIM_CHECK(blocks_.used() <= blocks_.total() && blocks_.used() >= 0);
  SERVESIM_CHECK(running_ <= max_running_);
}

}  // namespace servesim::cluster
