// criteo_synth: a seeded synthetic Criteo-like workload for sharded
// embeddings. 26 categorical tables with the Criteo Kaggle cardinalities
// (the mini profile caps them at 1M rows), one id per table per sample,
// ranks drawn Zipf(alpha) and mapped through a fixed bijective affine
// permutation per table so hot ids spread over owners. Each step every
// rank looks up a batch and applies Adagrad gradients to it.
//
// Run: criteo_synth [--dim 16] [--steps 20] [--batch 8192] [--alpha 1.1]
//      [--profile mini|full] [--tables 26] [--wire f32|f16|bf16] [--seed 1]
//      [--collection] [--dynamic]
// under hbrun -n N for several ranks. Reports per rank: ids/s (lookup +
// apply_gradients, counted once per id), unique-id ratio, collective rounds
// per step, wire bytes per step against the dedup bound, peak RSS against
// the shard's own size. --collection runs every step as one
// hb_collection_lookup and one hb_collection_apply_gradients over all the
// tables (one sum-pooled one-hot feature per table) instead of one
// lookup and one apply per table. --dynamic makes every table a dynamic
// hash table (num_rows = 0) fed the same ids.
#include <time.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define HB_EXPERIMENTAL 1
#include "common/proc_mem.h"
#include "common/zipf.h"
#include "hb.h"
#include "tables/handle.h"

namespace {

using hbbench::peak_rss_kib;
using hbbench::Zipf;

const int64_t kCriteoRows[26] = {
    1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
    93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
    2173,  4,    7046547,  18,      15,  286181, 105,     142572};

struct Args {
  int64_t dim = 16, steps = 20, batch = 8192, tables = 26, cap = 1000000;
  double alpha = 1.1;
  hb_dtype wire = HB_FLOAT32;
  uint64_t seed = 1;
  bool collection = false;
  bool dynamic = false;
};

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    if (k == "--dynamic") {
      a.dynamic = true;
      continue;
    }
    if (k == "--collection") {
      a.collection = true;
      continue;
    }
    if (k == "--dim")
      a.dim = std::atoll(v);
    else if (k == "--steps")
      a.steps = std::atoll(v);
    else if (k == "--batch")
      a.batch = std::atoll(v);
    else if (k == "--tables")
      a.tables = std::atoll(v);
    else if (k == "--alpha")
      a.alpha = std::atof(v);
    else if (k == "--seed")
      a.seed = std::strtoull(v, nullptr, 10);
    else if (k == "--profile")
      a.cap = std::string(v) == "full" ? INT64_MAX : 1000000;
    else if (k == "--wire")
      a.wire = std::string(v) == "f16"    ? HB_FLOAT16
               : std::string(v) == "bf16" ? HB_BFLOAT16
                                          : HB_FLOAT32;
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      std::exit(2);
    }
    ++i;
  }
  if (a.tables < 1 || a.tables > 26 || a.dim < 1 || a.steps < 1 ||
      a.batch < 1) {
    std::fprintf(stderr, "bad arguments\n");
    std::exit(2);
  }
  return a;
}

// CPU time of this thread: the machine may be shared, so wall time alone
// would measure the neighbours too.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void check(hb_status st, const char *what) {
  if (st != HB_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", what, hb_status_name(st),
                 hb_last_error());
    std::exit(1);
  }
}

struct Timing {
  double secs = 0, cpu = 0;
  uint64_t ids = 0;  // ids timed, counted once per lookup + apply
};
struct Traffic {
  uint64_t uniq = 0, ids_in = 0, rounds = 0;
  double sent = 0, recv = 0;
  double req = 0;    // bytes this rank causes as a requester
  double bound = 0;  // what its dedup bounds them by
};

template <class F>
void timed(Timing *tm, int64_t s, int warmup, uint64_t n, F &&f) {
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu_seconds();
  f();
  double c1 = cpu_seconds();
  auto t1 = std::chrono::steady_clock::now();
  if (s >= warmup) {
    tm->secs += std::chrono::duration<double>(t1 - t0).count();
    tm->cpu += c1 - c0;
    tm->ids += n;
  }
}

const int kWarmup = 2;

