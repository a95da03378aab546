// Rows and gradients on the wire: float32, or rounded (to nearest even) to
// float16 / bfloat16. Storage stays float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "abi/dtype.h"

namespace hb {
namespace emb {

inline size_t wire_size(hb_dtype d) { return d == HB_FLOAT32 ? 4 : 2; }

inline void wire_encode(const float *src, size_t n, hb_dtype d, void *dst) {
  if (n == 0) return;  // empty buffers may be null
  if (d == HB_FLOAT32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  uint16_t *o = static_cast<uint16_t *>(dst);
  if (d == HB_FLOAT16)
    for (size_t i = 0; i < n; ++i) o[i] = float_to_half(src[i]);
  else
    for (size_t i = 0; i < n; ++i) o[i] = float_to_bf16(src[i]);
}

inline void wire_decode(const void *src, size_t n, hb_dtype d, float *dst) {
  if (n == 0) return;
  if (d == HB_FLOAT32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  const uint16_t *in = static_cast<const uint16_t *>(src);
  if (d == HB_FLOAT16)
    for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(in[i]);
  else
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(in[i]);
}

}  // namespace emb
}  // namespace hb
