// The variable-length parts of requests (block hash ids, packed image sizes), kept outside the
// fixed-size Request in one ring of 64-bit words: a request holds a handle; the words stay
// readable until the request is released.
//
// Spans are allocated in arrival order at the ring's tail and released in any order; released
// space is reclaimed from the head as soon as every older span is released too. A span never
// wraps (it starts over at the ring's beginning instead), so it is one contiguous array. The ring
// doubles when the live spans fill it, so once warm no request costs an allocation, and memory is
// bounded by the words of the oldest unreleased request and everything issued after it.
// Invariants: head <= tail; tail - head <= capacity; handles index spans in issue order.
#pragma once

#include <cstdint>
#include <vector>

#include "core/check.h"

namespace servesim::workloads {

class IdRing {
 public:
  static constexpr std::uint64_t kNoHandle = ~std::uint64_t{0};

  // Copies n words in; returns the span's handle (kNoHandle for n = 0).
  std::uint64_t append(const std::uint64_t* words, std::size_t n);
  // The span's words (valid until it is released or the ring grows).
  const std::uint64_t* get(std::uint64_t handle) const;
  void release(std::uint64_t handle);

  std::size_t capacity() const { return buf_.size(); }
  std::uint64_t live_words() const { return tail_ - head_; }
  std::size_t live_spans() const { return span_count_; }

 private:
  struct Span {
    std::uint64_t begin;
    std::uint32_t count;
    bool released;
  };
  const Span& span(std::uint64_t handle) const;
  void grow_words();
  void grow_spans();

  std::vector<std::uint64_t> buf_;     // power-of-two size
  std::uint64_t head_ = 0, tail_ = 0;  // absolute positions
  std::vector<Span> spans_;            // power-of-two ring of spans, oldest at span_head_
  std::size_t span_head_ = 0, span_count_ = 0;
  std::uint64_t first_handle_ = 0;  // handle of spans_[span_head_]
};

inline const IdRing::Span& IdRing::span(std::uint64_t handle) const {
  SERVESIM_CHECK(handle >= first_handle_ && handle - first_handle_ < span_count_);
  return spans_[(span_head_ + (handle - first_handle_)) & (spans_.size() - 1)];
}

inline const std::uint64_t* IdRing::get(std::uint64_t handle) const {
  const Span& s = span(handle);
  SERVESIM_CHECK_MSG(!s.released, "request ids read after the request was released");
  return buf_.data() + (s.begin & (buf_.size() - 1));
}

}  // namespace servesim::workloads
