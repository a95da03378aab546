// Kernels of an embedding collection over GPU tables
// (src/embedding/device_collection.h): the bag structure of a jagged
// feature, pooling, the pooled gradient expanded per id, and the
// comparison of an update's ids with its lookup's. Pooling and the
// gradient shares use the host collection's float operations in its order
// (round-to-nearest intrinsics, no contraction: -fmad=false as well), so
// results are bit-equal to src/embedding/collection.cc.
#include "hb.h"
#include "plugin_entries.h"
#include "sort_util.cuh"

namespace hb_cuda {
namespace {

constexpr unsigned kBlock = 256;
// The pooling codes of hb.h's EXPERIMENTAL section (hb_pooling_code).
constexpr int32_t kNone = 0, kSum = 1, kMean = 2, kSqrtn = 3;

__global__ void offsets_bag_kernel(const int64_t *offsets, int64_t batch,
                                   int64_t *bag,
                                   unsigned long long *first_bad) {
  HB_GRID_STRIDE(b, batch + 1) {
    bag[b] = offsets[b] - offsets[0];
    if (b < batch && offsets[b + 1] < offsets[b])
      atomicMin(first_bad, static_cast<unsigned long long>(b));
  }
}

__global__ void lengths_check_kernel(const int64_t *lengths, int64_t batch,
                                     unsigned long long *first_bad) {
  HB_GRID_STRIDE(b, batch) {
    if (lengths[b] < 0 || lengths[b] >= (int64_t{1} << 32))
      atomicMin(first_bad, static_cast<unsigned long long>(b));
  }
}

__global__ void bags_info_kernel(const int64_t *offsets, const int64_t *lengths,
                                 int64_t batch, int64_t *bag,
                                 const unsigned long long *first_bad,
                                 int64_t *info) {
  if (!offsets) bag[0] = 0;  // the scan filled bag[1..batch]
  const int64_t bad = static_cast<int64_t>(*first_bad);
  info[0] = bag[batch];
  info[1] = offsets ? offsets[0] : 0;
  info[2] = 0, info[3] = 0, info[4] = 0;
  if (offsets && offsets[0] < 0) {
    info[2] = 1, info[4] = offsets[0];
  } else if (bad < batch) {
    info[2] = offsets ? 2 : 3, info[3] = bad;
    info[4] = offsets ? 0 : lengths[bad];
  }
}

__global__ void set_u64_kernel(unsigned long long *p, unsigned long long v) {
  *p = v;
}

__device__ float divisor(int32_t pooling, int64_t count) {
  float n = __ll2float_rn(count);
  return pooling == kMean ? n : __fsqrt_rn(n);
}

__global__ void pool_kernel(const float *rows, int64_t dim, const int64_t *slot,
                            const float *w, int64_t n, const int64_t *bag,
                            int64_t batch, int32_t pooling, float *out,
                            int64_t stride) {
  if (pooling == kNone) {
    HB_GRID_STRIDE(i, n * dim) {
      const int64_t k = i / dim, c = i % dim;
      const float r = rows[slot[k] * dim + c];
      out[k * stride + c] = w ? __fmul_rn(w[k], r) : r;
    }
    return;
  }
  HB_GRID_STRIDE(i, batch * dim) {
    const int64_t b = i / dim, c = i % dim;
    const int64_t lo = bag[b], hi = bag[b + 1];
    float acc = 0.0f;
    for (int64_t k = lo; k < hi; ++k) {
      const float r = rows[slot[k] * dim + c];
      const float v = w ? __fmul_rn(w[k], r) : r;
      acc = k == lo ? v : __fadd_rn(acc, v);
    }
    if (hi > lo && pooling != kSum)
      acc = __fdiv_rn(acc, divisor(pooling, hi - lo));
    out[b * stride + c] = acc;
  }
}

// The bag of id k: the largest b < batch with bag[b] <= k (k < bag[batch]).
__device__ int64_t bag_of(const int64_t *bag, int64_t batch, int64_t k) {
  int64_t lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (bag[mid] <= k)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void expand_kernel(const float *grad, int64_t stride, int64_t dim,
                              const float *w, int64_t n, const int64_t *bag,
                              int64_t batch, int32_t pooling, float *out) {
  HB_GRID_STRIDE(i, n * dim) {
    const int64_t k = i / dim, c = i % dim;
    if (pooling == kNone) {
      const float g = grad[k * stride + c];
      out[i] = w ? __fmul_rn(g, w[k]) : g;
      continue;
    }
    const int64_t b = bag_of(bag, batch, k);
    const float g = grad[b * stride + c];
    if (pooling == kSum && !w) {
      out[i] = g;
      continue;
    }
    float sc = w ? w[k] : 1.0f;
    if (pooling != kSum)
      sc = __fdiv_rn(sc, divisor(pooling, bag[b + 1] - bag[b]));
    out[i] = __fmul_rn(g, sc);
  }
}

__global__ void ids_equal_kernel(const int64_t *a, const int64_t *b, int64_t n,
                                 int64_t *differ) {
  HB_GRID_STRIDE(i, n) {
    if (a[i] != b[i]) *differ = 1;  // every writer stores the same value
  }
}

}  // namespace

int32_t emb_bags(const int64_t *offsets, const int64_t *lengths, int64_t batch,
                 int64_t *bag, int64_t *info, void *stream, char *errbuf,
                 size_t errcap) {
  HB_CUDA_CHECK_ARG(batch >= 0 && bag && info, "emb_bags: bad arguments");
  HB_CUDA_CHECK_ARG(batch == 0 || offsets || lengths,
                    "emb_bags: offsets and lengths are both NULL");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  Scratch scratch(s);
  unsigned long long *bad = nullptr;
  HB_CUDA_TRY(scratch.alloc(&bad, 1), "emb_bags: scratch");
  set_u64_kernel<<<1, 1, 0, s>>>(bad, static_cast<unsigned long long>(batch));
  if (offsets) {
    offsets_bag_kernel<<<grid_for(batch + 1, kBlock), kBlock, 0, s>>>(
        offsets, batch, bag, bad);
  } else if (batch > 0) {
    lengths_check_kernel<<<grid_for(batch, kBlock), kBlock, 0, s>>>(lengths,
                                                                    batch, bad);
    HB_CUDA_TRY(inclusive_sum(scratch, lengths, bag + 1, batch, s),
                "emb_bags: scan");
  }
  bags_info_kernel<<<1, 1, 0, s>>>(offsets, lengths, batch, bag, bad, info);
  return launch_status("emb_bags", errbuf, errcap);
}

int32_t emb_pool(const float *rows, int64_t dim, const int64_t *slot,
                 const float *weights, size_t n, const int64_t *bag,
                 int64_t batch, int32_t pooling, float *out, int64_t out_stride,
                 void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(
      dim > 0 && out_stride >= dim && pooling >= kNone && pooling <= kSqrtn,
      "emb_pool: dim %lld, stride %lld, pooling %d", (long long)dim,
      (long long)out_stride, (int)pooling);
  const size_t items =
      (pooling == kNone ? n : static_cast<size_t>(batch)) * dim;
  if (items == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  pool_kernel<<<grid_for(items, kBlock), kBlock, 0, s>>>(
      rows, dim, slot, weights, static_cast<int64_t>(n), bag, batch, pooling,
      out, out_stride);
  return launch_status("emb_pool", errbuf, errcap);
}

int32_t emb_expand_grads(const float *grad, int64_t grad_stride, int64_t dim,
                         const float *weights, size_t n, const int64_t *bag,
                         int64_t batch, int32_t pooling, float *out,
                         void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(dim > 0 && grad_stride >= dim && pooling >= kNone &&
                        pooling <= kSqrtn &&
                        (pooling == kNone || batch > 0 || n == 0),
                    "emb_expand_grads: dim %lld, stride %lld, pooling %d",
                    (long long)dim, (long long)grad_stride, (int)pooling);
  if (n == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  expand_kernel<<<grid_for(n * dim, kBlock), kBlock, 0, s>>>(
      grad, grad_stride, dim, weights, static_cast<int64_t>(n), bag, batch,
      pooling, out);
  return launch_status("emb_expand_grads", errbuf, errcap);
}

int32_t emb_ids_equal(const int64_t *a, const int64_t *b, size_t n,
                      int64_t *differ, void *stream, char *errbuf,
                      size_t errcap) {
  HB_CUDA_CHECK_ARG(differ, "emb_ids_equal: differ is NULL");
  if (n == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  ids_equal_kernel<<<grid_for(n, kBlock), kBlock, 0, s>>>(
      a, b, static_cast<int64_t>(n), differ);
  return launch_status("emb_ids_equal", errbuf, errcap);
}

}  // namespace hb_cuda
