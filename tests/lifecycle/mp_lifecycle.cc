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

#include "common/mp_check.h"
#include "harness.h"
#include "ref_lifecycle.h"
#include "tables/handle.h"

int g_mp_rank = 0;
const char *g_mp_name = "mp_lifecycle";

namespace {

int g_world = 1;

std::vector<int64_t> g_evicted;  // this rank's callback, in order
void on_evict(const int64_t *ids, size_t n, void *) {
  g_evicted.insert(g_evicted.end(), ids, ids + n);
}

// Steps of p on e and on the model; lookups compared bit for bit.
void run(hb_embedding *e, hbtest::RefLife &ref, const hbtest::Plan &p,
         std::vector<int64_t> *want_evicted) {
  const int64_t d = ref.t.c.dim;
  for (size_t s = 0; s < p.size(); ++s) {
    const hbtest::Batch &b = p[s][g_mp_rank];
    std::vector<float> out(b.ids.size() * d);
    CHECK_OK(hb_embedding_lookup(e, b.ids.data(), b.ids.size(), out.data()));
    for (size_t i = 0; i < b.ids.size(); ++i) {
      std::vector<float> w = ref.lookup(b.ids[i]);
      CHECK(std::memcmp(out.data() + i * d, w.data(), d * 4) == 0,
            "step %zu: lookup of id %lld differs", s, (long long)b.ids[i]);
    }
    CHECK_OK(hb_embedding_apply_gradients(e, b.ids.data(), b.ids.size(),
                                          b.grads.data()));
    hbtest::StepBatch all;
    for (int r = 0; r < g_world; ++r)
      all.emplace_back(p[s][r].ids, p[s][r].grads);
    size_t before = ref.evicted.size();
    ref.apply(all);
    for (size_t i = before; i < ref.evicted.size(); ++i)
      if (ref.owner(ref.evicted[i]) == g_mp_rank)
        want_evicted->push_back(ref.evicted[i]);
  }
}

uint64_t sum(hb_context *ctx, uint64_t v) {
  uint64_t out = 0;
  CHECK_OK(hb_allreduce(ctx, &v, &out, 1, HB_INT64, HB_SUM));
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  CHECK(argc == 2, "usage: mp_lifecycle DIR");
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_mp_rank = hb_context_rank(ctx);
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
  CHECK_OK(hb_embedding_create(ctx, &cfg, &e));
  run(e, ref, p1, &want);
  CHECK(g_evicted == want, "callback ids differ (%zu vs %zu)", g_evicted.size(),
        want.size());
  hb_embedding_lifecycle_stats st = HB_EMBEDDING_LIFECYCLE_STATS_INIT;
  CHECK_OK(hb_embedding_lifecycle_get_stats(e, &st));
  CHECK(st.step == ref.step, "step %llu vs %llu", (unsigned long long)st.step,
        (unsigned long long)ref.step);
  CHECK(sum(ctx, st.rows) == ref.t.rows.size(), "rows");
  CHECK(sum(ctx, st.admitted) == ref.admitted, "admitted");
  CHECK(sum(ctx, st.dropped) == ref.dropped, "dropped");
  CHECK(sum(ctx, st.evicted_ttl) == ref.ev_ttl, "evicted_ttl");
  CHECK(sum(ctx, st.evicted_capacity) == ref.ev_cap, "evicted_capacity");
  CHECK(sum(ctx, st.pending) == ref.counts.size(), "pending");
  CHECK(st.memory_bytes > 0, "memory_bytes");
  CHECK(ref.ev_cap > 0 && ref.ev_ttl > 0 && ref.dropped > 0,
        "the plan does not exercise the policies");
  std::string dir = std::string(argv[1]) + "/" + std::to_string(g_world);
  CHECK_OK(hb_embedding_save(e, dir.c_str()));
  hb_embedding_destroy(e);
  // A fresh table restored from the save continues as the model does.
  CHECK_OK(hb_embedding_create(ctx, &cfg, &e));
  CHECK_OK(hb_embedding_load(e, dir.c_str()));
  g_evicted.clear();
  want.clear();
  run(e, ref, p2, &want);
  CHECK(g_evicted == want, "callback ids after the load differ");
  CHECK_OK(hb_embedding_lifecycle_get_stats(e, &st));
  CHECK(sum(ctx, st.rows) == ref.t.rows.size(), "rows after the load");
  hb_embedding_destroy(e);
  hb_context_destroy(ctx);
  if (g_mp_rank == 0) std::printf("mp_lifecycle: %d ranks OK\n", g_world);
  return 0;
}
