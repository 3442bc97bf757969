// The values of the last few keys: serve and sweep answer many hypotheses on a few scenarios, so
// what a hypothesis builds from part of its scenario (a fabric, a check over it, a workload's
// draws) is often what the next one needs. A session owns its caches (sim/scenario/caches.h).
//
// At most `entries` entries and `budget` units of weight in all, an entry weighing
// `weight(key, value)` (1 without a weight function); the least recently used go first, and an
// entry heavier than the whole budget is not kept. Keys need `==`; lookups are linear (a handful
// of entries). Thread-safe: serve's and sweep's worker threads share one cache.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace servesim {

template <class Key, class Value>
class RecentCache {
 public:
  using Weight = std::size_t (*)(const Key&, const Value&);

  explicit RecentCache(std::size_t entries, std::size_t budget = std::numeric_limits<std::size_t>::max(),
                       Weight weight = nullptr)
      : max_entries_(entries), budget_(budget), weight_(weight) {}

  // The value kept for `key`, which becomes the most recently used.
  std::optional<Value> find(const Key& key) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first == key) {
        const auto at = entries_.begin() + static_cast<std::ptrdiff_t>(i);
        std::rotate(at, at + 1, entries_.end());
        return entries_.back().second;
      }
    }
    return std::nullopt;
  }

  // Keeps `value` for `key` (in place of what an equal key kept), as the most recently used.
  void keep(Key key, Value value) {
    const std::size_t w = weight_of(key, value);
    if (w > budget_) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        total_ -= weight_of(it->first, it->second);
        entries_.erase(it);
        break;
      }
    }
    total_ += w;
    entries_.emplace_back(std::move(key), std::move(value));
    while (entries_.size() > max_entries_ || total_ > budget_) {
      total_ -= weight_of(entries_.front().first, entries_.front().second);
      entries_.erase(entries_.begin());
    }
  }

 private:
  std::size_t weight_of(const Key& k, const Value& v) const { return weight_ ? weight_(k, v) : 1; }

  const std::size_t max_entries_, budget_;
  const Weight weight_;
  std::mutex mutex_;
  std::vector<std::pair<Key, Value>> entries_;  // least recently used first
  std::size_t total_ = 0;                       // their weight
};

}  // namespace servesim
