// One rank of a CTR-shaped training step, for the step model of
// docs/scaling.md: a collection of 26 tables (dim 8, one id per feature and
// sample, uniform over a small vocabulary so the per-peer costs show), a
// lookup and an update per step, and the dense gradient's allreduce (14,273
// floats: the demo's MLP). After WARM steps it counts STEPS: what this rank
// sent per step by transport (messages, bytes), its collective calls
// (rounds), and the step time (the median over steps of the slowest
// rank's). Prints one line per rank:
//   STEP np=N rank=R route=ALLTOALLV/ALLREDUCE calls=.. tcp_msgs=..
//        tcp_bytes=.. shm_msgs=.. shm_bytes=.. step_us=..
// (per step). Run under hbrun; bench/step_cost/step_cost.sh runs it at 2-16
// ranks on this host and across two network namespaces.
//   env: STEPS (20), WARM (3), BATCH (512 local), VOCAB (10000 per table)
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/communicator.h"
#include "context/context.h"
#include "hb.h"

namespace {

int env_int(const char *name, int dflt) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

void check(hb_status st, const char *what) {
  if (st == HB_OK) return;
  std::fprintf(stderr, "step_cost: %s: %s: %s\n", what, hb_status_name(st),
               hb_last_error());
  std::exit(1);
}

}  // namespace

int main() {
  constexpr int kTables = 26, kDim = 8, kDense = 14273;
  const int steps = env_int("STEPS", 20), warm = env_int("WARM", 3);
  const int64_t batch = env_int("BATCH", 512), vocab = env_int("VOCAB", 10000);
  // The counts are read from the context's backend: the collection's
  // rounds must run there, not on the progress channel's own backend
  // (cpu_async_exchange, on by default, would leave only the allreduce).
  setenv("HB_CPU_ASYNC_EXCHANGE", "0", 0);
  hb_context *ctx = nullptr;
  check(hb_context_create(nullptr, &ctx), "context");
  const int rank = hb_context_rank(ctx), np = hb_context_world_size(ctx);

  std::vector<hb_embedding *> tables(kTables);
  std::vector<std::string> names(kTables);
  std::vector<hb_collection_feature> feats(kTables);
  for (int t = 0; t < kTables; ++t) {
    names[t] = "t" + std::to_string(t);
    hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
    c.name = names[t].c_str();
    c.dim = kDim;
    c.num_rows = vocab;
    c.initializer = HB_INIT_UNIFORM;
    c.init_a = -0.05;
    c.init_b = 0.05;
    check(hb_embedding_create(ctx, &c, &tables[t]), "table");
    feats[t] = HB_COLLECTION_FEATURE_INIT;
    feats[t].table = tables[t];
  }
  hb_collection *coll = nullptr;
  check(hb_collection_create(ctx, feats.data(), kTables, &coll), "collection");

  std::mt19937_64 rng(1234 + uint64_t(rank));
  std::vector<std::vector<int64_t>> ids(kTables, std::vector<int64_t>(batch));
  std::vector<std::vector<int64_t>> lens(kTables,
                                         std::vector<int64_t>(batch, 1));
  std::vector<const int64_t *> id_ptr(kTables), len_ptr(kTables);
  for (int t = 0; t < kTables; ++t) {
    id_ptr[t] = ids[t].data();
    len_ptr[t] = lens[t].data();
  }
  hb_jagged_batch b = HB_JAGGED_BATCH_INIT;
  b.batch_size = batch;
  b.ids = id_ptr.data();
  b.lengths = len_ptr.data();
  const int64_t width = hb_collection_pooled_width(coll);
  std::vector<float> out(size_t(batch * width)), grad(out.size());
  std::vector<float> dense(kDense, 1e-3f);

  hb::comm::Backend &be = hb::comm::cpu_backend(hb::ctx_ref(ctx));
  hb::comm::Traffic t0;
  std::vector<double> us;
  for (int s = 0; s < warm + steps; ++s) {
    for (auto &v : ids)
      for (auto &id : v) id = int64_t(rng() % uint64_t(vocab));
    if (s == warm) t0 = be.traffic();
    const auto start = std::chrono::steady_clock::now();
    check(hb_collection_lookup(coll, &b, out.data(), nullptr), "lookup");
    for (size_t i = 0; i < out.size(); ++i) grad[i] = out[i] * 1e-3f;
    check(hb_collection_apply_gradients(coll, &b, grad.data(), nullptr),
          "apply");
    check(hb_allreduce(ctx, dense.data(), dense.data(), kDense, HB_FLOAT32,
                       HB_SUM),
          "dense allreduce");
    if (s >= warm)
      us.push_back(std::chrono::duration<double, std::micro>(
                       std::chrono::steady_clock::now() - start)
                       .count());
  }
  const hb::comm::Traffic t1 = be.traffic();
  std::sort(us.begin(), us.end());
  double med = us[us.size() / 2];
  // The step is as slow as its slowest rank (outside the counted steps).
  check(hb_allreduce(ctx, &med, &med, 1, HB_FLOAT64, HB_MAX), "max");
  const char *a2a = std::getenv("HB_CPU_ALLTOALLV");
  const char *ar = std::getenv("HB_CPU_ALLREDUCE_ROUTE");
  const std::string route =
      std::string(a2a ? a2a : "auto") + "/" + (ar ? ar : "auto");
  std::printf(
      "STEP np=%d rank=%d route=%s calls=%.1f tcp_msgs=%.1f tcp_bytes=%.0f "
      "shm_msgs=%.1f shm_bytes=%.0f step_us=%.0f\n",
      np, rank, route.c_str(), double(t1.calls - t0.calls) / steps,
      double(t1.tcp_messages - t0.tcp_messages) / steps,
      double(t1.tcp_bytes - t0.tcp_bytes) / steps,
      double(t1.shm_messages - t0.shm_messages) / steps,
      double(t1.shm_bytes - t0.shm_bytes) / steps, med);
  std::fflush(stdout);
  hb_collection_destroy(coll);
  for (auto *t : tables) hb_embedding_destroy(t);
  hb_context_destroy(ctx);
  return 0;
}
