/* One rank of a large one-host world (issue 34 item 3): forms a context,
 * then one allreduce of one float and one of 1000 floats, checked bit for
 * bit against the rank-order sum computed here, then a barrier. Usage (under
 * hbrun): mp_many_ranks [MAX_SOCKETS]. With MAX_SOCKETS, a rank that holds
 * more open sockets than that after the collectives fails: ranks that share
 * one host need no TCP mesh, so their count must not grow with the world.
 * Rank 0 prints the world's timings and its socket count. Exit 0 on
 * success. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hb.h"

#define VEC 1000

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank r's element i: values whose float sum depends on the order. */
static float value(int r, int i) {
  return 1.0f / (float)(r + 1) + 1e-3f * (float)((r * 7 + i) % 13);
}

/* Open sockets of this process (/proc/self/fd links "socket:[inode]"). */
static int open_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent *e;
  char path[300], target[64];
  while (d && (e = readdir(d)) != NULL) {
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(path, target, sizeof target - 1);
    if (len > 0) {
      target[len] = 0;
      n += strncmp(target, "socket:", 7) == 0;
    }
  }
  if (d) closedir(d);
  return n;
}

/* A "Name:  N kB" line of /proc/self/status, in KiB (-1: unknown). */
static long status_kib(const char *name) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  const size_t n = strlen(name);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, name, n) == 0 && line[n] == ':' &&
        sscanf(line + n + 1, "%ld", &kib) == 1)
      break;
  if (f) fclose(f);
  return kib;
}

static int fail(int rank, const char *what, hb_status s) {
  fprintf(stderr, "mp_many_ranks r%d: %s: %s: %s\n", rank, what,
          hb_status_name(s), hb_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const int max_sockets = argc > 1 ? atoi(argv[1]) : -1;
  const double t0 = now_s();
  hb_context *ctx = NULL;
  hb_status s = hb_context_create(NULL, &ctx);
  if (s != HB_OK) return fail(-1, "hb_context_create", s);
  const int rank = hb_context_rank(ctx), n = hb_context_world_size(ctx);
  const double created = now_s() - t0;
  float one = value(rank, 0), got = 0;
  s = hb_allreduce(ctx, &one, &got, 1, HB_FLOAT32, HB_SUM);
  if (s != HB_OK) return fail(rank, "hb_allreduce(1)", s);
  const double formed = now_s() - t0;
  static float vec[VEC], ref[VEC];
  for (int i = 0; i < VEC; ++i) {
    vec[i] = value(rank, i);
    ref[i] = value(0, i);
    for (int r = 1; r < n; ++r) ref[i] += value(r, i); /* rank order */
  }
  if (memcmp(&got, &ref[0], sizeof got) != 0) {
    fprintf(stderr,
            "mp_many_ranks r%d: allreduce(1) = %.9g, rank order gives %.9g\n",
            rank, got, ref[0]);
    return 1;
  }
  s = hb_allreduce(ctx, vec, vec, VEC, HB_FLOAT32, HB_SUM);
  if (s != HB_OK) return fail(rank, "hb_allreduce(1000)", s);
  for (int i = 0; i < VEC; ++i)
    if (memcmp(&vec[i], &ref[i], sizeof vec[i]) != 0) {
      fprintf(stderr,
              "mp_many_ranks r%d: element %d = %.9g, rank order gives %.9g\n",
              rank, i, vec[i], ref[i]);
      return 1;
    }
  s = hb_context_barrier(ctx, 60000);
  if (s != HB_OK) return fail(rank, "hb_context_barrier", s);
  const int sockets = open_sockets();
  if (rank == 0)
    printf(
        "world of %d: context in %.2f s, first allreduce after %.2f s, total "
        "%.2f s; rank 0 "
        "holds %d "
        "sockets, RssAnon %ld KiB, RssShmem %ld KiB, VmHWM %ld KiB, VmData %ld "
        "KiB\n",
        n, created, formed, now_s() - t0, sockets, status_kib("RssAnon"),
        status_kib("RssShmem"), status_kib("VmHWM"), status_kib("VmData"));
  /* Every rank's count, for bench/scale/netns_form.sh. */
  if (getenv("MP_MANY_RANKS_EVERY"))
    printf("rank %d holds %d sockets\n", rank, sockets);
  if (max_sockets >= 0 && sockets > max_sockets) {
    fprintf(stderr,
            "mp_many_ranks r%d: %d open sockets in a world of %d, at most %d "
            "expected\n",
            rank, sockets, n, max_sockets);
    return 1;
  }
  hb_context_destroy(ctx);
  return 0;
}
