/*
 * Asks for a custom scheduler slice for the calling thread (Linux >= 6.12:
 * sched_attr.sched_runtime of a SCHED_OTHER thread, 100 us..100 ms; 0: the
 * kernel's default), keeping its nice value; sched_setattr(2) has no glibc
 * wrapper. 0 on success, else -1 with errno set.
 */
#ifndef HB_BENCH_SLICE_ATTR_H
#define HB_BENCH_SLICE_ATTR_H

#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int set_slice_us(uint64_t us) {
  struct {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
  } a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.policy = SCHED_OTHER;
  a.nice = getpriority(PRIO_PROCESS, 0);
  a.runtime = us * 1000;
  return syscall(SYS_sched_setattr, 0, &a, 0) == 0 ? 0 : -1;
}

#endif
