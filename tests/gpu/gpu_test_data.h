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

template <class T>
T load(const uint8_t *p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

inline double element(const std::vector<uint8_t> &buf, hb_dtype dtype,
                      size_t i) {
  const uint8_t *p = &buf[i * hb_dtype_size(dtype)];
  switch (dtype) {
    case HB_FLOAT32:
      return load<float>(p);
    case HB_FLOAT64:
      return load<double>(p);
    case HB_FLOAT16:
      return hb::half_to_float(load<uint16_t>(p));
    case HB_BFLOAT16:
      return hb::bf16_to_float(load<uint16_t>(p));
    case HB_INT32:
      return load<int32_t>(p);
    case HB_INT64:
      return static_cast<double>(load<int64_t>(p));
    case HB_UINT8:
      return *p;
  }
  return 0;
}

inline const hb_dtype kAllDtypes[] = {HB_UINT8,   HB_INT32,    HB_INT64,
                                      HB_FLOAT16, HB_BFLOAT16, HB_FLOAT32,
                                      HB_FLOAT64};

// op over get(0..w-1), with add and mul supplied per number type.
template <class T, class Get, class Add, class Mul>
T fold(size_t w, hb_reduce_op op, Get get, Add add, Mul mul) {
  T acc = get(0);
  for (size_t r = 1; r < w; ++r) {
    T x = get(r);
    if (op == HB_SUM || op == HB_AVG) acc = add(acc, x);
    if (op == HB_PROD) acc = mul(acc, x);
    if (op == HB_MIN) acc = x < acc ? x : acc;
    if (op == HB_MAX) acc = x > acc ? x : acc;
  }
  return acc;
}

// Host reference of op over the ranks' element i: integers in 64-bit two's
// complement truncated to the dtype's width (as the device wraps), avg
// truncating toward zero; floats in double (exact for these small values
// except avg, which callers compare with a tolerance).
inline double reduce_ref(const std::vector<std::vector<uint8_t>> &per_rank,
                         hb_dtype dt, hb_reduce_op op, size_t i) {
  size_t w = per_rank.size();
  if (dt != HB_INT32 && dt != HB_INT64 && dt != HB_UINT8) {
    double acc = fold<double>(
        w, op, [&](size_t r) { return element(per_rank[r], dt, i); },
        [](double a, double b) { return a + b; },
        [](double a, double b) { return a * b; });
    return op == HB_AVG ? acc / static_cast<double>(w) : acc;
  }
  auto wrap = [&](uint64_t u) -> int64_t {
    if (dt == HB_UINT8) return static_cast<uint8_t>(u);
    if (dt == HB_INT32) return static_cast<int32_t>(static_cast<uint32_t>(u));
    return static_cast<int64_t>(u);
  };
  int64_t acc = fold<int64_t>(
      w, op,
      [&](size_t r) {
        return static_cast<int64_t>(element(per_rank[r], dt, i));
      },
      [&](int64_t a, int64_t b) { return wrap(uint64_t(a) + uint64_t(b)); },
      [&](int64_t a, int64_t b) { return wrap(uint64_t(a) * uint64_t(b)); });
  if (op == HB_AVG) acc /= static_cast<int64_t>(w);  // truncates toward zero
  return static_cast<double>(acc);
}

}  // namespace hb_test
