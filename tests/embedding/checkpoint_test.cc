// Checkpoints with k ranks simulated by threads: re-sharding loads that
// continue bit-equal to an uninterrupted run, corrupted and mismatched
// checkpoints that change nothing, and a process killed mid-save.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "abi/error.h"
#include "common/file_io.h"
#include "embedding/checkpoint.h"
#include "harness.h"
#include "temp_dirs.h"

using hbtest::Batch;
using hbtest::RefTable;

namespace {

std::string temp_dir(const char *tag) {
  return hbtest::temp_dir("hb_emb", tag);
}

hb_embedding_config config(int opt, int64_t num_rows, int partition) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "ck";
  c.dim = 4;
  c.num_rows = num_rows;
  c.partition = partition;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -0.5;
  c.init_b = 0.5;
  c.seed = 5;
  c.optimizer = opt;
  c.learning_rate = 0.1;
  return c;
}

using hbtest::make_plan;
using hbtest::Plan;

void ref_run(RefTable &ref, const Plan &p) { hbtest::ref_replay(ref, p); }

void table_run(hb::emb::Table &t, int rank, const Plan &p) {
  for (const auto &step : p) {
    const Batch &b = step[rank];
    std::vector<float> out(b.ids.size() * t.spec().dim);
    t.lookup(b.ids.data(), b.ids.size(), out.data());
    t.apply_gradients(b.ids.data(), b.ids.size(), b.grads.data());
  }
}

// Every row of every rank: id -> record.
using Rows = std::map<int64_t, std::vector<float>>;
void collect(const hb::emb::Table &t, std::mutex &mu, Rows *rows) {
  std::lock_guard<std::mutex> lk(mu);
  t.shard().for_each([&](int64_t id, const float *r) {
    (*rows)[id].assign(r, r + t.shard().record_words());
  });
}

Rows ref_rows(RefTable &ref) {
  Rows out;
  for (auto &kv : ref.rows) {
    std::vector<float> rec = kv.second.w;
    int opt = ref.c.optimizer;
    if (opt != HB_OPT_SGD)
      rec.insert(rec.end(), kv.second.s1.begin(), kv.second.s1.end());
    if (opt == HB_OPT_ADAM || opt == HB_OPT_FTRL)
      rec.insert(rec.end(), kv.second.s2.begin(), kv.second.s2.end());
    if (opt == HB_OPT_ADAM) {
      float two[2];
      std::memcpy(two, &kv.second.t, 8);
      rec.insert(rec.end(), two, two + 2);
    }
    out[kv.first] = rec;
  }
  return out;
}

struct ReshardCase {
  int opt;
  int64_t num_rows;
  int save_partition, load_partition;
};

class Reshard : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(Reshard, SaveAt4LoadAtKContinuesBitEqual) {
  ReshardCase rc = GetParam();
  hb_embedding_config c = config(rc.opt, rc.num_rows, rc.save_partition);
  std::string dir = temp_dir("reshard");
  Plan p1 = make_plan(11, 4, 12, c);
  hbtest::run_tables(4, c, [&](int r, hb::emb::Table &t) {
    table_run(t, r, p1);
    hb::emb::save_checkpoint(t, dir.c_str());
  });
  for (int k : {1, 2, 3, 4}) {
    hb_embedding_config lc = c;
    lc.partition = rc.load_partition;
    Plan p2 = make_plan(100 + k, k, 10, c);
    RefTable ref(c);  // the uninterrupted run: 4-way steps, then k-way ones
    ref_run(ref, p1);
    ref_run(ref, p2);
    if (rc.num_rows > 0)
      for (int64_t id = 0; id < rc.num_rows; ++id) ref.row(id);
    std::mutex mu;
    Rows got;
    hbtest::run_tables(k, lc, [&](int r, hb::emb::Table &t) {
      hb::emb::load_checkpoint(t, dir.c_str());
      table_run(t, r, p2);
      collect(t, mu, &got);
    });
    Rows want = ref_rows(ref);
    ASSERT_EQ(got.size(), want.size()) << "world " << k;
    for (auto &kv : want) {
      ASSERT_EQ(got.count(kv.first), 1u) << kv.first;
      ASSERT_EQ(std::memcmp(got[kv.first].data(), kv.second.data(),
                            kv.second.size() * 4),
                0)
          << "world " << k << " id " << kv.first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tables, Reshard,
    ::testing::Values(
        ReshardCase{HB_OPT_ADAGRAD, 60, HB_PARTITION_MOD, HB_PARTITION_MOD},
        ReshardCase{HB_OPT_ADAM, 60, HB_PARTITION_MOD, HB_PARTITION_DIV},
        ReshardCase{HB_OPT_FTRL, 60, HB_PARTITION_DIV, HB_PARTITION_MOD},
        ReshardCase{HB_OPT_SGD, 60, HB_PARTITION_DIV, HB_PARTITION_DIV},
        ReshardCase{HB_OPT_ADAM, 0, HB_PARTITION_MOD, HB_PARTITION_MOD},
        ReshardCase{HB_OPT_ADAGRAD, 0, HB_PARTITION_MOD, HB_PARTITION_MOD}));

// ---- Bad checkpoints change nothing ---------------------------------------

// Saves a trained 2-rank table into dir and returns the rows.
Rows save_reference(const hb_embedding_config &c, const std::string &dir) {
  Plan p = make_plan(3, 2, 5, c);
  std::mutex mu;
  Rows rows;
  hbtest::run_tables(2, c, [&](int r, hb::emb::Table &t) {
    table_run(t, r, p);
    hb::emb::save_checkpoint(t, dir.c_str());
    collect(t, mu, &rows);
  });
  return rows;
}

// Loads dir into a 2-rank table trained differently; expects `status` on
// both ranks, a message containing `needle`, and the rows unchanged.
void expect_rejected(const hb_embedding_config &c, const std::string &dir,
                     hb_status status, const char *needle) {
  Plan p = make_plan(77, 2, 4, c);
  std::mutex mu;
  Rows before, after;
  std::vector<hb_status> st(2, HB_OK);
  std::vector<std::string> msg(2);
  hbtest::run_tables(2, c, [&](int r, hb::emb::Table &t) {
    table_run(t, r, p);
    collect(t, mu, &before);
    try {
      hb::emb::load_checkpoint(t, dir.c_str());
    } catch (const hb::Error &e) {
      st[r] = e.status();
      msg[r] = e.what();
    }
    collect(t, mu, &after);
  });
  const std::string table = "hb_embedding_load('" + std::string(c.name) + "')";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r], status) << "rank " << r << ": " << msg[r];
    EXPECT_NE(msg[r].find(needle), std::string::npos) << msg[r];
    EXPECT_NE(msg[r].find(table), std::string::npos)  // names the table
        << msg[r];
  }
  EXPECT_TRUE(before == after);
}

