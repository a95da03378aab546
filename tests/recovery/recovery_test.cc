// Job checkpoints in one process (a world of one): what is saved comes back
// bit for bit, readers go on exactly where they were (and re-shard with
// every remaining line read once), bad checkpoints are refused or passed
// over, retention, async writes and the listener events.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "embedding/temp_dirs.h"
#include "hb.h"
#include "reader/file_list.h"
#include "reader/handle.h"
#include "reader/reader.h"
#include "reader/resume.h"

namespace {

std::string temp(const char *tag) {
  return hbtest::temp_dir("hb_recovery", tag);
}

struct Ctx {
  hb_context *ctx = nullptr;
  Ctx() { EXPECT_EQ(hb_context_create(nullptr, &ctx), HB_OK); }
  ~Ctx() { hb_context_destroy(ctx); }
};

// Lines "label \t serial \t id" (columns L I C): the dense value tells
// which line it is.
std::vector<std::string> make_files(const std::string &dir, int nfiles,
                                    int lines_per_file, bool gzip_odd,
                                    int *serial_count) {
  std::vector<std::string> paths;
  int serial = 0;
  std::mt19937 rng(7);
  for (int f = 0; f < nfiles; ++f) {
    std::string text;
    int n = lines_per_file + f * 13;
    for (int i = 0; i < n; ++i) {
      text += std::to_string(rng() % 2) + "\t" + std::to_string(serial++) +
              "\t" + std::to_string(rng() % 1000) + "\n";
      if (i % 17 == 3) text += "\n";  // blank lines are skipped
    }
    std::string p = dir + "/part-" + std::to_string(f);
    if (gzip_odd && f % 2) {
      gzFile gz = gzopen(p.c_str(), "wb");
      gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
      gzclose(gz);
    } else {
      std::ofstream(p, std::ios::binary) << text;
    }
    paths.push_back(p);
  }
  *serial_count = serial;
  return paths;
}

hb_reader_config reader_cfg(int shard, int shards, int epochs, bool shuffle) {
  hb_reader_config c = HB_READER_CONFIG_INIT;
  c.batch_size = 37;
  c.columns = "LIC";
  c.num_threads = 2;
  c.chunk_bytes = 700;  // many chunks per file
  c.num_epochs = epochs;
  c.shuffle = shuffle;
  c.seed = 11;
  c.shard_index = shard;
  c.num_shards = shards;
  return c;
}

hb_reader *open_reader(const std::vector<std::string> &paths,
                       const hb_reader_config &cfg) {
  std::vector<const char *> p;
  for (const std::string &s : paths) p.push_back(s.c_str());
  hb_reader *r = nullptr;
  EXPECT_EQ(hb_reader_create(nullptr, p.data(), p.size(), &cfg, &r), HB_OK)
      << hb_last_error();
  return r;
}

// The serials (epoch * 1e6 + serial) of the next batch; empty at the end.
std::vector<int64_t> next_serials(hb_reader *r) {
  hb_reader_batch *b = nullptr;
  EXPECT_EQ(hb_reader_next(r, &b), HB_OK) << hb_last_error();
  std::vector<int64_t> out;
  if (!b) return out;
  for (int64_t i = 0; i < b->size; ++i)
    out.push_back(int64_t{b->epoch} * 1000000 +
                  static_cast<int64_t>(b->dense[i]));
  hb_reader_batch_free(b);
  return out;
}

TEST(RecoveryReader, ResumesWithTheSameBatchesAtTheSameShardCount) {
  std::string dir = temp("rd_same");
  int serials = 0;
  auto paths = make_files(dir, 3, 200, true, &serials);
  for (int cut : {0, 1, 5, 11, 16}) {
    for (int shard = 0; shard < 2; ++shard) {
      hb_reader_config cfg = reader_cfg(shard, 2, 2, true);
      hb_reader *ref = open_reader(paths, cfg);
      std::vector<std::vector<int64_t>> want;
      for (auto b = next_serials(ref); !b.empty(); b = next_serials(ref))
        want.push_back(b);
      hb_reader_destroy(ref);

      hb_reader *a = open_reader(paths, cfg);
      std::vector<std::vector<int64_t>> got;
      for (int i = 0; i < cut && i < static_cast<int>(want.size()); ++i)
        got.push_back(next_serials(a));
      auto &impl = a->impl;
      hb::reader::SavedReader saved = hb::reader::decode_reader(
          hb::reader::encode_reader(hb::reader::save_reader(*impl)), "test");
      hb_reader_destroy(a);  // the "crash"
      hb_reader *b = open_reader(paths, cfg);
      auto &bimpl = b->impl;
      uint64_t lines = 0, skipped = 0;
      hb::reader::Sequence seq =
          hb::reader::resume_sequence(bimpl->files(), bimpl->settings(),
                                      {saved}, shard, 2, &lines, &skipped);
      bimpl = std::make_unique<hb::reader::Reader>(
          bimpl->files(), bimpl->settings(), shard, 2, seq, lines, skipped);
      for (auto x = next_serials(b); !x.empty(); x = next_serials(b))
        got.push_back(x);
      size_t total = 0;
      for (const auto &w : want) total += w.size();
      EXPECT_EQ(hb_reader_lines(b), total);  // carried over, then counted
      hb_reader_destroy(b);
      EXPECT_EQ(got, want) << "cut after " << cut << " batches, shard "
                           << shard;
    }
  }
}

// A file whose one line has no newline (and is one byte: its range starts
// at 0) is not read again after a restore.
TEST(RecoveryReader, LastLineWithoutNewlineIsNotReadTwice) {
  std::string dir = temp("rd_eof");
  std::ofstream(dir + "/a", std::ios::binary) << "1";
  std::ofstream(dir + "/b", std::ios::binary) << "0\n1\n";
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.batch_size = 1;
  cfg.columns = "L";
  cfg.num_threads = 1;
  cfg.shard_index = 0;
  cfg.num_shards = 1;
  hb_reader *r = open_reader({dir + "/a", dir + "/b"}, cfg);
  hb_reader_batch *b = nullptr;
  ASSERT_EQ(hb_reader_next(r, &b), HB_OK);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->labels[0], 1.0f);
  hb_reader_batch_free(b);
  hb::reader::SavedReader saved = hb::reader::save_reader(*r->impl);
  uint64_t lines = 0, skipped = 0;
  hb::reader::Sequence seq = hb::reader::resume_sequence(
      r->impl->files(), r->impl->settings(), {saved}, 0, 1, &lines, &skipped);
  r->impl = std::make_unique<hb::reader::Reader>(
      r->impl->files(), r->impl->settings(), 0, 1, seq, lines, skipped);
  std::vector<float> rest;
  for (;;) {
    ASSERT_EQ(hb_reader_next(r, &b), HB_OK);
    if (!b) break;
    rest.push_back(b->labels[0]);
    hb_reader_batch_free(b);
  }
  EXPECT_EQ(rest, (std::vector<float>{0.0f, 1.0f}));
  hb_reader_destroy(r);
}

