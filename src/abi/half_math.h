// IEEE binary16 and bfloat16 conversions (round to nearest even), as plain
// bit manipulation callable from host and CUDA code: the host collectives
// and embedding wire (abi/dtype.h) and the plugin's wire kernels
// (cuda/embedding_kernels.cu) share this one definition, so a GPU table
// rounds exactly as a host table does.
#pragma once

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define HB_HALF_HD __host__ __device__
#else
#define HB_HALF_HD
#endif

namespace hb {
namespace halfmath {

HB_HALF_HD inline uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (mag >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (mag < 0x38800000u) {
    // Subnormal or zero in half: shift the implicit-one mantissa into place
    // and round to nearest even.
    if (mag < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = mag >> 23;
    uint32_t mant = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 14 + (112 - exp) ... gives 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t h = ((mag - 0x38000000u) >> 13);
  uint32_t rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

HB_HALF_HD inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      exp = 113;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      out = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &out, 4);
  return f;
}

HB_HALF_HD inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

HB_HALF_HD inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

}  // namespace halfmath
}  // namespace hb
