// recovery_bench: what job checkpoints cost a training step, and their size.
//
//   recovery_bench [--rows R] [--dim D] [--dense F] [--ids N] [--steps S]
//                  [--every K] [--reps 3] [--dir DIR]
//
// A synthetic step: one table (R rows of dim D, Adagrad: rows and slots,
// num_rows static) looked up and updated with N random ids, and a dense
// buffer of F floats updated in place (a pass over its memory), plus a
// reader position and an AUC metric registered with the checkpoint. Each
// mode runs S steps; "sync" and "async" save every K steps. The modes run
// interleaved, --reps times, and the table shows medians:
//
//   step ms        mean step time, saves included
//   overhead       against "none" at one save every K steps
//   blocked ms     what one save cost the training thread (async: the copy)
//   write ms       what one save cost the writer (files, fsync, commit)
//   per minute     the overhead at one save per minute of training:
//                  blocked ms / 60 s (the goal: <= 5 %)
//   state MB / ckpt MB   registered state against the bytes written
//
// Under hbrun, every rank runs the step and rank 0 prints (the figures are
// rank 0's). The `restart` engineer's time-to-recovery rows go below.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hb.h"

namespace {

#define CHECK(call)                                               \
  do {                                                            \
    hb_status st_ = (call);                                       \
    if (st_ != HB_OK) {                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, \
                   hb_status_name(st_), hb_last_error());         \
      std::exit(1);                                               \
    }                                                             \
  } while (0)

