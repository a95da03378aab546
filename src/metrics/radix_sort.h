// LSD radix sort for the exact AUC paths. One pass builds every byte's
// histogram; passes whose byte is the same for all records are skipped
// (unweighted samples share their weight bytes), so sorting 8-byte sample
// keys usually costs 4-5 passes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hb {
namespace metrics {

// Sorts v ascending by the nbytes-byte unsigned number whose k-th least
// significant byte is byte_of(record, k).
template <class T, class ByteFn>
void radix_sort(std::vector<T> &v, int nbytes, ByteFn byte_of) {
  size_t n = v.size();
  if (n < 2) return;
  std::vector<std::array<size_t, 256>> hist(nbytes);
  for (auto &h : hist) h.fill(0);
  for (const T &x : v)
    for (int k = 0; k < nbytes; ++k) ++hist[k][byte_of(x, k)];
  std::vector<T> tmp(n);
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

inline void radix_sort(std::vector<uint64_t> &keys) {
  radix_sort(keys, 8, [](uint64_t x, int k) { return static_cast<unsigned>((x >> (8 * k)) & 0xff); });
}

}  // namespace metrics
}  // namespace hb