std::vector<float> make_grads(size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = ((i * 2654435761u) % 1000) * 1e-5f - 0.005f;
  return g;
}

// One lookup and one apply_gradients per table and step.
template <class Fill>
Traffic run_tables(const Args &a, std::vector<hb_embedding *> &tabs,
                   Fill &&fill_ids, Timing *tm) {
  std::vector<int64_t> ids(a.batch);
  std::vector<float> out(a.batch * a.dim), grads = make_grads(a.batch * a.dim);
  for (int64_t s = 0; s < a.steps + kWarmup; ++s) {
    if (s == kWarmup)
      for (auto *e : tabs) e->table->reset_stats();
    for (int t = 0; t < a.tables; ++t) {
      fill_ids(t, s, ids.data());
      timed(tm, s, kWarmup, a.batch, [&] {
        check(hb_embedding_lookup(tabs[t], ids.data(), a.batch, out.data()),
              "lookup");
        check(hb_embedding_apply_gradients(tabs[t], ids.data(), a.batch,
                                           grads.data()),
              "apply");
      });
    }
  }
  Traffic tr;
  for (auto *e : tabs) {
    const hb::emb::Stats &st = e->table->stats();
    tr.uniq += st.unique_ids;
    tr.ids_in += st.ids;
    tr.sent += st.wire_bytes_sent;
    tr.recv += st.wire_bytes_recv;
    tr.req += st.request_bytes;
    tr.rounds += 3 * (st.lookups + st.applies);  // header, ids, payload
  }
  // Dedup bound for this rank's requests: each locally unique id at most
  // once per lookup and apply (id out twice, row in, gradient out).
  const double row_bytes = a.dim * (a.wire == HB_FLOAT32 ? 4.0 : 2.0);
  tr.bound = tr.uniq / 2.0 * (16.0 + 2.0 * row_bytes);
  return tr;
}

// One collection over all the tables: one lookup and one apply per step.
template <class Fill>
Traffic run_collection(const Args &a, hb_context *ctx,
                       std::vector<hb_embedding *> &tabs, Fill &&fill_ids,
                       Timing *tm) {
  std::vector<hb_collection_feature> fs(a.tables);
  for (int t = 0; t < a.tables; ++t) {
    fs[t] = HB_COLLECTION_FEATURE_INIT;
    fs[t].table = tabs[t];
    fs[t].pooling = HB_POOLING_SUM;
  }
  hb_collection *coll = nullptr;
  check(hb_collection_create(ctx, fs.data(), fs.size(), &coll),
        "hb_collection_create");
  std::vector<int64_t> ids(a.tables * a.batch), offsets(a.batch + 1);
  for (int64_t i = 0; i <= a.batch; ++i) offsets[i] = i;  // one-hot
  std::vector<const int64_t *> pid(a.tables), poff(a.tables, offsets.data());
  for (int t = 0; t < a.tables; ++t) pid[t] = &ids[t * a.batch];
  hb_jagged_batch jb = HB_JAGGED_BATCH_INIT;
  jb.batch_size = a.batch;
  jb.ids = pid.data();
  jb.offsets = poff.data();
  std::vector<float> out(a.batch * a.tables * a.dim),
      grads = make_grads(out.size());
  for (int64_t s = 0; s < a.steps + kWarmup; ++s) {
    if (s == kWarmup) check(hb_collection_reset_stats(coll), "reset");
    for (int t = 0; t < a.tables; ++t) fill_ids(t, s, &ids[t * a.batch]);
    timed(tm, s, kWarmup, a.batch * a.tables, [&] {
      check(hb_collection_lookup(coll, &jb, out.data(), nullptr), "lookup");
      check(hb_collection_apply_gradients(coll, &jb, grads.data(), nullptr),
            "apply");
    });
  }
  hb_collection_stats st = HB_COLLECTION_STATS_INIT;
  check(hb_collection_get_stats(coll, &st), "stats");
  hb_collection_destroy(coll);
  Traffic tr;
  tr.uniq = st.unique_ids;
  tr.ids_in = st.ids / 2;  // each id is passed to lookup and apply
  tr.sent = st.wire_bytes_sent;
  tr.recv = st.wire_bytes_recv;
  tr.rounds = st.rounds;
  tr.bound = st.dedup_bound_bytes;
  // Requester traffic: its payload sent plus the rows it receives; the
  // collection counts every byte to other ranks, headers included.
  tr.req = st.wire_bytes_sent;
  return tr;
}

}  // namespace

