// A lane's paged KV-cache blocks, counted (lane.h): how many its requests and the decode step in
// flight hold, and the reservations beside them.
//
// Models: vLLM's block manager as counts. `used` is every block taken: the blocks requests hold
// of their own, the decode step's reservation (reserve_step), the blocks of KV caches on their way
// in (reserve_inbound) and of prefilled requests whose KV is being sent (hold). `booked` are
// blocks a multi-step decode run has promised its later steps: not yet used, but what admission and
// reservations see as taken (free()). Admission and inbound reservations leave `watermark` blocks
// free. The prefix cache's blocks are evicted by the lanes that use it (Lane::evict_cached).
// A lane's blocks are its own (vLLM V0's virtual engines: each 1/pp of the instance's), or drawn
// from a pool its instance's lanes share (share(): one scheduler per instance, vLLM V1 and
// Vidur): then total, free, unused and the peak are the pool's, while used, booked, held, inbound
// and the step's reservation stay the lane's own part of it, and the blocks of the instance's one
// prefix cache are the pool's alone (to_cache, cache_freed).
// Ignores: block identities and fragmentation (a request needs ceil(tokens / block_tokens)).
// Invariants: 0 <= used <= total; booked, inbound, held >= 0 (CHECKed where they shrink);
// Lane::check_invariants ties used to the blocks its requests hold; a shared pool's used and
// booked are the sums of its lanes' and used includes the shared prefix cache's blocks
// (Simulation::check_all).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/check.h"

namespace servesim::cluster {

// The blocks of an instance whose lanes share one pool (KvBlocks::share).
struct KvPool {
  std::int64_t total = 0;
  std::int64_t used = 0;    // the sum of its lanes' used
  std::int64_t booked = 0;  // the sum of its lanes' booked
  std::int64_t peak_used = 0;
  std::int64_t cached = 0;  // of used, the blocks of the instance's prefix cache (no lane's part)
};

class KvBlocks {
 public:
  KvBlocks(std::int64_t total, std::int64_t block_tokens, std::int64_t watermark)
      : total_(total), block_tokens_(static_cast<std::uint64_t>(block_tokens)), watermark_(watermark) {}

  // Draws this lane's blocks from `pool` (its instance's lanes share it) with `watermark` kept
  // free in it; before any block is taken.
  void share(KvPool* pool, std::int64_t watermark) {
    SERVESIM_CHECK(used_ == 0 && booked_ == 0);
    pool_ = pool;
    watermark_ = watermark;
  }
  const KvPool* pool() const { return pool_; }

  std::int64_t total() const { return pool_ ? pool_->total : total_; }
  // The blocks this lane holds (of a shared pool: its part).
  std::int64_t used() const { return used_; }
  std::int64_t peak_used() const { return pool_ ? pool_->peak_used : peak_used_; }
  std::int64_t watermark() const { return watermark_; }
  std::uint64_t block_tokens() const { return block_tokens_; }
  std::int64_t step_reserved() const { return step_reserved_; }
  std::int64_t booked() const { return booked_; }
  std::int64_t inbound() const { return inbound_; }
  std::int64_t held() const { return held_; }
  // Blocks no one holds (booked ones count as free here: a decode step takes its own booking).
  std::int64_t unused() const { return pool_ ? pool_->total - pool_->used : total_ - used_; }
  // Blocks free for admission and reservations: neither used nor booked.
  std::int64_t free() const { return pool_ ? pool_->total - pool_->used - pool_->booked : total_ - used_ - booked_; }
  std::uint32_t blocks_for(std::uint64_t tokens) const {
    return static_cast<std::uint32_t>((tokens + block_tokens_ - 1) / block_tokens_);
  }

  // Blocks a request takes (admission) or gives back (it leaves, is preempted, the cache frees
  // its copy or evicts).
  void take(std::int64_t n) {
    used_ += n;
    if (pool_) {
      pool_->used += n;
      pool_->peak_used = std::max(pool_->peak_used, pool_->used);
    } else {
      peak_used_ = std::max(peak_used_, used_);
    }
  }
  void give(std::int64_t n) {
    used_ -= n;
    if (pool_) pool_->used -= n;
  }
  // The decode step in flight reserves `n` blocks (its requests' next tokens); end_step() when
  // it ended (the blocks now belong to its requests).
  void reserve_step(std::int64_t n) {
    take(n);
    step_reserved_ = n;
  }
  void end_step() { step_reserved_ = 0; }
  // A decode run's settled steps took `taken` blocks, the last step's reservation `last` of them.
  void take_run_steps(std::int64_t taken, std::int64_t last) {
    take(taken);  // used only grew: the peak follows
    SERVESIM_CHECK_MSG(unused() >= 0, "a decode run's steps took more KV blocks than the lane has");
    step_reserved_ = last;
  }
  void book(std::int64_t n) {
    booked_ += n;
    if (pool_) pool_->booked += n;
  }
  void unbook(std::int64_t n) {
    booked_ -= n;
    if (pool_) pool_->booked -= n;
    SERVESIM_CHECK(booked_ >= 0);
  }
  // A KV cache on its way in: its blocks, above the watermark; false when they are not free.
  bool reserve_inbound(std::int64_t n) {
    if (free() - n < watermark_) return false;
    take(n);
    inbound_ += n;
    return true;
  }
  void cancel_inbound(std::int64_t n) {
    give(n);
    inbound_ -= n;
  }
  // An inbound KV cache's request joined the lane: its blocks are its own now.
  void inbound_arrived(std::int64_t n) { inbound_ -= n; }
  // The lane's prefix cache took `n` blocks a request computed (the request's become the
  // cache's), or freed `n` of its blocks. A lane's own cache's blocks are part of its used; a
  // shared pool's cache is the instance's: its blocks leave the lane's part and are the pool's.
  void to_cache(std::int64_t n) {
    if (pool_) {
      used_ -= n;
      pool_->cached += n;
    }
  }
  void cache_freed(std::int64_t n) {
    if (pool_) {
      pool_->used -= n;
      pool_->cached -= n;
    } else {
      used_ -= n;
    }
  }
  // A prefilled request keeps its `n` blocks until its KV has been sent (release_held).
  void hold(std::int64_t n) { held_ += n; }
  void release_held(std::int64_t n) {
    held_ -= n;
    give(n);
  }
  // Failures: every block of this lane is free again (the peak stays; of a shared pool, this
  // lane's part).
  void clear() {
    if (pool_) {
      pool_->used -= used_;
      pool_->booked -= booked_;
    }
    used_ = step_reserved_ = inbound_ = held_ = booked_ = 0;
  }

 private:
  std::int64_t total_;
  std::uint64_t block_tokens_;
  std::int64_t watermark_;
  std::int64_t used_ = 0;
  std::int64_t step_reserved_ = 0;  // blocks reserved for the decode step in flight
  std::int64_t booked_ = 0;         // see book()
  std::int64_t peak_used_ = 0;
  std::int64_t inbound_ = 0;  // reserved for KV caches in flight or ready
  std::int64_t held_ = 0;     // of prefilled requests whose KV is being sent
  KvPool* pool_ = nullptr;    // shared with the instance's other lanes, or none
};

}  // namespace servesim::cluster
