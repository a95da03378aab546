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

}  // namespace emb
}  // namespace hb
