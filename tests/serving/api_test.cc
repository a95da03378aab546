// The versioned-export and serving-update entry points on a world-of-one
// context: train, export full then deltas, follow them in a serving table
// with hb_embedding_update, check every row and the reported versions, and
// the refusals (serving table only, sharded table only, old bases, after a
// load).
#define HB_EXPERIMENTAL 1
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hb.h"

namespace {

std::string tmp(const std::string &tag) {
  return "/tmp/hb_serving_api_" + std::to_string(::getpid()) + "_" + tag;
}

TEST(ServingApi, ExportVersionsAndFollow) {
  hb_context *ctx = nullptr;
  ASSERT_EQ(hb_context_create(nullptr, &ctx), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_context_set_option(ctx, "delta_keep_versions", "2"), HB_OK);
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "api";
  c.dim = 4;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -1;
  c.init_b = 1;
  hb_embedding *t = nullptr, *s = nullptr;
  ASSERT_EQ(hb_embedding_create(ctx, &c, &t), HB_OK) << hb_last_error();
  const std::string full = tmp("full"), delta = tmp("delta"), ck = tmp("ck");
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 50; ++i) ids.push_back(i * 31 - 700);
  std::vector<float> out(ids.size() * 4), grad(out.size(), 0.5f),
      got(out.size());
  for (int64_t v = 1; v <= 5; ++v) {
    std::vector<int64_t> some(ids.begin(), ids.begin() + 10 * v);
    ASSERT_EQ(
        hb_embedding_apply_gradients(t, some.data(), some.size(), grad.data()),
        HB_OK);
    const std::string &p = v == 1 ? full : delta;
    ASSERT_EQ(hb_embedding_export_version(t, p.c_str(), v, v == 1 ? 0 : v - 1),
              HB_OK)
        << hb_last_error();
    if (v == 1)
      ASSERT_EQ(hb_embedding_open(full.c_str(), &s), HB_OK) << hb_last_error();
    else
      ASSERT_EQ(hb_embedding_update(s, delta.c_str()), HB_OK)
          << hb_last_error();
    EXPECT_EQ(hb_embedding_version(s), v);
    // Only the rows trained so far exist; the rest read zeros.
    ASSERT_EQ(hb_embedding_lookup(t, some.data(), some.size(), out.data()),
              HB_OK);
    int64_t version = -1;
    ASSERT_EQ(hb_embedding_lookup_version(s, some.data(), some.size(),
                                          got.data(), &version),
              HB_OK);
    EXPECT_EQ(version, v);
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + some.size() * 4),
              std::vector<float>(out.begin(), out.begin() + some.size() * 4));
    EXPECT_EQ(hb_embedding_local_rows(s), static_cast<int64_t>(some.size()));
  }
  // keep = 2: version 3 is too old a base now.
  EXPECT_EQ(hb_embedding_export_version(t, delta.c_str(), 6, 3),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("export a full version"),
            std::string::npos)
      << hb_last_error();
  // The wrong kind of handle.
  EXPECT_EQ(hb_embedding_update(t, delta.c_str()), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_export_version(s, delta.c_str(), 6, 0),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_update(nullptr, delta.c_str()),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_version(t), 0);
  // After a load every earlier base is gone.
  ASSERT_EQ(hb_embedding_save(t, ck.c_str()), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_load(t, ck.c_str()), HB_OK) << hb_last_error();
  EXPECT_EQ(hb_embedding_export_version(t, delta.c_str(), 6, 5),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("no versioned export"),
            std::string::npos)
      << hb_last_error();
  // A full export after the load has another lineage: the served chain's
  // deltas are refused, the new full version is accepted.
  ASSERT_EQ(hb_embedding_export_version(t, full.c_str(), 6, 0), HB_OK);
  ASSERT_EQ(hb_embedding_apply_gradients(t, ids.data(), 5, grad.data()), HB_OK);
  ASSERT_EQ(hb_embedding_export_version(t, delta.c_str(), 7, 6), HB_OK);
  EXPECT_EQ(hb_embedding_update(s, delta.c_str()), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_embedding_version(s), 5);
  ASSERT_EQ(hb_embedding_update(s, full.c_str()), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_update(s, delta.c_str()), HB_OK) << hb_last_error();
  EXPECT_EQ(hb_embedding_version(s), 7);
  hb_embedding_destroy(s);
  hb_embedding_destroy(t);
  hb_context_destroy(ctx);
  for (const auto &p : {full, delta}) ::unlink(p.c_str());
  std::filesystem::remove_all(ck);
}

}  // namespace
