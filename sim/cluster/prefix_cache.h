// A per-lane prefix cache of KV blocks (vLLM's automatic prefix caching, SGLang's RadixAttention):
// the KV of a prompt's leading segments, keyed by a hash of the segment and everything before it,
// kept after the request that computed it has left so that a later request with the same prefix
// prefills only the rest.
//
// A request's prefix is a sequence of segments (PrefixKeys): with Mooncake hash ids one segment per
// id (the trace's block_tokens, 512 in the published traces; equal ids mean equal content and equal
// everything before), else one KV block per segment, keyed by the shared prompt's id (prefix_id)
// and, past it, by the session (a later turn's history is the previous turn's prompt and output).
// Only whole segments are cached, and a request always prefills at least its last prompt token (it
// needs that token's logits), as in vLLM.
//
// Memory: cached blocks are blocks of the lane's KV budget (the lane counts them as used). An entry
// referenced by a running request is pinned; an unreferenced one is evictable, least recently
// released first (vLLM v1 KVCacheManager: a request frees its blocks tail first, so the end of a
// prefix is evicted before its beginning and the surviving part stays a usable prefix).
// At most `capacity_blocks` blocks are cached.
//
// Deliberately ignored: partial-block sharing, a second tier in host memory or on other instances
// (Mooncake's store), copy-on-write of the last block.
// Invariants: blocks() = sum of the entries' blocks <= capacity; evictable() = sum over entries
// with no reference; every unreferenced entry is in the LRU list and no referenced one is.
// No allocation once the table has grown to its working size.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/metrics/recorder.h"
#include "workloads/id_ring.h"

namespace servesim::cluster {

// 64-bit mix of two words (splitmix64's finaliser), for segment keys.
inline std::uint64_t prefix_key_mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t h = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

// The segment keys of one request's prompt, computed on demand (no per-request allocation).
// Hash ids are read from the request source's IdRing (its handle stays valid until the request
// finishes; the words may move when the ring grows, so they are looked up per use: ids()).
struct PrefixKeys {
  const workloads::IdRing* ring = nullptr;  // hash ids, or none
  std::uint64_t handle = workloads::IdRing::kNoHandle;
  std::uint64_t prefix_key = 0;   // shared prompt (segments [0, prefix_segments))
  std::uint64_t session_key = 0;  // session history (segments [prefix_segments, segments))
  std::uint32_t segments = 0;
  std::uint32_t prefix_segments = 0;
  std::uint32_t segment_tokens = 0;  // tokens per segment
  const std::uint64_t* ids() const { return ring != nullptr ? ring->get(handle) : nullptr; }
  // Segment i's key; `ids` is ids(), read once per operation.
  std::uint64_t key(const std::uint64_t* ids, std::uint32_t i) const {
    if (ids != nullptr) return prefix_key_mix(1, ids[i]);
    return prefix_key_mix(i < prefix_segments ? prefix_key : session_key, i);
  }
  std::uint64_t key(std::uint32_t i) const { return key(ids(), i); }
};

// A lane's counters are the recorder's (metrics::PrefixCacheCounts, capacity_blocks its own), so a
// pool's figures are the sum of its lanes'.
using PrefixCacheStats = metrics::PrefixCacheCounts;

class PrefixCache {
 public:
  explicit PrefixCache(std::int64_t capacity_blocks) : capacity_(capacity_blocks) {
    stats_.capacity_blocks = capacity_blocks;
  }

  // The leading segments of `keys` that are cached, at most `max_segments` (read only), and the
  // blocks of those that no request references (evictable until pinned).
  struct Match {
    std::uint32_t segments = 0;
    std::int64_t unreferenced_blocks = 0;
  };
  Match match(const PrefixKeys& keys, std::uint32_t max_segments) const;
  // References the first n segments (all cached: n <= match()).
  void pin(const PrefixKeys& keys, std::uint32_t n);
  // Drops a reference to each of the first n segments; the unreferenced ones become evictable,
  // the last segment first.
  void unpin(const PrefixKeys& keys, std::uint32_t n);
  // Segment `key` of `blocks` blocks, just computed by a request, joins the cache referenced by
  // it. kAdded: a new entry (the request's blocks become the cache's); kShared: already cached (the
  // request drops its copy and references the entry); kFull: no room even after evicting what is
  // evictable (nothing changes). Blocks evicted to make room are added to *evicted.
  enum class Insert { kAdded, kShared, kFull };
  Insert insert(std::uint64_t key, std::int64_t blocks, std::int64_t* evicted);
  // Evicts unreferenced entries, least recently released first, until `blocks` blocks are freed
  // or none is left; returns the blocks freed.
  std::int64_t evict(std::int64_t blocks);
  // Forgets everything (the instance failed: its memory is gone).
  void clear();

  std::int64_t blocks() const { return blocks_; }
  std::int64_t evictable() const { return evictable_; }
  std::int64_t capacity() const { return capacity_; }
  PrefixCacheStats& stats() { return stats_; }
  const PrefixCacheStats& stats() const { return stats_; }
  // Recomputes the block counts and the LRU list from the entries and CHECKs them.
  void check_invariants() const;

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  struct Entry {
    std::uint64_t key = 0;
    std::uint32_t blocks = 0;
    std::uint32_t refs = 0;
    std::uint32_t prev = kNone, next = kNone;  // LRU list (unreferenced entries), or free list
  };
  std::uint32_t find(std::uint64_t key) const;  // entry index or kNone
  void table_insert(std::uint32_t e);
  void table_erase(std::uint64_t key);
  void grow();
  void lru_push_back(std::uint32_t e);  // most recently released at the back
  void lru_unlink(std::uint32_t e);
  void remove(std::uint32_t e);

  std::int64_t capacity_;
  std::int64_t blocks_ = 0, evictable_ = 0;
  std::vector<Entry> entries_;
  std::uint32_t free_ = kNone;  // free entry slots
  std::uint32_t lru_head_ = kNone, lru_tail_ = kNone;
  std::vector<std::uint32_t> table_;  // open addressing, linear probing: entry or kNone
  std::size_t live_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace servesim::cluster
