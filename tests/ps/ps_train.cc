// One program for every task of the parameter-server tests (ps_tests.sh):
// a ps task serves (hb_context_serve), a worker trains. The same program
// runs in collective mode (no ps tasks: tables sharded over the ranks).
//
//   ps_train train OUT [--steps N] [--slow-rank R --slow-ms MS]
//                      [--max-lead K] [--expect-lead]
//       Two tables (static Adagrad, dynamic Adam), per step a lookup and a
//       gradient that depends on the rows looked up, on batches that depend
//       only on (rank, step). The chief saves both tables into OUT at the
//       end (collective mode: every rank saves). --max-lead K: the chief
//       checks the ps tasks' staleness counters (bound K never exceeded;
//       --expect-lead: K was reached).
//   ps_train train OUT --slow-rank R --slow-ms MS --slow-compute
//                      --expect-age K [--step-ms MS]
//       The age bound (staleness_bound=age, staleness K): rank R sleeps
//       between its lookup and its gradients (its pushes are computed on
//       old rows), nobody waits for it, and the chief checks that pushes
//       older than K + 3 versions came (the step bound K would have held
//       the others back) and were applied scaled (bound_violations > 0).
//   ps_train train OUT --ckpt DIR --ckpt-every N [--step-ms MS]
//       The same with a job checkpoint (hb_checkpoint_*) of both tables and
//       a dense buffer "w" on the ps tasks every N steps, resumed from the
//       latest one on start; the chief also writes w's values to OUT/w.bin.
//       A run whose ps task is killed and restarted (hbrun --max-restarts)
//       ends with the same bits as one that was not.
//   ps_train evaluate DIR LOG
//       An evaluator task (its context's task type is evaluator): follows
//       the job checkpoints of `train --ckpt DIR` (ps tables and the dense
//       buffer read into ordinary tables) and logs per checkpoint the exact
//       AUC of a score made of the rows of s8 and w; prints the steps.
//   ps_train reload IN OUT
//       The chief loads checkpoint IN into the tables and saves them to OUT
//       (in a ps job: a checkpoint of sharded tables into ps tables).
//   ps_train compare A B
//       World of one: loads both checkpoints of each table and checks that
//       the rows, and one more step with the same gradient, are bit-equal.
//   ps_train count OUT [--samples N] [--batch B] [--step-ms MS]
//                      [--pid-dir DIR] [--max-stall-ms MS --victim R]
//                      [--tables T] [--kill-after STEP:J]
//       Exactly once: worker r pushes a gradient of -(t + 1) (SGD, lr 1) to
//       table t (of T, 1 or 2) for each of its samples (ids r * 10^6 + j)
//       with its position; a restarted worker resumes at hb_ps_position.
//       When every other worker has left the chief checks that every
//       sample's row of table t is exactly t + 1 (what an uninterrupted run
//       gives, whatever the order) and writes "count ok" to OUT.
//       --kill-after STEP:J: on its first start, the victim SIGKILLs itself
//       at its step STEP right after its J-th push request of the step (0-
//       based; tables in order, each to ps task 0, 1, ...: ps/test_hook.h),
//       before the next one is sent.
//   ps_train splits OUT [--batch B] [--step-ms MS] [--slow-rank R --slow-ms
//                       MS] [--victim R --kill-after STEP:J [--victim-lost]]
//       Dynamic splits (HB_PS_SPLIT_* options, ps task 0's queue): each
//       worker takes the next split when it has finished its last, pushes
//       a gradient of -1 per sample (ids: the sample) with its position
//       {split, epoch, offset} (hb_ps_split_commit before the step's
//       pushes; the queue hears of it at the next commit). A restarted
//       worker resumes its own split where the ps tasks have it. The chief
//       checks that every sample's row is exactly the number of epochs, prints
//       the splits each rank took, and writes "count ok" to OUT. Through the
//       public API (hb_ps_split_next / hb_ps_split_commit). --print-splits: a
//       line per split taken (the order test).
//       --victim-lost: the victim is not restarted; another worker
//       finishes its split (from where the ps tables have it, its first
//       batch ending at the split's replay_end) once ps task 0 gives it
//       up. --workers N: the chief waits for N workers to leave (some
//       joined beyond its world). --linger-ms MS: a worker stays attached
//       that long after its last split before it leaves.
//   ps_train splitckpt OUT --ckpt DIR --ckpt-every N [--steps N]
//                          [--batch B] [--step-ms MS]
//       Dynamic splits with job checkpoints of the table (and so of ps task
//       0's queue): N steps of one batch each (none while the queue has
//       nothing for this worker: split_next without waiting), a collective
//       checkpoint every N steps, resumed from the latest on start; then
//       the rest of the splits without checkpoints. A run whose ps task is
//       SIGKILLed and the job restarted from a checkpoint still applies
//       every sample exactly once per epoch (the chief checks, as splits).
//   ps_train dense [--steps N]
//       A dense buffer on the ps: after N synchronous steps of known
//       gradients, its value equals SGD on the rank-order sums.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define HB_EXPERIMENTAL 1
#include "context/context.h"
#include "hb.h"
#include "ps/client.h"
#include "ps/test_hook.h"

