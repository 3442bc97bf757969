#include "sim/cluster/prefix_cache.h"

#include <algorithm>

#include "core/check.h"

namespace servesim::cluster {

std::uint32_t PrefixCache::find(std::uint64_t key) const {
  if (table_.empty()) return kNone;
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = static_cast<std::size_t>(key) & mask;; i = (i + 1) & mask) {
    const std::uint32_t e = table_[i];
    if (e == kNone) return kNone;
    if (entries_[e].key == key) return e;
  }
}

void PrefixCache::table_insert(std::uint32_t e) {
  const std::size_t mask = table_.size() - 1;
  std::size_t i = static_cast<std::size_t>(entries_[e].key) & mask;
  while (table_[i] != kNone) i = (i + 1) & mask;
  table_[i] = e;
}

void PrefixCache::table_erase(std::uint64_t key) {
  // Backward-shift deletion keeps every probe sequence unbroken without tombstones.
  const std::size_t mask = table_.size() - 1;
  std::size_t i = static_cast<std::size_t>(key) & mask;
  while (entries_[table_[i]].key != key) i = (i + 1) & mask;
  for (std::size_t j = (i + 1) & mask; table_[j] != kNone; j = (j + 1) & mask) {
    const std::size_t home = static_cast<std::size_t>(entries_[table_[j]].key) & mask;
    // Move j into the hole at i when its home is not in the cyclic range (i, j].
    if (((j - home) & mask) >= ((j - i) & mask)) {
      table_[i] = table_[j];
      i = j;
    }
  }
  table_[i] = kNone;
}

void PrefixCache::grow() {
  table_.assign(table_.empty() ? 64 : table_.size() * 2, kNone);
  for (std::uint32_t e = 0; e < entries_.size(); ++e) {
    if (entries_[e].blocks > 0) table_insert(e);
  }
}

PrefixCache::Match PrefixCache::match(const PrefixKeys& keys, std::uint32_t max_segments) const {
  const std::uint32_t n = std::min(keys.segments, max_segments);
  Match m;
  if (n == 0) return m;
  const std::uint64_t* ids = keys.ids();
  for (; m.segments < n; ++m.segments) {
    const std::uint32_t e = find(keys.key(ids, m.segments));
    if (e == kNone) break;
    if (entries_[e].refs == 0) m.unreferenced_blocks += entries_[e].blocks;
  }
  return m;
}

void PrefixCache::pin(const PrefixKeys& keys, std::uint32_t n) {
  if (n == 0) return;
  const std::uint64_t* ids = keys.ids();
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t e = find(keys.key(ids, i));
    SERVESIM_CHECK(e != kNone);
    Entry& en = entries_[e];
    if (en.refs++ == 0) {
      lru_unlink(e);
      evictable_ -= en.blocks;
    }
  }
}

void PrefixCache::unpin(const PrefixKeys& keys, std::uint32_t n) {
  // The last segment first: it goes to the LRU list before the earlier ones, so it is evicted
  // before them.
  if (n == 0) return;
  const std::uint64_t* ids = keys.ids();
  for (std::uint32_t i = n; i-- > 0;) {
    const std::uint32_t e = find(keys.key(ids, i));
    SERVESIM_CHECK(e != kNone && entries_[e].refs > 0);
    Entry& en = entries_[e];
    if (--en.refs == 0) {
      lru_push_back(e);
      evictable_ += en.blocks;
    }
  }
}

PrefixCache::Insert PrefixCache::insert(std::uint64_t key, std::int64_t blocks, std::int64_t* evicted) {
  if (const std::uint32_t e = find(key); e != kNone) {
    Entry& en = entries_[e];
    if (en.refs++ == 0) {
      lru_unlink(e);
      evictable_ -= en.blocks;
    }
    return Insert::kShared;
  }
  if (blocks > capacity_) return Insert::kFull;
  const std::int64_t over = blocks_ + blocks - capacity_;
  if (over > evictable_) return Insert::kFull;
  if (over > 0) *evicted += evict(over);
  std::uint32_t e = free_;
  if (e != kNone) {
    free_ = entries_[e].next;
  } else {
    e = static_cast<std::uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  entries_[e] = Entry{key, static_cast<std::uint32_t>(blocks), 1, kNone, kNone};
  if (2 * (live_ + 1) > table_.size())
    grow();
  else
    table_insert(e);
  ++live_;
  blocks_ += blocks;
  stats_.inserted_blocks += blocks;
  return Insert::kAdded;
}

std::int64_t PrefixCache::evict(std::int64_t blocks) {
  std::int64_t freed = 0;
  while (freed < blocks && lru_head_ != kNone) {
    const std::uint32_t e = lru_head_;
    freed += entries_[e].blocks;
    evictable_ -= entries_[e].blocks;
    lru_unlink(e);
    remove(e);
  }
  stats_.evicted_blocks += freed;
  return freed;
}

void PrefixCache::remove(std::uint32_t e) {
  table_erase(entries_[e].key);
  blocks_ -= entries_[e].blocks;
  entries_[e] = Entry{};
  entries_[e].next = free_;
  free_ = e;
  --live_;
}

void PrefixCache::clear() {
  entries_.clear();
  table_.assign(table_.size(), kNone);
  free_ = lru_head_ = lru_tail_ = kNone;
  blocks_ = evictable_ = 0;
  live_ = 0;
}

void PrefixCache::lru_push_back(std::uint32_t e) {
  Entry& en = entries_[e];
  en.prev = lru_tail_;
  en.next = kNone;
  if (lru_tail_ != kNone)
    entries_[lru_tail_].next = e;
  else
    lru_head_ = e;
  lru_tail_ = e;
}

void PrefixCache::lru_unlink(std::uint32_t e) {
  Entry& en = entries_[e];
  if (en.prev != kNone)
    entries_[en.prev].next = en.next;
  else
    lru_head_ = en.next;
  if (en.next != kNone)
    entries_[en.next].prev = en.prev;
  else
    lru_tail_ = en.prev;
  en.prev = en.next = kNone;
}

void PrefixCache::check_invariants() const {
  std::int64_t blocks = 0, evictable = 0;
  std::size_t live = 0, unreferenced = 0;
  for (std::uint32_t e = 0; e < entries_.size(); ++e) {
    const Entry& en = entries_[e];
    if (en.blocks == 0) continue;
    ++live;
    blocks += en.blocks;
    SERVESIM_CHECK(find(en.key) == e);
    if (en.refs == 0) {
      evictable += en.blocks;
      ++unreferenced;
    }
  }
  std::size_t listed = 0;
  for (std::uint32_t e = lru_head_; e != kNone; e = entries_[e].next) {
    SERVESIM_CHECK(entries_[e].refs == 0 && entries_[e].blocks > 0);
    ++listed;
  }
  SERVESIM_CHECK(listed == unreferenced && live == live_);
  SERVESIM_CHECK(blocks == blocks_ && evictable == evictable_);
  SERVESIM_CHECK(blocks_ <= capacity_);
}

}  // namespace servesim::cluster
