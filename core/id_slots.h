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
// readable (released ids only stop counting as held). Slots come in chunks of 2^shift that are
// never freed and never move, so a reference to a value stays valid while its id is held, and a
// steady run allocates nothing. Free slots are reused last released first (warm in the caches).
// Memory: 4 B per id added (its slot), plus the most ids held at once x sizeof(T), rounded up to
// whole chunks, plus 4 B per free slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/id_chunks.h"

namespace servesim {

template <class T>
class IdSlots {
 public:
  explicit IdSlots(unsigned shift = 10, bool release_slots = true)
      : shift_(shift), mask_((std::uint32_t{1} << shift) - 1), release_(release_slots) {}
  IdSlots(IdSlots&&) noexcept = default;
  IdSlots& operator=(IdSlots&&) noexcept = default;

  // Room in the id-to-slot table for n ids (the slots themselves come as ids are held).
  void reserve(std::size_t n) { slot_of_.reserve(n); }
  std::uint32_t size() const { return slot_of_.size(); }
  bool empty() const { return slot_of_.empty(); }
  // Ids added and not released, and the most there were at once.
  std::uint32_t held() const { return held_; }
  std::uint32_t peak_held() const { return peak_held_; }
  // Slots allocated (the most ids held at once, rounded up to whole chunks of 2^shift).
  std::size_t slots() const { return chunks_.size() << shift_; }

  T& operator[](std::uint32_t id) { return at(slot_of_[id]); }
  const T& operator[](std::uint32_t id) const { return at(slot_of_[id]); }
  // Whether id's value can be read: added and, in a store that releases, not released.
  bool has(std::uint32_t id) const { return id < slot_of_.size() && slot_of_[id] != kReleased; }

  // Adds the next id's value; returns the id.
  std::uint32_t push_back(const T& v) {
    std::uint32_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = next_slot_++;
      if ((s & mask_) == 0) chunks_.push_back(std::make_unique_for_overwrite<T[]>(std::size_t{1} << shift_));
    }
    at(s) = v;
    const std::uint32_t id = slot_of_.push_back(s);
    ++held_;
    if (held_ > peak_held_) peak_held_ = held_;
    return id;
  }

  // id's value is no longer needed; its slot goes to a later id (when the store releases).
  void release(std::uint32_t id) {
    SERVESIM_CHECK(has(id) && held_ > 0);
    --held_;
    if (!release_) return;
    free_.push_back(slot_of_[id]);
    slot_of_[id] = kReleased;
  }

 private:
  static constexpr std::uint32_t kReleased = 0xffffffffu;
  T& at(std::uint32_t s) { return chunks_[s >> shift_][s & mask_]; }
  const T& at(std::uint32_t s) const { return chunks_[s >> shift_][s & mask_]; }

  unsigned shift_;
  std::uint32_t mask_;
  bool release_;
  IdChunks<std::uint32_t> slot_of_{12, false};  // per id: its slot, kReleased once released
  std::vector<std::unique_ptr<T[]>> chunks_;    // slots, 2^shift per chunk
  std::vector<std::uint32_t> free_;             // released slots, reused last first
  std::uint32_t next_slot_ = 0;                 // slots handed out so far (free or held)
  std::uint32_t held_ = 0, peak_held_ = 0;
};

}  // namespace servesim
