// An embedding collection of GPU tables (device = 0) through the public API
// of the shared libhb.so against a collection of host tables of the same
// configs: bit-equal pooled and unpooled outputs and rows over many steps
// (every pooling mode, weights, empty bags, mixed dims, optimizers, wire
// dtypes, static and dynamic tables), the same rounds, plan reuse and
// re-planning, and the refusals (host buffers, host and GPU tables mixed).
// One rank (NCCL refuses two ranks on one GPU). Without a GPU it skips with
// the reason.
#define HB_EXPERIMENTAL 1
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api_context.h"
#include "embedding/collection_ref.h"
#include "hb.h"

#ifdef HB_TEST_WITH_CUDART
#include <cuda_runtime.h>
#endif

namespace {

using Ctx = hbtest::ApiContext;

#ifdef HB_TEST_WITH_CUDART

// Device blocks of one batch, freed on scope exit.
struct DevBlocks {
  std::vector<void *> blocks;
  template <class T>
  T *put(const std::vector<T> &v, size_t count) {
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(count * sizeof(T), 8)),
              cudaSuccess);
    blocks.push_back(p);
    if (!v.empty())
      EXPECT_EQ(
          cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
          cudaSuccess);
    return static_cast<T *>(p);
  }
  ~DevBlocks() {
    for (void *p : blocks) cudaFree(p);
  }
};

template <class T>
std::vector<T> download(const T *p, size_t n) {
  std::vector<T> v(n);
  if (n)
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
  return v;
}

// A batch's arrays, outputs and gradients on the device, and its view.
struct DevBatch {
  DevBlocks mem;
  std::vector<const int64_t *> ids, offsets, lengths;
  std::vector<const float *> weights, grad_unpooled;
  std::vector<float *> unpooled;
  float *out;
  const float *grad_out;
  hb_jagged_batch view = HB_JAGGED_BATCH_INIT;

  DevBatch(const hbtest::JBatch &b, const hbtest::CollCase &c) {
    const size_t F = c.features.size();
    for (size_t f = 0; f < F; ++f) {
      // With lengths the ids start at the feature's first id (no padding).
      const size_t skip = b.use_lengths ? b.base[f] : 0;
      std::vector<int64_t> fid(b.ids[f].begin() + skip, b.ids[f].end());
      ids.push_back(mem.put(fid, fid.size()));
      offsets.push_back(mem.put(b.offsets[f], b.offsets[f].size()));
      lengths.push_back(mem.put(b.lengths[f], b.lengths[f].size()));
      std::vector<float> w;
      if (!b.weights[f].empty())
        w.assign(b.weights[f].begin() + skip, b.weights[f].end());
      weights.push_back(w.empty() ? nullptr : mem.put(w, w.size()));
      const int64_t dim = c.tables[c.features[f].table].dim;
      const bool none = c.features[f].pooling == HB_POOLING_NONE;
      unpooled.push_back(none ? mem.put(std::vector<float>(), b.n(f) * dim)
                              : nullptr);
      grad_unpooled.push_back(
          none ? mem.put(b.grad_unpooled[f], b.grad_unpooled[f].size())
               : nullptr);
    }
    out = mem.put(std::vector<float>(), b.B * hbtest::coll_width(c));
    grad_out = mem.put(b.grad_out, b.grad_out.size());
    view.batch_size = b.B;
    view.ids = ids.data();
    view.weights = weights.data();
    if (b.use_lengths)
      view.lengths = lengths.data();
    else
      view.offsets = offsets.data();
  }
};

// Both sides of the comparison: host tables + collection on one context,
// GPU tables + collection on another (same names: the same initial rows).
struct Sides {
  Ctx hc, gc;
  hbtest::CollCase c = hbtest::standard_case();
  std::vector<hb_embedding *> ht, gt;
  hb_collection *hcoll = nullptr, *gcoll = nullptr;