// Old shards read k batches each, then the remaining lines go to a new
// shard count: every (epoch, line) is read exactly once overall.
void reshard_case(int old_n, int new_n, int epochs, bool gzip,
                  const std::vector<int> &cuts) {
  std::string dir = temp("rd_reshard");
  int serials = 0;
  auto paths = make_files(dir, 3, 300, gzip, &serials);
  std::map<int64_t, int> count;
  std::vector<hb::reader::SavedReader> saved;
  for (int s = 0; s < old_n; ++s) {
    hb_reader *r = open_reader(paths, reader_cfg(s, old_n, epochs, true));
    for (int i = 0; i < cuts[s % cuts.size()]; ++i)
      for (int64_t v : next_serials(r)) ++count[v];
    auto &impl = r->impl;
    saved.push_back(hb::reader::save_reader(*impl));
    hb_reader_destroy(r);
  }
  uint64_t total_lines = 0;
  for (int s = 0; s < new_n; ++s) {
    hb_reader *r = open_reader(paths, reader_cfg(s, new_n, epochs, true));
    auto &impl = r->impl;
    uint64_t lines = 0, skipped = 0;
    hb::reader::Sequence seq = hb::reader::resume_sequence(
        impl->files(), impl->settings(), saved, s, new_n, &lines, &skipped);
    impl = std::make_unique<hb::reader::Reader>(impl->files(), impl->settings(),
                                                s, new_n, seq, lines, skipped);
    for (auto b = next_serials(r); !b.empty(); b = next_serials(r))
      for (int64_t v : b) ++count[v];
    total_lines += hb_reader_lines(r);
    hb_reader_destroy(r);
  }
  EXPECT_EQ(count.size(), static_cast<size_t>(serials) * epochs);
  for (const auto &kv : count)
    ASSERT_EQ(kv.second, 1)
        << "epoch " << kv.first / 1000000 << " line " << kv.first % 1000000;
  EXPECT_EQ(total_lines, static_cast<uint64_t>(serials) * epochs);
}

