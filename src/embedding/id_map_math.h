// The layout of a dynamic GPU table's device id -> row map (plugin_api.h:
// emb_idmap_*), shared by the plugin's kernels (cuda/id_map_kernels.cu),
// the host driver (device_id_map.h) and the tests' host DeviceOps: an
// open-addressing table of capacity + 1 slots (capacity a power of two),
// keys[] and vals[] int64. Any int64 is an id, so the empty-key marker
// kEmptyKey (INT64_MIN) gets the extra slot `capacity` instead of a probe
// sequence; every other id probes linearly from its Fibonacci hash.
// vals[s] >= 0 is the row of keys[s]; kNoRow marks a slot without a row.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define HB_IDMAP_HD __host__ __device__
#else
#define HB_IDMAP_HD
#endif

namespace hb {
namespace idmap {

constexpr int64_t kEmptyKey = INT64_MIN;
constexpr int64_t kNoRow = INT64_MIN;
constexpr int64_t kMinCapacity = 16;

// log2 of a power-of-two capacity.
HB_IDMAP_HD inline int capacity_bits(int64_t capacity) {
  int bits = 0;
  while ((int64_t{1} << bits) < capacity) ++bits;
  return bits;
}

// The first slot id probes (the top bits of a multiply mix every input
// bit, so ids that share a residue mod the world size still spread).
HB_IDMAP_HD inline int64_t home_slot(int64_t id, int bits) {
  return static_cast<int64_t>(
      (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

// A slot value that, during one emb_idmap_assign, says "new this call,
// first seen at input position i": larger for smaller i (atomicMax keeps
// the first occurrence) and below every row (>= 0) and above kNoRow.
HB_IDMAP_HD inline int64_t pending(int64_t i) { return -2 - i; }

}  // namespace idmap
}  // namespace hb