std::string shard_path(const std::string &dir, int rank) {
  std::ifstream in(dir + "/ck.manifest");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("shard " + std::to_string(rank) + " ", 0) == 0) {
      std::istringstream ls(line);
      std::string k, r, f;
      ls >> k >> r >> f;
      return dir + "/" + f;
    }
  return "";
}

void rewrite(const std::string &path,
             const std::function<void(std::string &)> &edit) {
  std::string data = hb::read_whole_file(path);
  edit(data);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

TEST(BadCheckpoint, TruncatedShard) {
  hb_embedding_config c = config(HB_OPT_ADAGRAD, 40, HB_PARTITION_MOD);
  std::string dir = temp_dir("trunc");
  save_reference(c, dir);
  rewrite(shard_path(dir, 1), [](std::string &d) { d.resize(d.size() - 7); });
  expect_rejected(c, dir, HB_ERR_CORRUPT, "bytes");
}

TEST(BadCheckpoint, FlippedByteInShard) {
  hb_embedding_config c = config(HB_OPT_ADAGRAD, 40, HB_PARTITION_MOD);
  std::string dir = temp_dir("flip");
  save_reference(c, dir);
  rewrite(shard_path(dir, 0), [](std::string &d) { d[d.size() / 2] ^= 0x10; });
  expect_rejected(c, dir, HB_ERR_CORRUPT, "checksum");
}

TEST(BadCheckpoint, EditedManifest) {
  hb_embedding_config c = config(HB_OPT_SGD, 40, HB_PARTITION_MOD);
  std::string dir = temp_dir("manifest");
  save_reference(c, dir);
  rewrite(dir + "/ck.manifest", [](std::string &d) {
    size_t p = d.find("dim 4");
    d[p + 4] = '5';
  });
  expect_rejected(c, dir, HB_ERR_CORRUPT, "checksum");
  rewrite(dir + "/ck.manifest", [](std::string &d) { d.resize(d.size() / 2); });
  expect_rejected(c, dir, HB_ERR_CORRUPT, "manifest");
}

TEST(BadCheckpoint, MissingShardFile) {
  hb_embedding_config c = config(HB_OPT_SGD, 0, HB_PARTITION_MOD);
  std::string dir = temp_dir("missing");
  save_reference(c, dir);
  std::string gone = shard_path(dir, 1);
  ASSERT_EQ(::unlink(gone.c_str()), 0);
  // A shard the manifest names is part of the checkpoint: corrupt, not I/O.
  expect_rejected(c, dir, HB_ERR_CORRUPT, "named by the manifest");
  expect_rejected(c, dir, HB_ERR_CORRUPT, gone.c_str());
}

TEST(Save, CreatesMissingParentDirectories) {
  hb_embedding_config c = config(HB_OPT_SGD, 40, HB_PARTITION_MOD);
  std::string dir = temp_dir("parents") + "/a/b/c";
  save_reference(c, dir);
  EXPECT_FALSE(shard_path(dir, 0).empty());
  EXPECT_FALSE(shard_path(dir, 1).empty());
}

TEST(BadCheckpoint, WrongDimNameOptimizer) {
  hb_embedding_config c = config(HB_OPT_ADAGRAD, 40, HB_PARTITION_MOD);
  std::string dir = temp_dir("mismatch");
  save_reference(c, dir);
  hb_embedding_config d = c;
  d.dim = 3;
  expect_rejected(d, dir, HB_ERR_INVALID_ARGUMENT, "dim");
  d = c;
  d.optimizer = HB_OPT_ADAM;
  expect_rejected(d, dir, HB_ERR_INVALID_ARGUMENT, "optimizer");
  d = c;
  d.num_rows = 41;
  expect_rejected(d, dir, HB_ERR_INVALID_ARGUMENT, "num_rows");
  d = c;
  d.name = "other";
  expect_rejected(d, dir, HB_ERR_INVALID_ARGUMENT, "has: ck");
  // A manifest renamed to another table's name.
  ASSERT_EQ(::rename((dir + "/ck.manifest").c_str(),
                     (dir + "/other.manifest").c_str()),
            0);
  expect_rejected(d, dir, HB_ERR_INVALID_ARGUMENT, "checkpoint of table 'ck'");
  std::string empty = temp_dir("empty");
  expect_rejected(c, empty, HB_ERR_IO, "no checkpoint");
}

TEST(Save, OldFilesRemovedAfterCommit) {
  hb_embedding_config c = config(HB_OPT_SGD, 40, HB_PARTITION_MOD);
  std::string dir = temp_dir("gc");
  save_reference(c, dir);
  save_reference(c, dir);
  int n = 0;
  std::string cmd = "ls " + dir + " | grep -c shard";
  FILE *p = popen(cmd.c_str(), "r");
  ASSERT_EQ(std::fscanf(p, "%d", &n), 1);
  pclose(p);
  EXPECT_EQ(n, 2);  // one save's two shard files
}

// ---- A process killed mid-save leaves the previous checkpoint
// ----------------

// Child: trains plan a, saves, trains plan b, then saves again and is
// SIGKILLed after its shard file is written but before the manifest is.
void child_train_and_die(const hb_embedding_config &c, const std::string &dir,
                         bool kill_in_hook) {
  Plan a = make_plan(21, 1, 6, c), b = make_plan(22, 1, 6, c);
  hbtest::run_tables(1, c, [&](int r, hb::emb::Table &t) {
    table_run(t, r, a);
    hb::emb::save_checkpoint(t, dir.c_str());
    table_run(t, r, b);
    if (kill_in_hook)
      hb::emb::g_save_test_hook = [](const char *) { ::raise(SIGKILL); };
    for (;;) hb::emb::save_checkpoint(t, dir.c_str());  // killed in here
  });
}

TEST(Crash, SigkillMidSaveLeavesPreviousCheckpoint) {
  hb_embedding_config c = config(HB_OPT_ADAGRAD, 0, HB_PARTITION_MOD);
  std::string dir = temp_dir("crash");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    child_train_and_die(c, dir, true);
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  // The interrupted save's shard file exists, its manifest does not.
  std::string cmd = "ls " + dir + " | grep -c shard";
  FILE *p = popen(cmd.c_str(), "r");
  int n = 0;
  ASSERT_EQ(std::fscanf(p, "%d", &n), 1);
  pclose(p);
  EXPECT_EQ(n, 2);
  // The checkpoint loads and equals the state after plan a.
  Plan a = make_plan(21, 1, 6, c);
  std::mutex mu;
  Rows want, got;
  hbtest::run_tables(1, c, [&](int r, hb::emb::Table &t) {
    table_run(t, r, a);
    collect(t, mu, &want);
  });
  hbtest::run_tables(2, c, [&](int, hb::emb::Table &t) {
    hb::emb::load_checkpoint(t, dir.c_str());
    collect(t, mu, &got);
  });
  EXPECT_TRUE(got == want);
}

TEST(Crash, SigkillAtRandomTimesAlwaysLoadable) {
  hb_embedding_config c = config(HB_OPT_ADAM, 3000, HB_PARTITION_MOD);
  c.dim = 32;
  std::string dir = temp_dir("crashloop");
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      child_train_and_die(c, dir, false);
      _exit(3);
    }
    ::usleep(30000 + 17000 * i);
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!hb::file_exists(dir + "/ck.manifest"))
      continue;  // killed before any save
    hbtest::run_tables(1, c, [&](int, hb::emb::Table &t) {
      EXPECT_NO_THROW(hb::emb::load_checkpoint(t, dir.c_str()));
    });
  }
}

}  // namespace