long arg(int argc, char **argv, const char *name, long def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
  return def;
}
std::string sarg(int argc, char **argv, const char *name, const char *def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Result {
  double step_ms = 0, blocked_ms = 0, write_ms = 0;
  double state_mb = 0, file_mb = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  const long rows = arg(argc, argv, "--rows", 200000);
  const long dim = arg(argc, argv, "--dim", 16);
  const long dense = arg(argc, argv, "--dense", 4 << 20);
  const long nids = arg(argc, argv, "--ids", 8192);
  const long steps = arg(argc, argv, "--steps", 200);
  const long every = arg(argc, argv, "--every", 50);
  const long reps = arg(argc, argv, "--reps", 3);
  std::string root = sarg(argc, argv, "--dir", "");
  if (root.empty()) {
    char tmpl[] = "/tmp/hb_recovery_bench_XXXXXX";
    root = ::mkdtemp(tmpl);
  }

  hb_context *ctx = nullptr;
  CHECK(hb_context_create(nullptr, &ctx));
  const int rank = hb_context_rank(ctx);
  hb_embedding_config ec = HB_EMBEDDING_CONFIG_INIT;
  ec.name = "bench";
  ec.dim = dim;
  ec.num_rows = rows;
  ec.optimizer = HB_OPT_ADAGRAD;
  ec.initializer = HB_INIT_UNIFORM;
  ec.init_a = -0.01;
  ec.init_b = 0.01;
  hb_embedding *emb = nullptr;
  CHECK(hb_embedding_create(ctx, &ec, &emb));
  std::vector<float> w(static_cast<size_t>(dense), 0.5f);
  hb_metric *auc = nullptr;
  CHECK(hb_metric_create(ctx, nullptr, &auc));
  // A reader over one small file, for its position in the checkpoint.
  std::string data = root + "/data.txt";
  if (FILE *f = std::fopen(data.c_str(), "w")) {
    for (int i = 0; i < 1000; ++i) std::fprintf(f, "%d\t%d\t%x\n", i % 2, i, i);
    std::fclose(f);
  }
  const char *paths[] = {data.c_str()};
  hb_reader_config rc = HB_READER_CONFIG_INIT;
  rc.columns = "LIC";
  rc.num_epochs = 0;
  rc.batch_size = 64;
  hb_reader *reader = nullptr;
  CHECK(hb_reader_create(ctx, paths, 1, &rc, &reader));

  std::mt19937_64 rng(rank + 1);
  std::vector<int64_t> ids(static_cast<size_t>(nids));
  std::vector<float> out(ids.size() * dim), grads(ids.size() * dim, 0.01f);
  auto step = [&] {
    for (int64_t &id : ids) id = static_cast<int64_t>(rng() % rows);
    CHECK(hb_embedding_lookup(emb, ids.data(), ids.size(), out.data()));
    CHECK(hb_embedding_apply_gradients(emb, ids.data(), ids.size(),
                                       grads.data()));
    for (float &x : w) x = x * 0.9999f + 1e-6f;
    hb_reader_batch *b = nullptr;
    CHECK(hb_reader_next(reader, &b));
    if (b) {
      std::vector<float> p(b->size, 0.5f);
      for (int64_t i = 0; i < b->size; ++i) p[i] = (i % 7) / 7.0f;
      CHECK(hb_metric_update(auc, b->labels, p.data(), nullptr, b->size));
    }
    hb_reader_batch_free(b);
  };

  const char *modes[] = {"none", "sync", "async"};
  std::vector<std::vector<Result>> res(3);
  for (long rep = 0; rep < reps; ++rep) {
    for (int m = 0; m < 3; ++m) {
      hb_checkpoint *ck = nullptr;
      if (m > 0) {
        hb_checkpoint_config cc = HB_CHECKPOINT_CONFIG_INIT;
        std::string dir = root + "/" + modes[m];
        cc.dir = dir.c_str();
        cc.async_write = m == 2;
        cc.keep = 2;
        CHECK(hb_checkpoint_create(ctx, &cc, &ck));
        CHECK(hb_checkpoint_add_table(ck, emb));
        CHECK(hb_checkpoint_add_buffer(ck, "dense", w.data(),
                                       w.size() * sizeof(float), 0));
        CHECK(hb_checkpoint_add_reader(ck, reader));
        CHECK(hb_checkpoint_add_metric(ck, "auc", auc));
      }
      for (int i = 0; i < 5; ++i) step();  // warm up
      CHECK(hb_context_barrier(ctx, 0));
      Result r;
      double blocked = 0, written = 0;
      int saves = 0;
      double t0 = now();
      for (long s = 1; s <= steps; ++s) {
        step();
        if (ck && s % every == 0) {
          CHECK(hb_checkpoint_save(ck, rep * steps + s));
          hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
          CHECK(hb_checkpoint_get_stats(ck, &st));
          blocked += st.blocked_seconds;
          ++saves;
          if (m == 1) {
            written += st.write_seconds;
            r.state_mb = st.state_bytes / 1e6;
            r.file_mb = st.file_bytes / 1e6;
          }
        }
      }
      if (ck) CHECK(hb_checkpoint_wait(ck));
      r.step_ms = (now() - t0) * 1e3 / steps;
      if (ck) {
        hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
        CHECK(hb_checkpoint_get_stats(ck, &st));
        if (m == 2) {
          written = st.write_seconds * saves;  // the last one's, per save
          r.state_mb = st.state_bytes / 1e6;
          r.file_mb = st.file_bytes / 1e6;
        }
        r.blocked_ms = blocked * 1e3 / saves;
        r.write_ms = written * 1e3 / saves;
        hb_checkpoint_destroy(ck);
      }
      res[m].push_back(r);
    }
  }
  if (rank == 0) {
    auto med = [&](int m, double Result::*f) {
      std::vector<double> v;
      for (const Result &r : res[m]) v.push_back(r.*f);
      return median(v);
    };
    double base = med(0, &Result::step_ms);
    std::printf(
        "recovery_bench: world %d, table %ld x %ld (Adagrad), dense %.1f MB, "
        "%ld ids/step, save every %ld steps, %ld steps, median of %ld\n",
        hb_context_world_size(ctx), rows, dim, dense * 4 / 1e6, nids, every,
        steps, reps);
    std::printf(
        "| mode  | step ms | overhead | blocked ms/save | write ms/save "
        "| per minute | state MB | ckpt MB |\n");
    std::printf(
        "|-------|---------|----------|-----------------|---------------"
        "|------------|----------|---------|\n");
    for (int m = 0; m < 3; ++m) {
      double s = med(m, &Result::step_ms);
      if (m == 0) {
        std::printf(
            "| %-5s | %7.2f |        - |               - |             "
            "- |          - |        - |       - |\n",
            modes[m], s);
        continue;
      }
      double blocked = med(m, &Result::blocked_ms);
      std::printf(
          "| %-5s | %7.2f | %7.1f%% | %15.1f | %13.1f | %9.3f%% | "
          "%8.1f | %7.1f |\n",
          modes[m], s, 100.0 * (s - base) / base, blocked,
          med(m, &Result::write_ms), 100.0 * blocked / 60000.0,
          med(m, &Result::state_mb), med(m, &Result::file_mb));
    }
  }
  hb_reader_destroy(reader);
  hb_metric_destroy(auc);
  hb_embedding_destroy(emb);
  hb_context_destroy(ctx);
  if (sarg(argc, argv, "--dir", "").empty())
    std::system(("rm -rf '" + root + "'").c_str());
  return 0;
}
