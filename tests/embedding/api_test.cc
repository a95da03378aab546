// The C entry points on a world-of-one context: argument checks, the
// round trip create/lookup/apply/save/load/export/open, and concurrent
// serving lookups through hb_embedding_lookup (run under TSan).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "hb.h"

namespace {

struct Ctx {
  hb_context *ctx = nullptr;
  Ctx() {
    EXPECT_EQ(hb_context_create(nullptr, &ctx), HB_OK) << hb_last_error();
  }
  ~Ctx() { hb_context_destroy(ctx); }
};

hb_embedding_config config() {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "api";
  c.dim = 4;
  c.num_rows = 100;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -1;
  c.init_b = 1;
  c.optimizer = HB_OPT_ADAGRAD;
  return c;
}

std::string tmp(const char *tag) {
  return "/tmp/hb_emb_api_" + std::to_string(::getpid()) + "_" + tag;
}

TEST(Api, NullsAndBadArguments) {
  Ctx c;
  hb_embedding_config cfg = config();
  hb_embedding *e = nullptr;
  EXPECT_EQ(hb_embedding_create(nullptr, &cfg, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_create(c.ctx, nullptr, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_create(c.ctx, &cfg, nullptr), HB_ERR_INVALID_ARGUMENT);
  cfg.dim = -3;
  EXPECT_EQ(hb_embedding_create(c.ctx, &cfg, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("dim -3"), std::string::npos)
      << hb_last_error();
  EXPECT_EQ(e, nullptr);
  EXPECT_EQ(hb_embedding_lookup(nullptr, nullptr, 0, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_apply_gradients(nullptr, nullptr, 0, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_save(nullptr, "x"), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_open(nullptr, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_open(tmp("none").c_str(), &e), HB_ERR_IO);
  EXPECT_EQ(hb_embedding_dim(nullptr), 0);
  EXPECT_EQ(hb_embedding_local_rows(nullptr), 0);
  EXPECT_EQ(hb_embedding_misses(nullptr), 0u);
  hb_embedding_destroy(nullptr);

  cfg = config();
  ASSERT_EQ(hb_embedding_create(c.ctx, &cfg, &e), HB_OK);
  float out[8];
  EXPECT_EQ(hb_embedding_lookup(e, nullptr, 2, out), HB_ERR_INVALID_ARGUMENT);
  int64_t id = 100;
  EXPECT_EQ(hb_embedding_lookup(e, &id, 1, out), HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("id 100"), std::string::npos);
  EXPECT_EQ(hb_embedding_save(e, nullptr), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_lookup(e, nullptr, 0, nullptr), HB_OK);  // n = 0
  hb_embedding_destroy(e);
}

TEST(Api, RoundTrip) {
  Ctx c;
  hb_embedding_config cfg = config();
  hb_embedding *e = nullptr;
  ASSERT_EQ(hb_embedding_create(c.ctx, &cfg, &e), HB_OK) << hb_last_error();
  EXPECT_EQ(hb_embedding_dim(e), 4);
  EXPECT_EQ(hb_embedding_local_rows(e), 100);
  int64_t ids[3] = {5, 7, 5};
  float g[12], before[12], after[12], loaded[12];
  for (int i = 0; i < 12; ++i) g[i] = 0.5f;
  ASSERT_EQ(hb_embedding_lookup(e, ids, 3, before), HB_OK);
  std::string dir = tmp("ckpt");
  ASSERT_EQ(hb_embedding_save(e, dir.c_str()), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_apply_gradients(e, ids, 3, g), HB_OK);
  ASSERT_EQ(hb_embedding_lookup(e, ids, 3, after), HB_OK);
  EXPECT_NE(std::memcmp(before, after, sizeof before), 0);
  EXPECT_EQ(std::memcmp(after, after + 8, 16), 0);  // duplicate id, same row
  ASSERT_EQ(hb_embedding_load(e, dir.c_str()), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_lookup(e, ids, 3, loaded), HB_OK);
  EXPECT_EQ(std::memcmp(before, loaded, sizeof before), 0);

  std::string file = tmp("export");
  ASSERT_EQ(hb_embedding_export(e, file.c_str()), HB_OK) << hb_last_error();
  hb_embedding *s = nullptr;
  ASSERT_EQ(hb_embedding_open(file.c_str(), &s), HB_OK) << hb_last_error();
  EXPECT_EQ(hb_embedding_dim(s), 4);
  EXPECT_EQ(hb_embedding_local_rows(s), 100);
  float served[12];
  ASSERT_EQ(hb_embedding_lookup(s, ids, 3, served), HB_OK);
  EXPECT_EQ(std::memcmp(served, loaded, sizeof served), 0);
  EXPECT_EQ(hb_embedding_apply_gradients(s, ids, 3, g),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_save(s, dir.c_str()), HB_ERR_INVALID_ARGUMENT);
  hb_embedding_destroy(s);
  hb_embedding_destroy(e);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(file);
}

TEST(Api, ServingLookupsFromManyThreads) {
  Ctx c;
  hb_embedding_config cfg = config();
  cfg.num_rows = 0;
  hb_embedding *e = nullptr;
  ASSERT_EQ(hb_embedding_create(c.ctx, &cfg, &e), HB_OK);
  std::vector<int64_t> known;
  for (int i = 0; i < 500; ++i)
    known.push_back(static_cast<int64_t>(i) * -7919);
  std::vector<float> rows(known.size() * 4);
  ASSERT_EQ(hb_embedding_lookup(e, known.data(), known.size(), rows.data()),
            HB_OK);
  std::string file = tmp("threads");
  ASSERT_EQ(hb_embedding_export(e, file.c_str()), HB_OK);
  hb_embedding_destroy(e);

  hb_embedding *s = nullptr;
  ASSERT_EQ(hb_embedding_open(file.c_str(), &s), HB_OK);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      std::vector<int64_t> ids = {known[t], 1234567,
                                  known[(t * 31) % known.size()]};
      std::vector<float> out(12);
      for (int it = 0; it < 300; ++it) {
        if (hb_embedding_lookup(s, ids.data(), 3, out.data()) != HB_OK) ++bad;
        if (std::memcmp(out.data(), &rows[t * 4], 16) != 0) ++bad;
        for (int k = 4; k < 8; ++k)
          if (out[k] != 0.0f) ++bad;
      }
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(hb_embedding_misses(s), 8u * 300);
  hb_embedding_destroy(s);
  std::filesystem::remove(file);
}

}  // namespace