  bool create() {
    if (hc.status != HB_OK || gc.status != HB_OK) return false;
    for (const auto &cfg : c.tables) {
      hb_embedding_config g = cfg;
      g.device = 0;
      hb_embedding *a = nullptr, *b = nullptr;
      EXPECT_EQ(hb_embedding_create(hc.ctx, &cfg, &a), HB_OK)
          << hb_last_error();
      EXPECT_EQ(hb_embedding_create(gc.ctx, &g, &b), HB_OK) << hb_last_error();
      if (!a || !b) return false;
      ht.push_back(a), gt.push_back(b);
    }
    std::vector<hb_collection_feature> hf, gf;
    for (size_t f = 0; f < c.features.size(); ++f) {
      hb_collection_feature x = HB_COLLECTION_FEATURE_INIT;
      x.name = c.names[f].c_str();
      x.pooling = c.features[f].pooling;
      x.table = ht[c.features[f].table];
      hf.push_back(x);
      x.table = gt[c.features[f].table];
      gf.push_back(x);
    }
    EXPECT_EQ(hb_collection_create(hc.ctx, hf.data(), hf.size(), &hcoll), HB_OK)
        << hb_last_error();
    EXPECT_EQ(hb_collection_create(gc.ctx, gf.data(), gf.size(), &gcoll), HB_OK)
        << hb_last_error();
    return hcoll && gcoll;
  }
  ~Sides() {
    hb_collection_destroy(hcoll);
    hb_collection_destroy(gcoll);
    for (hb_embedding *e : ht) hb_embedding_destroy(e);
    for (hb_embedding *e : gt) hb_embedding_destroy(e);
  }

  // Lookup (look may be NULL) and update on both; false on a difference.
  ::testing::AssertionResult step(hbtest::JBatch *look, hbtest::JBatch &upd) {
    const size_t F = c.features.size();
    if (look) {
      hbtest::JBatch &b = *look;
      std::vector<float> out(b.B * hbtest::coll_width(c));
      std::vector<std::vector<float>> unp(F);
      std::vector<float *> up(F, nullptr);
      for (size_t f = 0; f < F; ++f)
        if (c.features[f].pooling == HB_POOLING_NONE) {
          unp[f].resize(b.n(f) * c.tables[c.features[f].table].dim);
          up[f] = unp[f].data();
        }
      hb_jagged_batch v = b.view();
      if (hb_collection_lookup(hcoll, &v, out.data(), up.data()) != HB_OK)
        return ::testing::AssertionFailure() << hb_last_error();
      DevBatch d(b, c);
      if (hb_collection_lookup(gcoll, &d.view, d.out, d.unpooled.data()) !=
          HB_OK)
        return ::testing::AssertionFailure() << hb_last_error();
      if (hb_context_synchronize(gc.ctx) != HB_OK)
        return ::testing::AssertionFailure() << hb_last_error();
      std::vector<float> got = download(d.out, out.size());
      if (!out.empty() && std::memcmp(got.data(), out.data(), out.size() * 4))
        return ::testing::AssertionFailure() << "pooled output differs";
      for (size_t f = 0; f < F; ++f) {
        if (!up[f] || unp[f].empty()) continue;
        got = download(d.unpooled[f], unp[f].size());
        if (std::memcmp(got.data(), unp[f].data(), unp[f].size() * 4))
          return ::testing::AssertionFailure()
                 << "unpooled output of feature " << f << " differs";
      }
    }
    std::vector<const float *> gup(F);
    for (size_t f = 0; f < F; ++f) gup[f] = upd.grad_unpooled[f].data();
    hb_jagged_batch v = upd.view();
    if (hb_collection_apply_gradients(hcoll, &v, upd.grad_out.data(),
                                      gup.data()) != HB_OK)
      return ::testing::AssertionFailure() << hb_last_error();
    DevBatch d(upd, c);
    if (hb_collection_apply_gradients(gcoll, &d.view, d.grad_out,
                                      d.grad_unpooled.data()) != HB_OK ||
        hb_context_synchronize(gc.ctx) != HB_OK)
      return ::testing::AssertionFailure() << hb_last_error();
    return ::testing::AssertionSuccess();
  }

  // The rows of ids (each table's) on both sides, bit for bit.
  ::testing::AssertionResult same_rows(
      const std::vector<std::vector<int64_t>> &ids) {
    for (size_t t = 0; t < ht.size(); ++t) {
      const int64_t dim = c.tables[t].dim;
      std::vector<float> want(ids[t].size() * dim);
      if (hb_embedding_lookup(ht[t], ids[t].data(), ids[t].size(),
                              want.data()) != HB_OK)
        return ::testing::AssertionFailure() << hb_last_error();
      DevBlocks m;
      int64_t *d_ids = m.put(ids[t], ids[t].size());
      float *d_out = m.put(std::vector<float>(), want.size());
      if (hb_embedding_lookup(gt[t], d_ids, ids[t].size(), d_out) != HB_OK ||
          hb_context_synchronize(gc.ctx) != HB_OK)
        return ::testing::AssertionFailure() << hb_last_error();
      std::vector<float> got = download(d_out, want.size());
      if (!want.empty() &&
          std::memcmp(got.data(), want.data(), want.size() * 4))
        return ::testing::AssertionFailure() << "table " << t << " differs";
    }
    return ::testing::AssertionSuccess();
  }
};