TEST(RecoveryReader, ReshardsFourToThree) {
  reshard_case(4, 3, 1, false, {3, 0, 7, 2});
}
TEST(RecoveryReader, ReshardsAcrossEpochsWithGzip) {
  reshard_case(4, 3, 2, true, {9, 14, 1, 30});
}
TEST(RecoveryReader, ReshardsTwoToFive) {
  reshard_case(2, 5, 2, true, {5, 13});
}
TEST(RecoveryReader, ReshardsDoneShards) {
  reshard_case(3, 2, 2, false, {1000, 4, 1000});
}

// ---- the job checkpoint layer --------------------------------------------

struct Model {
  hb_embedding *emb = nullptr;
  std::vector<float> w = std::vector<float>(16);
  std::vector<int64_t> mine = std::vector<int64_t>(5);
  hb_metric *auc = nullptr;
  explicit Model(hb_context *ctx,
                 const hb_embedding_lifecycle *life = nullptr) {
    hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
    c.name = "t";
    c.dim = 4;
    c.num_rows = 0;  // dynamic
    c.lifecycle = life;
    c.optimizer = HB_OPT_ADAGRAD;
    c.initializer = HB_INIT_UNIFORM;
    c.init_a = -0.1;
    c.init_b = 0.1;
    EXPECT_EQ(hb_embedding_create(ctx, &c, &emb), HB_OK) << hb_last_error();
    hb_metric_config mc = HB_METRIC_CONFIG_INIT;
    mc.kind = HB_METRIC_AUC_EXACT;
    EXPECT_EQ(hb_metric_create(ctx, &mc, &auc), HB_OK);
  }
  ~Model() {
    hb_metric_destroy(auc);
    hb_embedding_destroy(emb);
  }
  void step(int k) {
    std::vector<int64_t> ids = {k % 7, 100 + k, k % 3};
    std::vector<float> g(ids.size() * 4);
    for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * (k + 1) * (i % 5);
    ASSERT_EQ(
        hb_embedding_apply_gradients(emb, ids.data(), ids.size(), g.data()),
        HB_OK);
    for (size_t i = 0; i < w.size(); ++i) w[i] += 0.5f / (k + i + 1);
    mine[k % 5] += k;
    float l[2] = {1, 0}, p[2] = {0.3f + 0.01f * k, 0.5f};
    ASSERT_EQ(hb_metric_update(auc, l, p, nullptr, 2), HB_OK);
  }
  std::vector<float> rows() {
    std::vector<int64_t> ids;
    for (int k = 0; k < 130; ++k) ids.push_back(k);
    std::vector<float> out(ids.size() * 4);
    EXPECT_EQ(hb_embedding_lookup(emb, ids.data(), ids.size(), out.data()),
              HB_OK);
    return out;
  }
  double metric() {
    double v = 0;
    EXPECT_EQ(hb_metric_result(auc, &v), HB_OK);
    return v;
  }
  void add(hb_checkpoint *c) {
    ASSERT_EQ(hb_checkpoint_add_table(c, emb), HB_OK);
    ASSERT_EQ(hb_checkpoint_add_buffer(c, "w", w.data(), w.size() * 4, 0),
              HB_OK);
    ASSERT_EQ(hb_checkpoint_add_buffer(c, "mine", mine.data(), mine.size() * 8,
                                       HB_BUFFER_PER_RANK),
              HB_OK);
    ASSERT_EQ(hb_checkpoint_add_metric(c, "auc", auc), HB_OK);
  }
};

