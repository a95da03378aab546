// Embedding collections through the public API on real processes (hbrun):
//   mp_collection train DIR  bit-equal training vs the reference; then the
//                            tables of the collection are saved, trained
//                            on, loaded back (the collection keeps working)
//                            and exported; the export is checked
//   mp_collection mismatch   ranks create collections of different
//                            features: every rank fails, naming them; ranks
//                            call different collections: every rank gets
//                            HB_ERR_MISMATCH
// Every rank computes the whole reference itself from the shared seeds.
#define HB_EXPERIMENTAL 1

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collection_ref.h"
#include "common/mp_check.h"

int g_mp_rank = 0;
const char *g_mp_name = "mp_collection";

namespace {

int g_rank = 0, g_world = 1;

using hbtest::CollCase;
using hbtest::CollRef;
using hbtest::JBatch;

struct Model {
  std::vector<hb_embedding *> tables;
  hb_collection *coll = nullptr;
  Model(hb_context *ctx, const CollCase &c, bool alt_pooling = false) {
    for (const auto &cfg : c.tables) {
      hb_embedding *e = nullptr;
      CHECK_OK(hb_embedding_create(ctx, &cfg, &e));
      tables.push_back(e);
    }
    std::vector<hb_collection_feature> fs;
    for (size_t f = 0; f < c.features.size(); ++f) {
      hb_collection_feature x = HB_COLLECTION_FEATURE_INIT;
      x.name = c.names[f].c_str();
      x.table = tables[c.features[f].table];
      x.pooling = c.features[f].pooling;
      if (alt_pooling && x.pooling == HB_POOLING_SUM)
        x.pooling = HB_POOLING_MEAN;
      fs.push_back(x);
    }
    CHECK_OK(hb_collection_create(ctx, fs.data(), fs.size(), &coll));
  }
  ~Model() {
    hb_collection_destroy(coll);  // before its tables
    for (hb_embedding *e : tables) hb_embedding_destroy(e);
  }
};

// One step on the collection (this rank's batch) and on the reference (all
// batches), checking the outputs bit for bit.
void step(Model &m, CollRef &ref, std::vector<JBatch> &all, int s) {
  const CollCase &c = ref.c;
  JBatch &b = all[g_rank];
  const int64_t W = hbtest::coll_width(c);
  CHECK(hb_collection_pooled_width(m.coll) == W, "pooled width");
  std::vector<float> want;
  std::vector<std::vector<float>> want_unp;
  for (int r = 0; r < g_world; ++r) {
    std::vector<float> o;
    std::vector<std::vector<float>> u;
    ref.lookup(all[r], &o, &u);
    if (r == g_rank) want = o, want_unp = u;
  }
  ref.apply(all);
  std::vector<float> out(b.B * W, -7.0f);
  std::vector<std::vector<float>> unp(c.features.size());
  std::vector<float *> up(c.features.size());
  std::vector<const float *> gup(c.features.size());
  for (size_t f = 0; f < c.features.size(); ++f) {
    unp[f].assign(b.n(f) * hb_collection_feature_dim(m.coll, f), -7.0f);
    up[f] = unp[f].data();
    gup[f] = b.grad_unpooled[f].data();
  }
  hb_jagged_batch v = b.view();
  CHECK_OK(hb_collection_lookup(m.coll, &v, out.data(), up.data()));
  CHECK(out.empty() || !std::memcmp(out.data(), want.data(), out.size() * 4),
        "step %d: pooled output differs", s);
  for (size_t f = 0; f < c.features.size(); ++f)
    CHECK(
        c.features[f].pooling != HB_POOLING_NONE || unp[f].empty() ||
            !std::memcmp(unp[f].data(), want_unp[f].data(), unp[f].size() * 4),
        "step %d: unpooled output of feature %zu differs", s, f);
  CHECK_OK(
      hb_collection_apply_gradients(m.coll, &v, b.grad_out.data(), gup.data()));
}

void mode_train(hb_context *ctx, const std::string &dir) {
  CollCase c = hbtest::standard_case();
  CollRef ref(c);
  Model m(ctx, c);
  std::mt19937_64 g(77);
  int s = 0;
  for (; s < 5; ++s) {
    std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
    step(m, ref, all, s);
  }
  hb_collection_stats st = HB_COLLECTION_STATS_INIT;
  CHECK_OK(hb_collection_get_stats(m.coll, &st));
  CHECK(st.rounds == 4u * s && st.reused_plans == static_cast<uint64_t>(s),
        "%llu rounds, %llu reused in %d steps", (unsigned long long)st.rounds,
        (unsigned long long)st.reused_plans, s);
  // Save, train two steps, load back, train the same two steps again.
  for (hb_embedding *e : m.tables) CHECK_OK(hb_embedding_save(e, dir.c_str()));
  CollRef saved = ref;
  std::mt19937_64 g_after = g;
  for (int k = 0; k < 2; ++k, ++s) {
    std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
    step(m, ref, all, s);
  }
  for (hb_embedding *e : m.tables) CHECK_OK(hb_embedding_load(e, dir.c_str()));
  ref = saved;
  g = g_after;
  for (int k = 0; k < 2; ++k, ++s) {
    std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
    step(m, ref, all, s);
  }
  // Export every table and compare the served rows with the reference.
  for (size_t t = 0; t < m.tables.size(); ++t) {
    std::string file = dir + "/" + c.tables[t].name + ".hbe";
    CHECK_OK(hb_embedding_export(m.tables[t], file.c_str()));
    CHECK_OK(hb_context_barrier(ctx, 0));
    hb_embedding *sv = nullptr;
    CHECK_OK(hb_embedding_open(file.c_str(), &sv));
    const hbtest::RefTable &rt = ref.tables[t];
    for (const auto &kv : rt.rows) {
      std::vector<float> row(rt.c.dim);
      CHECK_OK(hb_embedding_lookup(sv, &kv.first, 1, row.data()));
      CHECK(!std::memcmp(row.data(), kv.second.w.data(), rt.c.dim * 4),
            "table %s: exported row %lld differs", rt.name.c_str(),
            (long long)kv.first);
    }
    if (rt.c.num_rows == 0)
      CHECK(hb_embedding_local_rows(sv) == static_cast<int64_t>(rt.rows.size()),
            "table %s: %lld rows exported, %zu in the reference",
            rt.name.c_str(), (long long)hb_embedding_local_rows(sv),
            rt.rows.size());
    hb_embedding_destroy(sv);
  }
}

// Ranks that create collections of different features all fail, the
// message naming the feature, what differs (its table, pooling, dim) and
// every rank's value; rank 1 is the odd one.
void create_mismatch(hb_context *ctx, const CollCase &c, const Model &m) {
  std::vector<hb_collection_feature> fs;
  for (size_t f = 0; f < c.features.size(); ++f) {
    hb_collection_feature x = HB_COLLECTION_FEATURE_INIT;
    x.name = c.names[f].c_str();
    x.table = m.tables[c.features[f].table];
    x.pooling = c.features[f].pooling;
    fs.push_back(x);
  }
  if (g_rank == 1) {
    fs[2].pooling = HB_POOLING_SUM;  // SQRTN elsewhere
    fs[4].table = m.tables[0];       // 'ta' (dim 3) for 'tc' (dim 2)
  }
  hb_collection *coll = nullptr;
  hb_status st = hb_collection_create(ctx, fs.data(), fs.size(), &coll);
  CHECK(st == HB_ERR_INVALID_ARGUMENT && !coll, "create gave %s: %s",
        hb_status_name(st), hb_last_error());
  const std::string others = g_world == 2 ? "(rank 0)" : "(ranks 0,2)";
  for (const std::string &n :
       {std::string("hb_collection_create"), std::string("rank 1 differs"),
        "feature 2 ('f2') pooling: HB_POOLING_SQRTN " + others +
            " vs HB_POOLING_SUM (rank 1)",
        "feature 4 ('f4') table: 'tc' " + others + " vs 'ta' (rank 1)",
        "feature 4 ('f4') dim: 2 " + others + " vs 3 (rank 1)"})
    CHECK(std::strstr(hb_last_error(), n.c_str()), "message lacks '%s': %s",
          n.c_str(), hb_last_error());
  // A fingerprint only where no named field differs.
  CHECK(!std::strstr(hb_last_error(), "table config"), "message: %s",
        hb_last_error());
}

void mode_mismatch(hb_context *ctx) {
  CollCase c = hbtest::standard_case();
  // b: other tables (names are unique per context) and other pooling.
  CollCase cb = c;
  std::vector<std::string> names;
  for (const auto &t : cb.tables) names.push_back(std::string(t.name) + "_b");
  for (size_t t = 0; t < cb.tables.size(); ++t)
    cb.tables[t].name = names[t].c_str();
  Model a(ctx, c), b(ctx, cb, /*alt_pooling=*/true);
  if (g_world > 1) create_mismatch(ctx, c, a);
  std::mt19937_64 g(5);
  JBatch batch = hbtest::make_jbatch(g, c, 0);
  hb_jagged_batch v = batch.view();
  std::vector<float *> up(c.features.size(), nullptr);
  hb_status st = hb_collection_lookup(g_rank == 0 ? a.coll : b.coll, &v,
                                      nullptr, up.data());
  if (g_world == 1) {
    CHECK(st == HB_OK, "world 1: %s", hb_last_error());
    return;
  }
  CHECK(st == HB_ERR_MISMATCH, "got %s: %s", hb_status_name(st),
        hb_last_error());
  CHECK(std::strstr(hb_last_error(), "made a different call"), "message: %s",
        hb_last_error());
}

}  // namespace

int main(int argc, char **argv) {
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_rank = g_mp_rank = hb_context_rank(ctx);
  g_world = hb_context_world_size(ctx);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "train")
    mode_train(ctx, argc > 2 ? argv[2] : "mp_coll_ckpt");
  else if (mode == "mismatch")
    mode_mismatch(ctx);
  else
    CHECK(false, "unknown mode '%s'", mode.c_str());
  hb_context_destroy(ctx);
  std::printf("rank %d/%d: mp_collection %s passed\n", g_rank, g_world,
              mode.c_str());
  return 0;
}
