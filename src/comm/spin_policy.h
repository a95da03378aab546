// How long a shared-memory wait spins before it sleeps on its futex (the
// spin budget), chosen from the host's load. A spinning rank keeps its
// core: worth it (the wake-up stays off the step) only while every rank of
// the job has a CPU that nothing else wants. Where other tasks are
// runnable, a long spin takes their CPU share from the peer the waiter is
// waiting for (measured: 1.7-1.9x slower at 2 ranks beside busy
// processes, docs/performance.md), so the wait spins briefly and sleeps.
#pragma once

#include <sched.h>

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

// Whether a rank's CPUs are shared with other ranks of the job on its host:
// the ranks that may run on any of them (own included: own mask, then each
// shared-memory peer's) outnumber them. True for a rank that hbrun
// --bind-to auto binds round-robin beside another (4 ranks on 2 CPUs),
// and for unbound ranks that outnumber the CPUs; false for one rank per
// CPU, bound or not.
bool own_cpus_shared(const cpu_set_t &own, const cpu_set_t *peers,
                     size_t npeers);

// spin_us of SpinPolicy (and of BackendConfig::wait_spin_us, never from the
// option, whose range starts at -1): auto, but never the long spin. The
// progress threads' channels (comm/progress.cc): their waits overlap their
// own process's compute, where a long spin takes the caller's core.
constexpr int64_t kSpinAutoShort = -2;

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
  // budget (option cpu_wait_spin_us), -1: auto, kSpinAutoShort: auto, short
  // at most. runnable: the load reader (tests inject a fake one).
  // shared (own_cpus_shared): auto never spins, as a spinning waiter burns
  // the CPU that the co-located rank it may be waiting for needs, and a
  // sleep hands that CPU over at once (4 ranks on 2 CPUs,
  // docs/performance.md "Oversubscribed hosts: no spin").
  SpinPolicy(int ranks, int cpus, int64_t fixed_us,
             std::function<int()> runnable = read_host_runnable,
             bool shared = false);

  // The budget for a wait that starts at `now`.
  std::chrono::nanoseconds budget(Clock::time_point now = Clock::now());

 private:
  int ranks_, cpus_;
  bool short_only_, shared_;
  std::chrono::nanoseconds fixed_{-1};
  std::function<int()> runnable_;
  // Relaxed atomics: two threads waiting on one transport (a P2P wait
  // beside a board wait) may sample together; either answer is fine.
  std::atomic<int64_t> next_sample_ns_{INT64_MIN};
  std::atomic<int> fits_{0};
  std::atomic<bool> long_{false};
};

}  // namespace hb::comm
