// A small CTR model trained under hbrun with job checkpoints; the recovery
// tests start it, kill it and start it again (recovery_kill_test.cc).
//
// Model: one table (dim 4, Adagrad) looked up by the two categorical
// columns, a dense vector w (4) and bias b (replicated, updated with the
// allreduced gradient), an exact AUC over the training predictions, and a
// replicated count per (epoch, line) of the samples trained (the second
// column is the line's serial number). Everything is checkpointed every
// --every steps, so after any crash the restored state has counted exactly
// the samples trained into it.
//
//   recovery_train --data DIR --files N --lines L --dir CKPT --out DUMP
//                  [--every N] [--async 0|1] [--epochs E] [--stop-at S]
//                  [--kill PHASE:RANK:NTH] [--step-ms MS]
//
// --stop-at S: exit(3) right after the save of step S (a clean stop).
// --kill PHASE:RANK:NTH: rank RANK SIGKILLs itself the NTH time (0-based)
// it reaches PHASE (recovery/test_hook.h; "step" = after a step's update,
// before its save).
// DUMP (rank 0, at the end): table rows of ids 0..999, w, b, the AUC's
// bits, the counts -- compared byte for byte between runs.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/mp_check.h"
#include "hb.h"
#include "recovery/test_hook.h"

int g_mp_rank = -1;
const char *g_mp_name = "recovery_train";

