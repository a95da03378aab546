// bench/limit: the speed of light of the CTR demo's step on this machine.
// Each phase of examples/ctr_train's step done by the simplest fast code,
// on the demo's shapes and ids, one core:
//   data    the batch's Criteo lines parsed by hb_reader (one thread)
//   lookup  gather the batch's rows from plain arrays into the MLP's input
//           (26 tables x dim) and sum the wide table's 26 scalars
//   mlp     the three GEMMs of the MLP (forward, both backward products)
//           with the demo's BLAS, plus a fused Adagrad over the dense weights
//   sparse  Adagrad over the touched rows: gradients summed per distinct
//           id (a stamp array, no sort), then one update per row
// Beside them, hb's own phase times from `ctr_train --profile` (one rank):
//
//   limit [--batch 512] [--dim 8] [--hidden 64] [--vocab 2048]
//         [--profile "profile rank 0: ms/step data .. | total .."]
//
// prints one table: phase, limit ms/step, hb ms/step, hb / limit. The
// demo's data generation is reported apart: its "data" phase makes
// synthetic samples, not the reader's parse. bench/limit/limit.sh runs both.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "blas_core.h"
#include "hb.h"
#include "synth_data.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Median of `reps` timings of fn(), in seconds.
template <class F>
double median_time(int reps, F &&fn) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    fn(r);
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void check(hb_status st, const char *what) {
  if (st != HB_OK) {
    std::fprintf(stderr, "limit: %s: %s: %s\n", what, hb_status_name(st),
                 hb_last_error());
    std::exit(1);
  }
}

// hb's phases from a `--profile` line ("name value" pairs).
std::map<std::string, double> parse_profile(const std::string &line) {
  std::map<std::string, double> m;
  const size_t at = line.find("ms/step");
  if (at == std::string::npos) return m;
  const char *p = line.c_str() + at + 7;
  char name[64];
  double v;
  int used;
  while (std::sscanf(p, " %63s %lf%n", name, &v, &used) == 2) {
    m[name] = v;
    p += used;
  }
  return m;
}

}  // namespace

