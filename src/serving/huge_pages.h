// An allocator for a serving replica's big arrays: allocations of 2 MiB or
// more are 2 MiB-aligned anonymous mappings advised to use transparent huge
// pages. A lookup reads one random row of a table of tens of MB: with 4 KiB
// pages each read is also a TLB miss and a page walk, which a caller that
// cannot overlap calls (JNI, cgo) pays in full; 2 MiB pages keep the whole
// table within the TLB. Where THP is off, the advice is ignored and this is
// a plain aligned mapping.
#pragma once

#include <cstddef>
#include <new>

namespace hb {
namespace serving {

void *huge_alloc(size_t bytes);
void huge_free(void *p, size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U> &) {}
  T *allocate(size_t n) { return static_cast<T *>(huge_alloc(n * sizeof(T))); }
  void deallocate(T *p, size_t n) { huge_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U> &) const {
    return true;
  }
  template <class U>
  bool operator!=(const HugePageAllocator<U> &) const {
    return false;
  }
};

}  // namespace serving
}  // namespace hb
