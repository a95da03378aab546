// Job checkpoints of GPU state through the public API of libhb.so: a GPU
// table (device 0) and a device buffer saved (sync and async: the async copy
// is taken in stream order) and restored bit for bit, and a GPU table's
// checkpoint restored into a host table of the same config. Without a GPU:
// a device buffer is refused with HB_ERR_UNSUPPORTED, the rest skips with the
// reason (tests/gpu/run_gpu_tests.sh runs it on a GPU machine).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu/api_context.h"
#include "hb.h"

#ifdef HB_TEST_WITH_CUDART
#include <cuda_runtime.h>
#endif

namespace {

using Ctx = hbtest::ApiContext;

std::string temp_dir() {
  char tmpl[] = "/tmp/hb_recovery_gpu_XXXXXX";
  return ::mkdtemp(tmpl);
}

hb_checkpoint *open_ckpt(hb_context *ctx, const std::string &dir, int async) {
  hb_checkpoint_config cfg = HB_CHECKPOINT_CONFIG_INIT;
  cfg.dir = dir.c_str();
  cfg.async_write = async;
  cfg.job_id = "gpu";
  hb_checkpoint *c = nullptr;
  EXPECT_EQ(hb_checkpoint_create(ctx, &cfg, &c), HB_OK) << hb_last_error();
  return c;
}

TEST(RecoveryGpu, DeviceBufferNeedsCuda) {
  Ctx c;
  ASSERT_EQ(c.status, HB_OK) << hb_last_error();
  if (hb_context_num_gpus(c.ctx) > 0) GTEST_SKIP() << "a GPU is present";
  std::string dir = temp_dir();
  hb_checkpoint *ck = open_ckpt(c.ctx, dir, 0);
  float x[4];
  EXPECT_EQ(hb_checkpoint_add_buffer(ck, "d", x, sizeof x, HB_BUFFER_DEVICE),
            HB_ERR_UNSUPPORTED);
  hb_checkpoint_destroy(ck);
  std::system(("rm -rf '" + dir + "'").c_str());
}

#ifdef HB_TEST_WITH_CUDART
hb_embedding_config table_config(int device) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "gput";
  c.dim = 8;
  c.num_rows = 0;  // dynamic: rows created in the device map's order
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -0.1;
  c.init_b = 0.1;
  c.optimizer = HB_OPT_ADAM;
  c.device = device;
  return c;
}

void step(hb_embedding *e, int k, bool device) {
  std::vector<int64_t> ids = {k % 5, 100 + k, k % 3, 7};
  std::vector<float> g(ids.size() * 8);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * (k + 1) * (i % 7);
  if (!device) {
    ASSERT_EQ(hb_embedding_apply_gradients(e, ids.data(), ids.size(), g.data()),
              HB_OK);
    return;
  }
  int64_t *di;
  float *dg;
  ASSERT_EQ(cudaMalloc(&di, ids.size() * 8), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dg, g.size() * 4), cudaSuccess);
  cudaMemcpy(di, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(dg, g.data(), g.size() * 4, cudaMemcpyHostToDevice);
  ASSERT_EQ(hb_embedding_apply_gradients(e, di, ids.size(), dg), HB_OK)
      << hb_last_error();
  cudaDeviceSynchronize();
  cudaFree(di);
  cudaFree(dg);
}

std::vector<float> rows(hb_embedding *e, bool device) {
  std::vector<int64_t> ids;
  for (int k = 0; k < 130; ++k) ids.push_back(k);
  std::vector<float> out(ids.size() * 8);
  if (!device) {
    EXPECT_EQ(hb_embedding_lookup(e, ids.data(), ids.size(), out.data()),
              HB_OK);
    return out;
  }
  int64_t *di;
  float *dout;
  cudaMalloc(&di, ids.size() * 8);
  cudaMalloc(&dout, out.size() * 4);
  cudaMemcpy(di, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice);
  EXPECT_EQ(hb_embedding_lookup(e, di, ids.size(), dout), HB_OK)
      << hb_last_error();
  cudaDeviceSynchronize();
  cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost);
  cudaFree(di);
  cudaFree(dout);
  return out;
}

class RecoveryGpuModes : public ::testing::TestWithParam<int> {};

TEST_P(RecoveryGpuModes, GpuTableAndDeviceBufferRoundTrip) {
  Ctx c;
  ASSERT_EQ(c.status, HB_OK) << hb_last_error();
  if (hb_context_num_gpus(c.ctx) == 0) {
    std::printf("[  SKIP    ] no GPU: %s\n", hb_build_info());
    GTEST_SKIP() << "no GPU: " << hb_build_info();
  }
  const int async = GetParam();
  std::string dir = temp_dir();
  hb_embedding_config cfg = table_config(0);
  hb_embedding *e = nullptr;
  ASSERT_EQ(hb_embedding_create(c.ctx, &cfg, &e), HB_OK) << hb_last_error();
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * i;
  float *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, host.size() * 4), cudaSuccess);
  cudaMemcpy(d, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
  hb_checkpoint *ck = open_ckpt(c.ctx, dir, async);
  ASSERT_EQ(hb_checkpoint_add_table(ck, e), HB_OK);
  ASSERT_EQ(
      hb_checkpoint_add_buffer(ck, "dev", d, host.size() * 4, HB_BUFFER_DEVICE),
      HB_OK)
      << hb_last_error();
  for (int k = 0; k < 5; ++k) step(e, k, true);
  ASSERT_EQ(hb_checkpoint_save(ck, 5), HB_OK) << hb_last_error();
  // Changed right after the save returned: the async copy must not see it.
  cudaMemset(d, 0, host.size() * 4);
  for (int k = 5; k < 9; ++k) step(e, k, true);
  ASSERT_EQ(hb_checkpoint_wait(ck), HB_OK) << hb_last_error();
  std::vector<float> want = rows(e, true);
  int64_t s = -1;
  ASSERT_EQ(hb_checkpoint_restore_latest(ck, &s), HB_OK) << hb_last_error();
  EXPECT_EQ(s, 5);
  std::vector<float> back(host.size());
  cudaMemcpy(back.data(), d, back.size() * 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(back, host);
  for (int k = 5; k < 9; ++k) step(e, k, true);
  EXPECT_EQ(rows(e, true), want);
  hb_checkpoint_destroy(ck);
  hb_embedding_destroy(e);

  // The same checkpoint into a host table (no device buffer registered:
  // a checkpoint of other registrations is refused, so register the same).
  hb_embedding_config hcfg = table_config(-1);
  ASSERT_EQ(hb_embedding_create(c.ctx, &hcfg, &e), HB_OK);
  ck = open_ckpt(c.ctx, dir, 0);
  ASSERT_EQ(hb_checkpoint_add_table(ck, e), HB_OK);
  ASSERT_EQ(
      hb_checkpoint_add_buffer(ck, "dev", d, host.size() * 4, HB_BUFFER_DEVICE),
      HB_OK);
  ASSERT_EQ(hb_checkpoint_restore_latest(ck, &s), HB_OK) << hb_last_error();
  for (int k = 5; k < 9; ++k) step(e, k, false);
  EXPECT_EQ(rows(e, false), want);
  hb_checkpoint_destroy(ck);
  hb_embedding_destroy(e);
  cudaFree(d);
  std::system(("rm -rf '" + dir + "'").c_str());
}

INSTANTIATE_TEST_SUITE_P(SyncAsync, RecoveryGpuModes, ::testing::Values(0, 1));
#endif

}  // namespace