int main(int argc, char **argv) {
  blas_core::rerun_if_misdetected(argv);  // the demo's kernels, as it runs
  int64_t n = 512, D = 8, H = 64, V = 2048;
  std::string profile;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--batch")
      n = std::atoll(argv[i + 1]);
    else if (a == "--dim")
      D = std::atoll(argv[i + 1]);
    else if (a == "--hidden")
      H = std::atoll(argv[i + 1]);
    else if (a == "--vocab")
      V = std::atoll(argv[i + 1]);
    else if (a == "--profile")
      profile = argv[i + 1];
    else {
      std::fprintf(stderr, "limit: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  const int T = synth::kTables, in = int(T * D + synth::kDense);
  const int kBatches = 64, kReps = 200;
  // The demo's ids (the same generator and seed as ctr_train).
  synth::Generator gen(2026, V, 1.1);
  std::vector<synth::Sample> samples(size_t(n * kBatches));
  for (size_t i = 0; i < samples.size(); ++i)
    gen.sample(0, int64_t(i), &samples[i]);

  // ---- data: hb_reader over the batches' lines, one parse thread.
  char path[] = "/tmp/hb_limit_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return 2;
  {
    FILE *f = fdopen(fd, "w");
    for (const synth::Sample &s : samples) {
      std::fprintf(f, "%d", int(s.label));
      for (int j = 0; j < synth::kDense; ++j)
        std::fprintf(f, "\t%.9g", double(s.dense[j]));
      for (int t = 0; t < T; ++t)
        std::fprintf(f, "\t%llx", (unsigned long long)s.ids[t]);
      std::fputc('\n', f);
    }
    std::fclose(f);
  }
  hb_context *ctx = nullptr;
  check(hb_context_create(nullptr, &ctx), "hb_context_create");
  double data_ms = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    hb_reader_config cfg = HB_READER_CONFIG_INIT;
    cfg.batch_size = n;
    cfg.num_threads = 1;
    const char *paths[] = {path};
    hb_reader *reader = nullptr;
    const double t0 = now_s();
    check(hb_reader_create(ctx, paths, 1, &cfg, &reader), "hb_reader_create");
    int got = 0;
    for (;;) {
      hb_reader_batch *b = nullptr;
      check(hb_reader_next(reader, &b), "hb_reader_next");
      if (!b) break;
      ++got;
      hb_reader_batch_free(b);
    }
    hb_reader_destroy(reader);
    if (got != kBatches)
      std::fprintf(stderr, "limit: reader gave %d batches\n", got);
    data_ms = std::min(data_ms, 1e3 * (now_s() - t0) / kBatches);
  }
  unlink(path);
  hb_context_destroy(ctx);

  // ---- lookup: gather + pool from plain arrays.
  std::vector<float> tables(size_t(T * V * D)), wide(size_t(T * V));
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = float(i % 97) * 1e-3f;
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = float(i % 89) * 1e-3f;
  const int64_t P = T * D + 1;
  std::vector<float> pooled(size_t(n * P));
  const double lookup_s = median_time(kReps, [&](int r) {
    const synth::Sample *s = &samples[size_t((r % kBatches) * n)];
    for (int64_t i = 0; i < n; ++i) {
      float *out = &pooled[size_t(i * P)];
      float w = 0;
      for (int t = 0; t < T; ++t) {
        std::memcpy(out + t * D, &tables[size_t((t * V + s[i].ids[t]) * D)],
                    size_t(D) * sizeof(float));
        w += wide[size_t(t * V + s[i].ids[t])];
      }
      out[T * D] = w;
    }
  });

  // ---- mlp: the three GEMMs and a fused Adagrad over W1.
  std::vector<float> x(size_t(n * in), 0.5f), w1(size_t(in * H), 0.01f),
      z1(size_t(n * H)), dz1(size_t(n * H), 0.001f), gw1(size_t(in * H)),
      gpool(size_t(n * P)), aw1(size_t(in * H), 0.1f);
  const double mlp_s = median_time(kReps, [&](int) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(H), in,
                1.0f, x.data(), in, w1.data(), in, 0.0f, z1.data(), int(H));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(H), in, int(n),
                1.0f, dz1.data(), int(H), x.data(), in, 0.0f, gw1.data(), in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(T * D),
                int(H), 1.0f, dz1.data(), int(H), w1.data(), in, 0.0f,
                gpool.data(), int(P));
    for (size_t k = 0; k < w1.size(); ++k) {
      aw1[k] += gw1[k] * gw1[k];
      w1[k] -= 0.05f * gw1[k] / std::sqrt(aw1[k]);
    }
  });

  // ---- sparse: Adagrad over the touched rows of every table (and the
  // wide table, dim 1).
  std::vector<float> acc(tables.size(), 0.1f), wacc(wide.size(), 0.1f);
  std::vector<int32_t> slot(size_t(T * V), -1);
  std::vector<int64_t> rows;
  std::vector<float> g(size_t(n * T * D)), wg(size_t(n * T));
  const double sparse_s = median_time(kReps, [&](int r) {
    const synth::Sample *s = &samples[size_t((r % kBatches) * n)];
    rows.clear();
    for (int64_t i = 0; i < n; ++i)
      for (int t = 0; t < T; ++t) {
        const int64_t row = t * V + s[i].ids[t];
        int32_t k = slot[size_t(row)];
        const float *gi = &gpool[size_t(i * P + t * D)];
        if (k < 0) {
          k = slot[size_t(row)] = int32_t(rows.size());
          rows.push_back(row);
          std::memcpy(&g[size_t(k * D)], gi, size_t(D) * sizeof(float));
          wg[size_t(k)] = gpool[size_t(i * P + T * D)];
        } else {
          for (int64_t d = 0; d < D; ++d) g[size_t(k * D + d)] += gi[d];
          wg[size_t(k)] += gpool[size_t(i * P + T * D)];
        }
      }
    for (size_t k = 0; k < rows.size(); ++k) {
      float *w = &tables[size_t(rows[k] * D)], *a = &acc[size_t(rows[k] * D)];
      const float *gk = &g[k * size_t(D)];
      for (int64_t d = 0; d < D; ++d) {
        a[d] += gk[d] * gk[d];
        w[d] -= 0.05f * gk[d] / std::sqrt(a[d]);
      }
      wacc[size_t(rows[k])] += wg[k] * wg[k];
      wide[size_t(rows[k])] -= 0.05f * wg[k] / std::sqrt(wacc[size_t(rows[k])]);
      slot[size_t(rows[k])] = -1;
    }
  });

  const std::map<std::string, double> hb = parse_profile(profile);
  auto get = [&](std::initializer_list<const char *> names) {
    double s = 0;
    bool any = false;
    for (const char *k : names) {
      auto it = hb.find(k);
      if (it != hb.end()) s += it->second, any = true;
    }
    return any ? s : -1.0;
  };
  struct Row {
    const char *phase;
    double limit_ms, hb_ms;
    const char *hb_phases;
  };
  const Row rows_out[] = {
      {"lookup (gather + pool)", 1e3 * lookup_s,
       get({"lookup", "lookup_start"}), "lookup + lookup_start"},
      {"mlp (3 GEMMs + Adagrad)", 1e3 * mlp_s,
       get({"mlp_fwd", "mlp_bwd", "dense_optim"}),
       "mlp_fwd + mlp_bwd + dense_optim"},
      {"sparse update (Adagrad)", 1e3 * sparse_s, get({"sparse_update"}),
       "sparse_update"},
      {"step bookkeeping", 0.0,
       get({"global_batch", "dense_allreduce", "data_sync", "metric"}),
       "global_batch + dense_allreduce + data_sync + metric"},
  };
  std::printf(
      "speed of light, batch %lld, dim %lld, hidden %lld, vocab %lld "
      "(ms/step)\n",
      (long long)n, (long long)D, (long long)H, (long long)V);
  std::printf(
      "| phase | limit | hb | hb / limit | hb's phases "
      "|\n|---|---|---|---|---|\n");
  double lim_total = 0, hb_total = 0;
  for (const Row &r : rows_out) {
    lim_total += r.limit_ms;
    if (r.hb_ms >= 0) hb_total += r.hb_ms;
    char ratio[32] = "-";
    if (r.hb_ms >= 0 && r.limit_ms > 0)
      std::snprintf(ratio, sizeof ratio, "%.1fx", r.hb_ms / r.limit_ms);
    char hbs[32] = "-";
    if (r.hb_ms >= 0) std::snprintf(hbs, sizeof hbs, "%.3f", r.hb_ms);
    std::printf("| %s | %.3f | %s | %s | %s |\n", r.phase, r.limit_ms, hbs,
                ratio, r.hb_phases);
  }
  char ratio[32] = "-";
  if (hb_total > 0)
    std::snprintf(ratio, sizeof ratio, "%.2fx", hb_total / lim_total);
  std::printf("| step without data | %.3f | %.3f | %s | |\n", lim_total,
              hb_total, ratio);
  const double gen_ms = get({"data"});
  std::printf(
      "| data: reader parse (limit) vs demo's generator (hb) | %.3f | %s | "
      "(apart) | data |\n",
      data_ms, gen_ms >= 0 ? std::to_string(gen_ms).c_str() : "-");
  if (hb_total > 0)
    std::printf(
        "hb at %.2f of the speed of light (limit total / hb total, data "
        "apart)\n",
        lim_total / hb_total);
  return 0;
}
