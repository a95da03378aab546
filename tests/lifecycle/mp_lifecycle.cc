// A table with a lifecycle in real processes (hbrun -n N), through the
// public API: every lookup of a Zipf stream bit-equal to the model, the
// evicted ids the callbacks report (gathered on every rank) and the summed
// statistics equal the model's; then a save, a load into a fresh table
// and more steps, still equal.
//   mp_lifecycle DIR
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "embedding/handle.h"
#include "harness.h"
#include "ref_lifecycle.h"

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

std::vector<int64_t> g_evicted;  // this rank's callback, in order
void on_evict(const int64_t *ids, size_t n, void *) {
  g_evicted.insert(g_evicted.end(), ids, ids + n);
}

// Steps of p on e and on the model; lookups compared bit for bit.
void run(hb_embedding *e, hbtest::RefLife &ref, const hbtest::Plan &p,
         std::vector<int64_t> *want_evicted) {
  const int64_t d = ref.t.c.dim;
  for (size_t s = 0; s < p.size(); ++s) {
    const hbtest::Batch &b = p[s][g_rank];
    std::vector<float> out(b.ids.size() * d);
    ok(hb_embedding_lookup(e, b.ids.data(), b.ids.size(), out.data()),
       "lookup");
    for (size_t i = 0; i < b.ids.size(); ++i) {
      std::vector<float> w = ref.lookup(b.ids[i]);
      REQUIRE(std::memcmp(out.data() + i * d, w.data(), d * 4) == 0,
              "step %zu: lookup of id %lld differs", s, (long long)b.ids[i]);
    }
    ok(hb_embedding_apply_gradients(e, b.ids.data(), b.ids.size(),
                                    b.grads.data()),
       "apply");
    hbtest::StepBatch all;
    for (int r = 0; r < g_world; ++r)
      all.emplace_back(p[s][r].ids, p[s][r].grads);
    size_t before = ref.evicted.size();
    ref.apply(all);
    for (size_t i = before; i < ref.evicted.size(); ++i)
      if (ref.owner(ref.evicted[i]) == g_rank)
        want_evicted->push_back(ref.evicted[i]);
  }
}

uint64_t sum(hb_context *ctx, uint64_t v) {
  uint64_t out = 0;
  ok(hb_allreduce(ctx, &v, &out, 1, HB_INT64, HB_SUM), "allreduce");
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  REQUIRE(argc == 2, "usage: mp_lifecycle DIR");
  hb_context *ctx = nullptr;
  ok(hb_context_create(nullptr, &ctx), "hb_context_create");
  g_rank = hb_context_rank(ctx);
  g_world = hb_context_world_size(ctx);
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.admission = HB_ADMIT_COUNT;
  life.min_count = 2;
  life.ttl_steps = 12;
  life.max_rows = 40;
  life.score = HB_SCORE_LFU;
  life.evict_interval = 2;
  life.on_evict = on_evict;
  hb_embedding_config cfg = HB_EMBEDDING_CONFIG_INIT;
  cfg.name = "mp_life";
  cfg.dim = 8;
  cfg.initializer = HB_INIT_NORMAL;
  cfg.init_b = 0.1;
  cfg.optimizer = HB_OPT_ADAGRAD;
  cfg.lifecycle = &life;
  hbtest::RefLife ref(cfg, life, g_world);
  hbtest::Plan p1 = hbtest::make_plan(31, g_world, 40, cfg, 400);
  hbtest::Plan p2 = hbtest::make_plan(32, g_world, 20, cfg, 400);
  std::vector<int64_t> want;
  hb_embedding *e = nullptr;
  ok(hb_embedding_create(ctx, &cfg, &e), "create");
  run(e, ref, p1, &want);
  REQUIRE(g_evicted == want, "callback ids differ (%zu vs %zu)",
          g_evicted.size(), want.size());
  hb_embedding_lifecycle_stats st = HB_EMBEDDING_LIFECYCLE_STATS_INIT;
  ok(hb_embedding_lifecycle_get_stats(e, &st), "stats");
  REQUIRE(st.step == ref.step, "step %llu vs %llu",
          (unsigned long long)st.step, (unsigned long long)ref.step);
  REQUIRE(sum(ctx, st.rows) == ref.t.rows.size(), "rows");
  REQUIRE(sum(ctx, st.admitted) == ref.admitted, "admitted");
  REQUIRE(sum(ctx, st.dropped) == ref.dropped, "dropped");
  REQUIRE(sum(ctx, st.evicted_ttl) == ref.ev_ttl, "evicted_ttl");
  REQUIRE(sum(ctx, st.evicted_capacity) == ref.ev_cap, "evicted_capacity");
  REQUIRE(sum(ctx, st.pending) == ref.counts.size(), "pending");
  REQUIRE(st.memory_bytes > 0, "memory_bytes");
  REQUIRE(ref.ev_cap > 0 && ref.ev_ttl > 0 && ref.dropped > 0,
          "the plan does not exercise the policies");
  std::string dir = std::string(argv[1]) + "/" + std::to_string(g_world);
  ok(hb_embedding_save(e, dir.c_str()), "save");
  hb_embedding_destroy(e);
  // A fresh table restored from the save continues as the model does.
  ok(hb_embedding_create(ctx, &cfg, &e), "create again");
  ok(hb_embedding_load(e, dir.c_str()), "load");
  g_evicted.clear();
  want.clear();
  run(e, ref, p2, &want);
  REQUIRE(g_evicted == want, "callback ids after the load differ");
  ok(hb_embedding_lifecycle_get_stats(e, &st), "stats");
  REQUIRE(sum(ctx, st.rows) == ref.t.rows.size(), "rows after the load");
  hb_embedding_destroy(e);
  hb_context_destroy(ctx);
  if (g_rank == 0) std::printf("mp_lifecycle: %d ranks OK\n", g_world);
  return 0;
}
