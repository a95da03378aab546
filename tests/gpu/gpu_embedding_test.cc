// A GPU embedding table (device = 0) through the public API of the shared
// libhb.so against a host table of the same config: bit-equal lookups over
// many steps of skewed ids with duplicates, every optimizer, static and
// dynamic tables, every wire dtype, checkpoints saved on one and loaded into
// the other both ways, an export, and the argument errors. One rank (NCCL
// refuses two ranks on one GPU); the NCCL alltoallv still runs. Without a GPU
// only the HB_ERR_UNSUPPORTED path runs and the rest skips with the reason.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "api_context.h"
#include "hb.h"

#ifdef HB_TEST_WITH_CUDART
#include <cuda_runtime.h>
#endif

namespace {

using Ctx = hbtest::ApiContext;

hb_embedding_config config(int opt, int64_t num_rows, int device) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "gpuemb";
  c.dim = 16;
  c.num_rows = num_rows;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -0.1;
  c.init_b = 0.1;
  c.seed = 3;
  c.optimizer = opt;
  c.learning_rate = 0.05;
  c.l1 = 0.001;
  c.l2 = 0.01;
  c.device = device;
  return c;
}

TEST(GpuEmbedding, WithoutGpuCreationIsUnsupported) {
  Ctx c;
  ASSERT_EQ(c.status, HB_OK) << hb_last_error();
  if (hb_context_num_gpus(c.ctx) > 0) GTEST_SKIP() << "a GPU is present";
  hb_embedding_config cfg = config(HB_OPT_SGD, 100, 0);
  hb_embedding *e = nullptr;
  EXPECT_EQ(hb_embedding_create(c.ctx, &cfg, &e), HB_ERR_UNSUPPORTED);
  std::string msg = hb_last_error();
  std::printf("GPU table without a GPU: %s\n", msg.c_str());
  EXPECT_NE(msg.find("hb_embedding_create"), std::string::npos) << msg;
  EXPECT_EQ(e, nullptr);
  // The context is still usable for host tables.
  cfg.device = -1;
  ASSERT_EQ(hb_embedding_create(c.ctx, &cfg, &e), HB_OK) << hb_last_error();
  hb_embedding_destroy(e);
}

#ifdef HB_TEST_WITH_CUDART

