// Little-endian byte writer / bounds-checked reader for serialized metric
// states. A short or malformed buffer is HB_ERR_CORRUPT naming the offset.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "abi/error.h"
#include "metrics/big_vector.h"
#include "metrics/exact_sum.h"

namespace hb {
namespace metrics {

// Serialized states can be hundreds of MiB (exact AUC): BigVector.
using Bytes = BigVector<unsigned char>;

class Writer {
 public:
  explicit Writer(Bytes *out) : out_(out) {}
  void u32(uint32_t v) { put(&v, sizeof v); }
  void i32(int32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  void i64(int64_t v) { put(&v, sizeof v); }
  void f64(double v) { put(&v, sizeof v); }
  void sum(const ExactSum &s) {
    size_t at = out_->size();
    out_->resize(at + ExactSum::kWireBytes);
    s.write(out_->data() + at);
  }
  void bytes(const void *p, size_t n) { put(p, n); }
  // A count, then the elements' bytes.
  template <class T>
  void array(const BigVector<T> &v) {
    u64(v.size());
    bytes(v.data(), v.size() * sizeof(T));
  }

 private:
  // The library targets little-endian hosts (x86-64, aarch64).
  void put(const void *p, size_t n) {
    size_t at = out_->size();
    out_->resize(at + n);
    if (n) std::memcpy(out_->data() + at, p, n);
  }
  Bytes *out_;
};

class Reader {
 public:
  Reader(const unsigned char *data, size_t size, std::string what)
      : data_(data), size_(size), what_(std::move(what)) {}
  uint32_t u32() { return get<uint32_t>(); }
  int32_t i32() { return get<int32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  int64_t i64() { return get<int64_t>(); }
  double f64() { return get<double>(); }
  void sum(ExactSum *s) {
    need(ExactSum::kWireBytes);
    if (!s->read(data_ + pos_))
      fail(HB_ERR_CORRUPT, "%s: malformed exact sum at byte offset %zu",
           what_.c_str(), pos_);
    pos_ += ExactSum::kWireBytes;
  }
  // A count of elements of elem_size bytes that must fit in what is left.
  uint64_t count(size_t elem_size) {
    uint64_t n = u64();
    if (elem_size && n > (size_ - pos_) / elem_size)
      fail(HB_ERR_CORRUPT,
           "%s: count %llu at byte offset %zu exceeds the %zu bytes left",
           what_.c_str(), static_cast<unsigned long long>(n), pos_ - 8,
           size_ - pos_);
    return n;
  }
  void bytes(void *p, size_t n) {
    need(n);
    if (n) std::memcpy(p, data_ + pos_, n);
    pos_ += n;
  }
  // Appends an array written by Writer::array to v.
  template <class T>
  void append_array(BigVector<T> *v) {
    uint64_t n = count(sizeof(T));
    size_t at = v->size();
    v->resize(at + n);
    bytes(v->data() + at, n * sizeof(T));
  }
  void expect_end() const {
    if (pos_ != size_)
      fail(HB_ERR_CORRUPT, "%s: %zu trailing bytes at byte offset %zu",
           what_.c_str(), size_ - pos_, pos_);
  }
  size_t offset() const { return pos_; }
  const std::string &what() const { return what_; }

 private:
  template <class T>
  T get() {
    T v;
    bytes(&v, sizeof v);
    return v;
  }
  void need(size_t n) const {
    if (n > size_ - pos_)
      fail(HB_ERR_CORRUPT,
           "%s: truncated at byte offset %zu (need %zu bytes, %zu left)",
           what_.c_str(), pos_, n, size_ - pos_);
  }
  const unsigned char *data_;
  size_t size_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace metrics
}  // namespace hb
