#include "serving/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace hb {
namespace serving {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

size_t rounded(size_t bytes) { return (bytes + kHuge - 1) & ~(kHuge - 1); }

}  // namespace

void *huge_alloc(size_t bytes) {
  if (bytes < kHuge) {
    void *p = std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  // Map one huge page more than needed and trim, so the start is aligned.
  const size_t len = rounded(bytes);
  void *m = ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t a = reinterpret_cast<uintptr_t>(m);
  const uintptr_t start = (a + kHuge - 1) & ~(kHuge - 1);
  if (start > a) ::munmap(m, start - a);
  if (start + len < a + len + kHuge)
    ::munmap(reinterpret_cast<void *>(start + len), a + kHuge - start);
  void *p = reinterpret_cast<void *>(start);
#ifdef MADV_HUGEPAGE
  ::madvise(p, len, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}

void huge_free(void *p, size_t bytes) {
  if (!p) return;
  if (bytes < kHuge)
    std::free(p);
  else
    ::munmap(p, rounded(bytes));
}

}  // namespace serving
}  // namespace hb
