/*
 * hb_comm_bench: CPU collective benchmark in the style of nccl-tests, using
 * only the public C ABI. Run it under hbrun:
 *
 *   hbrun -n 4 -- hb_comm_bench            # allreduce table + fusion
 *
 * For each size (4 KiB .. 64 MiB of float32, SUM, in place) every rank
 * times each call; the reported time is the slowest rank's median.
 * algbw = bytes / time, busbw = algbw * 2(n-1)/n (allreduce, as
 * nccl-tests). GB/s = 1e9 B/s. Lines starting "RESULT" use the same format
 * and definitions as the peer harnesses (/work/shared/peers), so one script
 * can put them side by side.
 *
 * Environment (same knobs as the peer harnesses): HB_SIZES=4K,1M (subset),
 * HB_SCALE=0.25 (fewer iterations), HB_TIME_BUDGET_S=4 (cap per size).
 * HB_BENCH_FUSION=0 skips the fusion part (256 tensors of 4 KiB: one
 * hb_allreduce_many versus 256 hb_allreduce calls); HB_BENCH_ALLTOALLV=0
 * the alltoallv of the embedding exchange pattern.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hb.h"

static const size_t kSizes[] = {4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20};
#define NSIZES (sizeof kSizes / sizeof kSizes[0])

static hb_context *g_ctx;
static int g_rank, g_np;

static void check(hb_status st, const char *what) {
  if (st != HB_OK) {
    fprintf(stderr, "hb_comm_bench r%d: %s: %s: %s\n", g_rank, what, hb_status_name(st),
            hb_last_error());
    exit(1);
  }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static double env_double(const char *name, double dflt) {
  const char *v = getenv(name);
  return v && *v && atof(v) > 0 ? atof(v) : dflt;
}

static int size_enabled(size_t bytes) {
  const char *p = getenv("HB_SIZES");
  if (!p || !*p) return 1;
  while (*p) {
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) {
      p++;
      continue;
    }
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    if (v == bytes) return 1;
    p = end;
  }
  return 0;
}

/* Iterations: move ~512 MiB * HB_SCALE per size, clamped; then capped so
 * iterations x (slowest rank's probe call) fits HB_TIME_BUDGET_S. */
enum { kMaxIters = 100000 }; /* the timings array's length */

