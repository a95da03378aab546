// Helpers shared by the plugin's translation units: turning CUDA and NCCL
// results into an hb_status plus a message in the caller's errbuf.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "hb.h"
#include "plugin_api.h"

namespace hb_cuda {

// Writes a printf-style message into errbuf (if any) and returns status.
inline int32_t set_error(char *errbuf, size_t errcap, int32_t status,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
inline int32_t set_error(char *errbuf, size_t errcap, int32_t status,
                         const char *fmt, ...) {
  if (errbuf && errcap) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(errbuf, errcap, fmt, ap);
    va_end(ap);
  }
  return status;
}

inline int32_t cuda_status(cudaError_t e, const char *what, char *errbuf,
                           size_t errcap) {
  if (e == cudaSuccess) return HB_OK;
  cudaGetLastError();  // clear a non-sticky error so later calls work
  int32_t st =
      e == cudaErrorMemoryAllocation ? HB_ERR_OUT_OF_MEMORY : HB_ERR_DEVICE;
  return set_error(errbuf, errcap, st, "%s: %s (%s)", what,
                   cudaGetErrorString(e), cudaGetErrorName(e));
}

inline int32_t nccl_status(ncclResult_t r, const char *what, char *errbuf,
                           size_t errcap) {
  if (r == ncclSuccess || r == ncclInProgress) return HB_OK;
  const char *last = ncclGetLastError(nullptr);
  return set_error(errbuf, errcap, HB_ERR_DEVICE, "%s: %s%s%s", what,
                   ncclGetErrorString(r), last && *last ? ": " : "",
                   last ? last : "");
}

// Returns the status of the last kernel launch (launch errors only).
inline int32_t launch_status(const char *what, char *errbuf, size_t errcap) {
  return cuda_status(cudaGetLastError(), what, errbuf, errcap);
}

#define HB_CUDA_TRY(expr, what)                               \
  do {                                                        \
    int32_t hb_cuda_st_ =                                     \
        ::hb_cuda::cuda_status((expr), what, errbuf, errcap); \
    if (hb_cuda_st_ != HB_OK) return hb_cuda_st_;             \
  } while (0)

#define HB_CUDA_CHECK_ARG(cond, ...)                                       \
  do {                                                                     \
    if (!(cond))                                                           \
      return ::hb_cuda::set_error(errbuf, errcap, HB_ERR_INVALID_ARGUMENT, \
                                  __VA_ARGS__);                            \
  } while (0)

// Grid size for n work items of `block` threads, capped (kernels loop).
inline unsigned grid_for(size_t n, unsigned block) {
  size_t g = (n + block - 1) / block;
  if (g == 0) g = 1;
  return g > 65535u * 16u ? 65535u * 16u : static_cast<unsigned>(g);
}

// A grid-stride loop over i in [0, n) (kernels launched with grid_for).
#define HB_GRID_STRIDE(i, n)                                            \
  for (int64_t i =                                                      \
           blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; \
       i < static_cast<int64_t>(n);                                     \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Stream-ordered scratch memory, released on the stream when it goes out of
// scope (cudaFreeAsync), so no call needs to wait for the GPU.
class Scratch {
 public:
  explicit Scratch(cudaStream_t s) : stream_(s) {}
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() {
    for (int i = 0; i < n_; ++i) cudaFreeAsync(ptrs_[i], stream_);
  }
  // Allocates bytes (at least 1) on the stream; nullptr on failure.
  template <class T>
  cudaError_t alloc(T **out, size_t count) {
    *out = nullptr;
    if (n_ == kMax) return cudaErrorMemoryAllocation;
    void *p = nullptr;
    cudaError_t e = cudaMallocAsync(&p, count ? count * sizeof(T) : 1, stream_);
    if (e != cudaSuccess) return e;
    ptrs_[n_++] = p;
    *out = static_cast<T *>(p);
    return cudaSuccess;
  }
  cudaError_t alloc_bytes(void **out, size_t bytes) {
    char *p = nullptr;
    cudaError_t e = alloc(&p, bytes);
    *out = p;
    return e;
  }

 private:
  static constexpr int kMax = 16;
  cudaStream_t stream_;
  void *ptrs_[kMax] = {};
  int n_ = 0;
};

}  // namespace hb_cuda
