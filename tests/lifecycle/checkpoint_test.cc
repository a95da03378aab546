// Checkpoints of tables with a lifecycle: a job saved at one world size and
// restored at the same or another one admits and evicts exactly as the
// uninterrupted model does (steps, ages, scores and counters survive and
// re-shard); format 1 checkpoints still load (into tables with and
// without a lifecycle), and format 2 ones load into plain tables.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "abi/error.h"
#include "common/file_io.h"
#include "embedding/checkpoint.h"
#include "harness.h"
#include "lifecycle_harness.h"
#include "temp_dirs.h"

namespace {

using namespace hbtest;

hb_embedding_config config(const char *name) {
  return life_config(name, HB_OPT_ADAM);
}

// Steps [0, n1) at world a, save, load at world b, steps [n1, n1 + n2):
// every lookup and the final state equal the model's uninterrupted run.
void save_then_resume(const hb_embedding_config &base,
                      const hb_embedding_lifecycle &life, int a, int b) {
  SCOPED_TRACE("save at " + std::to_string(a) + ", load at " +
               std::to_string(b));
  hb_embedding_config cfg = base;
  cfg.lifecycle = &life;
  Plan p1 = make_plan(10 + a, a, 25, cfg, 300);
  Plan p2 = make_plan(20 + b, b, 25, cfg, 300);
  // The Bloom filter's cells depend on the world: the model follows world
  // a, so only a == b is compared with a Bloom filter.
  RefLife ref(cfg, life, a);
  Expected e;
  model_steps(ref, p1, &e);
  model_steps(ref, p2, &e);
  std::string dir = temp_dir("hb_life", "ckpt");
  Evictions ev;
  FirstError err;
  run_life_tables(a, base, life, &ev, [&](int r, hb::emb::Table &t) {
    rank_steps(t, r, p1, e, 0, &err);
    hb::emb::save_checkpoint(t, dir.c_str());
  });
  ASSERT_EQ(err.first, "");
  Dump d;
  run_life_tables(b, base, life, &ev, [&](int r, hb::emb::Table &t) {
    hb::emb::load_checkpoint(t, dir.c_str());
    rank_steps(t, r, p2, e, p1.size(), &err);
    d.add(t);
  });
  ASSERT_EQ(err.first, "");
  compare_final(ref, d, false);  // statistics restart at the load
  EXPECT_EQ(ev.got, e.evictions);
}

TEST(LifecycleCheckpoint, ResumesExactlyAtTheSameAndOtherWorlds) {
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.admission = HB_ADMIT_COUNT;
  life.min_count = 2;
  life.ttl_steps = 8;
  life.max_rows = 40;
  life.score = HB_SCORE_LRU;
  life.evict_interval = 3;
  for (auto ab : std::vector<std::pair<int, int>>{
           {2, 2}, {3, 1}, {1, 4}, {4, 3}, {2, 3}}) {
    save_then_resume(config("ck_lru"), life, ab.first, ab.second);
    if (HasFatalFailure()) return;
  }
}

TEST(LifecycleCheckpoint, LfuScoresSurvive) {
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.max_rows = 30;
  life.score = HB_SCORE_LFU;
  life.evict_interval = 2;
  save_then_resume(config("ck_lfu"), life, 3, 2);
}

TEST(LifecycleCheckpoint, BloomCellsAtTheSameWorld) {
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.admission = HB_ADMIT_BLOOM;
  life.min_count = 3;
  life.bloom_bytes = 512;
  life.bloom_fpr = 0.05;
  life.max_rows = 40;
  save_then_resume(config("ck_bloom"), life, 2, 2);
}

// The rows of every rank, id -> record.
std::map<int64_t, std::vector<float>> rows_of(hb::emb::Table &t) {
  std::map<int64_t, std::vector<float>> m;
  const int64_t w = t.shard().record_words();
  t.shard().for_each([&](int64_t id, const float *r) {
    m[id] = std::vector<float>(r, r + w);
  });
  return m;
}

TEST(LifecycleCheckpoint, FormatOneLoadsIntoALifecycleTableAndBack) {
  hb_embedding_config plain = config("ck_fmt");
  Plan p = make_plan(5, 2, 10, plain, 200);
  std::string v1 = temp_dir("hb_life", "v1"), v2 = temp_dir("hb_life", "v2");
  std::map<int64_t, std::vector<float>> want;
  std::mutex mu;
  // A plain table writes format 1 (unchanged); its rows are what a lookup
  // created plus what an apply touched.
  run_tables(2, plain, [&](int r, hb::emb::Table &t) {
    for (const auto &step : p) {
      const Batch &b = step[r];
      std::vector<float> out(b.ids.size() * 4);
      t.lookup(b.ids.data(), b.ids.size(), out.data());
      t.apply_gradients(b.ids.data(), b.ids.size(), b.grads.data());
    }
    hb::emb::save_checkpoint(t, v1.c_str());
    std::lock_guard<std::mutex> lk(mu);
    for (auto &kv : rows_of(t)) want.insert(kv);
  });
  std::string manifest = hb::read_whole_file(v1 + "/ck_fmt.manifest");
  EXPECT_EQ(manifest.compare(0, 26, "hb-embedding-checkpoint 1\n"), 0);
  // Into a lifecycle table (3 ranks): every row, at step 0, never updated;
  // a capacity boundary then keeps the largest ids (all scores tie at 0).
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.max_rows = 5;
  Evictions ev;
  std::map<int64_t, std::vector<float>> got, kept;
  run_life_tables(3, plain, life, &ev, [&](int, hb::emb::Table &t) {
    hb::emb::load_checkpoint(t, v1.c_str());
    {
      std::lock_guard<std::mutex> lk(mu);
      for (auto &kv : rows_of(t)) got.insert(kv);
    }
    EXPECT_EQ(t.row_meta()->step(), 0u);
    t.shard().for_each_indexed([&](int64_t idx, int64_t, const float *) {
      EXPECT_EQ(t.row_meta()->last_step(idx), 0u);
      EXPECT_EQ(t.row_meta()->updates(idx), 0u);
    });
    hb::emb::save_checkpoint(t, v2.c_str());
    t.apply_gradients(nullptr, 0, nullptr);  // step 1: a boundary
    std::lock_guard<std::mutex> lk(mu);
    for (auto &kv : rows_of(t)) kept.insert(kv);
  });
  EXPECT_EQ(got, want);
  ASSERT_EQ(kept.size(), 5u);
  auto it = want.end();
  for (int i = 0; i < 5; ++i) --it;
  EXPECT_EQ(kept.begin()->first, it->first);
  manifest = hb::read_whole_file(v2 + "/ck_fmt.manifest");
  EXPECT_EQ(manifest.compare(0, 26, "hb-embedding-checkpoint 2\n"), 0);
  // Format 2 into a plain table: the rows, the lifecycle section skipped.
  std::map<int64_t, std::vector<float>> plain_got;
  run_tables(1, plain, [&](int, hb::emb::Table &t) {
    hb::emb::load_checkpoint(t, v2.c_str());
    plain_got = rows_of(t);
  });
  EXPECT_EQ(plain_got, want);
}

TEST(LifecycleCheckpoint, DamagedLifecycleSectionIsRefusedAndChangesNothing) {
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.admission = HB_ADMIT_COUNT;
  life.min_count = 2;
  life.max_rows = 20;
  hb_embedding_config cfg = config("ck_bad");
  Plan p = make_plan(8, 1, 10, cfg, 100);
  std::string dir = temp_dir("hb_life", "bad");
  Evictions ev;
  run_life_tables(1, cfg, life, &ev, [&](int, hb::emb::Table &t) {
    for (const auto &step : p)
      t.apply_gradients(step[0].ids.data(), step[0].ids.size(),
                        step[0].grads.data());
    hb::emb::save_checkpoint(t, dir.c_str());
  });
  // Cut the shard file's last byte and fix the manifest's size and
  // checksums, so only the lifecycle section's own checks can see it.
  std::string shard;
  for (auto &e : std::filesystem::directory_iterator(dir))
    if (e.path().string().find(".shard-0-of-1") != std::string::npos)
      shard = e.path().string();
  ASSERT_FALSE(shard.empty());
  std::string data = hb::read_whole_file(shard);
  std::string cut = data.substr(0, data.size() - 8);
  { std::ofstream(shard, std::ios::binary | std::ios::trunc) << cut; }
  std::string mpath = dir + "/ck_bad.manifest";
  std::string m = hb::read_whole_file(mpath);
  char old_line[200], new_line[200];
  std::snprintf(old_line, sizeof old_line, " %zu ", data.size());
  std::snprintf(new_line, sizeof new_line, " %zu ", cut.size());
  size_t at = m.find(old_line);
  ASSERT_NE(at, std::string::npos);
  m.replace(at, std::strlen(old_line), new_line);
  char sum_old[17], sum_new[17];
  std::snprintf(sum_old, sizeof sum_old, "%016llx",
                (unsigned long long)hb::checksum64(data.data(), data.size()));
  std::snprintf(sum_new, sizeof sum_new, "%016llx",
                (unsigned long long)hb::checksum64(cut.data(), cut.size()));
  at = m.find(sum_old);
  ASSERT_NE(at, std::string::npos);
  m.replace(at, 16, sum_new);
  m = m.substr(0, m.rfind("checksum "));
  char tail[40];
  std::snprintf(tail, sizeof tail, "checksum %016llx\n",
                (unsigned long long)hb::checksum64(m.data(), m.size()));
  m += tail;
  { std::ofstream(mpath, std::ios::binary | std::ios::trunc) << m; }
  run_life_tables(1, cfg, life, &ev, [&](int, hb::emb::Table &t) {
    std::vector<int64_t> ids = {1, 2};
    std::vector<float> g(8, 1.0f);
    t.apply_gradients(ids.data(), 2, g.data());
    try {
      hb::emb::load_checkpoint(t, dir.c_str());
      ADD_FAILURE() << "a truncated lifecycle section loaded";
    } catch (const hb::Error &e) {
      EXPECT_EQ(e.status(), HB_ERR_CORRUPT) << e.what();
      EXPECT_NE(std::string(e.what()).find("ck_bad"), std::string::npos);
    }
    EXPECT_EQ(t.row_meta()->step(), 1u);  // unchanged
    EXPECT_EQ(t.life()->admission().pending(), 2);
  });
}

}  // namespace