hb_checkpoint *open_ckpt(hb_context *ctx, const std::string &dir, int async,
                         const char *job = "job-a", int keep = 3) {
  hb_checkpoint_config cfg = HB_CHECKPOINT_CONFIG_INIT;
  cfg.dir = dir.c_str();
  cfg.async_write = async;
  cfg.job_id = job;
  cfg.keep = keep;
  hb_checkpoint *c = nullptr;
  EXPECT_EQ(hb_checkpoint_create(ctx, &cfg, &c), HB_OK) << hb_last_error();
  return c;
}

struct Events {
  std::vector<int> seen;
  std::vector<std::string> paths;
};
void on_event(hb_context *, int32_t ev, const char *path, void *u) {
  static_cast<Events *>(u)->seen.push_back(ev);
  static_cast<Events *>(u)->paths.push_back(path);
}

void round_trip(int async) {
  Ctx x;
  std::string dir = temp("rt");
  Events ev;
  for (int e = HB_EVENT_BEFORE_SAVE; e <= HB_EVENT_AFTER_LOAD; ++e)
    ASSERT_EQ(hb_context_add_listener(x.ctx, e, on_event, &ev), HB_OK);
  // Run A: 10 steps, checkpoint at 6, 10 more; remember state after 20.
  Model a(x.ctx);
  hb_checkpoint *c = open_ckpt(x.ctx, dir, async);
  a.add(c);
  for (int k = 0; k < 6; ++k) a.step(k);
  ASSERT_EQ(hb_checkpoint_set_meta(c, "lr", "0.25"), HB_OK);
  ASSERT_EQ(hb_checkpoint_save(c, 6), HB_OK) << hb_last_error();
  for (int k = 6; k < 20; ++k) a.step(k);  // overlaps the async write
  ASSERT_EQ(hb_checkpoint_wait(c), HB_OK) << hb_last_error();
  hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
  ASSERT_EQ(hb_checkpoint_get_stats(c, &st), HB_OK);
  EXPECT_EQ(st.committed_step, 6);
  EXPECT_GT(st.file_bytes, 0u);
  EXPECT_EQ(ev.seen,
            (std::vector<int>{HB_EVENT_BEFORE_SAVE, HB_EVENT_AFTER_SAVE}));
  hb_checkpoint_destroy(c);
  std::vector<float> rows = a.rows(), w = a.w;
  std::vector<int64_t> mine = a.mine;
  double m = a.metric();
  hb_embedding_destroy(a.emb);
  a.emb = nullptr;

  // Run B (a restart): restores step 6, redoes 6..19: the same bits.
  Model b(x.ctx);
  c = open_ckpt(x.ctx, dir, async);
  b.add(c);
  int64_t step = -2;
  ASSERT_EQ(hb_checkpoint_restore_latest(c, &step), HB_OK) << hb_last_error();
  EXPECT_EQ(step, 6);
  char buf[16];
  size_t need = 0;
  ASSERT_EQ(hb_checkpoint_get_meta(c, "lr", buf, sizeof buf, &need), HB_OK);
  EXPECT_STREQ(buf, "0.25");
  for (int k = 6; k < 20; ++k) b.step(k);
  EXPECT_EQ(b.rows(), rows);
  EXPECT_EQ(b.w, w);
  EXPECT_EQ(b.mine, mine);
  EXPECT_EQ(b.metric(), m);
  ASSERT_EQ(hb_checkpoint_get_stats(c, &st), HB_OK);
  EXPECT_EQ(st.restored_step, 6);
  EXPECT_EQ(st.skipped_damaged, 0);
  EXPECT_NE(std::string(st.restored_path).find("ckpt-000000000006-"),
            std::string::npos);
  EXPECT_EQ(ev.seen.size(), 4u);
  EXPECT_EQ(ev.seen[2], HB_EVENT_BEFORE_LOAD);
  EXPECT_EQ(ev.seen[3], HB_EVENT_AFTER_LOAD);
  EXPECT_EQ(ev.paths[3], st.restored_path);
  hb_checkpoint_destroy(c);
}

