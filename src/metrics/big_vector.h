// BigVector<T>: a growable array of trivially copyable T for the exact-AUC
// sample buffers (8-16 bytes per sample, so tens to hundreds of MiB).
// Buffers of 2 MiB and more are 2 MiB-aligned and advised as huge pages:
// first-touch page faults dominated the cost of these buffers with 4 KiB
// pages (about 50 ms per 8 MiB on the project's VMs, 15x less with huge
// pages). Growth is geometric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace hb {
namespace metrics {

void *big_alloc(size_t bytes);  // throws std::bad_alloc
void big_free(void *p);

template <class T>
class BigVector {
  static_assert(std::is_trivially_copyable<T>::value,
                "BigVector holds plain data");

 public:
  BigVector() = default;
  BigVector(const BigVector &o) { assign(o.data_, o.size_); }
  BigVector &operator=(const BigVector &o) {
    if (this != &o) assign(o.data_, o.size_);
    return *this;
  }
  BigVector(BigVector &&o) noexcept { swap(o); }
  BigVector &operator=(BigVector &&o) noexcept {
    swap(o);
    return *this;
  }
  ~BigVector() { big_free(data_); }

  T *data() { return data_; }
  const T *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T &operator[](size_t i) { return data_[i]; }
  const T &operator[](size_t i) const { return data_[i]; }
  T *begin() { return data_; }
  T *end() { return data_ + size_; }
  const T *begin() const { return data_; }
  const T *end() const { return data_ + size_; }

  void clear() { size_ = 0; }
  void swap(BigVector &o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }
  void reserve(size_t n) {
    if (n <= cap_) return;
    size_t cap = cap_ ? cap_ : 1024;
    while (cap < n) cap *= 2;
    T *p = static_cast<T *>(big_alloc(cap * sizeof(T)));
    if (size_) std::memcpy(p, data_, size_ * sizeof(T));
    big_free(data_);
    data_ = p;
    cap_ = cap;
  }
  // New elements are left uninitialized (callers write them).
  void resize(size_t n) {
    reserve(n);
    size_ = n;
  }
  void push_back(const T &x) {
    if (size_ == cap_) reserve(size_ + 1);
    data_[size_++] = x;
  }
  void assign(const T *p, size_t n) {
    resize(n);
    if (n) std::memcpy(data_, p, n * sizeof(T));
  }

 private:
  T *data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
};

}  // namespace metrics
}  // namespace hb
