// IdChunks<T>: one value per dense id (0, 1, 2, ... in the order they are added), stored in
// chunks of 2^shift ids, each allocated when its first id is added and freed as soon as every id
// in it has been released. What a run keeps per request while the request is in flight (its hot
// state, its live metric record) lives here, so a run's memory follows the ids still held (the
// chunks they touch), not every id it has seen: ids released in about the order they were added
// (requests finish in about the order they arrive) free their chunks behind them, and an id held
// long (a straggler) keeps only its own chunk.
//
// Invariants: ids are added in order; an id is released at most once; a released id's value must
// not be read again (its chunk may be gone: operator[] on it dereferences a null chunk). held(id)
// says whether its chunk is still there, for code that may meet a finished id (a stale flow). A
// store built with release_chunks = false never frees (a dense store that grows by chunks, never
// copying what it holds). At most one freed chunk is kept for reuse, so a steady run allocates
// nothing.
// Memory: held chunks x 2^shift x sizeof(T), plus 8 B of chunk table per 2^shift ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/check.h"

namespace servesim {

template <class T>
class IdChunks {
 public:
  // Chunks of 2^shift ids (shift 0: every id its own chunk, freed when it is released).
  explicit IdChunks(unsigned shift = 10, bool release_chunks = true)
      : shift_(shift), mask_((std::uint32_t{1} << shift) - 1), release_(release_chunks) {}
  IdChunks(IdChunks&&) noexcept = default;
  IdChunks& operator=(IdChunks&&) noexcept = default;

  // Room in the chunk table for n ids (the chunks themselves come as ids are added).
  void reserve(std::size_t n) {
    chunks_.reserve((n >> shift_) + 1);
    held_in_.reserve((n >> shift_) + 1);
  }
  std::uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Ids added and not released, and the most there were at once.
  std::uint32_t held() const { return held_; }
  std::uint32_t peak_held() const { return peak_held_; }
  // Chunks allocated now (each 2^shift values).
  std::size_t chunks_held() const { return chunks_held_; }
  std::size_t chunk_ids() const { return std::size_t{1} << shift_; }

  T& operator[](std::uint32_t id) { return chunks_[id >> shift_][id & mask_]; }
  const T& operator[](std::uint32_t id) const { return chunks_[id >> shift_][id & mask_]; }
  // Whether id's chunk is still there (an id not yet released always is).
  bool has(std::uint32_t id) const { return id < size_ && chunks_[id >> shift_] != nullptr; }

  // Adds the next id's value; returns the id.
  std::uint32_t push_back(const T& v) {
    const std::uint32_t id = size_;
    SERVESIM_CHECK_MSG(id != 0xffffffffu, "more than 2^32 - 1 ids");
    if ((id & mask_) == 0) {
      chunks_.push_back(take_chunk());
      held_in_.push_back(0);
      ++chunks_held_;
    }
    chunks_.back()[id & mask_] = v;
    ++held_in_.back();
    ++held_;
    ++size_;
    if (held_ > peak_held_) peak_held_ = held_;
    return id;
  }
  T& back() { return (*this)[size_ - 1]; }

  // id's value is no longer needed; its chunk goes once every id of it has been added and released.
  void release(std::uint32_t id) {
    const std::uint32_t k = id >> shift_;
    SERVESIM_CHECK(id < size_ && chunks_[k] != nullptr && held_in_[k] > 0);
    --held_;
    if (--held_in_[k] > 0 || !release_) return;
    // The chunk still being filled stays (more ids go into it).
    if (k + 1 == chunks_.size() && (size_ & mask_) != 0) return;
    --chunks_held_;
    if (!spare_) {
      spare_ = std::move(chunks_[k]);
    } else {
      chunks_[k].reset();
    }
  }

 private:
  std::unique_ptr<T[]> take_chunk() {
    if (spare_) return std::move(spare_);
    return std::make_unique_for_overwrite<T[]>(chunk_ids());
  }

  unsigned shift_;
  std::uint32_t mask_;
  bool release_;
  std::vector<std::unique_ptr<T[]>> chunks_;  // null once freed
  std::vector<std::uint32_t> held_in_;        // per chunk: ids added and not released
  std::unique_ptr<T[]> spare_;
  std::uint32_t size_ = 0, held_ = 0, peak_held_ = 0;
  std::size_t chunks_held_ = 0;
};

}  // namespace servesim