TEST(RecoveryJob, RoundTripIsBitIdentical) { round_trip(0); }
TEST(RecoveryJob, AsyncRoundTripIsBitIdentical) { round_trip(1); }

// A table with a lifecycle: its counters, ages and scores are in the job
// checkpoint (copied at the step boundary when the write is asynchronous),
// so the restarted run admits and evicts exactly as the first one did.
void lifecycle_round_trip(int async) {
  Ctx x;
  std::string dir = temp(async ? "life-async" : "life");
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.admission = HB_ADMIT_COUNT;
  life.min_count = 2;
  life.evict_interval = 2;
  life.ttl_steps = 5;
  life.max_rows = 6;
  life.score = HB_SCORE_LFU;
  auto stats = [](hb_embedding *e) {
    hb_embedding_lifecycle_stats st = HB_EMBEDDING_LIFECYCLE_STATS_INIT;
    EXPECT_EQ(hb_embedding_lifecycle_get_stats(e, &st), HB_OK);
    return std::vector<int64_t>{static_cast<int64_t>(st.step), st.rows,
                                st.pending};
  };
  Model a(x.ctx, &life);
  hb_checkpoint *c = open_ckpt(x.ctx, dir, async);
  a.add(c);
  for (int k = 0; k < 9; ++k) a.step(k);
  ASSERT_EQ(hb_checkpoint_save(c, 9), HB_OK) << hb_last_error();
  for (int k = 9; k < 30; ++k) a.step(k);  // overlaps the async write
  ASSERT_EQ(hb_checkpoint_wait(c), HB_OK) << hb_last_error();
  hb_checkpoint_destroy(c);
  std::vector<int64_t> st_a = stats(a.emb);
  std::vector<float> rows = a.rows();
  EXPECT_GT(st_a[1], 0);        // rows were admitted ...
  EXPECT_LE(st_a[1], 6);        // ... and evicted down to max_rows
  hb_embedding_destroy(a.emb);  // names are unique per context
  a.emb = nullptr;

  Model b(x.ctx, &life);
  c = open_ckpt(x.ctx, dir, async);
  b.add(c);
  int64_t step = -2;
  ASSERT_EQ(hb_checkpoint_restore_latest(c, &step), HB_OK) << hb_last_error();
  EXPECT_EQ(step, 9);
  for (int k = 9; k < 30; ++k) b.step(k);
  EXPECT_EQ(stats(b.emb), st_a);
  EXPECT_EQ(b.rows(), rows);
  EXPECT_EQ(b.w, a.w);
  hb_checkpoint_destroy(c);
}

TEST(RecoveryJob, LifecycleTableRoundTripIsBitIdentical) {
  lifecycle_round_trip(0);
}
TEST(RecoveryJob, AsyncLifecycleTableRoundTripIsBitIdentical) {
  lifecycle_round_trip(1);
}

