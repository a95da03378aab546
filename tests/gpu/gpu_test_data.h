// Test data for the GPU collective tests, independent of GoogleTest: small
// integer values exact in every dtype, and a host reference of every
// reduction (integers wrap as two's complement, as on the device).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "abi/dtype.h"

namespace hb_test {

// count elements of dtype with small integer values (exact in every dtype
// and in sums of a few ranks), as raw bytes. Different per seed.
inline std::vector<uint8_t> small_ints(hb_dtype dtype, size_t count,
                                       uint32_t seed) {
  size_t es = hb_dtype_size(dtype);
  std::vector<uint8_t> out(count * es);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    int v = static_cast<int>(rng() % 9);  // 0..8
    uint8_t *dst = &out[i * es];
    switch (dtype) {
      case HB_FLOAT32: {
        float f = static_cast<float>(v - 4);
        std::memcpy(dst, &f, 4);
        break;
      }
      case HB_FLOAT64: {
        double d = v - 4;
        std::memcpy(dst, &d, 8);
        break;
      }
      case HB_FLOAT16: {
        uint16_t h = hb::float_to_half(static_cast<float>(v - 4));
        std::memcpy(dst, &h, 2);
        break;
      }
      case HB_BFLOAT16: {
        uint16_t h = hb::float_to_bf16(static_cast<float>(v - 4));
        std::memcpy(dst, &h, 2);
        break;
      }
      case HB_INT32: {
        int32_t x = v * 1000 - 4000;
        std::memcpy(dst, &x, 4);
        break;
      }
      case HB_INT64: {
        int64_t x = (int64_t{v} << 40) - 3;
        std::memcpy(dst, &x, 8);
        break;
      }
      case HB_UINT8: {
        uint8_t x = static_cast<uint8_t>(v * 7);
        *dst = x;
        break;
      }
    }
  }
  return out;
}

inline double element(const std::vector<uint8_t> &buf, hb_dtype dtype,
                      size_t i) {
  const uint8_t *p = &buf[i * hb_dtype_size(dtype)];
  switch (dtype) {
    case HB_FLOAT32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case HB_FLOAT64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case HB_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return hb::half_to_float(h);
    }
    case HB_BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return hb::bf16_to_float(h);
    }
    case HB_INT32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case HB_INT64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case HB_UINT8:
      return *p;
  }
  return 0;
}

inline const hb_dtype kAllDtypes[] = {HB_UINT8,   HB_INT32,    HB_INT64,
                                      HB_FLOAT16, HB_BFLOAT16, HB_FLOAT32,
                                      HB_FLOAT64};

// Host reference of op over the ranks' element i (integers in 64-bit
// two's complement, truncated to the dtype's width on return; floats in
// double: exact for these small values except avg, which callers compare
// with a tolerance).
inline double reduce_ref(const std::vector<std::vector<uint8_t>> &per_rank,
                         hb_dtype dt, hb_reduce_op op, size_t i) {
  bool is_int = dt == HB_INT32 || dt == HB_INT64 || dt == HB_UINT8;
  size_t w = per_rank.size();
  if (!is_int) {
    double acc = element(per_rank[0], dt, i);
    for (size_t r = 1; r < w; ++r) {
      double x = element(per_rank[r], dt, i);
      switch (op) {
        case HB_SUM:
        case HB_AVG:
          acc += x;
          break;
        case HB_PROD:
          acc *= x;
          break;
        case HB_MIN:
          acc = x < acc ? x : acc;
          break;
        case HB_MAX:
          acc = x > acc ? x : acc;
          break;
      }
    }
    return op == HB_AVG ? acc / static_cast<double>(w) : acc;
  }
  auto get = [&](size_t r) -> int64_t {
    const uint8_t *p = &per_rank[r][i * hb_dtype_size(dt)];
    if (dt == HB_UINT8) return *p;
    if (dt == HB_INT32) {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    int64_t x;
    std::memcpy(&x, p, 8);
    return x;
  };
  auto wrap = [&](uint64_t u) -> int64_t {
    if (dt == HB_UINT8) return static_cast<uint8_t>(u);
    if (dt == HB_INT32) return static_cast<int32_t>(static_cast<uint32_t>(u));
    return static_cast<int64_t>(u);
  };
  int64_t acc = get(0);
  for (size_t r = 1; r < w; ++r) {
    int64_t x = get(r);
    switch (op) {
      case HB_SUM:
      case HB_AVG:
        acc = wrap(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
        break;
      case HB_PROD:
        acc = wrap(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x));
        break;
      case HB_MIN:
        acc = x < acc ? x : acc;
        break;
      case HB_MAX:
        acc = x > acc ? x : acc;
        break;
    }
  }
  if (op == HB_AVG) acc /= static_cast<int64_t>(w);  // truncates toward zero
  return static_cast<double>(acc);
}

}  // namespace hb_test
