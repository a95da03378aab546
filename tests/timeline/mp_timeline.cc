// One rank of the multi-process timeline test (2 ranks under hbrun):
// HB_TIMELINE=<dir>/trace.json, one of every collective, a data sync, a
// metric merge and an embedding step; after hb_context_destroy this rank's
// file <dir>/trace.<rank>.json must parse and hold each of them with
// pid = rank.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/mp_check.h"
#include "hb.h"
#include "timeline/trace_reader.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_timeline";

int main(int argc, char **argv) {
  CHECK(argc == 2, "usage: mp_timeline <output dir>");
  const std::string dir = argv[1];
  // hbrun names the rank; a file left by an earlier run must not count.
  const char *rank_env = std::getenv("HB_RANK");
  CHECK(rank_env, "HB_RANK is not set: run under hbrun");
  const std::string file = dir + "/trace." + rank_env + ".json";
  std::remove(file.c_str());
  setenv("HB_TIMELINE", (dir + "/trace.json").c_str(), 1);
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_mp_rank = hb_context_rank(ctx);
  const int world = hb_context_world_size(ctx), me = g_mp_rank;

  std::vector<float> a(64, 1.0f), b(64 * world);
  CHECK_OK(hb_allreduce(ctx, a.data(), a.data(), 64, HB_FLOAT32, HB_SUM));
  void *bufs[2] = {a.data(), a.data() + 32};
  size_t counts[2] = {32, 32};
  CHECK_OK(hb_allreduce_many(ctx, bufs, counts, 2, HB_FLOAT32, HB_SUM));
  CHECK_OK(hb_allgather(ctx, a.data(), b.data(), 64, HB_FLOAT32));
  std::vector<int64_t> vc(world, 8);
  CHECK_OK(hb_allgatherv(ctx, a.data(), 8, b.data(), vc.data(), nullptr,
                         HB_FLOAT32));
  CHECK_OK(hb_alltoall(ctx, b.data(), b.data() + 8 * world, 8, HB_FLOAT32));
  CHECK_OK(hb_alltoallv(ctx, a.data(), vc.data(), nullptr, b.data(), vc.data(),
                        nullptr, HB_FLOAT32));
  CHECK_OK(hb_broadcast(ctx, a.data(), b.data(), 16, HB_FLOAT32, 0));
  CHECK_OK(hb_reduce_scatter(ctx, b.data(), a.data(), 8, HB_FLOAT32, HB_SUM));
  CHECK_OK(hb_context_barrier(ctx, 0));
  int32_t cont = 0;
  CHECK_OK(hb_data_sync(ctx, 1, 0, &cont, nullptr));

  hb_metric_config mc = HB_METRIC_CONFIG_INIT;
  hb_metric *m = nullptr;
  CHECK_OK(hb_metric_create(ctx, &mc, &m));
  float labels[4] = {0, 1, 0, 1}, preds[4] = {0.1f, 0.8f, 0.3f, 0.6f};
  CHECK_OK(hb_metric_update(m, labels, preds, nullptr, 4));
  double auc = 0;
  CHECK_OK(hb_metric_result(m, &auc));
  hb_metric_destroy(m);

  hb_embedding_config ec = HB_EMBEDDING_CONFIG_INIT;
  ec.name = "t";
  ec.dim = 4;
  ec.num_rows = 100;
  hb_embedding *e = nullptr;
  CHECK_OK(hb_embedding_create(ctx, &ec, &e));
  int64_t ids[3] = {me, 7, 50 + me};
  float rows[12], grads[12] = {0};
  CHECK_OK(hb_embedding_lookup(e, ids, 3, rows));
  CHECK_OK(hb_embedding_apply_gradients(e, ids, 3, grads));
  hb_embedding_destroy(e);
  hb_context_destroy(ctx);

  CHECK(std::to_string(me) == rank_env, "rank %d, HB_RANK %s", me, rank_env);
  hb_test::Trace t = hb_test::read_trace(file);
  CHECK(t.valid, "%s: %s", file.c_str(), t.error.c_str());
  CHECK(t.process_name == "rank " + std::to_string(me), "process name '%s'",
        t.process_name.c_str());
  for (const char *name : {"allreduce", "allreduce_many", "allgather",
                           "allgatherv", "alltoall", "alltoallv", "broadcast",
                           "reduce_scatter", "data_sync", "metric_merge"})
    CHECK(t.count(name) >= 1, "%s: no '%s' event", file.c_str(), name);
  // The table's exchange: counts (alltoall) and payloads (alltoallv) for
  // the lookup and the gradients, beyond the one hb_alltoall(v) above.
  CHECK(t.count("alltoallv") >= 3, "%zu alltoallv events",
        t.count("alltoallv"));
  // The table's phases: a lookup and a gradient step.
  for (const char *name : {"emb.plan", "emb.ids", "emb.rows", "emb.gather",
                           "emb.grads", "emb.optimizer"})
    CHECK(t.count(name) >= 1, "%s: no '%s' event", file.c_str(), name);
  CHECK(t.count("emb.plan") == 2, "%zu emb.plan events", t.count("emb.plan"));
  for (const hb_test::TraceEvent &ev : t.events)
    CHECK(ev.pid == me && ev.dur >= 0 && ev.ts > 0, "event %s: pid %d dur %f",
          ev.name.c_str(), ev.pid, ev.dur);
  const hb_test::TraceEvent *ar = t.find("allreduce");
  CHECK(ar->bytes == 64 * 4, "allreduce bytes %lld", ar->bytes);
  CHECK(t.find("allreduce_many")->bytes == 64 * 4, "allreduce_many bytes");
  std::printf("[mp_timeline r%d] %zu events in %s\n", me, t.events.size(),
              file.c_str());
  return 0;
}
