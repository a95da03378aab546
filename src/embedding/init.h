// Deterministic row initializers (the arithmetic: init_math.h, shared with
// the GPU tables' kernels). A row's value is a pure function of (seed, hash
// of the table name, id, column), so every world size, partition and
// creation order produces the same initial table.
#pragma once

#include <cstdint>

#include "embedding/init_math.h"
#include "embedding/spec.h"

namespace hb {
namespace emb {

using initmath::splitmix64;

inline initmath::Params init_params(const Spec &spec, uint64_t name_hash) {
  return initmath::make_params(spec.initializer, spec.init_a, spec.init_b,
                               spec.seed, name_hash);
}

// Writes the dim initial weights of row `id` into w.
void init_row(const Spec &spec, uint64_t name_hash, int64_t id, float *w);

}  // namespace emb
}  // namespace hb
