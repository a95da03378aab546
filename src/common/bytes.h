// Bounds-checked little-endian reads from a file image: every overrun is
// HB_ERR_CORRUPT naming the file and the byte offset; and put(), the
// writing side.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "abi/error.h"

namespace hb {

class ByteReader {
 public:
  ByteReader(const std::string &data, std::string what)
      : data_(data), what_(std::move(what)) {}
  const char *take(size_t n, const char *field) {
    if (n > data_.size() - pos_)
      fail(HB_ERR_CORRUPT,
           "%s: truncated at byte %zu reading %s (%zu bytes needed, %zu left)",
           what_.c_str(), pos_, field, n, data_.size() - pos_);
    const char *p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <class T>
  T get(const char *field) {
    T v;
    std::memcpy(&v, take(sizeof v, field), sizeof v);
    return v;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return data_.size() - pos_; }
  const std::string &what() const { return what_; }

 private:
  const std::string &data_;
  std::string what_;
  size_t pos_ = 0;
};

// Appends v's bytes (host order, as ByteReader::get reads them).
template <class T>
void put(std::string *out, T v) {
  out->append(reinterpret_cast<const char *>(&v), sizeof v);
}

}  // namespace hb
