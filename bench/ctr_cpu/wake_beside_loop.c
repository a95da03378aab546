/*
 * wake_beside_loop: what a nice-19 busy loop on a sleeper's CPU costs each
 * of its wake-ups (docs/performance.md, "What a nice-19 busy loop costs").
 * No hb code: the kernel's side of a rank's futex wait, alone.
 *
 *   hb_wake_beside_loop [ROUNDS] [SLICE_US]
 *
 * A sleeper thread pinned on CPU 1 waits on a futex; the main thread, on
 * CPU 0, wakes it every 2 ms; the latency is the time from the wake call to
 * the sleeper running (one CLOCK_MONOTONIC). Then the sleeper does 20 us of
 * work, as a rank does after its wait. Three arms, interleaved, REPEATS
 * (5) times: no loop; a `nice 19` busy loop pinned on CPU 1 (a child
 * process: the same autogroup, as ctr_compare.sh's LOAD=1); the loop and a
 * sleeper that asked for a SLICE_US (100) slice (sched_setattr's
 * sched_runtime for SCHED_OTHER, Linux >= 6.12: a woken task with a
 * shorter slice than the running one preempts it at once). One line per
 * arm: median of the repeats' medians and p90s, in microseconds:
 *
 *   RESULT arm=loop slice_us=0 median_us=.. p90_us=.. loop_cpu=..%
 *
 * Needs 2 CPUs. On a host where other tasks run, their slices dominate
 * every arm; read it on a quiet host.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slice_attr.h"

enum { kRepeats = 5, kMaxRounds = 100000 };

static _Atomic int g_word;
static _Atomic int64_t g_woken_at;
static int64_t g_lat[kMaxRounds];
static int g_rounds, g_slice_us;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) {
    perror("sched_setaffinity (needs CPUs 0 and 1)");
    exit(2);
  }
}

static void *sleeper(void *arg) {
  (void)arg;
  pin(1);
  if (g_slice_us > 0) {
    if (set_slice_us((uint64_t)g_slice_us) != 0) {
      perror("sched_setattr (a custom slice needs Linux >= 6.12)");
      exit(2);
    }
  }
  for (int i = 0; i < g_rounds; ++i) {
    while (atomic_load(&g_word) == 0)
      syscall(SYS_futex, &g_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    g_lat[i] = now_ns() - atomic_load(&g_woken_at);
    atomic_store(&g_word, 0);
    const int64_t until = now_ns() + 20000;
    while (now_ns() < until) {
    }
  }
  return NULL;
}

static int by_value(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int64_t cpu_ns_of(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
  FILE *f = fopen(path, "r");
  long long ns = 0;
  if (f) {
    if (fscanf(f, "%lld", &ns) != 1) ns = 0;
    fclose(f);
  }
  return ns;
}

/* One run of an arm: the median and p90 latency (ns), the loop's CPU. */
static void run_arm(int loop, int slice_us, int64_t *median, int64_t *p90,
                    double *loop_cpu) {
  pid_t child = 0;
  if (loop) {
    child = fork();
    if (child == 0) {
      pin(1);
      setpriority(PRIO_PROCESS, 0, 19);
      for (;;) {
      }
    }
    usleep(100000);
  }
  const int64_t t0 = now_ns();
  g_slice_us = slice_us;
  pthread_t th;
  pthread_create(&th, NULL, sleeper, NULL);
  for (int i = 0; i < g_rounds; ++i) {
    const struct timespec gap = {0, 2000000};
    nanosleep(&gap, NULL);
    while (atomic_load(&g_word) != 0) {
    }
    atomic_store(&g_woken_at, now_ns());
    atomic_store(&g_word, 1);
    syscall(SYS_futex, &g_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  }
  pthread_join(th, NULL);
  *loop_cpu = 0;
  if (child) {
    *loop_cpu = 100.0 * (double)cpu_ns_of(child) / (double)(now_ns() - t0);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
  }
  qsort(g_lat, (size_t)g_rounds, sizeof g_lat[0], by_value);
  *median = g_lat[g_rounds / 2];
  *p90 = g_lat[g_rounds * 9 / 10];
}

static int64_t median_of(int64_t *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], by_value);
  return v[n / 2];
}

int main(int argc, char **argv) {
  g_rounds = argc > 1 ? atoi(argv[1]) : 500;
  const int slice = argc > 2 ? atoi(argv[2]) : 100;
  if (g_rounds < 10 || g_rounds > kMaxRounds || slice < 0) {
    fprintf(stderr, "usage: %s [ROUNDS 10..%d] [SLICE_US]\n", argv[0],
            kMaxRounds);
    return 2;
  }
  pin(0);
  static const struct {
    const char *name;
    int loop, slice_us;
  } arms[] = {{"quiet", 0, 0}, {"loop", 1, 0}, {"loop+slice", 1, -1}};
  enum { kArms = sizeof arms / sizeof arms[0] };
  int64_t med[kArms][kRepeats], p90[kArms][kRepeats];
  double cpu[kArms][kRepeats];
  for (int r = 0; r < kRepeats; ++r)
    for (int a = 0; a < kArms; ++a)
      run_arm(arms[a].loop, arms[a].slice_us < 0 ? slice : arms[a].slice_us,
              &med[a][r], &p90[a][r], &cpu[a][r]);
  for (int a = 0; a < kArms; ++a) {
    double c = 0;
    for (int r = 0; r < kRepeats; ++r) c += cpu[a][r] / kRepeats;
    printf(
        "RESULT arm=%s slice_us=%d median_us=%.1f p90_us=%.1f "
        "loop_cpu=%.1f%%\n",
        arms[a].name, arms[a].slice_us < 0 ? slice : arms[a].slice_us,
        (double)median_of(med[a], kRepeats) / 1e3,
        (double)median_of(p90[a], kRepeats) / 1e3, c);
  }
  return 0;
}