namespace {

[[noreturn]] void die(const char *what, hb_status st) {
  std::fprintf(stderr, "ps_train: %s: %s: %s\n", what, hb_status_name(st),
               hb_last_error());
  std::exit(1);
}
#define CHECK_HB(call)                 \
  do {                                 \
    hb_status st_ = (call);            \
    if (st_ != HB_OK) die(#call, st_); \
  } while (0)
#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      std::fprintf(stderr, "ps_train: FAILED: "); \
      std::fprintf(stderr, __VA_ARGS__);          \
      std::fprintf(stderr, "\n");                 \
      std::exit(1);                               \
    }                                             \
  } while (0)

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000),
              static_cast<long>(ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

struct Args {
  std::vector<std::string> pos;
  int64_t steps = 20, slow_rank = -1, slow_ms = 0, max_lead = -1;
  bool expect_lead = false;
  bool slow_compute = false;  // train: rank slow_rank sleeps mid-step
  int64_t expect_age = -1;    // train: the age bound K was passed (ps stats)
  int64_t samples = 2000, batch = 20, step_ms = 0, linger_ms = 0;
  std::string pid_dir;       // count: each worker writes <dir>/worker<rank>.pid
  int64_t max_stall_ms = 0;  // count: no step of a worker may take longer
  int64_t victim = -1;       // count: the rank the test stops (not checked)
  bool victim_lost = false;  // splits: the victim is not restarted
  int64_t workers = 0;       // splits: the chief waits for this many
  std::string ckpt;          // train: job checkpoints in this directory
  bool collection = false;   // train: the steps through one collection
  int64_t ckpt_every = 0;
  int64_t tables = 1;                       // count: 1 or 2 tables
  int64_t kill_step = -1, kill_after = -1;  // count: --kill-after STEP:J
  bool print_splits = false;                // splits: each split taken
};

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    auto num = [&] { return std::atoll(argv[++i]); };
    if (s == "--steps")
      a.steps = num();
    else if (s == "--slow-rank")
      a.slow_rank = num();
    else if (s == "--slow-ms")
      a.slow_ms = num();
    else if (s == "--max-lead")
      a.max_lead = num();
    else if (s == "--expect-lead")
      a.expect_lead = true;
    else if (s == "--slow-compute")
      a.slow_compute = true;
    else if (s == "--expect-age")
      a.expect_age = num();
    else if (s == "--samples")
      a.samples = num();
    else if (s == "--batch")
      a.batch = num();
    else if (s == "--print-splits")
      a.print_splits = true;
    else if (s == "--step-ms")
      a.step_ms = num();
    else if (s == "--linger-ms")
      a.linger_ms = num();
    else if (s == "--pid-dir")
      a.pid_dir = argv[++i];
    else if (s == "--max-stall-ms")
      a.max_stall_ms = num();
    else if (s == "--victim")
      a.victim = num();
    else if (s == "--victim-lost")
      a.victim_lost = true;
    else if (s == "--workers")
      a.workers = num();
    else if (s == "--collection")
      a.collection = true;
    else if (s == "--ckpt")
      a.ckpt = argv[++i];
    else if (s == "--ckpt-every")
      a.ckpt_every = num();
    else if (s == "--tables")
      a.tables = num();
    else if (s == "--kill-after") {
      std::string v = argv[++i];
      a.kill_step = std::atoll(v.c_str());
      a.kill_after = std::atoll(v.substr(v.find(':') + 1).c_str());
    } else
      a.pos.push_back(s);
  }
  return a;
}

hb_embedding *make_table(hb_context *ctx, const char *name, bool on_ps) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = name;
  c.seed = 7;
  if (std::strcmp(name, "s8") == 0) {
    c.dim = 8, c.num_rows = 1000, c.optimizer = HB_OPT_ADAGRAD;
    c.initializer = HB_INIT_NORMAL, c.init_a = 0.0, c.init_b = 0.1;
    c.learning_rate = 0.05;
  } else if (std::strcmp(name, "d4") == 0) {
    c.dim = 4, c.num_rows = 0, c.optimizer = HB_OPT_ADAM;
    c.initializer = HB_INIT_UNIFORM, c.init_a = -0.1, c.init_b = 0.1;
    c.learning_rate = 0.01;
  } else {  // "count", "count2": one float per sample, SGD with lr 1
    c.dim = 1, c.num_rows = 0, c.optimizer = HB_OPT_SGD;
    c.learning_rate = 1.0;
  }
  c.placement = on_ps ? HB_PLACEMENT_PS : HB_PLACEMENT_WORKERS;
  hb_embedding *e = nullptr;
  CHECK_HB(hb_embedding_create(ctx, &c, &e));
  return e;
}

// The ids of (rank, step) for a table: different counts per rank, with
// duplicates, negative ids in the dynamic table.
std::vector<int64_t> batch_ids(int rank, int64_t step, bool dynamic) {
  size_t n = 40 + static_cast<size_t>((rank * 7 + step * 3) % 29);
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t h = mix((uint64_t(rank) << 40) ^ (uint64_t(step) << 20) ^ i ^
                     (dynamic ? 0x5555 : 0));
    ids[i] = dynamic ? static_cast<int64_t>(h % 3000) - 1500
                     : static_cast<int64_t>(h % 300);
  }
  return ids;
}

// A gradient that depends on the rows looked up (so staleness shows).
void make_grads(const std::vector<float> &rows, int rank, int64_t step,
                std::vector<float> *g) {
  g->resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    (*g)[i] =
        0.5f * rows[i] +
        static_cast<float>(static_cast<int64_t>(
                               mix(rank * 1000003ull + step * 17 + i) % 2001) -
                           1000) *
            1e-3f;
}

void write_pid(const std::string &dir, const std::string &who) {
  if (dir.empty()) return;
  // For the test that kills this task (a new start rewrites it).
  std::string path = dir + "/" + who + ".pid", tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "w");
  CHECK(f, "cannot write %s", tmp.c_str());
  std::fprintf(f, "%d\n", static_cast<int>(getpid()));
  std::fclose(f);
  CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "rename %s", path.c_str());
}

constexpr int64_t kDenseN = 600;  // three rows of 256 on the ps, one padded

hb_ps_dense *make_dense(hb_context *ctx) {
  std::vector<float> init(kDenseN);
  for (int64_t i = 0; i < kDenseN; ++i)
    init[i] = 0.001f * static_cast<float>(i);
  hb_ps_dense_config c = HB_PS_DENSE_CONFIG_INIT;
  c.name = "w";
  c.count = kDenseN;
  c.init = init.data();
  c.optimizer = HB_OPT_ADAGRAD;
  c.learning_rate = 0.05;
  hb_ps_dense *d = nullptr;
  CHECK_HB(hb_ps_dense_create(ctx, &c, &d));
  return d;
}

