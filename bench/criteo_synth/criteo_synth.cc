// criteo_synth: a seeded synthetic Criteo-like workload for sharded
// embeddings. 26 categorical tables with the Criteo Kaggle cardinalities
// (the mini profile caps them at 1M rows), one id per table per sample,
// ranks drawn Zipf(alpha) and mapped through a fixed bijective affine
// permutation per table so hot ids spread over owners. Each step every
// rank looks up a batch and applies Adagrad gradients to it.
//
// Run: criteo_synth [--dim 16] [--steps 20] [--batch 8192] [--alpha 1.1]
//      [--profile mini|full] [--tables 26] [--wire f32|f16|bf16] [--seed 1]
// under hbrun -n N for several ranks. Reports per rank: ids/s (lookup +
// apply_gradients, counted once per id), unique-id ratio, wire bytes per
// step against the dedup bound, peak RSS against the shard's own size.
#include <time.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "embedding/handle.h"
#include "hb.h"

namespace {

const int64_t kCriteoRows[26] = {
    1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
    93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
    2173,  4,    7046547,  18,      15,  286181, 105,     142572};

// Zipf over [1, n] by rejection-inversion (Hoermann & Derflinger), O(1)
// memory, so the generator adds nothing to the peak memory measured.
class Zipf {
 public:
  Zipf(int64_t n, double s) : n_(n), s_(s) {
    hx1_ = H(1.5) - 1.0;
    hn_ = H(n + 0.5);
    cut_ = 2.0 - Hinv(H(2.5) - h(2.0));
  }
  int64_t operator()(uint64_t &state) const {
    for (;;) {
      double u = hn_ + unit(state) * (hx1_ - hn_);
      double x = Hinv(u);
      int64_t k = static_cast<int64_t>(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      if (k - x <= cut_ || u >= H(k + 0.5) - h(static_cast<double>(k)))
        return k;
    }
  }

 private:
  static double unit(uint64_t &st) {
    st += 0x9E3779B97F4A7C15ull;
    uint64_t z = st;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * 0x1p-53;
  }
  static double helper1(double x) {
    return std::fabs(x) > 1e-8 ? std::log1p(x) / x
                               : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) {
    return std::fabs(x) > 1e-8
               ? std::expm1(x) / x
               : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
  }
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  double H(double x) const {
    double lx = std::log(x);
    return helper2((1.0 - s_) * lx) * lx;
  }
  double Hinv(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;
    return std::exp(helper1(t) * x);
  }
  int64_t n_;
  double s_, hx1_, hn_, cut_;
};

struct Args {
  int64_t dim = 16, steps = 20, batch = 8192, tables = 26, cap = 1000000;
  double alpha = 1.1;
  hb_dtype wire = HB_FLOAT32;
  uint64_t seed = 1;
};

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : "";
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

long peak_rss_kib() {
  FILE *f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  if (f) std::fclose(f);
  return kib;
}

void check(hb_status st, const char *what) {
  if (st != HB_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", what, hb_status_name(st),
                 hb_last_error());
    std::exit(1);
  }
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
    c.num_rows = rows[t];
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

  std::vector<int64_t> ids(a.batch);
  std::vector<float> out(a.batch * a.dim), grads(a.batch * a.dim);
  for (size_t i = 0; i < grads.size(); ++i)
    grads[i] = ((i * 2654435761u) % 1000) * 1e-5f - 0.005f;
  double secs = 0, cpu = 0;
  const int warmup = 2;
  uint64_t ids_timed = 0;
  for (int64_t s = 0; s < a.steps + warmup; ++s) {
    if (s == warmup)
      for (auto *e : tabs) e->table->reset_stats();
    for (int t = 0; t < a.tables; ++t) {
      uint64_t st = a.seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(rank) << 40) ^
                    (uint64_t(s) << 20) ^ t;
      for (int64_t i = 0; i < a.batch; ++i) {
        int64_t k = zipf[t](st) - 1;
        ids[i] = static_cast<int64_t>(
            (static_cast<unsigned __int128>(mult[t]) * k + add[t]) % rows[t]);
      }
      auto t0 = std::chrono::steady_clock::now();
      double c0 = cpu_seconds();
      check(hb_embedding_lookup(tabs[t], ids.data(), a.batch, out.data()),
            "lookup");
      check(hb_embedding_apply_gradients(tabs[t], ids.data(), a.batch,
                                         grads.data()),
            "apply");
      double c1 = cpu_seconds();
      auto t1 = std::chrono::steady_clock::now();
      if (s >= warmup) {
        secs += std::chrono::duration<double>(t1 - t0).count();
        cpu += c1 - c0;
        ids_timed += a.batch;
      }
    }
  }
  uint64_t uniq = 0, ids_in = 0, sent = 0, recv = 0, req = 0;
  for (auto *e : tabs) {
    const hb::emb::Stats &st = e->table->stats();
    uniq += st.unique_ids;
    ids_in += st.ids;
    sent += st.wire_bytes_sent;
    recv += st.wire_bytes_recv;
    req += st.request_bytes;
  }
  const double steps = static_cast<double>(a.steps);
  const double row_bytes = a.dim * (a.wire == HB_FLOAT32 ? 4.0 : 2.0);
  // Dedup bound for this rank's requests: each locally unique id at most
  // once per lookup and apply (id out twice, row in, gradient out).
  const double bound = uniq / 2.0 * (16.0 + 2.0 * row_bytes) / steps;
  const double peak = peak_rss_kib() * 1024.0;
  std::printf(
      "criteo_synth rank %d/%d dim %lld batch %lld tables %lld alpha %.2f wire "
      "%s: "
      "%.2f M ids/s (%.2f M per CPU-second) | unique ratio %.3f | request "
      "bytes/step %.0f (dedup bound %.0f, %.2f) | "
      "wire sent %.0f recv %.0f bytes/step | peak RSS %.1f MiB, shard %.1f MiB "
      "(%.2fx)\n",
      rank, world, (long long)a.dim, (long long)a.batch, (long long)a.tables,
      a.alpha,
      a.wire == HB_FLOAT32   ? "f32"
      : a.wire == HB_FLOAT16 ? "f16"
                             : "bf16",
      ids_timed / secs / 1e6, ids_timed / cpu / 1e6,
      static_cast<double>(uniq) / ids_in, req / steps, bound,
      bound > 0 ? req / steps / bound : 0.0, sent / steps, recv / steps,
      peak / 1048576.0, shard_bytes / 1048576.0, peak / shard_bytes);
  for (auto *e : tabs) hb_embedding_destroy(e);
  hb_context_destroy(ctx);
  return 0;
}
