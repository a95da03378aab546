// Kernels of a GPU table's step plan (src/embedding/device_plan.h): with
// emb_dedup and emb_partition_bounded they build, on the device, the plan
// the host table builds (src/embedding/plan.h): distinct ids in
// first-occurrence order, bucketed by owner with a stable order, and the
// send slot of every input position. Counts stay on the device (bounds
// passed as device int64), so only the per-peer counts reach the host.
#include "plugin_entries.h"
#include "sort_util.cuh"

namespace hb_cuda {
namespace {

constexpr unsigned kBlock = 256;

// The first position of ids[i]'s segment: order is sorted by (id,
// position), so the segment's first entry is the id's first occurrence.
__device__ int64_t first_of(const int64_t *inverse, const int64_t *order,
                            const int64_t *seg, int64_t i) {
  return order[seg[inverse[i]]];
}

__global__ void first_flags_kernel(const int64_t *inverse, const int64_t *order,
                                   const int64_t *seg, int64_t n,
                                   int64_t *flags) {
  HB_GRID_STRIDE(i, n) { flags[i] = first_of(inverse, order, seg, i) == i; }
}

// scan[i] = first occurrences among positions 0..i, so the id first seen
// at position f is number scan[f] - 1 in first-occurrence order.
__global__ void first_scatter_kernel(const int64_t *ids, const int64_t *inverse,
                                     const int64_t *order, const int64_t *seg,
                                     const int64_t *scan, int64_t n,
                                     int64_t *unique, int64_t *first_inverse) {
  HB_GRID_STRIDE(i, n) {
    int64_t f = first_of(inverse, order, seg, i);
    first_inverse[i] = scan[f] - 1;
    if (f == i) unique[scan[i] - 1] = ids[i];
  }
}

__global__ void send_ids_kernel(const int64_t *unique, const int64_t *order,
                                const int64_t *num_unique, int64_t n,
                                int64_t *send_ids, int64_t *slot_of) {
  const int64_t k = *num_unique < n ? *num_unique : n;
  HB_GRID_STRIDE(j, k) {
    send_ids[j] = unique[order[j]];
    slot_of[order[j]] = j;
  }
}

__global__ void slots_kernel(const int64_t *slot_of, const int64_t *inverse,
                             int64_t n, int64_t *slots) {
  HB_GRID_STRIDE(i, n) { slots[i] = slot_of[inverse[i]]; }
}

__global__ void set_kernel(int64_t *p, int64_t v) { *p = v; }

__global__ void out_of_range_kernel(const int64_t *ids, int64_t n,
                                    int64_t num_rows,
                                    unsigned long long *first_bad) {
  HB_GRID_STRIDE(i, n) {
    if (ids[i] < 0 || ids[i] >= num_rows)
      atomicMin(first_bad, static_cast<unsigned long long>(i));  // exact
  }
}

__global__ void local_rows_kernel(const int64_t *ids, int64_t n,
                                  const int64_t *num_ids, int32_t world,
                                  int32_t mode, int64_t rows_per_shard,
                                  int64_t *rows) {
  const int64_t k = num_ids && *num_ids < n ? *num_ids : n;
  HB_GRID_STRIDE(i, k) {
    rows[i] = mode == HB_CUDA_PARTITION_DIV ? ids[i] % rows_per_shard
                                            : ids[i] / world;
  }
}

}  // namespace

int32_t emb_first_occurrence(const int64_t *ids, size_t n,
                             const int64_t *inverse, const int64_t *order,
                             const int64_t *seg, int64_t *unique,
                             int64_t *first_inverse, void *stream, char *errbuf,
                             size_t errcap) {
  if (n == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  Scratch scratch(s);
  int64_t nn = static_cast<int64_t>(n), *flags = nullptr, *scan = nullptr;
  HB_CUDA_TRY(scratch.alloc(&flags, n), "emb_first_occurrence: scratch");
  HB_CUDA_TRY(scratch.alloc(&scan, n), "emb_first_occurrence: scratch");
  unsigned g = grid_for(n, kBlock);
  first_flags_kernel<<<g, kBlock, 0, s>>>(inverse, order, seg, nn, flags);
  HB_CUDA_TRY(inclusive_sum(scratch, flags, scan, nn, s),
              "emb_first_occurrence: scan");
  first_scatter_kernel<<<g, kBlock, 0, s>>>(ids, inverse, order, seg, scan, nn,
                                            unique, first_inverse);
  return launch_status("emb_first_occurrence", errbuf, errcap);
}

int32_t emb_send_slots(const int64_t *unique, const int64_t *order,
                       const int64_t *num_unique, const int64_t *inverse,
                       size_t n, int64_t *send_ids, int64_t *slots,
                       void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(num_unique, "emb_send_slots: num_unique is NULL");
  if (n == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  Scratch scratch(s);
  int64_t nn = static_cast<int64_t>(n), *slot_of = nullptr;
  HB_CUDA_TRY(scratch.alloc(&slot_of, n), "emb_send_slots: scratch");
  unsigned g = grid_for(n, kBlock);
  send_ids_kernel<<<g, kBlock, 0, s>>>(unique, order, num_unique, nn, send_ids,
                                       slot_of);
  slots_kernel<<<g, kBlock, 0, s>>>(slot_of, inverse, nn, slots);
  return launch_status("emb_send_slots", errbuf, errcap);
}

int32_t emb_find_out_of_range(const int64_t *ids, size_t n, int64_t num_rows,
                              int64_t *first_bad, void *stream, char *errbuf,
                              size_t errcap) {
  HB_CUDA_CHECK_ARG(first_bad, "emb_find_out_of_range: first_bad is NULL");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t none = static_cast<int64_t>(n);
  set_kernel<<<1, 1, 0, s>>>(first_bad, none);
  if (n > 0)
    out_of_range_kernel<<<grid_for(n, kBlock), kBlock, 0, s>>>(
        ids, none, num_rows, reinterpret_cast<unsigned long long *>(first_bad));
  return launch_status("emb_find_out_of_range", errbuf, errcap);
}

int32_t emb_local_rows(const int64_t *ids, size_t n, const int64_t *num_ids,
                       int32_t world, int32_t mode, int64_t rows_per_shard,
                       int64_t *rows, void *stream, char *errbuf,
                       size_t errcap) {
  HB_CUDA_CHECK_ARG(world > 0, "emb_local_rows: world size %d must be > 0",
                    world);
  HB_CUDA_CHECK_ARG(mode == HB_CUDA_PARTITION_MOD ||
                        (mode == HB_CUDA_PARTITION_DIV && rows_per_shard > 0),
                    "emb_local_rows: mode %d with rows_per_shard %lld", mode,
                    static_cast<long long>(rows_per_shard));
  if (n == 0) return HB_OK;
  local_rows_kernel<<<grid_for(n, kBlock), kBlock, 0,
                      static_cast<cudaStream_t>(stream)>>>(
      ids, static_cast<int64_t>(n), num_ids, world, mode, rows_per_shard, rows);
  return launch_status("emb_local_rows", errbuf, errcap);
}

}  // namespace hb_cuda