// The step of train's two tables through one collection (a feature each,
// unpooled, one bag of the step's ids): the same rows and gradients as the
// tables' own calls, so the same bits (on the ps tasks: one pull and one
// push per ps task for both tables).
void collection_step(hb_collection *coll, hb_embedding *const t[2], int rank,
                     int64_t s) {
  std::vector<int64_t> ids[2], off[2];
  std::vector<float> rows[2], grads[2];
  for (int k = 0; k < 2; ++k) {
    ids[k] = batch_ids(rank, s, k == 1);
    off[k] = {0, static_cast<int64_t>(ids[k].size())};
    rows[k].assign(ids[k].size() * hb_embedding_dim(t[k]), 0.0f);
  }
  const int64_t *idp[2] = {ids[0].data(), ids[1].data()};
  const int64_t *offp[2] = {off[0].data(), off[1].data()};
  hb_jagged_batch jb = HB_JAGGED_BATCH_INIT;
  jb.batch_size = 1;
  jb.ids = idp;
  jb.offsets = offp;
  float pooled = 0;  // no pooled feature
  float *unpooled[2] = {rows[0].data(), rows[1].data()};
  CHECK_HB(hb_collection_lookup(coll, &jb, &pooled, unpooled));
  for (int k = 0; k < 2; ++k) make_grads(rows[k], rank, s, &grads[k]);
  const float *gp[2] = {grads[0].data(), grads[1].data()};
  CHECK_HB(hb_collection_apply_gradients(coll, &jb, &pooled, gp));
}

int serve(hb_context *ctx, const Args &a) {
  write_pid(a.pid_dir, "ps" + std::to_string(hb_context_task_id(ctx)));
  hb_status st = hb_context_serve(ctx);
  if (st != HB_OK)
    std::fprintf(stderr, "ps_train: ps task %d: %s: %s\n",
                 hb_context_task_id(ctx), hb_status_name(st), hb_last_error());
  hb_context_destroy(ctx);
  return st == HB_OK ? 0 : 1;
}

void check_staleness(hb_context *ctx, const Args &a) {
  if (hb_context_num_ps(ctx) == 0) return;
  hb_ps_stats s = HB_PS_STATS_INIT;
  if (a.expect_age >= 0) {
    // The slow rank's last pushes come after the chief's steps: wait for
    // the others to leave (bounded by the test's timeout).
    do {
      sleep_ms(20);
      CHECK_HB(hb_ps_get_stats(ctx, &s));
    } while (s.workers_left + 1 < hb_context_world_size(ctx));
    std::printf(
        "ps stats: pushes %lld, max age %lld (bound %lld), "
        "pushes scaled %lld\n",
        (long long)s.pushes, (long long)s.max_staleness,
        (long long)a.expect_age, (long long)s.bound_violations);
    CHECK(s.max_staleness >= a.expect_age + 3 && s.bound_violations > 0,
          "the age bound %lld: a slow worker's pushes should be older than "
          "the bound and scaled: max age %lld, %lld scaled",
          (long long)a.expect_age, (long long)s.max_staleness,
          (long long)s.bound_violations);
    return;
  }
  if (a.max_lead < 0) return;
  CHECK_HB(hb_ps_get_stats(ctx, &s));
  std::printf(
      "ps stats: pushes %lld, max lead %lld (bound %lld), "
      "violations %lld, rounds %lld\n",
      (long long)s.pushes, (long long)s.max_staleness, (long long)a.max_lead,
      (long long)s.bound_violations, (long long)s.rounds);
  CHECK(s.bound_violations == 0 && s.max_staleness <= a.max_lead,
        "staleness bound %lld exceeded: max lead %lld, %lld violations",
        (long long)a.max_lead, (long long)s.max_staleness,
        (long long)s.bound_violations);
  if (a.expect_lead)
    CHECK(s.max_staleness == a.max_lead,
          "a straggler should let the others reach the bound %lld, max lead "
          "was %lld",
          (long long)a.max_lead, (long long)s.max_staleness);
}

