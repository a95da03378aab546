// Multi-process checks through the public API, run by hbrun at several
// world sizes (tests/embedding/CMakeLists.txt):
//   mp_embedding train        bit-equal training vs the reference, errors
//   mp_embedding save DIR     train at this world size, save (listeners)
//   mp_embedding load DIR     load a save made at 4 ranks, continue, compare
//   mp_embedding export FILE  export, open read-only, compare
//   mp_embedding mismatch DIR mismatched calls fail on every rank with
//                             HB_ERR_MISMATCH; the tables stay intact;
//                             another job's checkpoint directory is
//                             refused on every rank, naming both job ids
// Every rank computes the whole reference itself from the shared seeds.
#define HB_EXPERIMENTAL 1  // hb_checkpoint
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "harness.h"
#include "tables/handle.h"

namespace {

int g_rank = 0, g_world = 1;

#define REQUIRE(cond, ...)                                              \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::fprintf(stderr, "rank %d: FAILED %s:%d: ", g_rank, __FILE__, \
                   __LINE__);                                           \
      std::fprintf(stderr, __VA_ARGS__);                                \
      std::fprintf(stderr, "\n");                                       \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

void ok(hb_status st, const char *what) {
  REQUIRE(st == HB_OK, "%s: %s: %s", what, hb_status_name(st), hb_last_error());
}

using hbtest::Plan;

Plan make_plan(uint64_t seed, int world, int steps,
               const hb_embedding_config &c) {
  return hbtest::make_plan(seed, world, steps, c, 300);
}

// Runs the plan on the table (this rank's batches) and on the reference
// (all ranks' batches), checking every lookup bit for bit.
void run_plan(hb_embedding *e, hbtest::RefTable &ref, const Plan &p,
              const char *label) {
  const int64_t d = ref.c.dim;
  for (size_t s = 0; s < p.size(); ++s) {
    const hbtest::Batch &b = p[s][g_rank];
    std::vector<float> out(b.ids.size() * d);
    ok(hb_embedding_lookup(e, b.ids.data(), b.ids.size(), out.data()),
       "lookup");
    std::vector<std::vector<float>> want;
    for (int r = 0; r < g_world; ++r)
      for (size_t i = 0; i < p[s][r].ids.size(); ++i) {
        std::vector<float> row = ref.lookup(p[s][r].ids[i]);
        if (r == g_rank) want.push_back(row);
      }
    for (size_t i = 0; i < b.ids.size(); ++i)
      REQUIRE(std::memcmp(out.data() + i * d, want[i].data(), d * 4) == 0,
              "%s step %zu: lookup of id %lld differs", label, s,
              (long long)b.ids[i]);
    ok(hb_embedding_apply_gradients(e, b.ids.data(), b.ids.size(),
                                    b.grads.data()),
       "apply");
    std::vector<std::pair<std::vector<int64_t>, std::vector<float>>> all;
    for (int r = 0; r < g_world; ++r)
      all.emplace_back(p[s][r].ids, p[s][r].grads);
    ref.apply(all);
  }
}

// This rank's rows and slots equal the reference's.
void check_shard(hb_embedding *e, hbtest::RefTable &ref, const char *label) {
  const int64_t d = ref.c.dim;
  int64_t n = 0;
  e->table->shard().for_each([&](int64_t id, const float *rec) {
    ++n;
    hbtest::RefTable::Row &want = ref.row(id);
    REQUIRE(std::memcmp(rec, want.w.data(), d * 4) == 0, "%s: row %lld differs",
            label, (long long)id);
    if (ref.c.optimizer != HB_OPT_SGD)
      REQUIRE(std::memcmp(rec + d, want.s1.data(), d * 4) == 0,
              "%s: slot of row %lld differs", label, (long long)id);
  });
  REQUIRE(n == hb_embedding_local_rows(e), "%s: local_rows", label);
}

