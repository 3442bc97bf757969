// A double-ended FIFO of small values in one growable power-of-two ring buffer: push and pop at
// both ends in O(1), one allocation (std::deque scatters elements over blocks and a map, which
// costs cache misses on every access in the simulator's hot loop).
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include "core/check.h"

namespace servesim {

template <class T>
class RingQueue {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  const T& front() const {
    SERVESIM_CHECK(size_ > 0);
    return buf_[head_];
  }

  void push_back(T v) {
    if (size_ == buf_.size()) grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = v;
    ++size_;
  }
  void push_front(T v) {
    if (size_ == buf_.size()) grow();
    head_ = (head_ + buf_.size() - 1) & (buf_.size() - 1);
    buf_[head_] = v;
    ++size_;
  }
  T pop_front() {
    SERVESIM_CHECK(size_ > 0);
    const T v = buf_[head_];
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
    return v;
  }
  T pop_back() {
    SERVESIM_CHECK(size_ > 0);
    --size_;
    return buf_[(head_ + size_) & (buf_.size() - 1)];
  }
  // Element i from the front (0 = front).
  const T& operator[](std::size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }

 private:
  void grow() {
    std::vector<T> bigger(buf_.empty() ? 8 : 2 * buf_.size());
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
    buf_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> buf_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace servesim
