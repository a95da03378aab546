// Metric throughput on one core: hb_metric_update for every kind over 10M
// samples (batches of 64Ki), plus hb_metric_result where it does real work
// (exact AUC, GAUC sort), and the cost of merging k ranks' states
// (serialize + merge + result, in process) for k = 2 and 4.
// Under hbrun (HB_WORLD_SIZE > 1) it instead times hb_metric_result on a
// context, each rank holding samples / world of the data (wall time, the
// slowest rank):
//
//   bench_metrics [samples [name-filter]]
//   hbrun -n 4 -- bench_metrics [samples [name-filter]]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hb.h"
#include "metrics/state.h"

namespace {

// CPU time of this thread: the machine is shared, and wall time would
// count the time other processes held the core.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Data {
  std::vector<float> labels, preds, weights;
  std::vector<int64_t> groups;
};

Data make_data(size_t n) {
  Data d;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  d.labels.resize(n);
  d.preds.resize(n);
  d.weights.resize(n);
  d.groups.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float s = u(rng);
    d.preds[i] = s;
    d.labels[i] = u(rng) < s ? 1.0f : 0.0f;
    d.weights[i] = 0.5f + u(rng);
    d.groups[i] = static_cast<int64_t>(rng() % 100000);
  }
  return d;
}

struct Kind {
  const char *name;
  hb_metric_config cfg;
};

void check(hb_status st) {
  if (st != HB_OK) {
    fprintf(stderr, "hb error: %s\n", hb_last_error());
    exit(1);
  }
}

void feed(hb_metric *m, const hb_metric_config &c, const Data &d, size_t n,
          bool weighted, size_t begin = 0) {
  const size_t batch = 65536;
  for (size_t at = begin; at < begin + n; at += batch) {
    size_t k = std::min(batch, begin + n - at);
    const float *w = weighted ? d.weights.data() + at : nullptr;
    if (c.kind == HB_METRIC_GAUC)
      check(hb_metric_update_grouped(m, d.labels.data() + at,
                                     d.preds.data() + at, w,
                                     d.groups.data() + at, k));
    else
      check(
          hb_metric_update(m, d.labels.data() + at, d.preds.data() + at, w, k));
  }
}

// hb_metric_result on a context: every rank holds its share of the data.
int distributed(const std::vector<Kind> &kinds, const Data &d, size_t n) {
  hb_context *ctx = nullptr;
  check(hb_context_create(nullptr, &ctx));
  int rank = hb_context_rank(ctx), world = hb_context_world_size(ctx);
  size_t begin = n * rank / world, end = n * (rank + 1) / world;
  if (rank == 0)
    printf(
        "hb_metric_result on a context: %d ranks, %zu samples in all (wall ms, "
        "slowest rank)\n"
        "%-22s %12s\n",
        world, n, "metric", "result ms");
  for (const Kind &k : kinds) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      hb_metric *m = nullptr;
      check(hb_metric_create(ctx, &k.cfg, &m));
      feed(m, k.cfg, d, end - begin, false, begin);
      check(hb_context_barrier(ctx, 0));
      timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      double out = 0;
      check(hb_metric_result(m, &out));
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
      check(hb_allreduce(ctx, &dt, &dt, 1, HB_FLOAT64, HB_MAX));
      best = std::min(best, dt);
      hb_metric_destroy(m);
    }
    if (rank == 0) printf("%-22s %12.2f\n", k.name, best * 1e3);
  }
  hb_context_destroy(ctx);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
  std::string filter = argc > 2 ? argv[2] : "";
  Data d = make_data(n);
  std::vector<Kind> kinds;
  auto add = [&](const char *name, int32_t kind, int64_t bins = 0) {
    hb_metric_config c = HB_METRIC_CONFIG_INIT;
    c.kind = kind;
    c.bins = bins;
    if (std::string(name).find(filter) != std::string::npos)
      kinds.push_back({name, c});
  };
  add("accuracy", HB_METRIC_ACCURACY);
  add("mean", HB_METRIC_MEAN);
  add("auc (200 thresholds)", HB_METRIC_AUC);
  add("auc_exact", HB_METRIC_AUC_EXACT);
  add("auc_exact bins=65536", HB_METRIC_AUC_EXACT, 65536);
  add("gauc (100k groups)", HB_METRIC_GAUC);

  const char *ws = getenv("HB_WORLD_SIZE");
  if (ws && atoi(ws) > 1) return distributed(kinds, d, n);
  double load[1] = {0};
  getloadavg(load, 1);
  printf("%zu samples, batches of 65536, thread CPU time (load average %.1f)\n",
         n, load[0]);
  printf("%-22s %-9s %14s %12s %16s\n", "metric", "weights", "update Ms/s",
         "result ms", "update+result Ms/s");
  for (const Kind &k : kinds)
    for (bool weighted : {false, true}) {
      double best_update = 1e30, best_result = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        hb_metric *m = nullptr;
        check(hb_metric_create(nullptr, &k.cfg, &m));
        double t0 = cpu_now();
        feed(m, k.cfg, d, n, weighted);
        double tu = (cpu_now() - t0);
        double out = 0;
        t0 = cpu_now();
        check(hb_metric_result(m, &out));
        double tr = (cpu_now() - t0);
        best_update = std::min(best_update, tu);
        best_result = std::min(best_result, tr);
        hb_metric_destroy(m);
      }
      printf("%-22s %-9s %14.1f %12.2f %16.1f\n", k.name,
             weighted ? "yes" : "no", n / best_update / 1e6, best_result * 1e3,
             n / (best_update + best_result) / 1e6);
    }

  // Merging k ranks' states in process: what hb_metric_result computes
  // after the allgather (serialize every state, merge all bytes, result).
  printf(
      "\nresult merge cost (in process, the part after the allgather), %zu "
      "samples in all\n",
      n);
  printf("%-22s %6s %12s %12s\n", "metric", "ranks", "merge+result ms",
         "state KiB/rank");
  for (const Kind &k : kinds)
    for (int ranks : {2, 4}) {
      using namespace hb::metrics;
      Config cfg = config_from_public(&k.cfg);
      std::vector<std::unique_ptr<State>> states;
      for (int r = 0; r < ranks; ++r) {
        states.push_back(make_state(cfg));
        size_t begin = n * r / ranks, end = n * (r + 1) / ranks;
        for (size_t at = begin; at < end; at += 65536) {
          size_t c = std::min<size_t>(65536, end - at);
          states.back()->update({d.labels.data() + at, d.preds.data() + at,
                                 nullptr, d.groups.data() + at, c});
        }
      }
      double best = 1e30;
      size_t bytes = 0;
      for (int rep = 0; rep < 3; ++rep) {
        double t0 = cpu_now();
        std::vector<Bytes> wire;
        for (auto &s : states) wire.push_back(serialize(cfg, *s));
        auto merged = make_state(cfg);
        for (auto &w : wire)
          merge_serialized(cfg, merged.get(), w.data(), w.size(), "bench");
        int32_t flags;
        volatile double r = merged->result(&flags);
        (void)r;
        best = std::min(best, (cpu_now() - t0));
        bytes = wire[0].size();
      }
      printf("%-22s %6d %12.2f %12.1f\n", k.name, ranks, best * 1e3,
             bytes / 1024.0);
    }
  return 0;
}
