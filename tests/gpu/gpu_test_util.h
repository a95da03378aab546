// Helpers for the GPU tests: skip without a device, device buffers through
// the plugin table (the tests need no CUDA headers), host data per dtype.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "abi/dtype.h"
#include "gpu/gpu.h"
#include "gpu/plugin_call.h"

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

// count elements of dtype with small integer values (exact in every dtype
// and in sums of a few ranks), as raw bytes. Different per seed.
inline std::vector<uint8_t> small_ints(hb_dtype dtype, size_t count,
                                       uint32_t seed) {
  size_t es = hb_dtype_size(dtype);
  std::vector<uint8_t> out(count * es);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    int v = static_cast<int>(rng() % 9);  // 0..8
    uint8_t *dst = &out[i * es];
    switch (dtype) {
      case HB_FLOAT32: {
        float f = static_cast<float>(v - 4);
        std::memcpy(dst, &f, 4);
        break;
      }
      case HB_FLOAT64: {
        double d = v - 4;
        std::memcpy(dst, &d, 8);
        break;
      }
      case HB_FLOAT16: {
        uint16_t h = hb::float_to_half(static_cast<float>(v - 4));
        std::memcpy(dst, &h, 2);
        break;
      }
      case HB_BFLOAT16: {
        uint16_t h = hb::float_to_bf16(static_cast<float>(v - 4));
        std::memcpy(dst, &h, 2);
        break;
      }
      case HB_INT32: {
        int32_t x = v * 1000 - 4000;
        std::memcpy(dst, &x, 4);
        break;
      }
      case HB_INT64: {
        int64_t x = (int64_t{v} << 40) - 3;
        std::memcpy(dst, &x, 8);
        break;
      }
      case HB_UINT8: {
        uint8_t x = static_cast<uint8_t>(v * 7);
        *dst = x;
        break;
      }
    }
  }
  return out;
}

inline double element(const std::vector<uint8_t> &buf, hb_dtype dtype,
                      size_t i) {
  const uint8_t *p = &buf[i * hb_dtype_size(dtype)];
  switch (dtype) {
    case HB_FLOAT32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case HB_FLOAT64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case HB_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return hb::half_to_float(h);
    }
    case HB_BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return hb::bf16_to_float(h);
    }
    case HB_INT32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case HB_INT64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case HB_UINT8:
      return *p;
  }
  return 0;
}

inline const hb_dtype kAllDtypes[] = {HB_UINT8,   HB_INT32,    HB_INT64,
                                      HB_FLOAT16, HB_BFLOAT16, HB_FLOAT32,
                                      HB_FLOAT64};

}  // namespace hb_test
