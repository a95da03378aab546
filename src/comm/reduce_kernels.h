// Element-wise reductions and the conversions around them.
//
// Reductions run on a "wire" type: float16 and bfloat16 are widened to
// float32 while being packed (so a sum over many ranks is rounded once, at
// the end, instead of once per step); every other dtype reduces as itself,
// except for HB_AVG of integers, where uint8 travels as int32 and int32 as
// int64 so the sum is exact. HB_AVG is that sum divided by the world size in
// unpack(): floating types divide, integer types truncate toward zero (C
// division), as hb.h documents. int64 sums (and SUM/PROD of any integer
// type) wrap modulo 2^bits, as NCCL's do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hb.h"

namespace hb {
namespace comm {

hb_dtype wire_dtype(hb_dtype dtype, hb_reduce_op op);
inline size_t wire_size(hb_dtype dtype, hb_reduce_op op) {
  return hb_dtype_size(wire_dtype(dtype, op));
}

// n elements of dtype at in -> wire representation at out (may alias when
// the wire type is the dtype itself, then nothing is copied).
void pack(const void *in, hb_dtype dtype, hb_reduce_op op, void *out, size_t n);
// n wire elements at in -> dtype at out, dividing by world for HB_AVG.
void unpack(const void *in, hb_dtype dtype, hb_reduce_op op, int world,
            void *out, size_t n);

// acc[i] = op(acc[i], in[i]) on the wire type (HB_AVG reduces as HB_SUM).
using ReduceFn = void (*)(void *acc, const void *in, size_t n);
// out[i] = op(a[i], b[i]); out may be a or b itself (exactly, not partly).
// Every op is commutative bit for bit (min/max of NaN and of signed zeros
// included), so the result never depends on which operand is which.
using CombineFn = void (*)(void *out, const void *a, const void *b, size_t n);
struct OpKernels {
  ReduceFn acc;
  CombineFn combine;
};
OpKernels op_kernels(hb_dtype wire, hb_reduce_op op);

// Typed kernels (used to instantiate Gloo's templated algorithms).
template <class T>
struct Kernels {
  static void sum(T *x, const T *y, size_t n);
  static void prod(T *x, const T *y, size_t n);
  static void min(T *x, const T *y, size_t n);
  static void max(T *x, const T *y, size_t n);
  // out = op(a, b) on buffers that do not overlap.
  static void sum3(T *__restrict out, const T *__restrict a,
                   const T *__restrict b, size_t n);
  static void prod3(T *__restrict out, const T *__restrict a,
                    const T *__restrict b, size_t n);
  static void min3(T *__restrict out, const T *__restrict a,
                   const T *__restrict b, size_t n);
  static void max3(T *__restrict out, const T *__restrict a,
                   const T *__restrict b, size_t n);
};

}  // namespace comm
}  // namespace hb
