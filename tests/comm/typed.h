// Test helpers: element values of any hb dtype as doubles, and the
// reference results the collectives must reproduce.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "abi/dtype.h"
#include "hb.h"

namespace hb {
namespace test {

inline const hb_dtype kAllDtypes[] = {HB_FLOAT32,  HB_FLOAT64, HB_FLOAT16,
                                      HB_BFLOAT16, HB_INT32,   HB_INT64,
                                      HB_UINT8};
inline const hb_reduce_op kAllOps[] = {HB_SUM, HB_PROD, HB_MIN, HB_MAX, HB_AVG};

inline bool is_float(hb_dtype t) {
  return t == HB_FLOAT32 || t == HB_FLOAT64 || t == HB_FLOAT16 ||
         t == HB_BFLOAT16;
}

inline void put(hb_dtype t, void *base, size_t i, double v) {
  switch (t) {
    case HB_FLOAT32:
      static_cast<float *>(base)[i] = static_cast<float>(v);
      break;
    case HB_FLOAT64:
      static_cast<double *>(base)[i] = v;
      break;
    case HB_FLOAT16:
      static_cast<uint16_t *>(base)[i] = float_to_half(static_cast<float>(v));
      break;
    case HB_BFLOAT16:
      static_cast<uint16_t *>(base)[i] = float_to_bf16(static_cast<float>(v));
      break;
    case HB_INT32:
      static_cast<int32_t *>(base)[i] = static_cast<int32_t>(v);
      break;
    case HB_INT64:
      static_cast<int64_t *>(base)[i] = static_cast<int64_t>(v);
      break;
    case HB_UINT8:
      static_cast<uint8_t *>(base)[i] = static_cast<uint8_t>(v);
      break;
  }
}

inline double get(hb_dtype t, const void *base, size_t i) {
  switch (t) {
    case HB_FLOAT32:
      return static_cast<const float *>(base)[i];
    case HB_FLOAT64:
      return static_cast<const double *>(base)[i];
    case HB_FLOAT16:
      return half_to_float(static_cast<const uint16_t *>(base)[i]);
    case HB_BFLOAT16:
      return bf16_to_float(static_cast<const uint16_t *>(base)[i]);
    case HB_INT32:
      return static_cast<const int32_t *>(base)[i];
    case HB_INT64:
      return static_cast<double>(static_cast<const int64_t *>(base)[i]);
    case HB_UINT8:
      return static_cast<const uint8_t *>(base)[i];
  }
  return NAN;
}

// Deterministic input of `rank` at index i, chosen so every op's exact
// result is representable in every dtype (small integers).
inline double input(int rank, size_t i, hb_reduce_op op, hb_dtype t) {
  const bool unsig = t == HB_UINT8;
  if (op == HB_PROD) {
    double v = static_cast<double>((rank + i) % 3 + 1);
    if (!unsig && i % 5 == 0 && rank == 1) v = -v;
    return v;
  }
  double v = static_cast<double>((rank * 7 + i * 3) % 11);
  return unsig ? v * 20 : v - 5;  // uint8 sums exceed 255: exercises wrap / avg
}

// The value every rank must hold after reducing x[0..n) with op, in dtype t.
inline double reference(const std::vector<double> &x, hb_reduce_op op,
                        hb_dtype t) {
  double acc = x[0];
  for (size_t r = 1; r < x.size(); ++r) {
    switch (op) {
      case HB_SUM:
      case HB_AVG:
        acc += x[r];
        break;
      case HB_PROD:
        acc *= x[r];
        break;
      case HB_MIN:
        acc = std::min(acc, x[r]);
        break;
      case HB_MAX:
        acc = std::max(acc, x[r]);
        break;
    }
  }
  const double n = static_cast<double>(x.size());
  if (op == HB_AVG) {
    switch (t) {
      case HB_FLOAT64:
        return acc / n;
      case HB_FLOAT32:
      case HB_FLOAT16:
      case HB_BFLOAT16:
        return static_cast<float>(acc) / static_cast<float>(n);
      default:
        return std::trunc(acc / n);  // exact sum, C truncation
    }
  }
  if (t == HB_UINT8)
    return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(acc)));
  return acc;
}

// Round a double through dtype t (what a buffer of t would hold).
inline double through(hb_dtype t, double v) {
  unsigned char tmp[8];
  put(t, tmp, 0, v);
  return get(t, tmp, 0);
}

}  // namespace test
}  // namespace hb
