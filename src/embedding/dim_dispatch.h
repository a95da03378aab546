// Calls a loop body with the row width as a compile-time constant for the
// common dims, so per-id loops over rows unroll and vectorise without a
// remainder or a per-row call (memcpy of a run-time length, say); other
// dims get 0: the callee then reads the width at run time.
#pragma once

#include <cstdint>
#include <type_traits>

namespace hb {
namespace emb {

template <int kDim>
using DimConst = std::integral_constant<int, kDim>;

// fn(DimConst<dim>()) for dim in {1, 2, 4, 8, 16, 32, 64}, else
// fn(DimConst<0>()).
template <class F>
inline void with_dim(int64_t dim, F &&fn) {
  switch (dim) {
    case 1:
      return fn(DimConst<1>());
    case 2:
      return fn(DimConst<2>());
    case 4:
      return fn(DimConst<4>());
    case 8:
      return fn(DimConst<8>());
    case 16:
      return fn(DimConst<16>());
    case 32:
      return fn(DimConst<32>());
    case 64:
      return fn(DimConst<64>());
    default:
      return fn(DimConst<0>());
  }
}

// A row of -0.0f as wide as the widest constant dim: adding a row to it
// assigns that row's bits (-0.0f + x == x for every x, signed zeros
// included; +0.0f + -0.0f would not), so a per-id loop can assign or add
// without a branch on which (select_row).
struct NegZeroRow {
  alignas(64) float v[64];
  constexpr NegZeroRow() : v() {
    for (float &x : v) x = -0.0f;
  }
};
inline constexpr NegZeroRow kNegZeroRow;

// first (0 or 1) ? kNegZeroRow.v : d, with a mask: "first ? a : b" became
// a branch again (dim 1) or per-lane blends (dim 8) under GCC. Whether an
// id is new follows the data (skewed ids: close to a coin toss), so a
// branch on it mispredicts often.
inline const float *select_row(const float *d, uint32_t first) {
  const uintptr_t m = uintptr_t{0} - first;
  return reinterpret_cast<const float *>(
      (reinterpret_cast<uintptr_t>(kNegZeroRow.v) & m) |
      (reinterpret_cast<uintptr_t>(d) & ~m));
}

}  // namespace emb
}  // namespace hb
