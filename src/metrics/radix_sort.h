// LSD radix sort for the exact AUC paths. One pass builds every byte's
// histogram; passes whose byte is the same for all records are skipped
// (unweighted samples share their weight bytes), so sorting 8-byte sample
// keys usually costs 4-5 passes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "metrics/big_vector.h"

namespace hb {
namespace metrics {

// Sorts v ascending by the nbytes-byte unsigned number whose k-th least
// significant byte is byte_of(record, k); tmp is scratch space (kept by the
// caller so repeated sorts reuse it).
template <class T, class ByteFn>
void radix_sort(BigVector<T> &v, BigVector<T> &tmp, int nbytes,
                ByteFn byte_of) {
  size_t n = v.size();
  if (n < 2) return;
  std::array<std::array<size_t, 256>, 16> hist;
  for (auto &h : hist) h.fill(0);
  for (const T &x : v)
    for (int k = 0; k < nbytes; ++k) ++hist[k][byte_of(x, k)];  // nbytes <= 16
  tmp.resize(n);
  for (int k = 0; k < nbytes; ++k) {
    auto &h = hist[k];
    if (h[byte_of(v[0], k)] == n) continue;  // this byte never varies
    size_t offset[256];
    size_t run = 0;
    for (int d = 0; d < 256; ++d) {
      offset[d] = run;
      run += h[d];
    }
    for (const T &x : v) tmp[offset[byte_of(x, k)]++] = x;
    v.swap(tmp);
  }
}

inline void radix_sort(BigVector<uint64_t> &keys, BigVector<uint64_t> &tmp) {
  radix_sort(keys, tmp, 8, [](uint64_t x, int k) {
    return static_cast<unsigned>((x >> (8 * k)) & 0xff);
  });
}

}  // namespace metrics
}  // namespace hb
