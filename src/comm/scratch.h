// A reusable, 64-byte aligned working buffer: grows (to the next power of
// two) but never shrinks, so steady-state collectives allocate nothing.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace hb {
namespace comm {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { std::free(ptr_); }

  // At least `bytes` usable bytes; the pointer changes only when it grows
  // (to the next power of two, or to exactly `bytes` rounded to 64 for a
  // buffer whose size is fixed).
  char *ensure(size_t bytes, bool exact = false) {
    if (bytes <= cap_ && ptr_) return ptr_;
    size_t cap = 4096;
    if (exact)
      cap = (bytes + 63) / 64 * 64;
    else
      while (cap < bytes) cap *= 2;
    void *p = std::aligned_alloc(64, cap);
    if (!p) throw std::bad_alloc();
    std::free(ptr_);
    ptr_ = static_cast<char *>(p);
    cap_ = cap;
    return ptr_;
  }
  char *data() const { return ptr_; }

 private:
  char *ptr_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace comm
}  // namespace hb