int train(hb_context *ctx, const Args &a) {
  CHECK(a.pos.size() == 1, "train OUT");
  const bool on_ps = hb_context_num_ps(ctx) > 0;
  const int rank = hb_context_rank(ctx);
  write_pid(a.pid_dir, "worker" + std::to_string(rank));
  hb_embedding *t[2] = {make_table(ctx, "s8", on_ps),
                        make_table(ctx, "d4", on_ps)};
  hb_ps_dense *w = nullptr;
  hb_checkpoint *ck = nullptr;
  std::vector<float> wv(kDenseN), wg(kDenseN);
  int64_t start = 0;
  if (!a.ckpt.empty()) {
    CHECK(on_ps, "--ckpt: a ps job");
    w = make_dense(ctx);
    hb_checkpoint_config cc = HB_CHECKPOINT_CONFIG_INIT;
    cc.dir = a.ckpt.c_str();
    cc.keep = 100;  // an evaluator sees every one
    CHECK_HB(hb_checkpoint_create(ctx, &cc, &ck));
    CHECK_HB(hb_checkpoint_add_table(ck, t[0]));
    CHECK_HB(hb_checkpoint_add_table(ck, t[1]));
    CHECK_HB(hb_checkpoint_add_ps_dense(ck, w));
    CHECK_HB(hb_checkpoint_restore_latest(ck, &start));
    if (start < 0) start = 0;
    std::printf(
        "rank %d starts at step %lld (restart %s)\n", rank, (long long)start,
        std::getenv("HB_RESTART_COUNT") ? std::getenv("HB_RESTART_COUNT")
                                        : "0");
    std::fflush(stdout);
  }
  hb_collection *coll = nullptr;
  if (a.collection) {  // both tables through one collection (unpooled)
    hb_collection_feature f[2] = {HB_COLLECTION_FEATURE_INIT,
                                  HB_COLLECTION_FEATURE_INIT};
    for (int k = 0; k < 2; ++k)
      f[k].table = t[k], f[k].pooling = HB_POOLING_NONE;
    CHECK_HB(hb_collection_create(ctx, f, 2, &coll));
  }
  std::vector<float> rows, grads;
  for (int64_t s = start; s < a.steps; ++s) {
    if (rank == a.slow_rank && a.slow_ms > 0 && !a.slow_compute)
      sleep_ms(a.slow_ms);
    if (a.step_ms > 0) sleep_ms(a.step_ms);
    if (w) {
      CHECK_HB(hb_ps_dense_pull(w, wv.data()));
      make_grads(wv, rank, s, &wg);
      CHECK_HB(hb_ps_dense_push(w, wg.data()));
    }
    if (coll) {
      collection_step(coll, t, rank, s);
    } else {
      for (int k = 0; k < 2; ++k) {
        std::vector<int64_t> ids = batch_ids(rank, s, k == 1);
        int64_t dim = hb_embedding_dim(t[k]);
        rows.assign(ids.size() * dim, 0.0f);
        CHECK_HB(
            hb_embedding_lookup(t[k], ids.data(), ids.size(), rows.data()));
        if (k == 0 && rank == a.slow_rank && a.slow_compute)
          sleep_ms(a.slow_ms);  // between its pull and its push
        make_grads(rows, rank, s, &grads);
        CHECK_HB(hb_embedding_apply_gradients(t[k], ids.data(), ids.size(),
                                              grads.data()));
      }
    }
    if (ck && a.ckpt_every > 0 && (s + 1) % a.ckpt_every == 0)
      CHECK_HB(hb_checkpoint_save(ck, s + 1));
  }
  if (!on_ps || rank == 0) {
    if (on_ps) {
      // Staleness 0: a pull at step N waits for every worker's step N - 1,
      // so the chief saves the table after the last round (an empty
      // lookup still waits, and creates no row).
      for (hb_embedding *e : t) {
        float row[8];
        CHECK_HB(hb_embedding_lookup(e, nullptr, 0, row));
      }
      check_staleness(ctx, a);
    }
    CHECK_HB(hb_embedding_save(t[0], a.pos[0].c_str()));
    CHECK_HB(hb_embedding_save(t[1], a.pos[0].c_str()));
    if (w) {  // the dense buffer's values, after the last round
      CHECK_HB(hb_ps_dense_pull(w, wv.data()));
      std::string path = a.pos[0] + "/w.bin";
      FILE *f = std::fopen(path.c_str(), "wb");
      CHECK(f && std::fwrite(wv.data(), 4, wv.size(), f) == wv.size(),
            "cannot write %s", path.c_str());
      std::fclose(f);
    }
    // Serving files too (ids ascending: bit-equal tables, equal files).
    CHECK_HB(hb_embedding_export(t[0], (a.pos[0] + "/s8.hbe").c_str()));
    CHECK_HB(hb_embedding_export(t[1], (a.pos[0] + "/d4.hbe").c_str()));
  }
  hb_collection_destroy(coll);
  if (ck) CHECK_HB(hb_checkpoint_finish(ck));  // followers: training is done
  hb_checkpoint_destroy(ck);
  hb_ps_dense_destroy(w);
  hb_embedding_destroy(t[0]);
  hb_embedding_destroy(t[1]);
  return 0;
}

// The chief loads checkpoint IN into its tables (on the ps tasks in a ps
// job) and saves them into OUT: checkpoints move between placements.
int reload(hb_context *ctx, const Args &a) {
  CHECK(a.pos.size() == 2, "reload IN OUT");
  const bool on_ps = hb_context_num_ps(ctx) > 0;
  hb_embedding *t[2] = {make_table(ctx, "s8", on_ps),
                        make_table(ctx, "d4", on_ps)};
  if (!on_ps || hb_context_rank(ctx) == 0)
    for (hb_embedding *e : t) {
      CHECK_HB(hb_embedding_load(e, a.pos[0].c_str()));
      CHECK_HB(hb_embedding_save(e, a.pos[1].c_str()));
    }
  hb_embedding_destroy(t[0]);
  hb_embedding_destroy(t[1]);
  return 0;
}

// An evaluator of the checkpoints in dir, polling every 20 ms.
hb_evaluator *open_evaluator(hb_context *ctx, const std::string &dir,
                             const char *log, int64_t timeout_ms) {
  hb_evaluator_config ec = HB_EVALUATOR_CONFIG_INIT;
  ec.dir = dir.c_str();
  ec.log_path = log;
  ec.poll_ms = 20;
  ec.timeout_ms = timeout_ms;
  hb_evaluator *ev = nullptr;
  CHECK_HB(hb_evaluator_create(ctx, &ec, &ev));
  return ev;
}

int evaluate(hb_context *ctx, const Args &a) {
  CHECK(a.pos.size() == 2, "evaluate DIR LOG");
  hb_embedding *s8 = make_table(ctx, "s8", false);
  // The dense buffer as the ps tasks saved it: rows of 256 floats.
  hb_embedding_config wc = HB_EMBEDDING_CONFIG_INIT;
  wc.name = "w";
  wc.dim = 256;
  wc.num_rows = (kDenseN + 255) / 256;
  wc.optimizer = HB_OPT_ADAGRAD;
  hb_embedding *w = nullptr;
  CHECK_HB(hb_embedding_create(ctx, &wc, &w));
  hb_evaluator *ev = open_evaluator(ctx, a.pos[0], a.pos[1].c_str(), 60000);
  CHECK_HB(hb_evaluator_add_table(ev, s8));
  CHECK_HB(hb_evaluator_add_table(ev, w));
  hb_metric_config mc = HB_METRIC_CONFIG_INIT;
  mc.kind = HB_METRIC_AUC_EXACT;
  hb_metric *auc = nullptr;
  CHECK_HB(hb_metric_create(ctx, &mc, &auc));
  CHECK_HB(hb_evaluator_add_metric(ev, "auc", auc));
  std::vector<int64_t> ids(1000), wids = {0, 1, 2};
  for (int64_t i = 0; i < 1000; ++i) ids[i] = i;
  std::vector<float> rows(8000), wrows(3 * 256), labels(1000), preds(1000);
  std::string steps;
  for (;;) {
    int64_t step = -1;
    CHECK_HB(hb_evaluator_next(ev, &step));
    if (step < 0) break;
    CHECK_HB(hb_embedding_lookup(s8, ids.data(), ids.size(), rows.data()));
    CHECK_HB(hb_embedding_lookup(w, wids.data(), wids.size(), wrows.data()));
    for (int64_t i = 0; i < 1000; ++i) {
      float p = 0;
      for (int d = 0; d < 8; ++d)
        p += rows[i * 8 + d] * wrows[(i * 8 + d) % kDenseN];
      preds[i] = p;
      labels[i] = static_cast<float>(mix(static_cast<uint64_t>(i)) & 1);
    }
    CHECK_HB(hb_metric_update(auc, labels.data(), preds.data(), nullptr, 1000));
    CHECK_HB(hb_evaluator_report(ev, nullptr));
    steps += " " + std::to_string(step);
  }
  std::printf("evaluated steps:%s\n", steps.c_str());
  hb_evaluator_destroy(ev);
  hb_metric_destroy(auc);
  hb_embedding_destroy(w);
  hb_embedding_destroy(s8);
  return 0;
}

