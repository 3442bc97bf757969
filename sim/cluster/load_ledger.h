// What each instance of a pool has outstanding, as its router compares it: the one place routing
// load is kept.
//
// Models: per instance, in the unit of the pool's router (RouterConfig::load): tokens (prompt
// tokens still to prefill plus, on a combined pool, output tokens still to generate; image tokens
// on an encode pool) or requests (unfinished ones); for decode placement (free_kv) the negated
// free KV blocks of the instance's roomiest lane, set whenever they change. The serving code
// reports what happened to a request (routed, worked, left) and the ledger keeps the unit it
// needs; and which instances are up (failures), so a router never picks a down one.
// Ignores: what a real router could not know is not hidden from it (outstanding output tokens are
// exact, not estimated: an upper bound on a router that estimates output lengths).
// Invariants: an instance's load equals the recount of the requests on it (tests recount it from
// the request table); a down instance's load is 0 until it is repaired. Ledgers a least-loaded
// pick reads keep the loads in a MinTree: O(log n) per change, O(1) for the minimum; the others
// in a plain array, O(1) per change. No allocation after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "core/min_tree.h"

namespace servesim::cluster {

enum class LoadUnit : std::uint8_t { kTokens, kRequests, kFreeBlocks };

class LoadLedger {
 public:
  // `ordered`: keep the loads in a MinTree for least_from().
  LoadLedger(std::uint32_t instances, LoadUnit unit, bool ordered);

  LoadUnit unit() const { return unit_; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(down_.size()); }

  // A request joined instance i bringing `tokens` of work.
  void routed(std::uint32_t i, std::int64_t tokens) { add(i, tokens, 1); }
  // `tokens` of instance i's outstanding work were done (or skipped: prefix-cache hits).
  void worked(std::uint32_t i, std::int64_t tokens) { add(i, -tokens, 0); }
  // `tokens` of work came back to instance i (a preempted request recomputes them).
  void unworked(std::uint32_t i, std::int64_t tokens) { add(i, tokens, 0); }
  // A request left instance i with `tokens` of its work still outstanding there.
  void left(std::uint32_t i, std::int64_t tokens) { add(i, -tokens, -1); }
  // Decode placement: instance i's roomiest lane has `blocks` free.
  void free_blocks(std::uint32_t i, std::int64_t blocks) { set(i, -blocks); }
  // Instance i has nothing outstanding (a failure emptied it; a repair brings it back empty).
  void clear(std::uint32_t i) { set(i, 0); }

  void set_up(std::uint32_t i, bool up);
  bool up(std::uint32_t i) const { return down_[i] == 0; }
  bool all_down() const { return down_count_ == down_.size(); }

  std::int64_t load(std::uint32_t i) const { return ordered_ ? tree_.value(i) - (down_[i] ? kDown : 0) : loads_[i]; }
  // The least loaded up instance, ties to the first at or after `cursor` (wrapping); kNoInstance
  // when every instance is down. Ordered ledgers only.
  std::uint32_t least_from(std::size_t cursor) const;

 private:
  // A down instance's tree value carries this offset (its load stays readable).
  static constexpr std::int64_t kDown = std::int64_t{1} << 60;
  void add(std::uint32_t i, std::int64_t tokens, std::int64_t requests) {
    if (unit_ == LoadUnit::kFreeBlocks) return;
    const std::int64_t delta = unit_ == LoadUnit::kTokens ? tokens : requests;
    if (delta == 0) return;
    if (ordered_) {
      tree_.set(i, tree_.value(i) + delta);
    } else {
      loads_[i] += delta;
    }
  }
  void set(std::uint32_t i, std::int64_t value) {
    if (ordered_) {
      tree_.set(i, value + (down_[i] ? kDown : 0));
    } else {
      loads_[i] = value;
    }
  }

  LoadUnit unit_;
  bool ordered_;
  MinTree tree_;                     // ordered
  std::vector<std::int64_t> loads_;  // otherwise
  std::vector<std::uint8_t> down_;
  std::uint32_t down_count_ = 0;
};

}  // namespace servesim::cluster
