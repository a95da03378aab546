#include "abi/dtype.h"

#include "abi/error.h"

namespace hb {

size_t dtype_size_or_throw(hb_dtype dtype, const char *what) {
  size_t s = hb_dtype_size(dtype);
  if (s == 0) fail(HB_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d", what, dtype);
  return s;
}

void check_reduce_op(hb_reduce_op op) {
  if (op < HB_SUM || op > HB_AVG)
    fail(HB_ERR_INVALID_ARGUMENT, "unknown reduce op %d", op);
}

const char *dtype_name(hb_dtype dtype) {
  switch (dtype) {
    case HB_FLOAT32: return "float32";
    case HB_FLOAT64: return "float64";
    case HB_FLOAT16: return "float16";
    case HB_BFLOAT16: return "bfloat16";
    case HB_INT32: return "int32";
    case HB_INT64: return "int64";
    case HB_UINT8: return "uint8";
  }
  return "unknown";
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
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

float half_to_float(uint16_t h) {
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
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace hb

extern "C" size_t hb_dtype_size(hb_dtype dtype) {
  switch (dtype) {
    case HB_FLOAT32: return 4;
    case HB_FLOAT64: return 8;
    case HB_FLOAT16: return 2;
    case HB_BFLOAT16: return 2;
    case HB_INT32: return 4;
    case HB_INT64: return 8;
    case HB_UINT8: return 1;
  }
  return 0;
}
