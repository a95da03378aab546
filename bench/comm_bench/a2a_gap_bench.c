/*
 * hb_a2a_gap_bench: the median time of one hb_alltoallv of B bytes to every
 * peer, back to back (GAP_US=0) or after GAP_US of busy compute per call,
 * +-30 % per rank and call (a training step's compute and its skew between
 * ranks). For the shared-memory call board's one-round alltoallv against
 * the print round + rings (docs/performance.md, "Rendezvous per step"):
 * run two builds' libhb interleaved, e.g.
 *
 *   for v in OLD/src NEW/src; do GAP_US=300 LD_LIBRARY_PATH=$v \
 *     hbrun -n 2 -- hb_a2a_gap_bench; done
 *
 * Prints "RESULT bytes=B median_us=T" per size (the slowest rank's median
 * of 1500 calls); SIZES=32768,98304 picks sizes (bytes per peer).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hb.h"

enum { kIters = 1500, kWarm = 50 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void check(hb_status st) {
  if (st != HB_OK) {
    fprintf(stderr, "hb_a2a_gap_bench: %s: %s\n", hb_status_name(st),
            hb_last_error());
    exit(1);
  }
}

int main(void) {
  hb_context *ctx;
  check(hb_context_create(NULL, &ctx));
  const int r = hb_context_rank(ctx), n = hb_context_world_size(ctx);
  const char *env = getenv("SIZES");
  const char *list = env && *env ? env : "32768,98304,215040,1048576";
  const double gap = getenv("GAP_US") ? atof(getenv("GAP_US")) : 0;
  static double t[kIters];
  int64_t *c = malloc(sizeof(int64_t) * 2 * (size_t)n);
  if (!c) return 2;
  for (const char *p = list; *p;) {
    char *end;
    const size_t b = strtoull(p, &end, 10);
    p = *end ? end + 1 : end;
    if (!b) continue;
    int64_t *counts = c, *offs = c + n;
    for (int q = 0; q < n; ++q)
      counts[q] = q == r ? 0 : (int64_t)b, offs[q] = q * (int64_t)b;
    char *in = malloc(b * (size_t)n), *out = malloc(b * (size_t)n);
    if (!in || !out) return 2;
    memset(in, r + 1, b * (size_t)n);
    unsigned seed = 12345u + 77u * (unsigned)r;
    for (int i = -kWarm; i < kIters; ++i) {
      if (gap > 0) {
        seed = seed * 1103515245u + 12345u;
        const double until =
            now_us() + gap * (0.7 + 0.6 * ((seed >> 16) & 1023) / 1023.0);
        while (now_us() < until) {
        }
      }
      const double t0 = now_us();
      check(hb_alltoallv(ctx, in, counts, offs, out, counts, offs, HB_UINT8));
      if (i >= 0) t[i] = now_us() - t0;
    }
    qsort(t, kIters, sizeof t[0], cmp);
    double med = t[kIters / 2], worst = 0;
    check(hb_allreduce(ctx, &med, &worst, 1, HB_FLOAT64, HB_MAX));
    if (r == 0)
      printf("RESULT bytes=%zu gap_us=%.0f median_us=%.1f\n", b, gap, worst);
    free(in);
    free(out);
  }
  free(c);
  hb_context_destroy(ctx);
  return 0;
}
