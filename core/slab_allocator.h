// An allocator for the simulator's big per-request slabs (one record per request, millions of
// them): large blocks are aligned to 2 MiB and advised for transparent huge pages, so filling a
// slab takes one page fault per 2 MiB instead of one per 4 KiB (measured: the fault handler was 8%
// of the 1,000-instance benchmark's time). Small blocks and non-Linux systems use operator new.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace servesim {

void* slab_allocate(std::size_t bytes);
void slab_deallocate(void* p, std::size_t bytes) noexcept;

template <class T>
struct SlabAllocator {
  using value_type = T;
  SlabAllocator() = default;
  template <class U>
  SlabAllocator(const SlabAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(slab_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { slab_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const SlabAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using SlabVector = std::vector<T, SlabAllocator<T>>;

}  // namespace servesim
