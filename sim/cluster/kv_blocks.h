// A lane's paged KV-cache blocks, counted (lane.h): how many its requests and the decode step in
// flight hold, and the reservations beside them.
//
// Models: vLLM's block manager as counts. `used` is every block taken: the blocks requests hold
// of their own, the decode step's reservation (reserve_step), the blocks of KV caches on their way
// in (reserve_inbound) and of prefilled requests whose KV is being sent (hold). `booked` are
// blocks a multi-step decode run has promised its later steps: not yet used, but what admission and
// reservations see as taken (free()). Admission and inbound reservations leave `watermark` blocks
// free. The prefix cache's blocks are the lane's to evict (Lane::evict_cached gives them back).
// Ignores: block identities and fragmentation (a request needs ceil(tokens / block_tokens)).
// Invariants: 0 <= used <= total; booked, inbound, held >= 0 (CHECKed where they shrink);
// Lane::check_invariants ties used to the blocks its requests hold.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/check.h"

namespace servesim::cluster {

class KvBlocks {
 public:
  KvBlocks(std::int64_t total, std::int64_t block_tokens, std::int64_t watermark)
      : total_(total), block_tokens_(static_cast<std::uint64_t>(block_tokens)), watermark_(watermark) {}

  std::int64_t total() const { return total_; }
  std::int64_t used() const { return used_; }
  std::int64_t peak_used() const { return peak_used_; }
  std::int64_t watermark() const { return watermark_; }
  std::uint64_t block_tokens() const { return block_tokens_; }
  std::int64_t step_reserved() const { return step_reserved_; }
  std::int64_t booked() const { return booked_; }
  std::int64_t inbound() const { return inbound_; }
  std::int64_t held() const { return held_; }
  // Blocks no one holds (booked ones count as free here: a decode step takes its own booking).
  std::int64_t unused() const { return total_ - used_; }
  // Blocks free for admission and reservations: neither used nor booked.
  std::int64_t free() const { return total_ - used_ - booked_; }
  std::uint32_t blocks_for(std::uint64_t tokens) const {
    return static_cast<std::uint32_t>((tokens + block_tokens_ - 1) / block_tokens_);
  }

  // Blocks a request takes (admission) or gives back (it leaves, is preempted, the cache frees
  // its copy or evicts).
  void take(std::int64_t n) {
    used_ += n;
    peak_used_ = std::max(peak_used_, used_);
  }
  void give(std::int64_t n) { used_ -= n; }
  // The decode step in flight reserves `n` blocks (its requests' next tokens); end_step() when
  // it ended (the blocks now belong to its requests).
  void reserve_step(std::int64_t n) {
    take(n);
    step_reserved_ = n;
  }
  void end_step() { step_reserved_ = 0; }
  // A decode run's settled steps took `taken` blocks, the last step's reservation `last` of them.
  void take_run_steps(std::int64_t taken, std::int64_t last) {
    used_ += taken;
    SERVESIM_CHECK_MSG(used_ <= total_, "a decode run's steps took more KV blocks than the lane has");
    step_reserved_ = last;
    peak_used_ = std::max(peak_used_, used_);  // used only grew
  }
  void book(std::int64_t n) { booked_ += n; }
  void unbook(std::int64_t n) {
    booked_ -= n;
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
    used_ -= n;
    inbound_ -= n;
  }
  // An inbound KV cache's request joined the lane: its blocks are its own now.
  void inbound_arrived(std::int64_t n) { inbound_ -= n; }
  // A prefilled request keeps its `n` blocks until its KV has been sent (release_held).
  void hold(std::int64_t n) { held_ += n; }
  void release_held(std::int64_t n) {
    held_ -= n;
    used_ -= n;
  }
  // Failures: every block is free again (the peak stays).
  void clear() { used_ = step_reserved_ = inbound_ = held_ = booked_ = 0; }

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
};

}  // namespace servesim::cluster
