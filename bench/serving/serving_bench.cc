// Serving benchmarks over the public C API (libhb.so).
//
//   serving_bench make PATH [ROWS DIM]      a full export (version 1) of a
//                                           static table, ROWS x DIM
//   serving_bench lookup PATH BATCH SECONDS [dependent]
//                                           one thread's lookups for
//                                           SECONDS of its CPU time: prints
//                                           "calls/s <x> ids/s <y>" per CPU
//                                           second; "dependent": each call's
//                                           ids wait for the last call's rows
//   serving_bench delta [ROWS DIM]          the table of export/apply
//                                           times, train-to-served latency
//                                           and lookup latency during swaps
//
// The lookup ids are the same stream in every language's bench
// (bench/serving/*): xorshift64 from seed 88172645463325252, id = x % rows,
// 65536 ids reused cyclically; each call copies its BATCH ids from the
// stream into the call's buffer in one bulk copy (the next BATCH ids of the
// stream, which repeats its start past the end).
#define HB_EXPERIMENTAL 1
#include <unistd.h>

#include <sys/stat.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hb.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds of the calling thread: the lookup rates count what a call
// costs, not the time other processes on a shared machine take.
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

void check(hb_status s, const char *what) {
  if (s != HB_OK) {
    std::fprintf(stderr, "serving_bench: %s: %s: %s\n", what, hb_status_name(s),
                 hb_last_error());
    std::exit(1);
  }
}

std::vector<int64_t> id_stream(int64_t rows) {
  std::vector<int64_t> ids(65536);
  uint64_t x = 88172645463325252ull;
  for (auto &id : ids) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    id = static_cast<int64_t>(x % static_cast<uint64_t>(rows));
  }
  return ids;
}

hb_embedding *make_table(hb_context *ctx, int64_t rows, int64_t dim) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "bench";
  c.dim = dim;
  c.num_rows = rows;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -1;
  c.init_b = 1;
  c.optimizer = HB_OPT_SGD;
  hb_embedding *t = nullptr;
  check(hb_embedding_create(ctx, &c, &t), "hb_embedding_create");
  return t;
}

int cmd_make(const char *path, int64_t rows, int64_t dim) {
  hb_context *ctx = nullptr;
  check(hb_context_create(nullptr, &ctx), "hb_context_create");
  hb_embedding *t = make_table(ctx, rows, dim);
  check(hb_embedding_export_version(t, path, 1, 0), "export");
  hb_embedding_destroy(t);
  hb_context_destroy(ctx);
  return 0;
}

