// The future event list: a binary heap in one vector, with bottom-up deletion.
//
// Order is total and defined in one place, `fires_before`: earlier time first; at equal times the
// lower priority class first; within a class, insertion order (FIFO). Priorities are small
// integers chosen by the caller (sim/cluster gives each event type its class), so two runs that
// push the same events in the same order pop them in the same order, on any standard library.
//
// Invariants: pop() never returns an event earlier than the previous pop's if every push is at or
// after the last popped time (the simulation CHECKs this: time never goes back). Payloads are
// trivially copyable; the queue never allocates once its vector has grown to the peak size.
// Cancellation is lazy: payloads carry a generation and stale ones are dropped by the handler.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/core/time.h"

namespace servesim {

template <class Payload>
class EventQueue {
  static_assert(std::is_trivially_copyable_v<Payload>, "events are small value types");

 public:
  struct Entry {
    SimTime time;
    std::uint64_t order;  // priority in the top 8 bits, insertion sequence below
    Payload payload;

    std::uint8_t priority() const { return static_cast<std::uint8_t>(order >> 56); }
    std::uint64_t sequence() const { return order & kSequenceMask; }
  };

  // The one definition of event order.
  static bool fires_before(const Entry& a, const Entry& b) {
    return a.time != b.time ? a.time < b.time : a.order < b.order;
  }

  void push(SimTime time, std::uint8_t priority, const Payload& payload) {
    heap_.push_back(Entry{time, (std::uint64_t{priority} << 56) | (next_seq_++ & kSequenceMask),
                          payload});
    sift_up(heap_.size() - 1);
  }

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Entry& top() const { return heap_.front(); }

  Entry pop() {
    Entry out = heap_.front();
    const Entry last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) {
      // Bottom-up deletion (Wegener 1993): walk the hole down to a leaf along the earlier child,
      // one comparison per level, then sift the displaced last entry up from there; it belongs
      // near the bottom, so that walk is short. Half the comparisons of the textbook sift-down.
      const std::size_t n = heap_.size();
      std::size_t i = 0;
      for (std::size_t child = 1; child < n; child = 2 * i + 1) {
        if (child + 1 < n && fires_before(heap_[child + 1], heap_[child])) ++child;
        heap_[i] = heap_[child];
        i = child;
      }
      heap_[i] = last;
      sift_up(i);
    }
    return out;
  }

  void reserve(std::size_t n) { heap_.reserve(n); }
  std::uint64_t pushed() const { return next_seq_; }

 private:
  static constexpr std::uint64_t kSequenceMask = (std::uint64_t{1} << 56) - 1;

  void sift_up(std::size_t i) {
    Entry e = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!fires_before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  std::vector<Entry> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace servesim