// An evaluator (one process, after a splitckpt job) over the job's
// checkpoints: the split queue it reports agrees with the tables of each --
// the samples of the "count" table add up to split_samples_done -- and its
// open splits (hb_evaluator_open_splits) lie inside their ranges.
int evalsplits(hb_context *ctx, const Args &a) {
  CHECK(a.pos.size() == 2, "evalsplits DIR SAMPLES");
  const int64_t n = std::atoll(a.pos[1].c_str());
  hb_embedding *t = make_table(ctx, "count", false);
  hb_evaluator *ev = open_evaluator(ctx, a.pos[0], nullptr, 20000);
  CHECK_HB(hb_evaluator_add_table(ev, t));
  std::vector<int64_t> ids(n);
  for (int64_t j = 0; j < n; ++j) ids[j] = j;
  std::vector<float> c(n);
  int checked = 0;
  for (;;) {
    int64_t step = -1;
    CHECK_HB(hb_evaluator_next(ev, &step));
    if (step < 0) break;
    hb_evaluator_stats st = HB_EVALUATOR_STATS_INIT;
    CHECK_HB(hb_evaluator_get_stats(ev, &st));
    CHECK_HB(hb_embedding_lookup(t, ids.data(), ids.size(), c.data()));
    double sum = 0;
    for (float v : c) sum += v;
    std::vector<hb_ps_split> open(st.splits_open + 1);
    for (hb_ps_split &o : open) o = HB_PS_SPLIT_INIT;
    size_t count = 0;
    CHECK_HB(hb_evaluator_open_splits(ev, open.data(), open.size(), &count));
    std::printf(
        "evaluator: step %lld: epoch %lld of %lld, %lld splits done, %lld "
        "open, %lld of %lld samples trained; the table has %.0f\n",
        (long long)step, (long long)st.split_epoch, (long long)st.split_epochs,
        (long long)st.splits_done, (long long)st.splits_open,
        (long long)st.split_samples_done, (long long)st.split_samples_total,
        sum);
    CHECK(st.split_epoch >= 0 && st.split_epoch <= st.split_epochs,
          "step %lld: split_epoch %lld", (long long)step,
          (long long)st.split_epoch);
    CHECK(static_cast<double>(st.split_samples_done) == sum,
          "step %lld: the queue says %lld samples trained, the table %.0f",
          (long long)step, (long long)st.split_samples_done, sum);
    CHECK(count == static_cast<size_t>(st.splits_open), "open splits %zu/%lld",
          count, (long long)st.splits_open);
    for (size_t i = 0; i < count; ++i)
      CHECK(open[i].begin <= open[i].from && open[i].from < open[i].end &&
                open[i].epoch <= st.split_epoch,
            "open split %lld epoch %lld: [%lld, %lld) from %lld",
            (long long)open[i].split, (long long)open[i].epoch,
            (long long)open[i].begin, (long long)open[i].end,
            (long long)open[i].from);
    ++checked;
  }
  CHECK(checked > 0, "no checkpoint evaluated");
  std::printf("evaluator: %d checkpoints, the queue agrees with the tables\n",
              checked);
  hb_evaluator_destroy(ev);
  hb_embedding_destroy(t);
  return 0;
}

int compare(const Args &a) {
  CHECK(a.pos.size() == 2, "compare A B");
  for (const char *name : {"s8", "d4"}) {
    std::vector<float> out[2];
    int64_t rows[2];
    for (int k = 0; k < 2; ++k) {
      hb_context *ctx = nullptr;
      CHECK_HB(hb_context_create(nullptr, &ctx));
      hb_embedding *e = make_table(ctx, name, false);
      CHECK_HB(hb_embedding_load(e, a.pos[k].c_str()));
      rows[k] = hb_embedding_local_rows(e);
      std::vector<int64_t> ids;
      bool dyn = std::strcmp(name, "d4") == 0;
      for (int64_t i = dyn ? -1500 : 0; i < (dyn ? 1500 : 1000); ++i)
        ids.push_back(i);
      int64_t dim = hb_embedding_dim(e);
      std::vector<float> o(ids.size() * dim), g(ids.size() * dim);
      CHECK_HB(hb_embedding_lookup(e, ids.data(), ids.size(), o.data()));
      // One more step shows the optimizer slots too.
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.25f - 0.001f * (i % 500);
      CHECK_HB(
          hb_embedding_apply_gradients(e, ids.data(), ids.size(), g.data()));
      std::vector<float> o2(o.size());
      CHECK_HB(hb_embedding_lookup(e, ids.data(), ids.size(), o2.data()));
      o.insert(o.end(), o2.begin(), o2.end());
      out[k] = o;
      hb_embedding_destroy(e);
      hb_context_destroy(ctx);
    }
    CHECK(rows[0] == rows[1], "table %s: %lld rows vs %lld", name,
          (long long)rows[0], (long long)rows[1]);
    size_t diff = 0;
    for (size_t i = 0; i < out[0].size(); ++i)
      if (std::memcmp(&out[0][i], &out[1][i], 4) != 0) ++diff;
    CHECK(diff == 0, "table %s: %zu of %zu values differ", name, diff,
          out[0].size());
    std::printf("table %s: %lld rows, %zu values bit-equal\n", name,
                (long long)rows[0], out[0].size());
  }
  return 0;
}

