// Deterministic row initializers. A row's value is a pure function of
// (seed, hash of the table name, id, column) through a counter-based
// generator (splitmix64), so every world size, partition and creation
// order produces the same initial table.
#pragma once

#include <cstdint>

#include "embedding/spec.h"

namespace hb {
namespace emb {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Writes the dim initial weights of row `id` into w.
void init_row(const Spec &spec, uint64_t name_hash, int64_t id, float *w);

}  // namespace emb
}  // namespace hb
