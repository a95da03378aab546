// Filling a caller's growable struct (CONTRACT: structs start with
// size_t struct_size): only min(out->struct_size, sizeof *out) bytes are
// written, and struct_size then says how many, so an older caller's
// shorter struct is never overrun.
#pragma once

#include <algorithm>
#include <cstring>

namespace hb {

template <typename T>
void copy_struct_out(const T &r, T *out) {
  const size_t n = std::min(out->struct_size, sizeof r);
  std::memcpy(out, &r, n);
  out->struct_size = n;
}

}  // namespace hb
