// Histogram of predictions over AUC thresholds for the metrics module:
// exact 64-bit counts, and weight sums in a fixed order (sorted segments).
#include "plugin_entries.h"
#include "sort_util.cuh"

namespace hb_cuda {
namespace {

constexpr unsigned kBlock = 256;

// key = 2 * bucket + positive, bucket = #thresholds strictly below pred.
__global__ void bucket_kernel(const float *labels, const float *preds,
                              int64_t n, const float *thresholds,
                              int32_t nthresh, uint64_t *pos, uint64_t *neg,
                              int64_t *keys) {
  int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    float p = preds[i];
    int32_t lo = 0, hi = nthresh;  // first threshold t with !(p > t)
    while (lo < hi) {
      int32_t mid = (lo + hi) / 2;
      if (p > thresholds[mid])
        lo = mid + 1;
      else
        hi = mid;
    }
    bool positive = labels[i] != 0.0f;
    atomicAdd(
        reinterpret_cast<unsigned long long *>(positive ? &pos[lo] : &neg[lo]),
        1ull);
    if (keys) keys[i] = 2 * static_cast<int64_t>(lo) + (positive ? 1 : 0);
  }
}

// One thread per (bucket, class) segment: the weights in input order.
__global__ void weight_sum_kernel(const float *weights, const int64_t *unique,
                                  const int64_t *order, const int64_t *seg,
                                  const int64_t *num_unique, double *wpos,
                                  double *wneg) {
  int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       u < *num_unique; u += stride) {
    double acc = 0.0;
    for (int64_t j = seg[u]; j < seg[u + 1]; ++j)
      acc += static_cast<double>(weights[order[j]]);
    int64_t key = unique[u];
    double *dst = (key & 1) ? &wpos[key >> 1] : &wneg[key >> 1];
    *dst += acc;  // one segment per (bucket, class): no two threads collide
  }
}

}  // namespace

int32_t auc_histogram(const float *labels, const float *preds,
                      const float *weights, size_t n, const float *thresholds,
                      int32_t nthresh, uint64_t *pos, uint64_t *neg,
                      double *wpos, double *wneg, void *stream, char *errbuf,
                      size_t errcap) {
  HB_CUDA_CHECK_ARG(nthresh >= 0 && (nthresh == 0 || thresholds),
                    "auc_histogram: %d thresholds (array %p)", nthresh,
                    static_cast<const void *>(thresholds));
  HB_CUDA_CHECK_ARG(!weights || (wpos && wneg),
                    "auc_histogram: weights without wpos/wneg");
  for (int32_t i = 1; i < nthresh; ++i)
    HB_CUDA_CHECK_ARG(thresholds[i - 1] <= thresholds[i],
                      "auc_histogram: thresholds not ascending at index %d", i);
  if (n == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  Scratch scratch(s);
  int64_t nn = static_cast<int64_t>(n);
  float *dthresh = nullptr;
  HB_CUDA_TRY(scratch.alloc(&dthresh, static_cast<size_t>(nthresh)),
              "auc_histogram: scratch");
  HB_CUDA_TRY(cudaMemcpyAsync(dthresh, thresholds, sizeof(float) * nthresh,
                              cudaMemcpyHostToDevice, s),
              "auc_histogram: copy thresholds");
  int64_t *keys = nullptr;
  if (weights) HB_CUDA_TRY(scratch.alloc(&keys, n), "auc_histogram: scratch");
  unsigned g = grid_for(n, kBlock);
  bucket_kernel<<<g, kBlock, 0, s>>>(labels, preds, nn, dthresh, nthresh, pos,
                                     neg, keys);
  HB_CUDA_TRY(cudaGetLastError(), "auc_histogram: bucket kernel");
  if (!weights) return HB_OK;
  int64_t *unique, *order, *seg, *num_unique;
  HB_CUDA_TRY(scratch.alloc(&unique, n), "auc_histogram: scratch");
  HB_CUDA_TRY(scratch.alloc(&order, n), "auc_histogram: scratch");
  HB_CUDA_TRY(scratch.alloc(&seg, n + 1), "auc_histogram: scratch");
  HB_CUDA_TRY(scratch.alloc(&num_unique, 1), "auc_histogram: scratch");
  int end_bit = 2;
  while (end_bit < 63 &&
         (int64_t{1} << end_bit) <= 2 * static_cast<int64_t>(nthresh) + 1)
    ++end_bit;
  HB_CUDA_TRY(group_keys(scratch, keys, nn, end_bit, unique, nullptr,
                         num_unique, order, seg, s),
              "auc_histogram: group");
  weight_sum_kernel<<<g, kBlock, 0, s>>>(weights, unique, order, seg,
                                         num_unique, wpos, wneg);
  return launch_status("auc_histogram: weight sums", errbuf, errcap);
}

}  // namespace hb_cuda