int main(int argc, char **argv) {
  Args a = parse(argc, argv);
  hb_context *ctx = nullptr;
  check(hb_context_create(nullptr, &ctx), "hb_context_create");
  const int rank = hb_context_rank(ctx), world = hb_context_world_size(ctx);

  std::vector<hb_embedding *> tabs(a.tables);
  std::vector<int64_t> rows(a.tables), mult(a.tables), add(a.tables);
  std::vector<Zipf> zipf;
  std::vector<std::string> names(a.tables);
  for (int t = 0; t < a.tables; ++t) {
    rows[t] = std::min(kCriteoRows[t], a.cap);
    // Affine bijection k -> (mult * k + add) mod rows, gcd(mult, rows) = 1.
    int64_t m = (rows[t] / 2 + 7919) | 1;
    while (std::__gcd(m, rows[t]) != 1) m += 2;
    mult[t] = m % rows[t];
    add[t] = (t * 104729) % rows[t];
    zipf.emplace_back(rows[t], a.alpha);
    names[t] = "C" + std::to_string(t + 1);
    hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
    c.name = names[t].c_str();
    c.dim = a.dim;
    c.num_rows = a.dynamic ? 0 : rows[t];
    c.initializer = HB_INIT_UNIFORM;
    c.init_a = -0.05;
    c.init_b = 0.05;
    c.seed = a.seed;
    c.optimizer = HB_OPT_ADAGRAD;
    c.wire_dtype = a.wire;
    check(hb_embedding_create(ctx, &c, &tabs[t]), "hb_embedding_create");
  }
  double shard_bytes = 0;
  for (int t = 0; t < a.tables; ++t)
    shard_bytes += tabs[t]->table->shard().memory_bytes();

  // The ids of table t at step s on this rank (the same in both modes).
  auto fill_ids = [&](int t, int64_t s, int64_t *ids) {
    uint64_t st = a.seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(rank) << 40) ^
                  (uint64_t(s) << 20) ^ t;
    for (int64_t i = 0; i < a.batch; ++i) {
      int64_t k = zipf[t](st) - 1;
      ids[i] = static_cast<int64_t>(
          (static_cast<unsigned __int128>(mult[t]) * k + add[t]) % rows[t]);
    }
  };
  Timing tm;
  Traffic tr;
  if (a.collection)
    tr = run_collection(a, ctx, tabs, fill_ids, &tm);
  else
    tr = run_tables(a, tabs, fill_ids, &tm);
  const double steps = static_cast<double>(a.steps);
  const double peak = peak_rss_kib() * 1024.0;
  std::printf(
      "criteo_synth rank %d/%d %s dim %lld batch %lld tables %lld alpha %.2f "
      "wire %s: "
      "%.2f M ids/s (%.2f M per CPU-second) | unique ratio %.3f | rounds/step "
      "%.1f | request bytes/step %.0f (dedup bound %.0f, %.2f) | "
      "wire sent %.0f recv %.0f bytes/step | peak RSS %.1f MiB, shard %.1f MiB "
      "(%.2fx)\n",
      rank, world, a.collection ? "collection" : "tables", (long long)a.dim,
      (long long)a.batch, (long long)a.tables, a.alpha,
      a.wire == HB_FLOAT32   ? "f32"
      : a.wire == HB_FLOAT16 ? "f16"
                             : "bf16",
      tm.ids / tm.secs / 1e6, tm.ids / tm.cpu / 1e6,
      static_cast<double>(tr.uniq) / tr.ids_in, tr.rounds / steps,
      tr.req / steps, tr.bound / steps, tr.bound > 0 ? tr.req / tr.bound : 0.0,
      tr.sent / steps, tr.recv / steps, peak / 1048576.0,
      shard_bytes / 1048576.0, peak / shard_bytes);
  for (auto *e : tabs) hb_embedding_destroy(e);
  hb_context_destroy(ctx);
  return 0;
}
