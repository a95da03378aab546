// Stable sort-based grouping shared by the embedding and metric kernels:
// equal keys become contiguous segments whose members keep their input
// order, so sums over a segment are reproducible (no atomics on floats).
#pragma once

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "plugin_util.h"

namespace hb_cuda {

// Stable radix sort of (key, value) pairs on the stream; bits [0, end_bit).
template <class K, class V>
cudaError_t sort_pairs(Scratch &scratch, const K *keys_in, K *keys_out,
                       const V *values_in, V *values_out, int64_t n,
                       int end_bit, cudaStream_t s) {
  size_t bytes = 0;
  cudaError_t e =
      cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out,
                                      values_in, values_out, n, 0, end_bit, s);
  if (e != cudaSuccess) return e;
  void *tmp = nullptr;
  if ((e = scratch.alloc_bytes(&tmp, bytes)) != cudaSuccess) return e;
  return cub::DeviceRadixSort::SortPairs(
      tmp, bytes, keys_in, keys_out, values_in, values_out, n, 0, end_bit, s);
}

template <class T>
cudaError_t inclusive_sum(Scratch &scratch, const T *in, T *out, int64_t n,
                          cudaStream_t s) {
  size_t bytes = 0;
  cudaError_t e = cub::DeviceScan::InclusiveSum(nullptr, bytes, in, out, n, s);
  if (e != cudaSuccess) return e;
  void *tmp = nullptr;
  if ((e = scratch.alloc_bytes(&tmp, bytes)) != cudaSuccess) return e;
  return cub::DeviceScan::InclusiveSum(tmp, bytes, in, out, n, s);
}

// out[i] = i (a template so every translation unit has its own copy).
template <class T>
__global__ void iota_kernel(T *out, int64_t n) {
  int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride)
    out[i] = static_cast<T>(i);
}

// Groups n int64 keys: order = positions sorted by (key, position);
// unique/inverse/seg/num_unique as emb_dedup of plugin_api.h describes
// (unique, inverse, seg may be NULL). end_bit 64 for arbitrary int64 keys.
cudaError_t group_keys(Scratch &scratch, const int64_t *keys, int64_t n,
                       int end_bit, int64_t *unique, int64_t *inverse,
                       int64_t *num_unique, int64_t *order, int64_t *seg,
                       cudaStream_t s);

}  // namespace hb_cuda
