// How long a shared-memory wait spins before it sleeps on its futex (the
// spin budget), chosen from the host's load. A spinning rank keeps its
// core: worth it (the wake-up stays off the step) only while every rank of
// the job has a CPU that nothing else wants. Where other tasks are
// runnable, a long spin takes their CPU share from the peer the waiter is
// waiting for (measured: 1.7-1.9x slower at 2 ranks beside busy
// processes, docs/performance.md), so the wait spins briefly and sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace hb::comm {

// Reads a small file of /proc whole into buf (NUL-terminated): one
// open+read+close; false if it cannot.
bool read_proc_file(const char *path, char *buf, size_t size);

// The host's runnable tasks right now (nr_running, counting the caller and
// the job's own running ranks), from /proc/loadavg; -1 if unreadable.
int read_host_runnable();

// Marks the calling thread as a progress thread (comm/progress.h): unless
// the budget is fixed (cpu_wait_spin_us), its waits spin kShort at most,
// since they overlap its own process's compute, and a long spin there takes
// the CPU the caller computes on (2 ranks on 2 cores halved the overlapped
// step, docs/performance.md). The caller's own waits keep the rule.
void mark_progress_thread();

// The scheduler slice of thread tid of this process (0: the calling one;
// Linux >= 6.12: a custom slice, sched_attr.sched_runtime, for SCHED_OTHER
// and SCHED_BATCH), in us: the current slice as the kernel reports it, or
// -1 where it cannot (an older kernel, a real-time policy).
int64_t thread_slice_us(long tid = 0);
// Asks for a slice of us (the kernel clamps it to 100 us..100 ms; 0: its
// default) for the calling thread, keeping its policy and nice value;
// false where the kernel cannot (nothing changed then).
bool set_thread_slice_us(int64_t us);

// Option cpu_wait_slice_us > 0: while a wait sleeps (a futex, a condition
// variable), its thread asks for that slice, and gets its own back when
// it wakes (a thread on the kernel's default gets a custom slice of the
// same length: sched_getattr cannot tell them apart). Why: a task woken on a
// CPU where another task runs preempts it at once only if its slice is shorter
// (EEVDF's PREEMPT_SHORT); else it may wait for the running task's protected
// slice. A nice-19 busy loop's slice protects it as long as a nice-0 task's
// (1.4 ms here), and at 2 ranks on 2 CPUs such a loop shares a rank's CPU:
// every wake-up of that rank then risks a slice behind it (docs/performance.md,
// "What a nice-19 busy loop costs"). 0 (default): no change. Costs a
// sched_getattr and a sched_setattr on each side of a sleep (a few us; the
// wake-up it shortens takes tens of us to milliseconds).
class SleepSlice {
 public:
  explicit SleepSlice(int64_t us);
  ~SleepSlice();
  SleepSlice(const SleepSlice &) = delete;
  SleepSlice &operator=(const SleepSlice &) = delete;

 private:
  int64_t restore_us_ = -1;  // the thread's own slice; -1: nothing to undo
};

class SpinPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kLong{2000}, kShort{5};
  // A sample is reused this long: a wait costs a clock read, not a syscall.
  static constexpr std::chrono::milliseconds kSampleEvery{20};
  // Long spins come back only after this many fitting samples in a row
  // (500 ms; one busy sample turns them off): a sample taken while a peer
  // sleeps undercounts the job's own runnable ranks by one, and a shared
  // host's load comes in bursts (3 samples: 0.95x of 25 at 2 ranks, quiet;
  // docs/performance.md).
  static constexpr int kFitsToGoLong = 25;

  // ranks: this host's ranks of the job; cpus: the CPUs they may run on
  // (the union of their affinity masks); fixed_us >= 0: always that
  // budget (option cpu_wait_spin_us), -1: auto. runnable: the load reader
  // (tests inject a fake one).
  SpinPolicy(int ranks, int cpus, int64_t fixed_us,
             std::function<int()> runnable = read_host_runnable);

  // The budget for a wait that starts at `now`.
  std::chrono::nanoseconds budget(Clock::time_point now = Clock::now());

 private:
  int ranks_, cpus_;
  std::chrono::nanoseconds fixed_{-1};
  std::function<int()> runnable_;
  // Relaxed atomics: two threads waiting on one transport (a P2P wait
  // beside a board wait) may sample together; either answer is fine.
  std::atomic<int64_t> next_sample_ns_{INT64_MIN};
  std::atomic<int> fits_{0};
  std::atomic<bool> long_{false};
};

}  // namespace hb::comm