// The chief waits until every other worker has left (a restarted one may
// still be catching up).
// lost_too: a worker lost for good counts as gone.
void wait_others_left(hb_context *ctx, int world, bool lost_too = false) {
  for (int tries = 0;; ++tries) {
    hb_ps_stats s = HB_PS_STATS_INIT;
    CHECK_HB(hb_ps_get_stats(ctx, &s));
    if ((lost_too ? s.workers_gone : s.workers_left) >= world - 1) break;
    CHECK(tries < 1200, "only %lld of %d workers left after 60 s",
          (long long)s.workers_left, world - 1);
    sleep_ms(50);
  }
}

// count --kill-after: the victim's step and its push requests so far.
int64_t g_kill_step = -1, g_kill_after = -1, g_step = -1, g_sent = 0;

void kill_point(const char *point, int ps) {
  if (g_step != g_kill_step || g_sent++ != g_kill_after) return;
  // Give ps task `ps` the time to apply it: it has the push, the next one
  // never comes.
  sleep_ms(50);
  std::fprintf(stderr,
               "ps_train: killing myself at step %lld after %s to ps %d\n",
               (long long)g_step, point, ps);
  std::fflush(stderr);
  ::raise(SIGKILL);
}

// --kill-after, on the victim's first start; returns HB_RESTART_COUNT.
const char *arm_kill_point(const Args &a, int rank) {
  const char *restarted = std::getenv("HB_RESTART_COUNT");
  if (a.kill_step >= 0 && rank == a.victim &&
      (!restarted || std::atoi(restarted) == 0)) {
    g_kill_step = a.kill_step, g_kill_after = a.kill_after;
    hb::ps::g_test_hook = kill_point;
  }
  return restarted;
}

const char *kCountTables[2] = {"count", "count2"};

int count(hb_context *ctx, const Args &a) {
  CHECK(a.pos.size() == 1, "count OUT");
  CHECK(a.tables == 1 || a.tables == 2, "--tables 1 or 2");
  const int rank = hb_context_rank(ctx), world = hb_context_world_size(ctx);
  write_pid(a.pid_dir, "worker" + std::to_string(rank));
  const char *restarted = arm_kill_point(a, rank);
  std::vector<hb_embedding *> t;
  for (int64_t k = 0; k < a.tables; ++k)
    t.push_back(make_table(ctx, kCountTables[k], true));
  // Where this worker left off (0 on its first start).
  int64_t next = 0, step = 0;
  size_t len = 0;
  CHECK_HB(hb_ps_position(ctx, &next, sizeof next, &len, &step));
  if (len != sizeof next) next = 0;
  std::printf("rank %d starts at sample %lld (step %lld, restart %s)\n", rank,
              (long long)next, (long long)step, restarted ? restarted : "0");
  std::fflush(stdout);
  std::vector<int64_t> ids;
  std::vector<float> rows, grads;
  int64_t worst_ms = 0;
  for (int64_t s = step; next < a.samples; ++s) {
    const int64_t t0 = now_ms();
    int64_t end = std::min(a.samples, next + a.batch);
    ids.clear();
    for (int64_t j = next; j < end; ++j) ids.push_back(rank * 1000000 + j);
    rows.resize(ids.size());
    for (hb_embedding *e : t)
      CHECK_HB(hb_embedding_lookup(e, ids.data(), ids.size(), rows.data()));
    // The position after this batch rides with its gradients.
    CHECK_HB(hb_ps_set_position(ctx, &end, sizeof end));
    g_step = s, g_sent = 0;
    for (size_t k = 0; k < t.size(); ++k) {
      grads.assign(ids.size(), -static_cast<float>(k + 1));
      CHECK_HB(hb_embedding_apply_gradients(t[k], ids.data(), ids.size(),
                                            grads.data()));
    }
    next = end;
    worst_ms = std::max(worst_ms, now_ms() - t0);
    if (a.step_ms > 0) sleep_ms(a.step_ms);
  }
  // A lost or stopped peer holds this worker back for peer_timeout_ms at
  // most (plus load), never for as long as the peer is gone.
  if (a.max_stall_ms > 0 && rank != a.victim)
    CHECK(worst_ms <= a.max_stall_ms,
          "rank %d: a step took %lld ms (at most %lld expected)", rank,
          (long long)worst_ms, (long long)a.max_stall_ms);
  std::printf("rank %d: done, longest step %lld ms\n", rank,
              (long long)worst_ms);
  // Out of data: leave the table, so that no one waits for this worker's
  // next step (staleness 0). The others then leave the job.
  for (hb_embedding *e : t) hb_embedding_destroy(e);
  t.clear();
  if (rank == 0) {
    // Then every sample's row.
    wait_others_left(ctx, world);
    std::vector<int64_t> all;
    for (int r = 0; r < world; ++r)
      for (int64_t j = 0; j < a.samples; ++j) all.push_back(r * 1000000 + j);
    std::vector<float> c(all.size());
    size_t bad = 0;
    for (int64_t k = 0; k < a.tables; ++k) {
      t.push_back(make_table(ctx, kCountTables[k], true));
      CHECK_HB(hb_embedding_lookup(t[k], all.data(), all.size(), c.data()));
      for (size_t i = 0; i < c.size(); ++i)
        if (c[i] != static_cast<float>(k + 1)) {
          if (bad < 5)
            std::fprintf(stderr, "table %s: sample %lld applied %g times\n",
                         kCountTables[k], (long long)all[i],
                         c[i] / static_cast<float>(k + 1));
          ++bad;
        }
    }
    hb_ps_stats s = HB_PS_STATS_INIT;
    CHECK_HB(hb_ps_get_stats(ctx, &s));
    std::printf(
        "count: %zu samples, %zu not applied exactly once; %lld "
        "duplicate pushes dropped, %lld workers lost, %lld rejoined\n",
        c.size(), bad, (long long)s.duplicate_pushes, (long long)s.workers_lost,
        (long long)s.workers_rejoined);
    CHECK(bad == 0, "%zu samples not applied exactly once", bad);
    FILE *f = std::fopen(a.pos[0].c_str(), "w");
    CHECK(f, "cannot write %s", a.pos[0].c_str());
    std::fprintf(f, "count ok\n");
    std::fclose(f);
  }
  for (hb_embedding *e : t) hb_embedding_destroy(e);
  return 0;
}

