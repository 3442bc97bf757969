#include "workloads/id_ring.h"

#include <algorithm>
#include <cstring>

namespace servesim::workloads {

void IdRing::grow_words() {
  const std::size_t old = buf_.size();
  std::vector<std::uint64_t> bigger(old == 0 ? 1024 : 2 * old);
  // Positions are absolute, so each live word moves to its position modulo the new size; a span
  // that did not wrap in the old ring does not wrap in the new one (its offset grows by at most
  // the old size, and it was at most the old size long).
  for (std::uint64_t p = head_; p < tail_; ++p) {
    bigger[p & (bigger.size() - 1)] = buf_[p & (old - 1)];
  }
  buf_.swap(bigger);
}

void IdRing::grow_spans() {
  std::vector<Span> bigger(spans_.empty() ? 256 : 2 * spans_.size());
  for (std::size_t i = 0; i < span_count_; ++i) {
    bigger[i] = spans_[(span_head_ + i) & (spans_.size() - 1)];
  }
  spans_.swap(bigger);
  span_head_ = 0;
}

std::uint64_t IdRing::append(const std::uint64_t* words, std::size_t n) {
  if (n == 0) return kNoHandle;
  std::uint64_t pos = 0;
  while (true) {
    const std::uint64_t cap = buf_.size();
    if (cap > 0) {
      pos = tail_;
      const std::uint64_t offset = pos & (cap - 1);
      if (offset + n > cap) pos += cap - offset;  // start over at the ring's beginning
      if (pos + n - head_ <= cap) break;
    }
    grow_words();
  }
  std::memcpy(buf_.data() + (pos & (buf_.size() - 1)), words, n * sizeof(std::uint64_t));
  if (span_count_ == 0) head_ = pos;  // nothing live: the padding before pos is free
  tail_ = pos + n;
  if (span_count_ == spans_.size()) grow_spans();
  spans_[(span_head_ + span_count_) & (spans_.size() - 1)] = Span{pos, static_cast<std::uint32_t>(n), false};
  ++span_count_;
  return first_handle_ + span_count_ - 1;
}

void IdRing::release(std::uint64_t handle) {
  if (handle == kNoHandle) return;
  SERVESIM_CHECK(handle >= first_handle_ && handle - first_handle_ < span_count_);
  Span& s = spans_[(span_head_ + (handle - first_handle_)) & (spans_.size() - 1)];
  SERVESIM_CHECK_MSG(!s.released, "a request's ids were released twice");
  s.released = true;
  while (span_count_ > 0 && spans_[span_head_].released) {
    span_head_ = (span_head_ + 1) & (spans_.size() - 1);
    --span_count_;
    ++first_handle_;
  }
  head_ = span_count_ > 0 ? spans_[span_head_].begin : tail_;
}

}  // namespace servesim::workloads
