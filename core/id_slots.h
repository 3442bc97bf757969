// IdSlots<T>: one value per dense id (0, 1, 2, ... in the order they are added) while the id is
// held, in a slot that a released id gives back for the next one. What a run keeps per request
// while the request is in flight lives here, so its memory follows the requests in flight even
// when a few long ones outlive most of those that arrived with them (IdChunks, id_chunks.h, keeps
// a whole chunk of ids for one straggler: in a long run with long outputs nearly every chunk has
// one).
//
// Invariants: ids are added in order; an id is released at most once; a released id's value
// must not be read again (has(id) is false from its release on, and its slot holds another id's
// value). A store built with release_slots = false never gives slots back: every value stays
// readable (released ids only stop counting as held). Slots come in chunks of 2^Shift that are
// never freed and never move, so a reference to a value stays valid while its id is held; once
// the most ids held at once is reached, a run allocates only the id table's chunks (16 KB per
// 4,096 ids). Free slots are reused last released first (warm in the caches).
// Memory: 4 B per id added (its slot), plus the most ids held at once x sizeof(T), rounded up to
// whole chunks, plus 4 B per free slot. Chunk sizes are compile-time, so a lookup (a request's
// state, on the hot path) is four loads with constant shifts and masks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/check.h"

namespace servesim {

template <class T, unsigned Shift = 10>
class IdSlots {
 public:
  explicit IdSlots(bool release_slots = true) : release_(release_slots) {}
  IdSlots(IdSlots&&) noexcept = default;
  IdSlots& operator=(IdSlots&&) noexcept = default;

  // Room in the id-to-slot table for n ids (its chunks come as ids are added).
  void reserve(std::size_t n) { ids_.reserve((n >> kIdShift) + 1); }
  std::uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Ids added and not released, and the most there were at once.
  std::uint32_t held() const { return held_; }
  std::uint32_t peak_held() const { return peak_held_; }
  // Slots allocated (the most ids held at once, rounded up to whole chunks of 2^Shift).
  std::size_t slots() const { return chunks_.size() << Shift; }

  T& operator[](std::uint32_t id) { return at(slot_of(id)); }
  const T& operator[](std::uint32_t id) const { return at(slot_of(id)); }
  // Whether id's value can be read: added and, in a store that releases, not released.
  bool has(std::uint32_t id) const { return id < size_ && slot_of(id) != kReleased; }

  // Adds the next id's value; returns the id.
  std::uint32_t push_back(const T& v) {
    const std::uint32_t id = size_;
    SERVESIM_CHECK_MSG(id != kReleased, "more than 2^32 - 1 ids");
    std::uint32_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = next_slot_++;
      if ((s & kMask) == 0) chunks_.push_back(std::make_unique_for_overwrite<T[]>(std::size_t{1} << Shift));
    }
    at(s) = v;
    if ((id & kIdMask) == 0) ids_.push_back(std::make_unique_for_overwrite<std::uint32_t[]>(kIdMask + 1));
    ids_.back()[id & kIdMask] = s;
    ++size_;
    ++held_;
    if (held_ > peak_held_) peak_held_ = held_;
    return id;
  }

  // id's value is no longer needed; its slot goes to a later id (when the store releases).
  void release(std::uint32_t id) {
    SERVESIM_CHECK(has(id) && held_ > 0);
    --held_;
    if (!release_) return;
    std::uint32_t& s = ids_[id >> kIdShift][id & kIdMask];
    free_.push_back(s);
    s = kReleased;
  }

 private:
  static constexpr std::uint32_t kReleased = 0xffffffffu;
  static constexpr std::uint32_t kMask = (std::uint32_t{1} << Shift) - 1;
  static constexpr unsigned kIdShift = 12;  // the id-to-slot table in chunks of 4,096 ids (16 KB)
  static constexpr std::uint32_t kIdMask = (std::uint32_t{1} << kIdShift) - 1;
  std::uint32_t slot_of(std::uint32_t id) const { return ids_[id >> kIdShift][id & kIdMask]; }
  T& at(std::uint32_t s) { return chunks_[s >> Shift][s & kMask]; }
  const T& at(std::uint32_t s) const { return chunks_[s >> Shift][s & kMask]; }

  bool release_;
  std::vector<std::unique_ptr<std::uint32_t[]>> ids_;  // per id: its slot, kReleased once released
  std::vector<std::unique_ptr<T[]>> chunks_;           // slots, 2^Shift per chunk
  std::vector<std::uint32_t> free_;                    // released slots, reused last first
  std::uint32_t size_ = 0;                             // ids added
  std::uint32_t next_slot_ = 0;                        // slots handed out so far (free or held)
  std::uint32_t held_ = 0, peak_held_ = 0;
};

}  // namespace servesim
