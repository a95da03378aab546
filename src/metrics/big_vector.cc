#include "metrics/big_vector.h"

#include <sys/mman.h>

#include <cstdlib>

namespace hb {
namespace metrics {

namespace {
constexpr size_t kHuge = size_t(2) << 20;
}

void *big_alloc(size_t bytes) {
  void *p;
  if (bytes >= kHuge) {
    p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
    if (p) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure is fine
  } else {
    p = std::malloc(bytes);
  }
  if (!p) throw std::bad_alloc();
  return p;
}

void big_free(void *p) { std::free(p); }

}  // namespace metrics
}  // namespace hb