static int iterations(size_t bytes, double probe_us, int *warm) {
  double scale = env_double("HB_SCALE", 1.0), budget_us = env_double("HB_TIME_BUDGET_S", 4.0) * 1e6;
  double it = 512.0 * 1024 * 1024 * scale / (double)bytes;
  int lo = (int)(10 * (scale < 1 ? scale : 1)), hi = (int)(2000 * scale);
  if (lo < 3) lo = 3;
  if (hi < lo) hi = lo;
  if (hi > kMaxIters) hi = kMaxIters;
  if (lo > hi) lo = hi;
  int iters = it < lo ? lo : it > hi ? hi : (int)it;
  if (probe_us > 0 && iters * probe_us > budget_us) iters = (int)(budget_us / probe_us) < 3 ? 3 : (int)(budget_us / probe_us);
  *warm = iters / 10 < 2 ? 2 : iters / 10;
  if (probe_us * 3 > budget_us) *warm = 0;
  else if (*warm * probe_us > budget_us / 4) *warm = 1;
  return iters;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Slowest rank's value. */
static double max_over_ranks(double v) {
  check(hb_allreduce(g_ctx, &v, &v, 1, HB_FLOAT64, HB_MAX), "max over ranks");
  return v;
}

static void result(const char *impl, size_t bytes, int iters, double med, double first,
                   double factor) {
  double algbw = bytes / (med * 1e-6) / 1e9;
  printf("RESULT impl=%s np=%d bytes=%zu iters=%d median_us=%.2f min_us=%.2f "
         "algbw_GBps=%.3f busbw_GBps=%.3f\n",
         impl, g_np, bytes, iters, med, first, algbw, algbw * factor);
  fflush(stdout);
}

static void fill(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (float)(g_rank + 1) + (float)(i % 7);
}

static int verify(const float *p, size_t n) {
  const float base = (float)g_np * (g_np + 1) / 2.0f;
  for (size_t i = 0; i < n; i++)
    if (p[i] != base + (float)g_np * (float)(i % 7)) return 0;
  return 1;
}

static void bench_allreduce(float *buf, double *t) {
  const double factor = g_np > 1 ? 2.0 * (g_np - 1) / g_np : 1.0;
  if (g_rank == 0)
    printf("#\n# hb_allreduce float32 sum, in place, %d ranks\n"
           "# %10s %12s %10s %10s %10s\n", g_np, "size(B)", "count", "time(us)", "algbw", "busbw");
  for (size_t s = 0; s < NSIZES; s++) {
    const size_t bytes = kSizes[s], n = bytes / sizeof(float);
    if (!size_enabled(bytes)) continue;
    fill(buf, n);
    check(hb_allreduce(g_ctx, buf, buf, n, HB_FLOAT32, HB_SUM), "allreduce");
    double ok = max_over_ranks(verify(buf, n) ? 0 : 1);
    if (ok != 0) {
      if (g_rank == 0) fprintf(stderr, "hb_comm_bench: wrong result at %zu bytes\n", bytes);
      exit(3);
    }
    memset(buf, 0, bytes); /* repeated in-place sums stay finite */
    double probe = now_us();
    check(hb_allreduce(g_ctx, buf, buf, n, HB_FLOAT32, HB_SUM), "allreduce");
    int warm, iters = iterations(bytes, max_over_ranks(now_us() - probe), &warm);
    for (int i = 0; i < warm; i++) check(hb_allreduce(g_ctx, buf, buf, n, HB_FLOAT32, HB_SUM), "allreduce");
    for (int i = 0; i < iters; i++) {
      double t0 = now_us();
      check(hb_allreduce(g_ctx, buf, buf, n, HB_FLOAT32, HB_SUM), "allreduce");
      t[i] = now_us() - t0;
    }
    double first = max_over_ranks(t[0]);
    double med = max_over_ranks(median(t, iters));
    if (g_rank == 0) {
      double algbw = bytes / (med * 1e-6) / 1e9;
      printf("  %10zu %12zu %10.1f %10.3f %10.3f\n", bytes, n, med, algbw, algbw * factor);
      result("hb_allreduce", bytes, iters, med, first, factor);
    }
  }
}

/* 256 tensors of 4 KiB: one fused call against 256 separate calls. */
static void bench_fusion(float *buf, double *t) {
  enum { kTensors = 256, kCount = 1024 };
  void *bufs[kTensors];
  size_t counts[kTensors];
  for (int k = 0; k < kTensors; k++) {
    bufs[k] = buf + (size_t)k * kCount;
    counts[k] = kCount;
  }
  memset(buf, 0, (size_t)kTensors * kCount * sizeof(float));
  const size_t bytes = (size_t)kTensors * kCount * sizeof(float);
  int iters = (int)(50 * env_double("HB_SCALE", 1.0));
  if (iters < 5) iters = 5;
  if (iters > kMaxIters) iters = kMaxIters;
  double med[2];
  for (int mode = 0; mode < 2; mode++) {
    for (int i = -2; i < iters; i++) { /* two warm-up rounds */
      double t0 = now_us();
      if (mode == 0) {
        check(hb_allreduce_many(g_ctx, bufs, counts, kTensors, HB_FLOAT32, HB_SUM), "allreduce_many");
      } else {
        for (int k = 0; k < kTensors; k++)
          check(hb_allreduce(g_ctx, bufs[k], bufs[k], kCount, HB_FLOAT32, HB_SUM), "allreduce");
      }
      if (i >= 0) t[i] = now_us() - t0;
    }
    med[mode] = max_over_ranks(median(t, iters));
  }
  if (g_rank == 0) {
    printf("#\n# 256 tensors x 4 KiB: hb_allreduce_many %.1f us, 256 x hb_allreduce %.1f us: %.1fx\n",
           med[0], med[1], med[1] / med[0]);
    result("hb_allreduce_many_256x4K", bytes, iters, med[0], med[0], 1.0);
    result("hb_allreduce_256x4K_separate", bytes, iters, med[1], med[1], 1.0);
  }
}

/* The embedding exchange pattern: uneven alltoallv, rank r sending peer q
 * 4 KiB << ((r + 2q) % 10) bytes (4 KiB .. 2 MiB). bytes = what the
 * slowest rank sends; busbw = algbw x (n-1)/n, as nccl-tests' alltoall. */
static size_t emb_bytes(int from, int to) {
  return (size_t)4096 << ((from + 2 * to) % 10);
}

static void bench_alltoallv(double *t) {
  int64_t *sc = calloc((size_t)g_np * 4, sizeof(int64_t));
  int64_t *so = sc + g_np, *rc = so + g_np, *ro = rc + g_np;
  size_t stotal = 0, rtotal = 0, most = 0;
  for (int q = 0; q < g_np; q++) {
    so[q] = (int64_t)(stotal / sizeof(float));
    sc[q] = (int64_t)(emb_bytes(g_rank, q) / sizeof(float));
    stotal += emb_bytes(g_rank, q);
    ro[q] = (int64_t)(rtotal / sizeof(float));
    rc[q] = (int64_t)(emb_bytes(q, g_rank) / sizeof(float));
    rtotal += emb_bytes(q, g_rank);
  }
  for (int r = 0; r < g_np; r++) {
    size_t b = 0;
    for (int q = 0; q < g_np; q++) b += emb_bytes(r, q);
    if (b > most) most = b;
  }
  float *in = malloc(stotal), *out = malloc(rtotal);
  if (!sc || !in || !out) exit(2);
  for (size_t i = 0; i < stotal / sizeof(float); i++)
    in[i] = (float)(g_rank * 1000 + i % 1000);
  check(hb_alltoallv(g_ctx, in, sc, so, out, rc, ro, HB_FLOAT32), "alltoallv");
  int bad = 0;
  for (int q = 0; q < g_np; q++)
    for (int64_t i = 0; i < rc[q]; i++) {
      size_t at = 0; /* where q put what it sends me */
      for (int k = 0; k < g_rank; k++) at += emb_bytes(q, k) / sizeof(float);
      if (out[ro[q] + i] != (float)(q * 1000 + (at + (size_t)i) % 1000))
        bad = 1;
    }
  if (max_over_ranks(bad) != 0) {
    if (g_rank == 0) fprintf(stderr, "hb_comm_bench: wrong alltoallv result\n");
    exit(3);
  }
  int iters = (int)(100 * env_double("HB_SCALE", 1.0));
  if (iters < 5) iters = 5;
  if (iters > kMaxIters) iters = kMaxIters;
  for (int i = -2; i < iters; i++) {
    double t0 = now_us();
    check(hb_alltoallv(g_ctx, in, sc, so, out, rc, ro, HB_FLOAT32),
          "alltoallv");
    if (i >= 0) t[i] = now_us() - t0;
  }
  double med = max_over_ranks(median(t, iters));
  double first = max_over_ranks(t[0]);
  if (g_rank == 0) {
    printf(
        "#\n# hb_alltoallv float32, embedding pattern (4 KiB .. 2 MiB per "
        "peer, uneven): "
        "%zu bytes from the busiest rank, %.1f us\n",
        most, med);
    result("hb_alltoallv_emb", most, iters, med, first,
           g_np > 1 ? (double)(g_np - 1) / g_np : 1.0);
  }
  free(in);
  free(out);
  free(sc);
}

int main(void) {
  check(hb_context_create(NULL, &g_ctx), "hb_context_create");
  g_rank = hb_context_rank(g_ctx);
  g_np = hb_context_world_size(g_ctx);
  void *mem = NULL;
  double *t = malloc(sizeof(double) * kMaxIters);
  if (posix_memalign(&mem, 4096, kSizes[NSIZES - 1]) != 0 || !t) return 2;
  float *buf = mem;
  bench_allreduce(buf, t);
  const char *f = getenv("HB_BENCH_FUSION");
  if (!f || strcmp(f, "0") != 0) bench_fusion(buf, t);
  const char *a = getenv("HB_BENCH_ALLTOALLV");
  if (!a || strcmp(a, "0") != 0) bench_alltoallv(t);
  free(buf);
  free(t);
  hb_context_destroy(g_ctx);
  return 0;
}
