// A segment tree over n integer values answering "which index holds the minimum" in O(1) and
// updating one value in O(log n). Ties are broken by position relative to a cursor: the first
// minimum at or after the cursor, wrapping around. Callers that advance the cursor past each
// pick spread ties evenly over the tied indices instead of favouring the lowest one.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace servesim {

class MinTree {
 public:
  explicit MinTree(std::size_t n = 0) { reset(n); }

  void reset(std::size_t n) {
    n_ = n;
    size_ = 1;
    while (size_ < n) size_ *= 2;
    tree_.assign(2 * size_, kEmpty);
    for (std::size_t i = 0; i < n; ++i) tree_[size_ + i] = 0;
    for (std::size_t i = size_ - 1; i >= 1; --i) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
  }

  std::size_t size() const { return n_; }
  std::int64_t value(std::size_t i) const { return tree_[size_ + i]; }
  std::int64_t min() const { return tree_[1]; }

  void set(std::size_t i, std::int64_t v) {
    std::size_t node = size_ + i;
    tree_[node] = v;
    for (node /= 2; node >= 1; node /= 2) {
      const std::int64_t m = std::min(tree_[2 * node], tree_[2 * node + 1]);
      if (tree_[node] == m) break;  // ancestors are unchanged too
      tree_[node] = m;
    }
  }

  // The first index at or after `cursor` (wrapping) whose value equals min(). n > 0.
  std::size_t argmin_from(std::size_t cursor) const {
    const std::int64_t m = tree_[1];
    const std::size_t found = first_at_or_after(cursor, m);
    return found != kNone ? found : first_at_or_after(0, m);
  }

 private:
  static constexpr std::int64_t kEmpty = std::numeric_limits<std::int64_t>::max();
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  // First leaf index >= from whose value is m: from the leaf up until a right sibling holds m,
  // then down its leftmost path of m (O(log n), no recursion).
  std::size_t first_at_or_after(std::size_t from, std::int64_t m) const {
    if (from >= size_) return kNone;
    std::size_t node = size_ + from;
    if (tree_[node] != m) {
      while (true) {
        if (node == 1) return kNone;
        if ((node & 1) == 0 && tree_[node + 1] == m) {
          ++node;
          break;
        }
        node /= 2;
      }
      while (node < size_) node = tree_[2 * node] == m ? 2 * node : 2 * node + 1;
    }
    return node - size_;
  }

  std::size_t n_ = 0;
  std::size_t size_ = 1;
  std::vector<std::int64_t> tree_;
};

}  // namespace servesim
