/* A worker that forms an hb context, for the launcher tests that need the
 * rendezvous hbrun serves. Usage:
 *   context_probe stop-rank R
 *     Rank R stops itself (SIGSTOP) once the context is formed, so only its
 *     missing heartbeats can tell the others; they wait in a barrier, which
 *     must fail with HB_ERR_PEER_FAILED, and exit 1.
 *   context_probe fail-rank R abort|exit [N]
 *     Rank R aborts (SIGABRT) or exits 3 once the context is formed, without
 *     leaving it (with N: only while HB_RESTART_COUNT < N); the others exit
 *     4 the moment their barrier fails, as a program that stops on
 *     HB_ERR_PEER_FAILED does: they often exit before hbrun has reaped rank
 *     R. A barrier that passes prints "barrier: HB_OK restart=<count>". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hb.h"

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int stop = argc == 3 && strcmp(argv[1], "stop-rank") == 0;
  int fail = (argc == 4 || argc == 5) && strcmp(argv[1], "fail-rank") == 0 &&
             (strcmp(argv[3], "abort") == 0 || strcmp(argv[3], "exit") == 0);
  if (!stop && !fail) {
    fprintf(stderr,
            "usage: context_probe stop-rank R | fail-rank R abort|exit [N]\n");
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
  if (stop) printf("formed\n");
  const char *restart = getenv("HB_RESTART_COUNT");
  if (fail && argc == 5 && atoi(restart ? restart : "0") >= atoi(argv[4]))
    fail = 0; /* this start succeeds */
  if (rank == atoi(argv[2])) {
    if (stop) raise(SIGSTOP);
    if (fail && argv[3][0] == 'a') abort();
    if (fail) _exit(3);
  }
  s = hb_context_barrier(ctx, 60000);
  if (fail && s != HB_OK) _exit(4);
  if (argc == 5)
    printf("barrier: %s restart=%s\n", hb_status_name(s),
           restart ? restart : "unset");
  else if (!fail)
    printf("barrier: %s\n", hb_status_name(s));
  hb_context_destroy(ctx);
  return s == HB_OK ? 0 : 1;
}
