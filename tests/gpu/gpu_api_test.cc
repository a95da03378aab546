// The GPU path through the public API of the shared libhb.so, which finds
// libhb_cuda.so next to itself: on a machine without a GPU it loads, says
// why in hb_build_info, and CUDA requests are HB_ERR_UNSUPPORTED naming
// what is missing; with a GPU, a device allreduce on the context's stream.
#include <gtest/gtest.h>

#include <string>

#include "api_context.h"
#include "hb.h"

#ifdef HB_TEST_WITH_CUDART
#include <cuda_runtime.h>
#endif

namespace {

using Ctx = hbtest::ApiContext;

TEST(GpuApi, BuildInfoAndDeviceWithoutGpu) {
  std::string info = hb_build_info();
  std::printf("hb_build_info: %s\n", info.c_str());
  EXPECT_NE(info.find("cuda_plugin="), std::string::npos);
  Ctx c;
  ASSERT_EQ(c.status, HB_OK) << hb_last_error();
  if (hb_context_num_gpus(c.ctx) > 0) GTEST_SKIP() << "a GPU is present";
#ifdef HB_TEST_WITH_CUDART
  // libhb_cuda.so is built and sits next to libhb.so: it loads, and finds
  // no usable driver or device.
  EXPECT_NE(info.find("cuda_plugin=built"), std::string::npos) << info;
  EXPECT_NE(info.find("cuda_plugin_loaded=no("), std::string::npos) << info;
  EXPECT_EQ(info.find("cannot load CUDA plugin"), std::string::npos) << info;
#endif
  EXPECT_STREQ(hb_context_device(c.ctx), "cpu:0");
  int dummy = 0;
  hb_status st = hb_context_set_cuda_stream(c.ctx, &dummy);
  EXPECT_EQ(st, HB_ERR_UNSUPPORTED);
  std::string msg = hb_last_error();
  std::printf("hb_context_set_cuda_stream without a GPU: %s\n", msg.c_str());
  EXPECT_NE(msg.find("hb_context_set_cuda_stream"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  EXPECT_EQ(hb_context_synchronize(c.ctx), HB_OK);  // nothing enqueued
  // Host buffers never need CUDA.
  float x[4] = {1, 2, 3, 4}, y[4];
  EXPECT_EQ(hb_allreduce(c.ctx, x, y, 4, HB_FLOAT32, HB_SUM), HB_OK)
      << hb_last_error();
  EXPECT_EQ(y[3], 4.0f);
}

#ifdef HB_TEST_WITH_CUDART
TEST(GpuApi, DeviceAllreduceOnUserStream) {
  Ctx c;
  ASSERT_EQ(c.status, HB_OK) << hb_last_error();
  if (hb_context_num_gpus(c.ctx) == 0) {
    std::printf("[  SKIP    ] no GPU: %s\n", hb_build_info());
    GTEST_SKIP() << "no GPU: " << hb_build_info();
  }
  const size_t n = 1 << 16;
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<float>(i % 100);
  float *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(hb_context_set_cuda_stream(c.ctx, s), HB_OK) << hb_last_error();
  for (hb_reduce_op op : {HB_SUM, HB_AVG, HB_MAX}) {
    ASSERT_EQ(hb_allreduce(c.ctx, d, d, n, HB_FLOAT32, op), HB_OK)
        << hb_last_error();
  }
  ASSERT_EQ(hb_context_synchronize(c.ctx), HB_OK) << hb_last_error();
  std::vector<float> out(n);
  ASSERT_EQ(
      cudaMemcpy(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost),
      cudaSuccess);
  EXPECT_EQ(out, h);  // one rank: every reduction is the identity
  // Mixed host and device buffers are an argument error, not a crash.
  EXPECT_EQ(hb_allreduce(c.ctx, h.data(), d, n, HB_FLOAT32, HB_SUM),
            HB_ERR_INVALID_ARGUMENT);
  // After an abort, device collectives fail with HB_ERR_ABORTED.
  ASSERT_EQ(hb_context_abort(c.ctx, "test abort"), HB_OK);
  EXPECT_EQ(hb_allreduce(c.ctx, d, d, n, HB_FLOAT32, HB_SUM), HB_ERR_ABORTED);
  EXPECT_NE(std::string(hb_last_error()).find("test abort"), std::string::npos);
  hb_context_set_cuda_stream(c.ctx, nullptr);
  cudaStreamDestroy(s);
  cudaFree(d);
}
#endif

}  // namespace