hb_embedding_config config(const char *name, int opt, int64_t rows, int part,
                           hb_dtype wire) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = name;
  c.dim = 8;
  c.num_rows = rows;
  c.partition = part;
  c.initializer = HB_INIT_NORMAL;
  c.init_b = 0.1;
  c.seed = 3;
  c.optimizer = opt;
  c.learning_rate = 0.05;
  c.wire_dtype = wire;
  return c;
}

void mode_train(hb_context *ctx) {
  struct {
    const char *name;
    int opt;
    int64_t rows;
    int part;
    hb_dtype wire;
  } cases[] = {
      {"sgd_mod", HB_OPT_SGD, 500, HB_PARTITION_MOD, HB_FLOAT32},
      {"adagrad_div", HB_OPT_ADAGRAD, 500, HB_PARTITION_DIV, HB_FLOAT32},
      {"adam_dyn", HB_OPT_ADAM, 0, HB_PARTITION_MOD, HB_FLOAT16},
      {"ftrl_dyn", HB_OPT_FTRL, 0, HB_PARTITION_MOD, HB_BFLOAT16}};
  for (auto &k : cases) {
    hb_embedding_config c = config(k.name, k.opt, k.rows, k.part, k.wire);
    hb_embedding *e = nullptr;
    ok(hb_embedding_create(ctx, &c, &e), "create");
    REQUIRE(hb_embedding_dim(e) == 8, "dim");
    hbtest::RefTable ref(c);
    run_plan(e, ref, make_plan(17 + g_world, g_world, 20, c), k.name);
    check_shard(e, ref, k.name);
    hb_embedding_destroy(e);
  }
  // A bad id on the last rank fails the call on every rank, names the id,
  // and the table keeps working.
  hb_embedding_config c =
      config("errors", HB_OPT_SGD, 10, HB_PARTITION_MOD, HB_FLOAT32);
  hb_embedding *e = nullptr;
  ok(hb_embedding_create(ctx, &c, &e), "create");
  int64_t ids[2] = {1, g_rank == g_world - 1 ? int64_t{99} : int64_t{2}};
  std::vector<float> out(16);
  hb_status st = hb_embedding_lookup(e, ids, 2, out.data());
  REQUIRE(st == HB_ERR_INVALID_ARGUMENT, "bad id gave %s", hb_status_name(st));
  REQUIRE(std::strstr(hb_last_error(), "99") != nullptr, "message: %s",
          hb_last_error());
  ok(hb_embedding_lookup(e, ids, 1, out.data()), "lookup after error");
  // Mismatched configs across ranks are refused on every rank.
  hb_embedding_config m =
      config("mismatch", HB_OPT_SGD, 10 + g_rank, HB_PARTITION_MOD, HB_FLOAT32);
  hb_embedding *bad = nullptr;
  st = hb_embedding_create(ctx, &m, &bad);
  if (g_world > 1)
    REQUIRE(st == HB_ERR_INVALID_ARGUMENT && !bad, "mismatch gave %s",
            hb_status_name(st));
  hb_embedding_destroy(bad);
  hb_embedding_destroy(e);
}

const hb_embedding_config ckpt_config() {
  return config("ckpt", HB_OPT_ADAM, 0, HB_PARTITION_MOD, HB_FLOAT32);
}

struct Fired {
  int before = 0, after = 0;
  std::string path;
};
void on_save(hb_context *, int32_t ev, const char *path, void *ud) {
  Fired *f = static_cast<Fired *>(ud);
  if (ev == HB_EVENT_BEFORE_SAVE) {
    REQUIRE(f->after == f->before, "after-save fired before before-save");
    ++f->before;
  } else {
    ++f->after;
  }
  f->path = path;
}

