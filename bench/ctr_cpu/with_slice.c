/*
 * hb_with_slice: runs a command with a custom scheduler slice (Linux >=
 * 6.12: sched_attr.sched_runtime for SCHED_OTHER; threads inherit it), to
 * try a short slice on the CTR demo's ranks without changing the library
 * (docs/performance.md, "What a nice-19 busy loop costs"):
 *
 *   hbrun -n 2 -- hb_with_slice 100 ctr_train ...
 *
 * A woken thread whose slice is shorter than the running task's preempts it
 * at once (EEVDF's PREEMPT_SHORT) instead of waiting for that task's
 * protected slice. SLICE_US 0 restores the kernel's default slice.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "slice_attr.h"

int main(int argc, char **argv) {
  if (argc < 3 || atoi(argv[1]) < 0) {
    fprintf(stderr, "usage: %s SLICE_US COMMAND [ARGS...]\n", argv[0]);
    return 2;
  }
  if (set_slice_us((uint64_t)atoi(argv[1])) != 0) {
    perror("hb_with_slice: sched_setattr (a custom slice needs Linux >= 6.12)");
    return 2;
  }
  execvp(argv[2], argv + 2);
  perror("hb_with_slice: exec");
  return 127;
}
