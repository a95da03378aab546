// Element types and reductions shared by collectives, embeddings and the
// GPU plugin: sizes, half-precision conversions, validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "abi/half_math.h"
#include "hb.h"

namespace hb {

// Throws HB_ERR_INVALID_ARGUMENT naming `what` for an unknown dtype / op.
size_t dtype_size_or_throw(hb_dtype dtype, const char *what);
void check_reduce_op(hb_reduce_op op);
const char *dtype_name(hb_dtype dtype);

// IEEE binary16 and bfloat16 conversions, round to nearest even
// (abi/half_math.h, shared with the CUDA plugin).
inline uint16_t float_to_half(float f) { return halfmath::float_to_half(f); }
inline float half_to_float(uint16_t h) { return halfmath::half_to_float(h); }
inline uint16_t float_to_bf16(float f) { return halfmath::float_to_bf16(f); }
inline float bf16_to_float(uint16_t h) { return halfmath::bf16_to_float(h); }

}  // namespace hb
