// Helpers for the GPU tests: skip without a device, device buffers through
// the plugin table (the tests need no CUDA headers), host data per dtype.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/gpu.h"
#include "gpu/plugin_call.h"
#include "gpu_test_data.h"

namespace hb_test {

// Skips the test (printing why) unless a CUDA device is usable.
#define HB_REQUIRE_GPU()                                                \
  do {                                                                  \
    if (hb::gpu::device_count() == 0) {                                 \
      std::printf("[  SKIP    ] no usable CUDA device: %s\n",           \
                  hb::gpu::describe().c_str());                         \
      GTEST_SKIP() << "no usable CUDA device: " << hb::gpu::describe(); \
    }                                                                   \
  } while (0)

// Device memory of `bytes`, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes)
      : p_(hb::gpu::require_plugin()), bytes_(bytes) {
    hb::gpu::plugin_call("cudaMalloc", p_.device_malloc, &ptr_,
                         bytes ? bytes : 1);
  }
  template <class T>
  explicit DeviceBuffer(const std::vector<T> &host, void *stream)
      : DeviceBuffer(host.size() * sizeof(T)) {
    upload(host.data(), bytes_, stream);
  }
  ~DeviceBuffer() { hb::gpu::plugin_try(nullptr, p_.device_free, ptr_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  template <class T = void>
  T *get() const {
    return static_cast<T *>(ptr_);
  }
  void upload(const void *src, size_t bytes, void *stream) {
    hb::gpu::plugin_call("upload", p_.memcpy_async, ptr_, src, bytes, stream);
  }
  void download(void *dst, size_t bytes, void *stream) const {
    hb::gpu::plugin_call("download", p_.memcpy_async, dst,
                         static_cast<const void *>(ptr_), bytes, stream);
  }

 private:
  const hb_cuda_plugin &p_;
  size_t bytes_;
  void *ptr_ = nullptr;
};

}  // namespace hb_test
