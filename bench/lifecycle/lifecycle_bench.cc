// lifecycle_bench: a long stream of ids through a dynamic table, with and
// without a lifecycle (docs/table-lifecycle.md).
//
//   lifecycle_bench speed  [--ids 20000000] [--reps 3] [common options]
//     ids/s of lookup + apply_gradients for: a plain table (off), capacity
//     eviction only, admission + ttl + capacity, and the same with a Bloom
//     filter; runs interleaved (off, on, ... per repetition), median of the
//     repetitions; the boundary's share of the time and its selection
//     rounds.
//   lifecycle_bench memory [--ids 100000000] [--max-rows 1000000] [--check]
//     resident memory of a table with max_rows (LRU, no admission) fed the
//     stream, against the bound 1.1 x rows x bytes-per-row + C (C: the
//     process's resident memory before the table exists plus 16 MiB for
//     one step's buffers); --check exits 1 when the bound does not hold.
// Common: [--batch 8192] [--dim 16] [--alpha 1.05] [--universe 1e9]
//         [--interval 4] [--seed 1]
// Ids: Zipf(alpha) ranks over [1, universe] scrambled by splitmix64, so
// most ids are rare and new ones keep coming.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define HB_EXPERIMENTAL 1
#include "common/proc_mem.h"
#include "common/zipf.h"
#include "hb.h"
#include "tables/handle.h"