void check_splits(hb_context *ctx, int world, const Args &a);

int splits(hb_context *ctx, const Args &a) {
  CHECK(a.pos.size() == 1, "splits OUT");
  const int rank = hb_context_rank(ctx), world = hb_context_world_size(ctx);
  write_pid(a.pid_dir, "worker" + std::to_string(rank));
  arm_kill_point(a, rank);
  hb_embedding *t = make_table(ctx, "count", true);
  std::vector<int64_t> ids;
  std::vector<float> rows, grads;
  int64_t taken = 0, samples = 0, s = 0;
  // The public loop (hb.h, "Dynamic splits"): a restarted worker's first
  // split is its own, from where its applied pushes left it.
  hb_ps_split sp = HB_PS_SPLIT_INIT;
  for (;;) {
    CHECK_HB(hb_ps_split_next(ctx, &sp));
    if (sp.split < 0) break;
    ++taken;
    if (a.print_splits)
      std::printf("rank %d: split %lld epoch %lld from %lld\n", rank,
                  (long long)sp.split, (long long)sp.epoch, (long long)sp.from);
    for (int64_t next = sp.from; next < sp.end;) {
      if (rank == a.slow_rank && a.slow_ms > 0) sleep_ms(a.slow_ms);
      // A lost holder's last batch, applied by some ps tables and not
      // others, is pushed again whole (the split's replay_end).
      const int64_t end = next < sp.replay_end
                              ? sp.replay_end
                              : std::min(sp.end, next + a.batch);
      if (next < sp.replay_end)
        std::printf(
            "rank %d: resumes split %lld at %lld, first batch to %lld\n", rank,
            (long long)sp.split, (long long)next, (long long)end);
      ids.clear();
      for (int64_t j = next; j < end; ++j) ids.push_back(j);
      rows.resize(ids.size());
      CHECK_HB(hb_embedding_lookup(t, ids.data(), ids.size(), rows.data()));
      CHECK_HB(hb_ps_split_commit(ctx, sp.split, end));
      g_step = s++, g_sent = 0;
      grads.assign(ids.size(), -1.0f);
      CHECK_HB(hb_embedding_apply_gradients(t, ids.data(), ids.size(),
                                            grads.data()));
      samples += end - next;
      next = end;
      if (a.step_ms > 0) sleep_ms(a.step_ms);
    }
  }
  std::printf("rank %d: took %lld splits, %lld samples\n", rank,
              (long long)taken, (long long)samples);
  std::fflush(stdout);
  if (a.linger_ms > 0) sleep_ms(a.linger_ms);
  hb_embedding_destroy(t);
  t = nullptr;
  if (rank == 0) check_splits(ctx, world, a);
  return 0;
}

// The chief, once the others are gone: every sample of the queue applied
// exactly once per epoch (a row of table "count" per sample, -1 a push).
void check_splits(hb_context *ctx, int world, const Args &a) {
  // --workers: more than the chief's world (some joined mid-job).
  wait_others_left(ctx, a.workers > world ? static_cast<int>(a.workers) : world,
                   a.victim_lost);
  const int64_t n = ctx->options.get_int("ps_split_samples");
  const int64_t epochs = ctx->options.get_int("ps_split_epochs");
  hb_embedding *t = make_table(ctx, "count", true);
  std::vector<int64_t> all(n);
  for (int64_t j = 0; j < n; ++j) all[j] = j;
  std::vector<float> c(n);
  CHECK_HB(hb_embedding_lookup(t, all.data(), all.size(), c.data()));
  size_t bad = 0;
  for (int64_t j = 0; j < n; ++j)
    if (c[j] != static_cast<float>(epochs)) {
      if (bad < 5)
        std::fprintf(stderr, "sample %lld applied %g times in %lld epochs\n",
                     (long long)j, c[j], (long long)epochs);
      ++bad;
    }
  std::printf(
      "splits: %lld samples x %lld epochs, %zu not applied exactly "
      "once per epoch\n",
      (long long)n, (long long)epochs, bad);
  CHECK(bad == 0, "%zu samples not applied exactly once", bad);
  FILE *f = std::fopen(a.pos[0].c_str(), "w");
  CHECK(f, "cannot write %s", a.pos[0].c_str());
  std::fprintf(f, "count ok\n");
  std::fclose(f);
  hb_embedding_destroy(t);
}

// One step of the public loop on split sp from *next: its position
// committed before the pushes (hb_ps_split_commit), a -1 for each sample.
// False once the split is finished.
bool public_split_step(hb_context *ctx, hb_embedding *t, const hb_ps_split &sp,
                       int64_t *next, int64_t batch) {
  const int64_t end =
      *next < sp.replay_end ? sp.replay_end : std::min(sp.end, *next + batch);
  std::vector<int64_t> ids;
  for (int64_t j = *next; j < end; ++j) ids.push_back(j);
  std::vector<float> rows(ids.size()), grads(ids.size(), -1.0f);
  CHECK_HB(hb_embedding_lookup(t, ids.data(), ids.size(), rows.data()));
  CHECK_HB(hb_ps_split_commit(ctx, sp.split, end));
  CHECK_HB(
      hb_embedding_apply_gradients(t, ids.data(), ids.size(), grads.data()));
  *next = end;
  return end < sp.end;
}