TEST(RecoveryJob, FreshStartAndLatest) {
  Ctx x;
  std::string dir = temp("fresh");
  Model a(x.ctx);
  hb_checkpoint *c = open_ckpt(x.ctx, dir + "/sub/dir", 0);
  a.add(c);
  int64_t step = 5;
  ASSERT_EQ(hb_checkpoint_restore_latest(c, &step), HB_OK) << hb_last_error();
  EXPECT_EQ(step, -1);
  char path[512];
  size_t need = 0;
  ASSERT_EQ(hb_checkpoint_latest((dir + "/sub/dir").c_str(), path, sizeof path,
                                 &need, &step),
            HB_OK);
  EXPECT_EQ(step, -1);
  EXPECT_STREQ(path, "");
  ASSERT_EQ(hb_checkpoint_save(c, 3), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_checkpoint_save(c, 9), HB_OK) << hb_last_error();
  ASSERT_EQ(
      hb_checkpoint_latest((dir + "/sub/dir").c_str(), path, 4, &need, &step),
      HB_ERR_INVALID_ARGUMENT);
  ASSERT_GT(need, 4u);
  ASSERT_EQ(hb_checkpoint_latest((dir + "/sub/dir").c_str(), path, sizeof path,
                                 &need, &step),
            HB_OK);
  EXPECT_EQ(step, 9);
  EXPECT_NE(std::string(path).find("/ckpt-000000000009-"), std::string::npos);
  hb_checkpoint_destroy(c);
}

TEST(RecoveryJob, AnotherJobsDirectoryIsRefused) {
  Ctx x;
  std::string dir = temp("job");
  hb_checkpoint *c = open_ckpt(x.ctx, dir, 0, "job-a");
  ASSERT_EQ(hb_checkpoint_save(c, 1), HB_OK);
  hb_checkpoint_destroy(c);
  hb_checkpoint_config cfg = HB_CHECKPOINT_CONFIG_INIT;
  cfg.dir = dir.c_str();
  cfg.job_id = "job-b";
  c = nullptr;
  EXPECT_EQ(hb_checkpoint_create(x.ctx, &cfg, &c), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);
  std::string err = hb_last_error();
  EXPECT_NE(err.find("job-a"), std::string::npos) << err;
  EXPECT_NE(err.find("job-b"), std::string::npos) << err;
  // A checkpoint copied in from another job is refused at restore too.
  std::string other = temp("job2");
  c = open_ckpt(x.ctx, other, 0, "job-b");
  char path[512];
  size_t need;
  int64_t step;
  ASSERT_EQ(hb_checkpoint_latest(dir.c_str(), path, sizeof path, &need, &step),
            HB_OK);
  std::string base = std::string(path).substr(dir.size() + 1);
  ASSERT_EQ(std::system(
                ("cp -r '" + std::string(path) + "' '" + other + "/'").c_str()),
            0);
  EXPECT_EQ(hb_checkpoint_restore_latest(c, &step), HB_ERR_INVALID_ARGUMENT);
  err = hb_last_error();
  EXPECT_NE(err.find("belongs to job 'job-a'"), std::string::npos) << err;
  hb_checkpoint_destroy(c);
}

TEST(RecoveryJob, OtherRegistrationsAreRefused) {
  Ctx x;
  std::string dir = temp("reg");
  Model a(x.ctx);
  hb_checkpoint *c = open_ckpt(x.ctx, dir, 0);
  a.add(c);
  ASSERT_EQ(hb_checkpoint_save(c, 1), HB_OK);
  hb_checkpoint_destroy(c);
  c = open_ckpt(x.ctx, dir, 0);
  ASSERT_EQ(hb_checkpoint_add_buffer(c, "w", a.w.data(), 8, 0), HB_OK);
  int64_t step = 0;
  EXPECT_EQ(hb_checkpoint_restore_latest(c, &step), HB_ERR_INVALID_ARGUMENT);
  std::string err = hb_last_error();
  EXPECT_NE(err.find("item 0"), std::string::npos) << err;
  EXPECT_EQ(step, -1);
  hb_checkpoint_destroy(c);
}

