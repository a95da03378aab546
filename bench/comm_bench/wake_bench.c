/*
 * hb_wake_bench: how long a waiting rank takes to return from a collective
 * once the last rank arrives (the wake-up latency of hb's waits), with the
 * last rank arriving DELAY microseconds after the others. Run it under
 * hbrun:
 *
 *   hbrun -n 2 -- hb_wake_bench
 *
 * Each round, rank 0 computes (a busy loop) for DELAY us, reads
 * CLOCK_MONOTONIC (one clock for every process of the host) and enters an
 * hb_allreduce(MAX) of that time stamp; the other ranks enter at once and
 * wait. A waiter's latency is its return time minus rank 0's stamp: the
 * collective's own cost plus the wake-up. Per delay it prints the median
 * and the 90th percentile over the rounds, rank 1's view:
 *
 *   RESULT wake np=2 bytes=8 delay_us=100 rounds=400 median_us=.. p90_us=..
 *
 * Environment: HB_WAKE_DELAYS=0,20,100,500,2000 (us), HB_WAKE_ROUNDS=400,
 * HB_WAKE_BYTES=8 (the stamp rides in the first 8 bytes; larger messages
 * go over the rings instead of the call board).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hb.h"

static int g_rank;

static void check(hb_status st, const char *what) {
  if (st != HB_OK) {
    fprintf(stderr, "hb_wake_bench r%d: %s: %s: %s\n", g_rank, what,
            hb_status_name(st), hb_last_error());
    exit(1);
  }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v && atol(v) > 0 ? atol(v) : dflt;
}

int main(void) {
  hb_context *ctx = NULL;
  check(hb_context_create(NULL, &ctx), "hb_context_create");
  g_rank = hb_context_rank(ctx);
  const int np = hb_context_world_size(ctx);
  const long rounds = env_long("HB_WAKE_ROUNDS", 400);
  size_t count = (size_t)env_long("HB_WAKE_BYTES", 8) / sizeof(double);
  if (count < 1) count = 1;
  const char *delays = getenv("HB_WAKE_DELAYS");
  if (!delays || !*delays) delays = "0,20,100,500,2000";
  double *buf = calloc(count, sizeof(double));
  double *lat = malloc(sizeof(double) * (size_t)rounds);
  if (!buf || !lat) return 2;
  for (const char *p = delays; *p;) {
    char *end;
    const long delay = strtol(p, &end, 10);
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
    check(hb_context_barrier(ctx, 0), "barrier");
    for (long r = -10; r < rounds; r++) {  // 10 rounds of warm-up
      memset(buf, 0, count * sizeof(double));
      if (g_rank == 0) {
        const double until = now_us() + (double)delay;
        while (now_us() < until) {
        }
        buf[0] = now_us();
      }
      check(hb_allreduce(ctx, buf, buf, count, HB_FLOAT64, HB_MAX),
            "allreduce");
      if (r >= 0) lat[r] = now_us() - buf[0];
    }
    qsort(lat, (size_t)rounds, sizeof(double), cmp_double);
    if (g_rank == (np > 1 ? 1 : 0))
      printf(
          "RESULT wake np=%d bytes=%zu delay_us=%ld rounds=%ld median_us=%.1f "
          "p90_us=%.1f\n",
          np, count * sizeof(double), delay, rounds, lat[rounds / 2],
          lat[rounds * 9 / 10]);
    fflush(stdout);
  }
  free(buf);
  free(lat);
  hb_context_destroy(ctx);
  return 0;
}