void mode_save(hb_context *ctx, const char *dir) {
  Fired f;
  ok(hb_context_add_listener(ctx, HB_EVENT_BEFORE_SAVE, on_save, &f),
     "listener");
  ok(hb_context_add_listener(ctx, HB_EVENT_AFTER_SAVE, on_save, &f),
     "listener");
  hb_embedding_config c = ckpt_config();
  hb_embedding *e = nullptr;
  ok(hb_embedding_create(ctx, &c, &e), "create");
  hbtest::RefTable ref(c);
  run_plan(e, ref, make_plan(5, g_world, 12, c), "save");
  ok(hb_embedding_save(e, dir), "save");
  REQUIRE(f.before == 1 && f.after == 1 && f.path == dir,
          "listeners: %d %d '%s'", f.before, f.after, f.path.c_str());
  hb_embedding_destroy(e);
}

void mode_load(hb_context *ctx, const char *dir) {
  hb_embedding_config c = ckpt_config();
  hb_embedding *e = nullptr;
  ok(hb_embedding_create(ctx, &c, &e), "create");
  ok(hb_embedding_load(e, dir), "load");
  // The uninterrupted run: 12 steps at 4 ranks, then 10 at this world size.
  hbtest::RefTable ref(c);
  hbtest::ref_replay(ref, make_plan(5, 4, 12, c));
  run_plan(e, ref, make_plan(99, g_world, 10, c), "after load");
  check_shard(e, ref, "after load");
  // A wrong-dim table refuses the checkpoint and stays as it was (names are
  // unique per context: the first table goes first).
  hb_embedding_destroy(e);
  hb_embedding_config wrong = c;
  wrong.dim = 4;
  hb_embedding *w = nullptr;
  ok(hb_embedding_create(ctx, &wrong, &w), "create");
  int64_t rows_before = hb_embedding_local_rows(w);
  hb_status st = hb_embedding_load(w, dir);
  REQUIRE(st == HB_ERR_INVALID_ARGUMENT, "wrong dim gave %s",
          hb_status_name(st));
  REQUIRE(hb_embedding_local_rows(w) == rows_before, "rows changed");
  hb_embedding_destroy(w);
}

void mode_export(hb_context *ctx, const char *file) {
  hb_embedding_config c =
      config("exp", HB_OPT_ADAGRAD, 0, HB_PARTITION_MOD, HB_FLOAT32);
  hb_embedding *e = nullptr;
  ok(hb_embedding_create(ctx, &c, &e), "create");
  hbtest::RefTable ref(c);
  run_plan(e, ref, make_plan(8, g_world, 6, c), "export");
  ok(hb_embedding_export(e, file), "export");
  ok(hb_context_barrier(ctx, 0), "barrier");
  hb_embedding *s = nullptr;
  ok(hb_embedding_open(file, &s), "open");
  REQUIRE(hb_embedding_local_rows(s) == static_cast<int64_t>(ref.rows.size()),
          "rows in export");
  for (auto &kv : ref.rows) {
    std::vector<float> out(8);
    ok(hb_embedding_lookup(s, &kv.first, 1, out.data()), "serving lookup");
    REQUIRE(std::memcmp(out.data(), kv.second.w.data(), 32) == 0,
            "exported row %lld", (long long)kv.first);
  }
  REQUIRE(hb_embedding_misses(s) == 0, "misses");
  REQUIRE(hb_embedding_apply_gradients(s, nullptr, 0, nullptr) ==
              HB_ERR_INVALID_ARGUMENT,
          "serving table accepted gradients");
  hb_embedding_destroy(s);
  hb_embedding_destroy(e);
}

// A call that must fail on this rank with `want`, its message naming every
// fragment in `names`.
void expect_status(hb_status st, hb_status want, const char *what,
                   std::initializer_list<const char *> names) {
  std::string msg = hb_last_error();
  REQUIRE(st == want, "%s: got %s (%s), want %s", what, hb_status_name(st),
          msg.c_str(), hb_status_name(want));
  for (const char *n : names)
    REQUIRE(msg.find(n) != std::string::npos, "%s: '%s' does not name '%s'",
            what, msg.c_str(), n);
}

