// GPU path checks that need no GPU: plugin state in hb_build_info, the
// plugin's table and its argument checks (which run before any CUDA call),
// device selection, and the shared optimizer formulas against double math.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "abi/error.h"
#include "gpu/context_state.h"
#include "gpu/gpu.h"
#include "gpu/plugin_call.h"
#include "gpu_test_data.h"
#include "hb.h"
#include "embedding/optimizer_math.h"

namespace {

TEST(GpuNoDevice, BuildInfoReportsPluginState) {
  std::string info = hb_build_info();
  std::printf("hb_build_info: %s\n", info.c_str());
#ifdef HB_TEST_CUDA_PLUGIN_PATH
  EXPECT_NE(info.find("cuda_plugin=built"), std::string::npos) << info;
  if (hb::gpu::device_count() == 0)
    EXPECT_NE(info.find("cuda_plugin_loaded=no("), std::string::npos) << info;
  else
    EXPECT_NE(info.find("cuda_plugin_loaded=yes"), std::string::npos) << info;
#else
  EXPECT_NE(info.find("cuda_plugin=not built"), std::string::npos) << info;
#endif
}

TEST(GpuNoDevice, HostPointersNeverNeedCuda) {
  int x = 0;
  EXPECT_FALSE(hb::gpu::is_device_pointer(&x));
  EXPECT_FALSE(hb::gpu::is_device_pointer(nullptr));
}

TEST(GpuNoDevice, MissingGpuIsUnsupportedNamingWhy) {
  if (hb::gpu::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  std::string why;
  EXPECT_EQ(hb::gpu::plugin(&why) != nullptr, false);
  EXPECT_FALSE(why.empty());
  hb_status st = hb::guard([] { hb::gpu::require_plugin(); });
  EXPECT_EQ(st, HB_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(hb_last_error()).find("CUDA is not available: "),
            std::string::npos)
      << hb_last_error();
  std::printf("without a GPU: %s\n", hb_last_error());
  st = hb::guard([] { hb::gpu::pick_device("", 0, 0); });
  EXPECT_EQ(st, HB_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(hb_last_error()).find("no CUDA device"),
            std::string::npos);
}

TEST(GpuNoDevice, PickDevice) {
  EXPECT_EQ(hb::gpu::pick_device("cpu:0", 5, 4), 1);
  EXPECT_EQ(hb::gpu::pick_device("", 2, 4), 2);
  EXPECT_EQ(hb::gpu::pick_device("cuda:3", 0, 4), 3);
  EXPECT_EQ(hb::guard([] { hb::gpu::pick_device("cuda:4", 0, 4); }),
            HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("cuda:4"), std::string::npos);
  EXPECT_EQ(hb::guard([] { hb::gpu::pick_device("cuda:x", 0, 4); }),
            HB_ERR_CONFIG);
}

#ifdef HB_TEST_CUDA_PLUGIN_PATH
// The plugin loads without a driver (libcudart finds none only when asked)
// and checks its arguments before touching the GPU.
class PluginTable : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(HB_TEST_CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto entry = reinterpret_cast<hb_cuda_plugin_entry_fn>(
        dlsym(handle_, HB_CUDA_PLUGIN_ENTRY));
    ASSERT_NE(entry, nullptr);
    t_ = entry();
    ASSERT_NE(t_, nullptr);
  }
  // Keep the plugin loaded: CUDA's runtime does not support being unloaded.
  void *handle_ = nullptr;
  const hb_cuda_plugin *t_ = nullptr;
  char err_[512] = {0};
};

TEST_F(PluginTable, IsCompleteAndVersioned) {
  EXPECT_EQ(t_->abi_version, static_cast<uint32_t>(HB_CUDA_PLUGIN_ABI_VERSION));
  EXPECT_EQ(t_->struct_size, sizeof(hb_cuda_plugin));
  EXPECT_GE(t_->cuda_runtime_version, 12000);
  EXPECT_GE(t_->nccl_version, 21000);
  // Every member after the header is a function pointer and must be set.
  const char *base = reinterpret_cast<const char *>(t_);
  for (size_t off = offsetof(hb_cuda_plugin, device_count);
       off < sizeof(hb_cuda_plugin); off += sizeof(void *)) {
    void *fn;
    std::memcpy(&fn, base + off, sizeof fn);
    EXPECT_NE(fn, nullptr) << "table member at byte offset " << off;
  }
  EXPECT_TRUE(HB_CUDA_PLUGIN_HAS(t_, auc_histogram));
  EXPECT_TRUE(HB_CUDA_PLUGIN_HAS(t_, emb_wire_decode));
  hb_cuda_plugin older = *t_;
  older.struct_size = offsetof(hb_cuda_plugin, set_device);
  EXPECT_FALSE(HB_CUDA_PLUGIN_HAS(&older, set_device));
}

TEST_F(PluginTable, DeviceCountWithoutDriver) {
  int32_t n = -1;
  int32_t st = t_->device_count(&n, err_, sizeof err_);
  if (hb::gpu::device_count() == 0) {
    EXPECT_EQ(n, 0);
    EXPECT_EQ(st, HB_ERR_DEVICE);
    EXPECT_NE(std::string(err_).find("cudaGetDeviceCount"), std::string::npos)
        << err_;
  } else {
    EXPECT_EQ(st, HB_OK);
    EXPECT_GT(n, 0);
  }
}

TEST_F(PluginTable, KernelsCheckArgumentsFirst) {
  int64_t ids[2] = {1, 2};
  int32_t owner[2];
  EXPECT_EQ(t_->emb_partition(ids, 2, 0, HB_CUDA_PARTITION_MOD, 0, owner,
                              nullptr, nullptr, nullptr, err_, sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("world size 0"), std::string::npos) << err_;
  EXPECT_EQ(t_->emb_partition(ids, 2, 2, 7, 0, owner, nullptr, nullptr, nullptr,
                              err_, sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("partition mode 7"), std::string::npos)
      << err_;
  EXPECT_EQ(t_->emb_partition(ids, 2, 2, HB_CUDA_PARTITION_DIV, 0, owner,
                              nullptr, nullptr, nullptr, err_, sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("rows_per_shard"), std::string::npos)
      << err_;
  EXPECT_EQ(t_->emb_dedup(ids, 2, nullptr, nullptr, nullptr, nullptr, nullptr,
                          nullptr, err_, sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t_->emb_gather(nullptr, 1, 1, 0, nullptr, 1, nullptr, nullptr, err_,
                           sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("dim 0"), std::string::npos) << err_;
  EXPECT_EQ(t_->emb_gather(nullptr, 1, 3, 4, nullptr, 1, nullptr, nullptr, err_,
                           sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("row_stride 3"), std::string::npos) << err_;
  hb_cuda_optimizer opt = {};
  opt.kind = 9;
  EXPECT_EQ(t_->emb_apply(&opt, nullptr, 1, 1, 1, nullptr, nullptr, 1, nullptr,
                          nullptr, err_, sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("unknown optimizer 9"), std::string::npos)
      << err_;
  opt.kind = HB_OPT_ADAM;  // dim 4 needs 4 * 3 + 2 words per record
  EXPECT_EQ(t_->emb_apply(&opt, nullptr, 13, 1, 4, nullptr, nullptr, 1, nullptr,
                          nullptr, err_, sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("record_words 13 < 14"), std::string::npos)
      << err_;
  EXPECT_EQ(t_->emb_wire_encode(nullptr, 1, HB_FLOAT32, nullptr, nullptr, err_,
                                sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("not float16 or bfloat16"),
            std::string::npos)
      << err_;
  EXPECT_EQ(t_->emb_wire_decode(nullptr, 1, HB_INT32, nullptr, nullptr, err_,
                                sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  float thresholds[3] = {0.0f, 0.5f, 0.25f};
  EXPECT_EQ(
      t_->auc_histogram(nullptr, nullptr, nullptr, 1, thresholds, 3, nullptr,
                        nullptr, nullptr, nullptr, nullptr, err_, sizeof err_),
      HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("not ascending at index 2"),
            std::string::npos)
      << err_;
  EXPECT_EQ(
      t_->divide_async(nullptr, 1, HB_FLOAT32, 2, nullptr, err_, sizeof err_),
      HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("not an integer dtype"), std::string::npos)
      << err_;
  EXPECT_EQ(
      t_->divide_async(nullptr, 1, HB_INT32, 0, nullptr, err_, sizeof err_),
      HB_ERR_INVALID_ARGUMENT);
}

TEST_F(PluginTable, CollectiveChecksDtypeAndOp) {
  hb_cuda_collective c = {};
  c.kind = HB_CUDA_ALLREDUCE;
  c.nranks = 1;
  c.count = 1;
  int32_t in_progress = 0;
  c.dtype = 42;
  EXPECT_EQ(t_->nccl_collective(nullptr, nullptr, &c, &in_progress, err_,
                                sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("allreduce: dtype 42"), std::string::npos)
      << err_;
  c.dtype = HB_INT32;
  c.op = HB_AVG;  // integer averages are the core's sum + divide_async
  EXPECT_EQ(t_->nccl_collective(nullptr, nullptr, &c, &in_progress, err_,
                                sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  c.kind = HB_CUDA_ALLTOALLV;
  c.op = HB_SUM;
  EXPECT_EQ(t_->nccl_collective(nullptr, nullptr, &c, &in_progress, err_,
                                sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_).find("per-peer counts"), std::string::npos)
      << err_;
  int32_t rank_bad = 0;
  uint8_t id[HB_CUDA_NCCL_ID_BYTES] = {0};
  void *comm = nullptr;
  EXPECT_EQ(t_->nccl_comm_init(&comm, 2, 2, id, err_, sizeof err_),
            HB_ERR_INVALID_ARGUMENT);
  (void)rank_bad;
}
#endif  // HB_TEST_CUDA_PLUGIN_PATH

// The shared formulas against the same math in double (close, not equal:
// float rounding), so a typo in one formula cannot hide.
TEST(OptimizerMath, MatchesDoubleReference) {
  const double lr = 0.05, eps = 1e-8, init = 0.1, b1 = 0.9, b2 = 0.999;
  const double l1 = 0.01, l2 = 0.02;
  const float grads[] = {0.5f, -1.25f, 0.0f, 2.0f, -0.01f};
  hb::optmath::Hyper h =
      hb::optmath::make_hyper(lr, eps, init, b1, b2, l1, l2, -0.5);
  float w = 0.3f, acc = static_cast<float>(init);
  double wd = 0.3, accd = static_cast<float>(init);
  for (float g : grads) {
    hb::optmath::adagrad(w, acc, g, h);
    accd += double(g) * g;
    wd -= lr * g / (std::sqrt(accd) + eps);
  }
  EXPECT_NEAR(w, wd, 1e-6);
  float m = 0, v = 0;
  w = 0.3f;
  double md = 0, vd = 0;
  wd = 0.3;
  int64_t t = 0;
  for (float g : grads) {
    ++t;
    hb::optmath::adam(w, m, v, g, hb::optmath::adam_lr(h, t), h);
    md = b1 * md + (1 - b1) * g;
    vd = b2 * vd + (1 - b2) * g * g;
    double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    wd -= lr_t * md / (std::sqrt(vd) + eps);
  }
  EXPECT_NEAR(w, wd, 1e-5);
  for (double lr_power : {-0.5, -0.25}) {
    h = hb::optmath::make_hyper(lr, eps, init, b1, b2, l1, l2, lr_power);
    float n = static_cast<float>(init), z = 0;
    w = 0.0f;
    double nd = static_cast<float>(init), zd = 0;
    wd = 0;
    for (float g : grads) {
      hb::optmath::ftrl(w, n, z, g, h);
      double nn = nd + double(g) * g;
      double sigma = (std::pow(nn, -lr_power) - std::pow(nd, -lr_power)) / lr;
      zd += g - sigma * wd;
      nd = nn;
      double quad = std::pow(nd, -lr_power) / lr + 2 * l2;
      wd = std::fabs(zd) > l1 ? ((zd > 0 ? l1 : -l1) - zd) / quad : 0.0;
    }
    EXPECT_NEAR(w, wd, 1e-5) << "lr_power " << lr_power;
    EXPECT_NE(w, 0.0f);
  }
  w = 1.0f;
  hb::optmath::sgd(w, 2.0f, h);
  EXPECT_FLOAT_EQ(w, 0.9f);
  EXPECT_EQ(hb::optmath::record_words(HB_OPT_SGD, 8), 8);
  EXPECT_EQ(hb::optmath::record_words(HB_OPT_ADAGRAD, 8), 16);
  EXPECT_EQ(hb::optmath::record_words(HB_OPT_ADAM, 8), 26);
  EXPECT_EQ(hb::optmath::record_words(HB_OPT_FTRL, 8), 24);
}

}  // namespace

namespace {

// The host reference the multi-rank GPU test checks NCCL against.
TEST(GpuTestData, ReduceReference) {
  auto bytes = [](hb_dtype dt, std::vector<double> v) {
    std::vector<uint8_t> out(v.size() * hb_dtype_size(dt));
    for (size_t i = 0; i < v.size(); ++i) {
      uint8_t *p = &out[i * hb_dtype_size(dt)];
      if (dt == HB_UINT8) *p = static_cast<uint8_t>(v[i]);
      if (dt == HB_INT32) {
        int32_t x = static_cast<int32_t>(v[i]);
        std::memcpy(p, &x, 4);
      }
      if (dt == HB_FLOAT16) {
        uint16_t h = hb::float_to_half(float(v[i]));
        std::memcpy(p, &h, 2);
      }
    }
    return out;
  };
  std::vector<std::vector<uint8_t>> u8 = {bytes(HB_UINT8, {200, 3}),
                                          bytes(HB_UINT8, {100, 5})};
  EXPECT_EQ(hb_test::reduce_ref(u8, HB_UINT8, HB_SUM, 0), 44);  // 300 wraps
  EXPECT_EQ(hb_test::reduce_ref(u8, HB_UINT8, HB_PROD, 1), 15);
  EXPECT_EQ(hb_test::reduce_ref(u8, HB_UINT8, HB_AVG, 0),
            22);  // of the wrapped sum
  EXPECT_EQ(hb_test::reduce_ref(u8, HB_UINT8, HB_MIN, 0), 100);
  std::vector<std::vector<uint8_t>> i32 = {bytes(HB_INT32, {-7, 65536}),
                                           bytes(HB_INT32, {2, 65536}),
                                           bytes(HB_INT32, {0, 1})};
  EXPECT_EQ(hb_test::reduce_ref(i32, HB_INT32, HB_AVG, 0),
            -1);  // -5 / 3 toward zero
  EXPECT_EQ(hb_test::reduce_ref(i32, HB_INT32, HB_PROD, 1),
            0);  // 2^32 wraps to 0
  EXPECT_EQ(hb_test::reduce_ref(i32, HB_INT32, HB_MAX, 0), 2);
  std::vector<std::vector<uint8_t>> f16 = {bytes(HB_FLOAT16, {1}),
                                           bytes(HB_FLOAT16, {2})};
  EXPECT_EQ(hb_test::reduce_ref(f16, HB_FLOAT16, HB_AVG, 0), 1.5);
  EXPECT_EQ(hb_test::reduce_ref(f16, HB_FLOAT16, HB_PROD, 0), 2.0);
  auto a = hb_test::small_ints(HB_BFLOAT16, 50, 1),
       b = hb_test::small_ints(HB_BFLOAT16, 50, 2);
  EXPECT_NE(a, b);
  for (size_t i = 0; i < 50; ++i) {
    double x = hb_test::element(a, HB_BFLOAT16, i);
    EXPECT_TRUE(x >= -4 && x <= 4 && x == std::floor(x)) << x;
  }
}

}  // namespace
