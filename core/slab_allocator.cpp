#include "core/slab_allocator.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace servesim {
namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kThreshold = 4 * kHugePage;
}  // namespace

void* slab_allocate(std::size_t bytes) {
#if defined(__linux__)
  if (bytes >= kThreshold) {
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure leaves ordinary pages
    return p;
  }
#endif
  return ::operator new(bytes);
}

void slab_deallocate(void* p, std::size_t bytes) noexcept {
#if defined(__linux__)
  if (bytes >= kThreshold) {
    std::free(p);
    return;
  }
#endif
  ::operator delete(p);
}

}  // namespace servesim