namespace {

std::string arg(int argc, char **argv, const char *name, const char *def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

std::string kill_phase;
int kill_rank = -1, kill_nth = 0, my_rank = 0;
int phase_hits = 0;

void maybe_kill(const char *phase) {
  if (my_rank != kill_rank || kill_phase != phase) return;
  if (phase_hits++ == kill_nth) {
    std::fprintf(stderr, "recovery_train: rank %d killing itself at %s\n",
                 my_rank, phase);
    ::raise(SIGKILL);
  }
}

}  // namespace

int main(int argc, char **argv) {
  const std::string data = arg(argc, argv, "--data", "");
  const int nfiles = std::atoi(arg(argc, argv, "--files", "3").c_str());
  const int nlines = std::atoi(arg(argc, argv, "--lines", "1000").c_str());
  const std::string dir = arg(argc, argv, "--dir", "");
  const std::string out = arg(argc, argv, "--out", "");
  const int every = std::atoi(arg(argc, argv, "--every", "5").c_str());
  const int async = std::atoi(arg(argc, argv, "--async", "0").c_str());
  const int epochs = std::atoi(arg(argc, argv, "--epochs", "2").c_str());
  const long stop_at = std::atol(arg(argc, argv, "--stop-at", "-1").c_str());
  const int step_ms = std::atoi(arg(argc, argv, "--step-ms", "0").c_str());
  std::string kill = arg(argc, argv, "--kill", "");
  if (!kill.empty()) {
    size_t a = kill.find(':'), b = kill.rfind(':');
    kill_phase = kill.substr(0, a);
    kill_rank = std::atoi(kill.substr(a + 1, b - a - 1).c_str());
    kill_nth = std::atoi(kill.substr(b + 1).c_str());
  }
  hb::recovery::g_test_hook = maybe_kill;

  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  my_rank = g_mp_rank = hb_context_rank(ctx);
  std::printf("rank %d pid %d\n", my_rank, static_cast<int>(::getpid()));
  std::fflush(stdout);

  hb_embedding_config ec = HB_EMBEDDING_CONFIG_INIT;
  ec.name = "emb";
  ec.dim = 4;
  ec.num_rows = 1000;
  ec.initializer = HB_INIT_UNIFORM;
  ec.init_a = -0.05;
  ec.init_b = 0.05;
  ec.seed = 5;
  ec.optimizer = HB_OPT_ADAGRAD;
  ec.learning_rate = 0.05;
  hb_embedding *emb = nullptr;
  CHECK_OK(hb_embedding_create(ctx, &ec, &emb));

  std::vector<std::string> paths;
  for (int f = 0; f < nfiles; ++f)
    paths.push_back(data + "/part-" + std::to_string(f));
  std::vector<const char *> pp;
  for (const std::string &p : paths) pp.push_back(p.c_str());
  hb_reader_config rc = HB_READER_CONFIG_INIT;
  rc.batch_size = 16;
  rc.columns = "LICC";
  rc.num_rows = 1000;
  rc.num_epochs = epochs;
  rc.shuffle = 1;
  rc.seed = 3;
  rc.chunk_bytes = 2000;
  hb_reader *reader = nullptr;
  CHECK_OK(hb_reader_create(ctx, pp.data(), pp.size(), &rc, &reader));

  hb_metric_config mc = HB_METRIC_CONFIG_INIT;
  mc.kind = HB_METRIC_AUC_EXACT;
  hb_metric *auc = nullptr;
  CHECK_OK(hb_metric_create(ctx, &mc, &auc));

  std::vector<float> w(4, 0.1f), b(1, 0.0f);
  std::vector<int32_t> counts(static_cast<size_t>(nlines) * epochs, 0);

  hb_checkpoint_config cc = HB_CHECKPOINT_CONFIG_INIT;
  cc.dir = dir.c_str();
  cc.async_write = async;
  cc.job_id = "recovery-test";
  cc.keep = 2;
  hb_checkpoint *ck = nullptr;
  CHECK_OK(hb_checkpoint_create(ctx, &cc, &ck));
  CHECK_OK(hb_checkpoint_add_table(ck, emb));
  CHECK_OK(hb_checkpoint_add_buffer(ck, "w", w.data(), w.size() * 4, 0));
  CHECK_OK(hb_checkpoint_add_buffer(ck, "b", b.data(), 4, 0));
  CHECK_OK(hb_checkpoint_add_buffer(ck, "counts", counts.data(),
                                    counts.size() * 4, 0));
  CHECK_OK(hb_checkpoint_add_reader(ck, reader));
  CHECK_OK(hb_checkpoint_add_metric(ck, "auc", auc));
  int64_t step = -1;
  CHECK_OK(hb_checkpoint_restore_latest(ck, &step));
  if (my_rank == 0)
    std::printf("restored step %lld\n", static_cast<long long>(step));
  step = step < 0 ? 0 : step;

  std::vector<int32_t> delta(counts.size());
  for (;;) {
    hb_reader_batch *batch = nullptr;
    CHECK_OK(hb_reader_next(reader, &batch));
    int32_t more = 0, empty = 0;
    CHECK_OK(hb_data_sync(ctx, batch != nullptr, 0, &more, &empty));
    if (!more) {
      hb_reader_batch_free(batch);
      break;
    }
    const int64_t n = batch ? batch->size : 0;
    // ids feature-major: feature 0's n ids, then feature 1's (all present).
    std::vector<int64_t> ids(batch ? batch->ids : nullptr,
                             batch ? batch->ids + batch->num_ids : nullptr);
    if (static_cast<int64_t>(ids.size()) != 2 * n) {
      std::fprintf(stderr, "expected two ids per sample\n");
      return 2;
    }
    std::vector<float> rows(ids.size() * 4);
    CHECK_OK(hb_embedding_lookup(emb, ids.data(), ids.size(), rows.data()));
    std::vector<float> preds(n), grads(ids.size() * 4);
    std::vector<float> gdense(5, 0.0f);  // w (4) and b
    std::fill(delta.begin(), delta.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      float z = b[0];
      for (int f = 0; f < 2; ++f)
        for (int k = 0; k < 4; ++k) z += rows[(f * n + i) * 4 + k] * w[k];
      float p = 1.0f / (1.0f + std::exp(-z));
      preds[i] = p;
      float g = p - batch->labels[i];
      for (int f = 0; f < 2; ++f)
        for (int k = 0; k < 4; ++k) {
          grads[(f * n + i) * 4 + k] = g * w[k];
          gdense[k] += g * rows[(f * n + i) * 4 + k];
        }
      gdense[4] += g;
      int64_t serial = static_cast<int64_t>(batch->dense[i]);
      delta[static_cast<size_t>(batch->epoch) * nlines + serial] += 1;
    }
    CHECK_OK(hb_embedding_apply_gradients(emb, ids.data(), ids.size(),
                                          grads.data()));
    CHECK_OK(
        hb_allreduce(ctx, gdense.data(), gdense.data(), 5, HB_FLOAT32, HB_SUM));
    CHECK_OK(hb_allreduce(ctx, delta.data(), delta.data(), delta.size(),
                          HB_INT32, HB_SUM));
    for (int k = 0; k < 4; ++k) w[k] -= 0.01f * gdense[k];
    b[0] -= 0.01f * gdense[4];
    for (size_t i = 0; i < counts.size(); ++i) counts[i] += delta[i];
    if (n > 0)
      CHECK_OK(hb_metric_update(auc, batch->labels, preds.data(), nullptr, n));
    hb_reader_batch_free(batch);
    ++step;
    if (step_ms > 0) ::usleep(step_ms * 1000);
    maybe_kill("step");
    if (step % every == 0) {
      CHECK_OK(hb_checkpoint_save(ck, step));
      if (step == stop_at) {
        CHECK_OK(hb_checkpoint_wait(ck));
        std::fprintf(stderr, "recovery_train: rank %d stops after step %ld\n",
                     my_rank, stop_at);
        std::exit(3);
      }
    }
  }
  CHECK_OK(hb_checkpoint_wait(ck));
  double a = 0;
  CHECK_OK(hb_metric_result(auc, &a));
  std::vector<int64_t> all(1000);
  for (int i = 0; i < 1000; ++i) all[i] = i;
  std::vector<float> table(1000 * 4);
  CHECK_OK(hb_embedding_lookup(emb, all.data(), all.size(), table.data()));
  if (my_rank == 0) {
    std::ofstream f(out + ".tmp", std::ios::binary);
    f.write(reinterpret_cast<const char *>(table.data()), table.size() * 4);
    f.write(reinterpret_cast<const char *>(w.data()), 16);
    f.write(reinterpret_cast<const char *>(b.data()), 4);
    f.write(reinterpret_cast<const char *>(&a), 8);
    f.write(reinterpret_cast<const char *>(counts.data()), counts.size() * 4);
    f.close();
    std::rename((out + ".tmp").c_str(), out.c_str());
    std::printf("done: steps %lld auc %.6f\n", static_cast<long long>(step), a);
  }
  hb_checkpoint_destroy(ck);
  hb_metric_destroy(auc);
  hb_reader_destroy(reader);
  hb_embedding_destroy(emb);
  hb_context_destroy(ctx);
  return 0;
}