bool have_gpu() {
  Ctx c;
  if (c.status == HB_OK && hb_context_num_gpus(c.ctx) > 0) return true;
  std::printf("[  SKIP    ] no GPU: %s\n", hb_build_info());
  return false;
}

TEST(GpuCollection, BitEqualToTheHostCollection) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << hb_build_info();
  Sides s;
  ASSERT_TRUE(s.create());
  std::mt19937_64 g(7);
  std::vector<std::vector<int64_t>> touched(s.c.tables.size());
  const int steps = 12;
  for (int step = 0; step < steps; ++step) {
    hbtest::JBatch b =
        hbtest::make_jbatch(g, s.c, step % 5 == 4 ? 0 : 1 + g() % 9);
    for (size_t f = 0; f < s.c.features.size(); ++f)
      for (size_t k = 0; k < b.n(f); ++k)
        touched[s.c.features[f].table].push_back(b.id_ptr(f)[k]);
    ASSERT_TRUE(s.step(&b, b)) << "step " << step;
  }
  EXPECT_TRUE(s.same_rows(touched));
  hb_collection_stats a = HB_COLLECTION_STATS_INIT,
                      d = HB_COLLECTION_STATS_INIT;
  ASSERT_EQ(hb_collection_get_stats(s.hcoll, &a), HB_OK);
  ASSERT_EQ(hb_collection_get_stats(s.gcoll, &d), HB_OK);
  EXPECT_EQ(d.rounds, a.rounds);
  EXPECT_EQ(d.rounds, 4u * steps);
  EXPECT_EQ(d.reused_plans, static_cast<uint64_t>(steps));
  EXPECT_EQ(d.wire_bytes_sent, a.wire_bytes_sent);

  // An update of other ids plans again, on both alike.
  hbtest::JBatch look = hbtest::make_jbatch(g, s.c, 5), upd = look;
  hbtest::shift_ids(upd, s.c);
  for (size_t f = 0; f < s.c.features.size(); ++f)
    for (size_t k = 0; k < upd.n(f); ++k)
      touched[s.c.features[f].table].push_back(upd.id_ptr(f)[k]);
  ASSERT_TRUE(s.step(&look, upd));
  ASSERT_EQ(hb_collection_get_stats(s.gcoll, &d), HB_OK);
  EXPECT_EQ(d.reused_plans, static_cast<uint64_t>(steps));
  EXPECT_TRUE(s.same_rows(touched));
}

TEST(GpuCollection, RefusesHostBuffersAndMixedTables) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << hb_build_info();
  Sides s;
  ASSERT_TRUE(s.create());
  std::mt19937_64 g(9);
  hbtest::JBatch b = hbtest::make_jbatch(g, s.c, 3);
  std::vector<float> out(3 * hbtest::coll_width(s.c));
  std::vector<float *> up(s.c.features.size(), nullptr);
  std::vector<std::vector<float>> unp(s.c.features.size());
  for (size_t f = 0; f < up.size(); ++f) {
    unp[f].resize(b.n(f) * 8 + 8);
    up[f] = unp[f].data();
  }
  hb_jagged_batch v = b.view();  // host arrays
  EXPECT_EQ(hb_collection_lookup(s.gcoll, &v, out.data(), up.data()),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("host memory"), std::string::npos)
      << hb_last_error();
  // The collection still works after the refusal.
  EXPECT_TRUE(s.step(&b, b));

  hb_embedding_config hcfg = s.c.tables[0];
  hcfg.name = "host_on_gpu_ctx";
  hb_embedding *h = nullptr;
  ASSERT_EQ(hb_embedding_create(s.gc.ctx, &hcfg, &h), HB_OK);
  hb_collection_feature fs[2] = {HB_COLLECTION_FEATURE_INIT,
                                 HB_COLLECTION_FEATURE_INIT};
  fs[0].table = s.gt[0];
  fs[1].table = h;
  hb_collection *mixed = nullptr;
  EXPECT_EQ(hb_collection_create(s.gc.ctx, fs, 2, &mixed), HB_ERR_UNSUPPORTED);
  EXPECT_EQ(mixed, nullptr);
  hb_embedding_destroy(h);
}

#else

TEST(GpuCollection, Skipped) {
  std::printf("[  SKIP    ] built without the CUDA runtime: %s\n",
              hb_build_info());
  GTEST_SKIP() << "built without the CUDA runtime";
}

#endif

}  // namespace
