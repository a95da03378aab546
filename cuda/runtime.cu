// Devices, streams and memory for the core, plus the integer division that
// completes an integer HB_AVG.
#include "plugin_entries.h"
#include "plugin_util.h"

namespace hb_cuda {
namespace {

template <class T>
__global__ void divide_kernel(T *buf, size_t count, int64_t divisor) {
  size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride)
    buf[i] = static_cast<T>(static_cast<int64_t>(buf[i]) /
                            divisor);  // truncates toward zero
}

template <class T>
int32_t launch_divide(void *buf, size_t count, int64_t divisor, cudaStream_t s,
                      char *errbuf, size_t errcap) {
  if (count == 0) return HB_OK;
  divide_kernel<T><<<grid_for(count, 256), 256, 0, s>>>(static_cast<T *>(buf),
                                                        count, divisor);
  return launch_status("divide kernel", errbuf, errcap);
}

}  // namespace

int32_t device_count(int32_t *count, char *errbuf, size_t errcap) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  *count = e == cudaSuccess ? n : 0;
  return cuda_status(e, "cudaGetDeviceCount", errbuf, errcap);
}

int32_t pointer_is_device(const void *p, int32_t *is_device, char *errbuf,
                          size_t errcap) {
  cudaPointerAttributes attr;
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  *is_device = e == cudaSuccess && (attr.type == cudaMemoryTypeDevice ||
                                    attr.type == cudaMemoryTypeManaged);
  return cuda_status(e, "cudaPointerGetAttributes", errbuf, errcap);
}

int32_t set_device(int32_t device, char *errbuf, size_t errcap) {
  HB_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
  return HB_OK;
}

int32_t stream_create(void **stream, char *errbuf, size_t errcap) {
  cudaStream_t s = nullptr;
  HB_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
  *stream = s;
  return HB_OK;
}

int32_t stream_destroy(void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_TRY(cudaStreamDestroy(static_cast<cudaStream_t>(stream)),
              "cudaStreamDestroy");
  return HB_OK;
}

int32_t stream_query(void *stream, int32_t *done, char *errbuf, size_t errcap) {
  cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  *done = e == cudaSuccess;
  if (e == cudaErrorNotReady) return HB_OK;
  return cuda_status(e, "cudaStreamQuery", errbuf, errcap);
}

int32_t device_malloc(void **ptr, size_t bytes, char *errbuf, size_t errcap) {
  *ptr = nullptr;
  HB_CUDA_TRY(cudaMalloc(ptr, bytes ? bytes : 1), "cudaMalloc");
  return HB_OK;
}

int32_t device_free(void *ptr, char *errbuf, size_t errcap) {
  HB_CUDA_TRY(cudaFree(ptr), "cudaFree");
  return HB_OK;
}

int32_t memcpy_async(void *dst, const void *src, size_t bytes, void *stream,
                     char *errbuf, size_t errcap) {
  if (bytes == 0) return HB_OK;
  HB_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                              static_cast<cudaStream_t>(stream)),
              "cudaMemcpyAsync");
  return HB_OK;
}

int32_t memset_async(void *dst, int32_t value, size_t bytes, void *stream,
                     char *errbuf, size_t errcap) {
  if (bytes == 0) return HB_OK;
  HB_CUDA_TRY(
      cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)),
      "cudaMemsetAsync");
  return HB_OK;
}

int32_t divide_async(void *buf, size_t count, int32_t dtype, int64_t divisor,
                     void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(divisor > 0, "divide_async: divisor %lld must be > 0",
                    static_cast<long long>(divisor));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case HB_INT32:
      return launch_divide<int32_t>(buf, count, divisor, s, errbuf, errcap);
    case HB_INT64:
      return launch_divide<int64_t>(buf, count, divisor, s, errbuf, errcap);
    case HB_UINT8:
      return launch_divide<uint8_t>(buf, count, divisor, s, errbuf, errcap);
  }
  return set_error(errbuf, errcap, HB_ERR_INVALID_ARGUMENT,
                   "divide_async: dtype %d is not an integer dtype", dtype);
}

}  // namespace hb_cuda