int cmd_lookup(const char *path, int64_t batch, double secs, bool dependent) {
  hb_embedding *s = nullptr;
  check(hb_embedding_open(path, &s), "hb_embedding_open");
  const int64_t dim = hb_embedding_dim(s);
  std::vector<int64_t> stream = id_stream(hb_embedding_local_rows(s));
  // A call's ids are one slice of the stream, copied in bulk (as every
  // language's bench does): the stream repeats its start past the end.
  for (int64_t i = 0; i < batch; ++i) stream.push_back(stream[i & 65535]);
  std::vector<int64_t> ids(batch);
  std::vector<float> out(batch * dim);
  size_t at = 0;
  uint64_t calls = 0;
  const double t0 = thread_cpu_seconds();
  double el = 0;
  for (;;) {
    for (int k = 0; k < 1024; ++k) {  // check the clock every 1024 calls
      std::copy_n(stream.begin() + at, batch, ids.begin());
      at = (at + batch) & 65535;
      // A batch-1 loop from C overlaps one call's cache misses with the
      // next call's; a caller whose call into C is longer than the CPU's
      // reorder window (cgo, JNI) cannot. "dependent" shows that floor: the
      // ids take a zero that the CPU knows only once the last rows arrived.
      if (dependent && batch > 0) ids[0] |= out[0] != out[0];
      int64_t v;
      check(hb_embedding_lookup_version(s, ids.data(), batch, out.data(), &v),
            "lookup");
    }
    calls += 1024;
    if ((el = thread_cpu_seconds() - t0) >= secs) break;
  }
  std::printf("calls/s %.0f ids/s %.0f\n", calls / el, calls * batch / el);
  hb_embedding_destroy(s);
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double percentile(std::vector<double> &v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * (v.size() - 1));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

size_t file_size(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

// One training step that changes `frac` of the rows (distinct ids).
void train_step(hb_embedding *t, int64_t rows, int64_t dim, double frac,
                uint64_t seed, std::vector<int64_t> &ids,
                std::vector<float> &grads) {
  const int64_t n = static_cast<int64_t>(rows * frac);
  ids.resize(n);
  grads.assign(n * dim, 0.01f);
  const int64_t stride = rows / n;
  for (int64_t i = 0; i < n; ++i)
    ids[i] = (i * stride + static_cast<int64_t>(seed % stride)) % rows;
  check(hb_embedding_apply_gradients(t, ids.data(), n, grads.data()), "apply");
}

int cmd_delta(int64_t rows, int64_t dim) {
  const std::string dir = "/tmp/hb_serving_bench_" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0755);
  const std::string full = dir + "/full.hbe", full2 = dir + "/full2.hbe";
  hb_context *ctx = nullptr;
  check(hb_context_create(nullptr, &ctx), "hb_context_create");
  hb_embedding *t = make_table(ctx, rows, dim);
  std::vector<int64_t> ids;
  std::vector<float> grads;
  int64_t version = 1;
  check(hb_embedding_export_version(t, full.c_str(), version, 0), "export");
  hb_embedding *s = nullptr;
  check(hb_embedding_open(full.c_str(), &s), "open");

  // 1. Export and apply: a delta of 1 % of the rows against a full export,
  // interleaved, median of 5.
  std::vector<double> t_full_export, t_open, t_full_update, t_delta_export,
      t_delta_apply;
  size_t full_bytes = file_size(full), delta_bytes = 0;
  for (int rep = 0; rep < 5; ++rep) {
    train_step(t, rows, dim, 0.01, rep, ids, grads);
    const std::string d = dir + "/d" + std::to_string(rep) + ".hbe";
    Clock::time_point t0 = Clock::now();
    check(hb_embedding_export_version(t, d.c_str(), version + 1, version),
          "delta export");
    t_delta_export.push_back(seconds_since(t0));
    delta_bytes = file_size(d);
    t0 = Clock::now();
    check(hb_embedding_update(s, d.c_str()), "delta apply");
    t_delta_apply.push_back(seconds_since(t0));
    ++version;
    t0 = Clock::now();
    check(hb_embedding_export_version(t, full2.c_str(), ++version, 0),
          "full export");
    t_full_export.push_back(seconds_since(t0));
    t0 = Clock::now();
    hb_embedding *o = nullptr;
    check(hb_embedding_open(full2.c_str(), &o), "open");
    t_open.push_back(seconds_since(t0));
    hb_embedding_destroy(o);
    t0 = Clock::now();
    check(hb_embedding_update(s, full2.c_str()), "full update");
    t_full_update.push_back(seconds_since(t0));
    ::unlink(d.c_str());
  }
  std::printf(
      "table: %lld rows x %lld float32; delta: 1%% of the rows "
      "changed (%lld)\n\n",
      (long long)rows, (long long)dim, (long long)(rows / 100));
  std::printf("| operation | median of 5 (ms) | file (bytes) |\n");
  std::printf("| --- | ---: | ---: |\n");
  std::printf(
      "| full export (hb_embedding_export_version, base 0) | %.1f | %zu |\n",
      1e3 * median(t_full_export), full_bytes);
  std::printf("| delta export (1 %% changed) | %.1f | %zu |\n",
              1e3 * median(t_delta_export), delta_bytes);
  std::printf("| open a full export (hb_embedding_open) | %.1f | |\n",
              1e3 * median(t_open));
  std::printf("| update to a full export (hb_embedding_update) | %.1f | |\n",
              1e3 * median(t_full_update));
  std::printf("| apply the delta (hb_embedding_update) | %.1f | |\n",
              1e3 * median(t_delta_apply));
  std::printf("\ndelta bytes / (changed rows x (8 + 4 x dim)) = %.3f\n\n",
              delta_bytes / (rows / 100.0 * (8 + 4 * dim)));

  // 2. From a training step to the served version that contains it.
  std::vector<double> t_step, t_export, t_apply, t_total;
  std::vector<float> probe(dim);
  for (int rep = 0; rep < 7; ++rep) {
    const std::string d = dir + "/s.hbe";
    Clock::time_point t0 = Clock::now();
    train_step(t, rows, dim, 0.01, 100 + rep, ids, grads);
    double a = seconds_since(t0);
    check(hb_embedding_export_version(t, d.c_str(), version + 1, version),
          "delta export");
    double b = seconds_since(t0);
    check(hb_embedding_update(s, d.c_str()), "apply");
    int64_t v = 0;
    check(hb_embedding_lookup_version(s, ids.data(), 1, probe.data(), &v),
          "probe");
    double c = seconds_since(t0);
    if (v != ++version) {
      std::fprintf(stderr, "served version %lld, expected %lld\n", (long long)v,
                   (long long)version);
      return 1;
    }
    t_step.push_back(a), t_export.push_back(b - a), t_apply.push_back(c - b);
    t_total.push_back(c);
  }
  std::printf(
      "| train step -> served (1 %% of rows per step) | median of 7 (ms) |\n");
  std::printf("| --- | ---: |\n");
  std::printf("| training step (apply_gradients) | %.1f |\n",
              1e3 * median(t_step));
  std::printf("| delta export | %.1f |\n", 1e3 * median(t_export));
  std::printf(
      "| apply in the serving table, first lookup of the new version | %.1f "
      "|\n",
      1e3 * median(t_apply));
  std::printf("| step start -> served | %.1f |\n\n", 1e3 * median(t_total));

  // 3. Lookup latency under 4 readers, steady and during swaps. Deltas of
  // 1 % are prepared, then the writer applies them back to back with a
  // pause between; a lookup counts as "during a swap" when an update was
  // in progress when it started or ended.
  const int kDeltas = 20;
  std::vector<std::string> chain;
  for (int k = 0; k < kDeltas; ++k) {
    train_step(t, rows, dim, 0.01, 200 + k, ids, grads);
    chain.push_back(dir + "/c" + std::to_string(k) + ".hbe");
    check(hb_embedding_export_version(t, chain.back().c_str(), version + 1 + k,
                                      version + k),
          "chain export");
  }
  std::atomic<int> swapping{0};
  std::atomic<bool> stop{false};
  const int kReaders = 4;
  std::vector<std::vector<double>> steady(kReaders), during(kReaders);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r)
    readers.emplace_back([&, r] {
      std::vector<int64_t> stream = id_stream(rows);
      std::vector<float> out(dim);
      size_t at = r * 1000;
      steady[r].reserve(1 << 22);
      during[r].reserve(1 << 20);
      while (!stop.load(std::memory_order_relaxed)) {
        int64_t id = stream[at++ & 65535], v;
        int before = swapping.load(std::memory_order_relaxed);
        Clock::time_point t0 = Clock::now();
        hb_embedding_lookup_version(s, &id, 1, out.data(), &v);
        double ns =
            std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
        int after = swapping.load(std::memory_order_relaxed);
        (before || after ? during[r] : steady[r]).push_back(ns);
      }
    });
  std::vector<double> apply_ms;
  for (int k = 0; k < kDeltas; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    swapping.store(1);
    Clock::time_point t0 = Clock::now();
    check(hb_embedding_update(s, chain[k].c_str()), "swap");
    apply_ms.push_back(1e3 * seconds_since(t0));
    swapping.store(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  stop = true;
  for (auto &th : readers) th.join();
  std::vector<double> all_steady, all_during;
  for (int r = 0; r < kReaders; ++r) {
    all_steady.insert(all_steady.end(), steady[r].begin(), steady[r].end());
    all_during.insert(all_during.end(), during[r].begin(), during[r].end());
  }
  std::printf(
      "| lookup latency, 4 reader threads, batch 1 | lookups | p50 (ns) | p99 "
      "(ns) |\n");
  std::printf("| --- | ---: | ---: | ---: |\n");
  size_t ns_ = all_steady.size(), nd = all_during.size();
  double s50 = percentile(all_steady, 0.5), s99 = percentile(all_steady, 0.99);
  double d50 = percentile(all_during, 0.5), d99 = percentile(all_during, 0.99);
  std::printf("| steady | %zu | %.0f | %.0f |\n", ns_, s50, s99);
  std::printf(
      "| during a swap (%d deltas of 1 %%, median apply %.1f ms) | %zu | %.0f "
      "| %.0f |\n",
      kDeltas, median(apply_ms), nd, d50, d99);
  std::printf(
      "\nduring / steady: p50 %.2f, p99 %.2f (machine: %u hardware threads)\n",
      d50 / s50, d99 / s99, std::thread::hardware_concurrency());
  for (auto &c : chain) ::unlink(c.c_str());
  ::unlink(full.c_str());
  ::unlink(full2.c_str());
  ::unlink((dir + "/s.hbe").c_str());
  ::rmdir(dir.c_str());
  hb_embedding_destroy(s);
  hb_embedding_destroy(t);
  hb_context_destroy(ctx);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "make" && argc >= 3)
    return cmd_make(argv[2], argc > 3 ? std::atoll(argv[3]) : 1000000,
                    argc > 4 ? std::atoll(argv[4]) : 16);
  if (cmd == "lookup" &&
      (argc == 5 || (argc == 6 && !std::strcmp(argv[5], "dependent"))))
    return cmd_lookup(argv[2], std::atoll(argv[3]), std::atof(argv[4]),
                      argc == 6);
  if (cmd == "delta")
    return cmd_delta(argc > 2 ? std::atoll(argv[2]) : 1000000,
                     argc > 3 ? std::atoll(argv[3]) : 16);
  std::fprintf(stderr,
               "usage: serving_bench make PATH [ROWS DIM]\n"
               "       serving_bench lookup PATH BATCH SECONDS [dependent]\n"
               "       serving_bench delta [ROWS DIM]\n");
  return 2;
}
