/*
 * cluster_demo: the smallest hb job. Every rank forms the context from what
 * the launcher put in its environment, says who it is, and then all ranks
 * meet at a few barriers; rank 0 prints a summary.
 *
 *   hbrun -n 4 -- ./cluster_demo          (4 CPU workers on this machine)
 *   ./cluster_demo                        (a world of one, no network)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>

#include "hb.h"

enum { kBarriers = 5, kBarrierTimeoutMs = 30000 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Prints the failed call with hb's status and message. */
static int report(const char *what, hb_status s) {
  fprintf(stderr, "cluster_demo: %s failed: %s: %s\n", what, hb_status_name(s),
          hb_last_error());
  return 1;
}

int main(void) {
  /* Through hbrun stdout is a pipe: flush each line as it is printed. */
  setvbuf(stdout, NULL, _IOLBF, 0);

  hb_context *ctx = NULL;
  hb_status s = hb_context_create(NULL, &ctx);
  if (s != HB_OK) return report("hb_context_create", s);

  int rank = hb_context_rank(ctx), world = hb_context_world_size(ctx);
  printf(
      "cluster_demo: rank %d of %d, local %d of %d, device %s, task %s:%d%s\n",
      rank, world, hb_context_local_rank(ctx), hb_context_local_world_size(ctx),
      hb_context_device(ctx), hb_context_task_type(ctx),
      hb_context_task_id(ctx), hb_context_is_chief(ctx) ? " (chief)" : "");

  double start = now_ms();
  for (int i = 0; i < kBarriers; ++i) {
    s = hb_context_barrier(ctx, kBarrierTimeoutMs);
    if (s != HB_OK) {
      hb_context_destroy(ctx);
      return report("hb_context_barrier", s);
    }
  }
  double elapsed = now_ms() - start;
  if (rank == 0) {
    printf(
        "cluster_demo: %d ranks passed %d barriers in %.3f ms (%.1f us each)\n",
        world, kBarriers, elapsed, elapsed * 1e3 / kBarriers);
    printf("cluster_demo: %s\n", hb_build_info());
  }
  hb_context_destroy(ctx);
  return 0;
}