void mode_mismatch(hb_context *ctx, const char *dir) {
  hb_embedding_config ca =
      config("mm_a", HB_OPT_ADAGRAD, 0, HB_PARTITION_MOD, HB_FLOAT32);
  hb_embedding_config cb = ca;
  cb.name = "mm_b";
  hb_embedding *a = nullptr, *b = nullptr;
  ok(hb_embedding_create(ctx, &ca, &a), "create a");
  ok(hb_embedding_create(ctx, &cb, &b), "create b");
  // Names are unique per context: a second "mm_a" fails on every rank.
  hb_embedding *dup = nullptr;
  expect_status(hb_embedding_create(ctx, &ca, &dup), HB_ERR_INVALID_ARGUMENT,
                "duplicate name", {"mm_a", "unique"});
  REQUIRE(dup == nullptr, "duplicate handle");
  // Different configs fail on every rank, naming each field that differs
  // and every rank's value (not a fingerprint); the name stays free.
  hb_embedding_config cc = ca;
  cc.name = "mm_c";
  if (g_rank == 1) {
    cc.dim = 6;
    cc.initial_accumulator = 0.25;
    cc.wire_dtype = HB_FLOAT16;
  }
  std::string others = g_world == 2 ? "(rank 0)" : "(ranks 0,2)";
  hb_embedding *c = nullptr;
  expect_status(
      hb_embedding_create(ctx, &cc, &c), HB_ERR_INVALID_ARGUMENT,
      "config mismatch",
      {"hb_embedding_create('mm_c')", "rank 1 differs",
       ("dim: 8 " + others + " vs 6 (rank 1)").c_str(),
       ("initial_accumulator: 0.1 " + others + " vs 0.25 (rank 1)").c_str(),
       ("wire_dtype: HB_FLOAT32 " + others + " vs HB_FLOAT16 (rank 1)")
           .c_str()});
  REQUIRE(c == nullptr, "mismatched handle");
  cc = ca;
  cc.name = "mm_c";
  ok(hb_embedding_create(ctx, &cc, &c), "create mm_c");
  hb_embedding_destroy(c);

  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back(i * 7 + g_rank);
  std::vector<float> before_a(ids.size() * 8), before_b(ids.size() * 8),
      after(ids.size() * 8), grads(ids.size() * 8, 0.5f);
  ok(hb_embedding_lookup(a, ids.data(), ids.size(), before_a.data()), "a");
  ok(hb_embedding_lookup(b, ids.data(), ids.size(), before_b.data()), "b");
  // Rank 1 differs, the others agree: every rank fails, naming rank 1.
  const bool odd = g_rank == 1;
  // lookup against apply_gradients on one table.
  hb_status st =
      odd ? hb_embedding_apply_gradients(a, ids.data(), ids.size(),
                                         grads.data())
          : hb_embedding_lookup(a, ids.data(), ids.size(), after.data());
  expect_status(st, HB_ERR_MISMATCH, "lookup vs apply",
                {"rank 1 differs", "hb_embedding_lookup",
                 "hb_embedding_apply_gradients"});
  // apply_gradients on two different tables.
  st = hb_embedding_apply_gradients(odd ? b : a, ids.data(), ids.size(),
                                    grads.data());
  expect_status(st, HB_ERR_MISMATCH, "a vs b",
                {"rank 1 differs",
                 "rank 0: hb_embedding_apply_gradients, "
                 "table 'mm_a'",
                 "rank 1: hb_embedding_apply_gradients, table 'mm_b'"});
  // save against load.
  st = odd ? hb_embedding_load(a, dir) : hb_embedding_save(a, dir);
  expect_status(st, HB_ERR_MISMATCH, "save vs load",
                {"hb_embedding_save", "hb_embedding_load"});
  // Nothing moved: both tables are as they were, and matched calls work.
  ok(hb_embedding_lookup(a, ids.data(), ids.size(), after.data()), "a again");
  REQUIRE(std::memcmp(after.data(), before_a.data(), after.size() * 4) == 0,
          "table a changed by a mismatched call");
  ok(hb_embedding_lookup(b, ids.data(), ids.size(), after.data()), "b again");
  REQUIRE(std::memcmp(after.data(), before_b.data(), after.size() * 4) == 0,
          "table b changed by a mismatched call");
  ok(hb_embedding_apply_gradients(a, ids.data(), ids.size(), grads.data()),
     "matched apply");
  ok(hb_embedding_save(a, dir), "matched save");
  // The name is free again once its table is gone.
  hb_embedding_destroy(b);
  ok(hb_embedding_create(ctx, &cb, &b), "re-create b");
  hb_embedding_destroy(b);
  hb_embedding_destroy(a);
  // A checkpoint directory of another job: rank 0 reads its JOB file, and
  // every rank reports why (both ids), not only "rank 0 failed".
  const std::string jobs = std::string(dir) + "/jobs";
  hb_checkpoint_config cfg = HB_CHECKPOINT_CONFIG_INIT;
  cfg.dir = jobs.c_str();
  cfg.job_id = "mm-job-a";
  hb_checkpoint *ck = nullptr;
  ok(hb_checkpoint_create(ctx, &cfg, &ck), "checkpoint of job a");
  hb_checkpoint_destroy(ck);
  cfg.job_id = "mm-job-b";
  ck = nullptr;
  expect_status(
      hb_checkpoint_create(ctx, &cfg, &ck), HB_ERR_INVALID_ARGUMENT,
      "another job's directory",
      {"holds the checkpoints of job 'mm-job-a'", "this job is 'mm-job-b'"});
  REQUIRE(ck == nullptr, "refused checkpoint handle");
  // Ranks that registered different things: every rank names the item that
  // differs and each rank's version of it, not fingerprints.
  cfg.job_id = "mm-job-a";
  ok(hb_checkpoint_create(ctx, &cfg, &ck), "checkpoint of job a again");
  float w[2] = {1, 2};
  ok(hb_checkpoint_add_buffer(ck, "w", w, g_rank == 1 ? 8 : 4, 0), "buffer");
  expect_status(
      hb_checkpoint_save(ck, 1), HB_ERR_MISMATCH, "different registrations",
      {"rank 1 differs", ("registered[0]: 'buffer w replicated 4' " + others +
                          " vs 'buffer w replicated 8' (rank 1)")
                             .c_str()});
  hb_checkpoint_destroy(ck);
  // The last call is a table create: a rank done with it destroys its
  // context at once (hb_context_destroy is not collective) and its peers,
  // whose transfers with it are complete, must still succeed.
  cc = ca;
  cc.name = "mm_last";
  ok(hb_embedding_create(ctx, &cc, &c), "last create");
  hb_embedding_destroy(c);
}

}  // namespace

int main(int argc, char **argv) {
  hb_context *ctx = nullptr;
  ok(hb_context_create(nullptr, &ctx), "hb_context_create");
  g_rank = hb_context_rank(ctx);
  g_world = hb_context_world_size(ctx);
  std::string mode = argc > 1 ? argv[1] : "";
  const char *arg = argc > 2 ? argv[2] : "";
  if (mode == "train")
    mode_train(ctx);
  else if (mode == "save")
    mode_save(ctx, arg);
  else if (mode == "load")
    mode_load(ctx, arg);
  else if (mode == "export")
    mode_export(ctx, arg);
  else if (mode == "mismatch")
    mode_mismatch(ctx, arg);
  else
    REQUIRE(false, "unknown mode '%s'", mode.c_str());
  hb_context_destroy(ctx);
  std::printf("rank %d/%d: mp_embedding %s passed\n", g_rank, g_world,
              mode.c_str());
  return 0;
}
