// Element types and reductions shared by collectives, embeddings and the
// GPU plugin: sizes, half-precision conversions, validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hb.h"

namespace hb {

// Throws HB_ERR_INVALID_ARGUMENT naming `what` for an unknown dtype / op.
size_t dtype_size_or_throw(hb_dtype dtype, const char *what);
void check_reduce_op(hb_reduce_op op);
const char *dtype_name(hb_dtype dtype);

// IEEE binary16 and bfloat16 conversions, round to nearest even.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace hb
