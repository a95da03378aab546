#include "sort_util.cuh"

namespace hb_cuda {

namespace {

__global__ void head_flags_kernel(const int64_t *sorted, int64_t n,
                                  int64_t *flags) {
  int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       j < n; j += stride)
    flags[j] = (j == 0 || sorted[j] != sorted[j - 1]) ? 1 : 0;
}

// scan[j] = 1 + index of the segment of sorted position j.
__global__ void scatter_groups_kernel(const int64_t *sorted,
                                      const int64_t *positions,
                                      const int64_t *scan, int64_t n,
                                      int64_t *unique, int64_t *inverse,
                                      int64_t *seg, int64_t *num_unique) {
  int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       j < n; j += stride) {
    int64_t u = scan[j] - 1;
    bool head = j == 0 || scan[j] != scan[j - 1];
    if (inverse) inverse[positions[j]] = u;
    if (head) {
      if (unique) unique[u] = sorted[j];
      if (seg) seg[u] = j;
    }
    if (j == n - 1) {
      *num_unique = u + 1;
      if (seg) seg[u + 1] = n;
    }
  }
}

}  // namespace

cudaError_t group_keys(Scratch &scratch, const int64_t *keys, int64_t n,
                       int end_bit, int64_t *unique, int64_t *inverse,
                       int64_t *num_unique, int64_t *order, int64_t *seg,
                       cudaStream_t s) {
  cudaError_t e;
  if (n == 0) {
    if ((e = cudaMemsetAsync(num_unique, 0, sizeof(int64_t), s)) != cudaSuccess)
      return e;
    return seg ? cudaMemsetAsync(seg, 0, sizeof(int64_t), s) : cudaSuccess;
  }
  int64_t *pos_in, *pos_out, *sorted, *scan;
  if ((e = scratch.alloc(&pos_in, n)) != cudaSuccess ||
      (e = scratch.alloc(&sorted, n)) != cudaSuccess ||
      (e = scratch.alloc(&scan, n)) != cudaSuccess)
    return e;
  pos_out = order;
  if (!pos_out && (e = scratch.alloc(&pos_out, n)) != cudaSuccess) return e;
  unsigned g = grid_for(static_cast<size_t>(n), 256);
  iota_kernel<<<g, 256, 0, s>>>(pos_in, n);
  if ((e = sort_pairs(scratch, keys, sorted, pos_in, pos_out, n, end_bit, s)) !=
      cudaSuccess)
    return e;
  // The flags reuse pos_in (no longer needed once sorted).
  head_flags_kernel<<<g, 256, 0, s>>>(sorted, n, pos_in);
  if ((e = inclusive_sum(scratch, pos_in, scan, n, s)) != cudaSuccess) return e;
  scatter_groups_kernel<<<g, 256, 0, s>>>(sorted, pos_out, scan, n, unique,
                                          inverse, seg, num_unique);
  return cudaGetLastError();
}

}  // namespace hb_cuda
