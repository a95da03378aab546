// 64-bit FNV-1a: fingerprints of names and configurations.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hb {

const uint64_t kFnvBasis = 0xcbf29ce484222325ull;

// Continues the hash h over n more bytes (h = kFnvBasis to start).
inline uint64_t fnv1a64(const void *data, size_t n, uint64_t h = kFnvBasis) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace hb
