/* A worker that forms an hb context, for the launcher tests that need the
 * rendezvous hbrun serves. Usage: context_probe stop-rank R
 * Rank R stops itself (SIGSTOP) once the context is formed, so only its
 * missing heartbeats can tell the others; they wait in a barrier, which must
 * fail with HB_ERR_PEER_FAILED, and exit 1. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb.h"

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 3 || strcmp(argv[1], "stop-rank") != 0) {
    fprintf(stderr, "usage: context_probe stop-rank R\n");
    return 2;
  }
  hb_context *ctx = NULL;
  hb_status s = hb_context_create(NULL, &ctx);
  if (s != HB_OK) {
    fprintf(stderr, "hb_context_create: %s: %s\n", hb_status_name(s),
            hb_last_error());
    return 2;
  }
  int rank = hb_context_rank(ctx);
  printf("formed\n");
  if (rank == atoi(argv[2])) raise(SIGSTOP);
  s = hb_context_barrier(ctx, 60000);
  printf("barrier: %s\n", hb_status_name(s));
  hb_context_destroy(ctx);
  return s == HB_OK ? 0 : 1;
}