std::vector<std::string> ckpt_dirs(const std::string &dir) {
  std::vector<std::string> out;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("ckpt-", 0) == 0)
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RecoveryJob, DamagedNewestFallsBackAndSaysSo) {
  Ctx x;
  std::string dir = temp("damaged");
  Model a(x.ctx);
  hb_checkpoint *c = open_ckpt(x.ctx, dir, 0);
  a.add(c);
  a.step(0);
  ASSERT_EQ(hb_checkpoint_save(c, 1), HB_OK);
  std::vector<float> w1 = a.w;
  a.step(1);
  ASSERT_EQ(hb_checkpoint_save(c, 2), HB_OK);
  a.step(2);
  // A crashed save of step 3: files but no MANIFEST.
  ASSERT_EQ(mkdir((dir + "/ckpt-000000000003-0badf00d").c_str(), 0755), 0);
  auto dirs = ckpt_dirs(dir);
  ASSERT_EQ(dirs.size(), 3u);
  // Damage step 2: flip a byte of its buffer file.
  std::string f = dirs[1] + "/buffers/w";
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(3);
    io.put('\x55');
  }
  int64_t step = -1;
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(hb_checkpoint_restore_latest(c, &step), HB_OK) << hb_last_error();
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(step, 1);
  EXPECT_EQ(a.w, w1);
  EXPECT_NE(log.find("damaged"), std::string::npos) << log;
  EXPECT_NE(log.find("checksum mismatch"), std::string::npos) << log;
  hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
  ASSERT_EQ(hb_checkpoint_get_stats(c, &st), HB_OK);
  EXPECT_EQ(st.skipped_damaged, 1);
  EXPECT_EQ(std::string(st.restored_path), dirs[0]);
  // Every checkpoint damaged: an error, not a silent fresh start.
  ASSERT_EQ(std::remove((dirs[0] + "/buffers/w").c_str()), 0);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(hb_checkpoint_restore_latest(c, &step), HB_ERR_CORRUPT);
  ::testing::internal::GetCapturedStderr();
  hb_checkpoint_destroy(c);
}

TEST(RecoveryJob, KeepsTheLastKAndRemovesCrashedSaves) {
  Ctx x;
  std::string dir = temp("keep");
  Model a(x.ctx);
  hb_checkpoint *c = open_ckpt(x.ctx, dir, 1, "job-a", 2);
  a.add(c);
  ASSERT_EQ(mkdir((dir + "/ckpt-000000000000-00000001").c_str(), 0755), 0);
  for (int s = 1; s <= 5; ++s) {
    a.step(s);
    ASSERT_EQ(hb_checkpoint_save(c, s), HB_OK) << hb_last_error();
  }
  ASSERT_EQ(hb_checkpoint_wait(c), HB_OK);
  auto dirs = ckpt_dirs(dir);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_NE(dirs[0].find("ckpt-000000000004-"), std::string::npos);
  EXPECT_NE(dirs[1].find("ckpt-000000000005-"), std::string::npos);
  hb_checkpoint_destroy(c);
}

TEST(RecoveryJob, BadArguments) {
  Ctx x;
  std::string dir = temp("args");
  hb_checkpoint_config cfg = HB_CHECKPOINT_CONFIG_INIT;
  hb_checkpoint *c = nullptr;
  EXPECT_EQ(hb_checkpoint_create(x.ctx, &cfg, &c), HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("checkpoint_dir"),
            std::string::npos);
  cfg.dir = dir.c_str();
  cfg.keep = 0;
  EXPECT_EQ(hb_checkpoint_create(x.ctx, &cfg, &c), HB_ERR_INVALID_ARGUMENT);
  c = open_ckpt(x.ctx, dir, 0);
  float v[2];
  EXPECT_EQ(hb_checkpoint_add_buffer(c, "a/b", v, 8, 0),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_checkpoint_add_buffer(c, "ok", v, 8, 0), HB_OK);
  EXPECT_EQ(hb_checkpoint_add_buffer(c, "ok", v, 8, 0),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_checkpoint_add_buffer(c, "f", v, 8, 64),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_checkpoint_save(c, -1), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_checkpoint_restore(c, (dir + "/nope").c_str(), nullptr),
            HB_ERR_CORRUPT);
  char buf[4];
  EXPECT_EQ(hb_checkpoint_get_meta(c, "missing", buf, 4, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  hb_checkpoint_destroy(c);
  hb_checkpoint_destroy(nullptr);
}

}  // namespace
