// Gradient fusion: bucket plans, and hb_allreduce_many's result equal bit for
// bit to one allreduce per tensor (random floats, where summation order
// would show).
#include <gtest/gtest.h>

#include <random>

#include "comm/fusion.h"
#include "thread_world.h"
#include "typed.h"

namespace {

using hb::comm::plan_buckets;

std::vector<size_t> sizes_of(
    const std::vector<std::vector<hb::comm::Tensor>> &b) {
  std::vector<size_t> out;
  for (auto &bucket : b) {
    size_t n = 0;
    for (auto &t : bucket) n += t.count;
    out.push_back(n);
  }
  return out;
}

TEST(FusionPlan, BucketBytesAndCount) {
  std::vector<float> a(100), b(300), c(50), d(1000);
  void *bufs[] = {a.data(), b.data(), nullptr, c.data(), d.data()};
  size_t counts[] = {100, 300, 0, 50, 1000};
  // 2 KiB buckets: 100+300 fit (1600 B), 50 fits (1800 B), 1000 alone.
  EXPECT_EQ(sizes_of(plan_buckets(bufs, counts, 5, 4, 0, 2048)),
            (std::vector<size_t>{450, 1000}));
  // Tiny buckets: one tensor each, the empty one left out.
  EXPECT_EQ(sizes_of(plan_buckets(bufs, counts, 5, 4, 0, 1)),
            (std::vector<size_t>{100, 300, 50, 1000}));
  // Two buckets of about equal bytes.
  EXPECT_EQ(sizes_of(plan_buckets(bufs, counts, 5, 4, 2, 0)),
            (std::vector<size_t>{450, 1000}));
  // More buckets than tensors: at most one bucket per tensor.
  EXPECT_EQ(plan_buckets(bufs, counts, 5, 4, 64, 0).size(), 4u);
  EXPECT_TRUE(plan_buckets(bufs, counts, 0, 4, 0, 1024).empty());
}

void expect_fused_equals_single(int n, hb_dtype t, hb_reduce_op op,
                                int64_t nbuckets, int64_t bucket_bytes,
                                hb::comm::BackendConfig cfg = {}) {
  hb::test::ThreadWorld w(n, cfg);
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> len(0, 700);
  std::uniform_real_distribution<double> val(-1, 1);
  const size_t kTensors = 37;
  std::vector<size_t> counts(kTensors);
  for (auto &c : counts) c = len(rng);
  counts[3] = 0;
  counts[20] = 5000;
  const size_t es = hb_dtype_size(t);
  // fused[r][k] and single[r][k]: the same random tensors.
  std::vector<std::vector<std::vector<unsigned char>>> fused(n), single(n);
  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < kTensors; ++k) {
      std::vector<unsigned char> b(std::max<size_t>(counts[k], 1) * es);
      for (size_t i = 0; i < counts[k]; ++i)
        hb::test::put(t, b.data(), i, val(rng) * 3.7);
      fused[r].push_back(b);
      single[r].push_back(b);
    }
  w.run([&](int r) {
    std::vector<void *> bufs;
    for (auto &b : fused[r]) bufs.push_back(b.data());
    auto plan = plan_buckets(bufs.data(), counts.data(), kTensors, es, nbuckets,
                             bucket_bytes);
    ASSERT_GT(plan.size(), 1u);
    w.at(r).allreduce_buckets(plan, t, op);
    for (size_t k = 0; k < kTensors; ++k)
      w.at(r).allreduce(single[r][k].data(), single[r][k].data(), counts[k], t,
                        op);
  });
  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < kTensors; ++k)
      ASSERT_EQ(0, std::memcmp(fused[r][k].data(), single[r][k].data(),
                               counts[k] * es))
          << "world " << n << " rank " << r << " tensor " << k << " "
          << hb::dtype_name(t);
}

TEST(Fusion, ManyEqualsOneCallPerTensorByBytes) {
  for (int n : {2, 3, 4})
    for (hb_dtype t : {HB_FLOAT32, HB_FLOAT64, HB_BFLOAT16})
      expect_fused_equals_single(n, t, HB_SUM, 0, 8192);
}

// Buckets and single tensors taking different paths (a bucket over
// per-call buffers in pieces, small tensors over registered ones, in one
// round or two) still agree bit for bit: every path reduces in rank order.
TEST(Fusion, ManyEqualsOneCallPerTensorAcrossPaths) {
  hb::comm::BackendConfig cfg;
  cfg.staged_bytes = 4096;
  cfg.piece_bytes = 1000;
  cfg.one_round_bytes = 1024;
  for (int n : {2, 3, 4})
    for (hb_reduce_op op : {HB_SUM, HB_MIN})
      expect_fused_equals_single(n, HB_FLOAT32, op, 0, 16384, cfg);
}

TEST(Fusion, ManyEqualsOneCallPerTensorByCount) {
  for (int n : {3, 4}) {
    expect_fused_equals_single(n, HB_FLOAT32, HB_AVG, 3, 0);
    expect_fused_equals_single(n, HB_FLOAT16, HB_PROD, 5, 0);
  }
}

}  // namespace