// Device copies of host vectors, freed on scope exit.
template <class T>
struct Dev {
  T *p = nullptr;
  size_t n;
  explicit Dev(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
  }
  explicit Dev(const std::vector<T> &v) : Dev(v.size()) {
    EXPECT_EQ(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  }
};

// Looks ids up on a host table and a GPU table; true when bit-equal.
bool same_lookup(hb_context *ctx, hb_embedding *cpu, hb_embedding *gpu,
                 const std::vector<int64_t> &ids, int64_t dim) {
  std::vector<float> want(ids.size() * dim);
  EXPECT_EQ(hb_embedding_lookup(cpu, ids.data(), ids.size(), want.data()),
            HB_OK)
      << hb_last_error();
  Dev<int64_t> d_ids(ids);
  Dev<float> d_out(ids.size() * dim);
  EXPECT_EQ(hb_embedding_lookup(gpu, d_ids.p, ids.size(), d_out.p), HB_OK)
      << hb_last_error();
  EXPECT_EQ(hb_context_synchronize(ctx), HB_OK) << hb_last_error();
  std::vector<float> got = d_out.get();
  return std::memcmp(got.data(), want.data(), want.size() * 4) == 0;
}

std::string temp_dir(const char *tag) {
  std::string t = std::string("/tmp/hb_gpuemb_") + tag + "_XXXXXX";
  std::vector<char> b(t.begin(), t.end());
  b.push_back(0);
  return mkdtemp(b.data()) ? std::string(b.data()) : std::string();
}

class GpuVsCpu
    : public ::testing::TestWithParam<std::tuple<int, int64_t, hb_dtype>> {};

TEST_P(GpuVsCpu, BitEqualTrainingAndCheckpointsBothWays) {
  Ctx c;
  ASSERT_EQ(c.status, HB_OK) << hb_last_error();
  if (hb_context_num_gpus(c.ctx) == 0) {
    std::printf("[  SKIP    ] no GPU: %s\n", hb_build_info());
    GTEST_SKIP() << "no GPU: " << hb_build_info();
  }
  const int opt = std::get<0>(GetParam());
  const int64_t rows = std::get<1>(GetParam());
  hb_embedding_config cc = config(opt, rows, -1), gc = config(opt, rows, 0);
  cc.wire_dtype = gc.wire_dtype = std::get<2>(GetParam());
  const int64_t dim = cc.dim;
  // One name, so the same initial rows; table names are unique per
  // context, so each table of that name has a context (a world of one).
  Ctx gx, c2, g2;
  hb_embedding *cpu = nullptr, *gpu = nullptr;
  ASSERT_EQ(hb_embedding_create(c.ctx, &cc, &cpu), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_create(gx.ctx, &gc, &gpu), HB_OK) << hb_last_error();

  std::mt19937_64 g(opt * 31 + rows);
  std::vector<int64_t> touched;
  auto draw_id = [&]() -> int64_t {
    double u = std::uniform_real_distribution<double>(0, 1)(g);
    int64_t k = static_cast<int64_t>(std::pow(1000.0, u * u)) - 1;  // skewed
    return rows > 0 ? k % rows : k * 7919 - 3000;  // dynamic: negative too
  };
  for (int step = 0; step < 40; ++step) {
    size_t n = step % 7 == 3 ? 0 : 1 + g() % 300;
    std::vector<int64_t> ids(n);
    for (int64_t &id : ids) id = draw_id();
    touched.insert(touched.end(), ids.begin(), ids.end());
    std::vector<float> grads(n * dim);
    for (float &v : grads) v = std::uniform_real_distribution<float>(-1, 1)(g);
    ASSERT_TRUE(same_lookup(gx.ctx, cpu, gpu, ids, dim)) << "step " << step;
    ASSERT_EQ(hb_embedding_apply_gradients(cpu, ids.data(), n, grads.data()),
              HB_OK)
        << hb_last_error();
    Dev<int64_t> d_ids(ids);
    Dev<float> d_grads(grads);
    ASSERT_EQ(hb_embedding_apply_gradients(gpu, d_ids.p, n, d_grads.p), HB_OK)
        << hb_last_error();
    ASSERT_EQ(hb_context_synchronize(gx.ctx), HB_OK) << hb_last_error();
  }
  ASSERT_TRUE(same_lookup(gx.ctx, cpu, gpu, touched, dim));
  EXPECT_EQ(hb_embedding_local_rows(gpu), hb_embedding_local_rows(cpu));

  // GPU save -> host load, host save -> GPU load.
  std::string gdir = temp_dir("g"), cdir = temp_dir("c");
  ASSERT_FALSE(gdir.empty() || cdir.empty());
  ASSERT_EQ(hb_embedding_save(gpu, gdir.c_str()), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_save(cpu, cdir.c_str()), HB_OK) << hb_last_error();
  hb_embedding *cpu2 = nullptr, *gpu2 = nullptr;
  ASSERT_EQ(hb_embedding_create(c2.ctx, &cc, &cpu2), HB_OK);
  ASSERT_EQ(hb_embedding_create(g2.ctx, &gc, &gpu2), HB_OK);
  ASSERT_EQ(hb_embedding_load(cpu2, gdir.c_str()), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_load(gpu2, cdir.c_str()), HB_OK) << hb_last_error();
  EXPECT_TRUE(same_lookup(gx.ctx, cpu2, gpu, touched, dim));
  EXPECT_TRUE(same_lookup(g2.ctx, cpu, gpu2, touched, dim));
  // Both continue identically after the load.
  std::vector<int64_t> ids(touched.begin(), touched.begin() + 50);
  std::vector<float> grads(ids.size() * dim, 0.25f);
  ASSERT_EQ(
      hb_embedding_apply_gradients(cpu2, ids.data(), ids.size(), grads.data()),
      HB_OK);
  Dev<int64_t> d_ids(ids);
  Dev<float> d_grads(grads);
  ASSERT_EQ(hb_embedding_apply_gradients(gpu2, d_ids.p, ids.size(), d_grads.p),
            HB_OK)
      << hb_last_error();
  EXPECT_TRUE(same_lookup(g2.ctx, cpu2, gpu2, touched, dim));

  // Export from the GPU table: the serving file holds the trained rows.
  std::string path = gdir + "/t.hbe";
  ASSERT_EQ(hb_embedding_export(gpu, path.c_str()), HB_OK) << hb_last_error();
  hb_embedding *srv = nullptr;
  ASSERT_EQ(hb_embedding_open(path.c_str(), &srv), HB_OK) << hb_last_error();
  std::vector<float> a(touched.size() * dim), b(a.size());
  ASSERT_EQ(hb_embedding_lookup(srv, touched.data(), touched.size(), a.data()),
            HB_OK);
  ASSERT_EQ(hb_embedding_lookup(cpu, touched.data(), touched.size(), b.data()),
            HB_OK);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);

  // Argument errors: host pointers and (static) bad ids, named.
  std::vector<float> out(ids.size() * dim);
  EXPECT_EQ(hb_embedding_lookup(gpu, ids.data(), ids.size(), out.data()),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("device pointers"),
            std::string::npos)
      << hb_last_error();
  if (rows > 0) {
    std::vector<int64_t> bad = {1, rows + 5};
    Dev<int64_t> d_bad(bad);
    Dev<float> d_out(bad.size() * dim);
    EXPECT_EQ(hb_embedding_lookup(gpu, d_bad.p, bad.size(), d_out.p),
              HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(hb_last_error()).find(std::to_string(rows + 5)),
              std::string::npos)
        << hb_last_error();
  }
  for (hb_embedding *e : {srv, gpu2, cpu2, gpu, cpu}) hb_embedding_destroy(e);
  std::filesystem::remove_all(gdir);
  std::filesystem::remove_all(cdir);
}

INSTANTIATE_TEST_SUITE_P(
    All, GpuVsCpu,
    ::testing::Combine(::testing::Values(HB_OPT_SGD, HB_OPT_ADAGRAD,
                                         HB_OPT_ADAM, HB_OPT_FTRL),
                       ::testing::Values(int64_t{5000}, int64_t{0}),
                       ::testing::Values(HB_FLOAT32, HB_BFLOAT16, HB_FLOAT16)));

#endif  // HB_TEST_WITH_CUDART

}  // namespace