// Dynamic splits with collective job checkpoints, through the public calls:
// hb_ps_split_try never waits, so every worker reaches every save (a worker
// the queue has nothing for makes an empty step).
int splitckpt(hb_context *ctx, const Args &a) {
  CHECK(a.pos.size() == 1 && !a.ckpt.empty() && a.ckpt_every > 0,
        "splitckpt OUT --ckpt DIR --ckpt-every N");
  const int rank = hb_context_rank(ctx), world = hb_context_world_size(ctx);
  write_pid(a.pid_dir, "worker" + std::to_string(rank));
  hb_embedding *t = make_table(ctx, "count", true);
  hb_checkpoint *ck = nullptr;
  hb_checkpoint_config cc = HB_CHECKPOINT_CONFIG_INIT;
  cc.dir = a.ckpt.c_str();
  CHECK_HB(hb_checkpoint_create(ctx, &cc, &ck));
  CHECK_HB(hb_checkpoint_add_table(ck, t));
  int64_t start = 0;
  CHECK_HB(hb_checkpoint_restore_latest(ck, &start));
  if (start < 0) start = 0;
  std::printf(
      "rank %d starts at step %lld (restart %s)\n", rank, (long long)start,
      std::getenv("HB_RESTART_COUNT") ? std::getenv("HB_RESTART_COUNT") : "0");
  std::fflush(stdout);
  hb_ps_split sp = HB_PS_SPLIT_INIT;
  bool has = false;
  int64_t next = 0, taken = 0, later = 0;
  for (int64_t s = start; s < a.steps; ++s) {
    if (!has) {
      CHECK_HB(hb_ps_split_try(ctx, &sp));
      CHECK(sp.split >= -1 || sp.split == HB_PS_SPLIT_LATER,
            "hb_ps_split_try: split %lld", (long long)sp.split);
      later += sp.split == HB_PS_SPLIT_LATER;
      has = sp.split >= 0, next = sp.from, taken += has;
    }
    if (has) has = public_split_step(ctx, t, sp, &next, a.batch);
    if (a.step_ms > 0) sleep_ms(a.step_ms);
    if ((s + 1) % a.ckpt_every == 0) CHECK_HB(hb_checkpoint_save(ck, s + 1));
  }
  // The rest without checkpoints (a worker may wait here for a split that
  // another holds).
  for (;;) {
    if (!has) {
      CHECK_HB(hb_ps_split_next(ctx, &sp));
      if (sp.split < 0) break;
      has = true, next = sp.from, ++taken;
    }
    has = public_split_step(ctx, t, sp, &next, a.batch);
  }
  std::printf("rank %d: took %lld splits (%lld tries answered later)\n", rank,
              (long long)taken, (long long)later);
  std::fflush(stdout);
  CHECK_HB(hb_checkpoint_finish(ck));
  hb_checkpoint_destroy(ck);
  hb_embedding_destroy(t);
  if (rank == 0) check_splits(ctx, world, a);
  return 0;
}

int dense(hb_context *ctx, const Args &a) {
  const int rank = hb_context_rank(ctx), world = hb_context_world_size(ctx);
  const int64_t n = 600;  // three rows of 256, the last padded
  std::vector<float> init(n), w(n), g(n);
  for (int64_t i = 0; i < n; ++i) init[i] = 0.001f * static_cast<float>(i);
  hb_ps_dense_config c = HB_PS_DENSE_CONFIG_INIT;
  c.name = "dense";
  c.count = n;
  c.init = init.data();
  c.optimizer = HB_OPT_SGD;
  c.learning_rate = 0.5;
  hb_ps_dense *d = nullptr;
  CHECK_HB(hb_ps_dense_create(ctx, &c, &d));
  auto grad = [](int r, int64_t s, int64_t i) {
    return static_cast<float>(
               static_cast<int64_t>(mix(r * 7919ull + s * 31 + i) % 1001) -
               500) *
           1e-4f;
  };
  std::vector<float> ref = init;
  const float lr = 0.5f;
  for (int64_t s = 0; s < a.steps; ++s) {
    CHECK_HB(hb_ps_dense_pull(d, w.data()));
    // Staleness 0: the value after s rounds, exactly.
    for (int64_t i = 0; i < n; ++i)
      CHECK(std::memcmp(&w[i], &ref[i], 4) == 0,
            "rank %d step %lld: element %lld is %.9g, expected %.9g", rank,
            (long long)s, (long long)i, w[i], ref[i]);
    for (int64_t i = 0; i < n; ++i) g[i] = grad(rank, s, i);
    CHECK_HB(hb_ps_dense_push(d, g.data()));
    for (int64_t i = 0; i < n; ++i) {
      float sum = grad(0, s, i);
      for (int r = 1; r < world; ++r) sum += grad(r, s, i);
      ref[i] = ref[i] - lr * sum;
    }
  }
  std::printf("rank %d: dense buffer equal to the reference for %lld steps\n",
              rank, (long long)a.steps);
  hb_ps_dense_destroy(d);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ps_train train|compare|count|dense ...\n");
    return 2;
  }
  std::string mode = argv[1];
  Args a = parse(argc, argv);
  if (mode == "compare") return compare(a);
  hb_context *ctx = nullptr;
  CHECK_HB(hb_context_create(nullptr, &ctx));
  if (std::strcmp(hb_context_task_type(ctx), "ps") == 0) return serve(ctx, a);
  int rc = mode == "train"        ? train(ctx, a)
           : mode == "reload"     ? reload(ctx, a)
           : mode == "count"      ? count(ctx, a)
           : mode == "splits"     ? splits(ctx, a)
           : mode == "splitckpt"  ? splitckpt(ctx, a)
           : mode == "dense"      ? dense(ctx, a)
           : mode == "evaluate"   ? evaluate(ctx, a)
           : mode == "evalsplits" ? evalsplits(ctx, a)
                                  : 2;
  hb_context_destroy(ctx);
  return rc;
}