namespace {

struct Args {
  std::string mode;
  int64_t ids = 0, batch = 8192, dim = 16, max_rows = 1000000, interval = 4;
  int reps = 3;
  double alpha = 1.05, universe = 1e9;
  uint64_t seed = 1;
  bool check = false;
};

Args parse(int argc, char **argv) {
  Args a;
  if (argc < 2) {
    std::fprintf(stderr, "usage: lifecycle_bench speed|memory [options]\n");
    std::exit(2);
  }
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--check") {
      a.check = true;
      continue;
    }
    const char *v = i + 1 < argc ? argv[++i] : "";
    if (k == "--ids")
      a.ids = static_cast<int64_t>(std::atof(v));
    else if (k == "--batch")
      a.batch = std::atoll(v);
    else if (k == "--dim")
      a.dim = std::atoll(v);
    else if (k == "--max-rows")
      a.max_rows = static_cast<int64_t>(std::atof(v));
    else if (k == "--interval")
      a.interval = std::atoll(v);
    else if (k == "--reps")
      a.reps = std::atoi(v);
    else if (k == "--alpha")
      a.alpha = std::atof(v);
    else if (k == "--universe")
      a.universe = std::atof(v);
    else if (k == "--seed")
      a.seed = std::strtoull(v, nullptr, 10);
    else {
      std::fprintf(stderr, "lifecycle_bench: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.ids == 0) a.ids = a.mode == "memory" ? 100000000 : 20000000;
  return a;
}

void check(hb_status st, const char *what) {
  if (st != HB_OK) {
    std::fprintf(stderr, "lifecycle_bench: %s: %s: %s\n", what,
                 hb_status_name(st), hb_last_error());
    std::exit(1);
  }
}

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Result {
  double seconds = 0;  // in lookup + apply, wall
  double cpu = 0;      // the same, this thread's CPU time
  int64_t rows = 0;
  hb_embedding_lifecycle_stats st = HB_EMBEDDING_LIFECYCLE_STATS_INIT;
  bool has_life = false;
};

// Streams a.ids ids in batches through a fresh table; `life` NULL: none.
Result stream(hb_context *ctx, const Args &a,
              const hb_embedding_lifecycle *life,
              const std::function<void(int64_t step)> &after_step = {}) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "stream";
  c.dim = a.dim;
  c.initializer = HB_INIT_NORMAL;
  c.init_b = 0.01;
  c.optimizer = HB_OPT_ADAGRAD;
  c.lifecycle = life;
  hb_embedding *e = nullptr;
  check(hb_embedding_create(ctx, &c, &e), "hb_embedding_create");
  hbbench::Zipf zipf(static_cast<int64_t>(a.universe), a.alpha);
  uint64_t state = a.seed;
  std::vector<int64_t> ids(a.batch);
  std::vector<float> out(a.batch * a.dim), grads(a.batch * a.dim);
  for (size_t i = 0; i < grads.size(); ++i)
    grads[i] = static_cast<float>((splitmix(i) >> 40) * 0x1p-24 - 0.5) * 0.1f;
  Result r;
  int64_t done = 0, step = 0;
  while (done < a.ids) {
    const int64_t n = std::min(a.batch, a.ids - done);
    for (int64_t i = 0; i < n; ++i)
      ids[i] = static_cast<int64_t>(splitmix(zipf(state)));
    auto t0 = std::chrono::steady_clock::now();
    double c0 = thread_cpu();
    check(hb_embedding_lookup(e, ids.data(), n, out.data()), "lookup");
    check(hb_embedding_apply_gradients(e, ids.data(), n, grads.data()),
          "apply");
    r.cpu += thread_cpu() - c0;
    r.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    done += n;
    if (after_step) after_step(++step);
  }
  r.rows = hb_embedding_local_rows(e);
  if (life) {
    r.has_life = true;
    check(hb_embedding_lifecycle_get_stats(e, &r.st), "stats");
  }
  hb_embedding_destroy(e);
  return r;
}

int speed(hb_context *ctx, const Args &a) {
  struct Config {
    const char *name;
    bool on;
    hb_embedding_lifecycle life;
  };
  std::vector<Config> cfgs(4);
  for (Config &c : cfgs) {
    c.life = HB_EMBEDDING_LIFECYCLE_INIT;
    c.life.evict_interval = a.interval;
    c.on = true;
  }
  cfgs[0].name = "off (plain dynamic table)";
  cfgs[0].on = false;
  cfgs[1].name = "max_rows (LRU)";
  cfgs[1].life.max_rows = a.max_rows;
  cfgs[2].name = "count>=2 + ttl + max_rows";
  cfgs[2].life.admission = HB_ADMIT_COUNT;
  cfgs[2].life.min_count = 2;
  cfgs[2].life.ttl_steps = 2000;
  cfgs[2].life.max_rows = a.max_rows;
  cfgs[3].name = "bloom>=2 + max_rows";
  cfgs[3].life.admission = HB_ADMIT_BLOOM;
  cfgs[3].life.min_count = 2;
  cfgs[3].life.bloom_bytes = 64 << 20;
  cfgs[3].life.bloom_fpr = 0.01;
  cfgs[3].life.max_rows = a.max_rows;
  std::vector<std::vector<Result>> res(cfgs.size());
  for (int rep = 0; rep < a.reps; ++rep)
    for (size_t k = 0; k < cfgs.size(); ++k)
      res[k].push_back(stream(ctx, a, cfgs[k].on ? &cfgs[k].life : nullptr));
  std::printf("lifecycle_bench speed: %" PRId64
              " ids (Zipf %.2f over %.0e ranks), "
              "batch %" PRId64 ", dim %" PRId64 ", Adagrad, max_rows %" PRId64
              ", evict_interval %" PRId64 ", median of %d interleaved runs\n\n",
              a.ids, a.alpha, a.universe, a.batch, a.dim, a.max_rows,
              a.interval, a.reps);
  std::printf(
      "| table | M ids/s (wall) | M ids per CPU-s | vs off (CPU) | rows at "
      "end | admitted | dropped grads | evicted | boundary share of wall | "
      "selection rounds/boundary |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  double off = 0;
  for (size_t k = 0; k < cfgs.size(); ++k) {
    std::vector<Result> rs = res[k];
    auto median = [&](double Result::*f) {
      std::vector<double> v;
      for (const Result &x : rs) v.push_back(x.*f);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double ips = a.ids / median(&Result::seconds) / 1e6;
    const double cps = a.ids / median(&Result::cpu) / 1e6;
    if (k == 0) off = cps;
    const Result &m = rs.back();
    if (!m.has_life) {
      std::printf("| %s | %.2f | %.2f | 1.00 | %" PRId64
                  " | - | - | - | - | - |\n",
                  cfgs[k].name, ips, cps, m.rows);
      continue;
    }
    const hb_embedding_lifecycle_stats &st = m.st;
    std::printf(
        "| %s | %.2f | %.2f | %.2f | %" PRId64 " | %" PRIu64 " | %" PRIu64
        " | %" PRIu64 " | %.1f %% | %.1f |\n",
        cfgs[k].name, ips, cps, cps / off, m.rows, st.admitted, st.dropped,
        st.evicted_ttl + st.evicted_l2 + st.evicted_capacity,
        100.0 * st.boundary_seconds / m.seconds,
        st.boundaries ? double(st.selection_rounds) / st.boundaries : 0.0);
  }
  return 0;
}

int memory(hb_context *ctx, const Args &a) {
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.max_rows = a.max_rows;
  life.evict_interval = a.interval;
  const long before_kib = hbbench::rss_kib();
  long max_kib = 0;
  Result r = stream(ctx, a, &life, [&](int64_t step) {
    if (step % 64 == 0) max_kib = std::max(max_kib, hbbench::rss_kib());
  });
  const long end_kib = max_kib, peak_kib = hbbench::peak_rss_kib();
  // Bytes per row: the record (dim weights + dim Adagrad accumulators), the
  // id (8), the free-slot flag (1), the lifecycle columns (stamp 8, last
  // step 8, updates 4), the selection's scratch at a boundary (8) and the
  // id map (12 bytes a slot, 2^ceil(log2(2 rows)) slots).
  int64_t slots = 16;
  while (slots < 2 * a.max_rows) slots *= 2;
  const double per_row = 4.0 * 2 * a.dim + 8 + 1 + 20 + 8 +
                         12.0 * static_cast<double>(slots) / a.max_rows;
  const double table = per_row * a.max_rows;
  const double c = before_kib * 1024.0 + 16.0 * (1 << 20);
  const double bound = 1.1 * table + c;
  const bool ok = end_kib * 1024.0 <= bound;
  std::printf("lifecycle_bench memory: %" PRId64
              " ids (Zipf %.2f over %.0e ranks), "
              "batch %" PRId64 ", dim %" PRId64 ", Adagrad, max_rows %" PRId64
              " (LRU), evict_interval %" PRId64 "\n\n",
              a.ids, a.alpha, a.universe, a.batch, a.dim, a.max_rows,
              a.interval);
  std::printf(
      "| rows at end | rows created | evicted | bytes/row "
      "| rows x bytes/row | RSS before table | max RSS while streaming | "
      "bound 1.1 x rows x B + C | within | M ids/s (wall) | M ids per "
      "CPU-s |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf("| %" PRId64 " | %" PRIu64 " | %" PRIu64
              " | %.1f | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %s | "
              "%.2f | %.2f |\n",
              r.rows, r.st.admitted, r.st.evicted_capacity, per_row,
              table / (1 << 20), before_kib / 1024.0, end_kib / 1024.0,
              bound / (1 << 20), ok ? "yes" : "NO", a.ids / r.seconds / 1e6,
              a.ids / r.cpu / 1e6);
  std::printf(
      "\n(RSS sampled every 64 steps; C = RSS before the table + "
      "16 MiB; the table's own count at the end: %.1f MiB; peak RSS "
      "(VmHWM, with the id map's transient growth): %.1f MiB)\n",
      r.st.memory_bytes / double(1 << 20), peak_kib / 1024.0);
  if (a.check && !ok) {
    std::fprintf(stderr,
                 "lifecycle_bench: resident memory %.1f MiB above the bound "
                 "%.1f MiB\n",
                 end_kib / 1024.0, bound / (1 << 20));
    return 1;
  }
  // Between boundaries a table may grow by the new rows of interval steps.
  if (a.check && r.rows > a.max_rows + a.interval * a.batch) {
    std::fprintf(stderr,
                 "lifecycle_bench: %" PRId64
                 " rows > max_rows + interval x "
                 "batch\n",
                 r.rows);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  Args a = parse(argc, argv);
  hb_context *ctx = nullptr;
  check(hb_context_create(nullptr, &ctx), "hb_context_create");
  int rc = 2;
  if (a.mode == "speed")
    rc = speed(ctx, a);
  else if (a.mode == "memory")
    rc = memory(ctx, a);
  else
    std::fprintf(stderr, "lifecycle_bench: unknown mode %s\n", a.mode.c_str());
  hb_context_destroy(ctx);
  return rc;
}
