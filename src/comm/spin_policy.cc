#include "comm/spin_policy.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace hb::comm {

bool read_proc_file(const char *path, char *buf, size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

int read_host_runnable() {
  // "0.52 0.58 0.59 3/467 12345": the 4th field is running/total tasks.
  // One open+read+close per sample (every kSampleEvery at most).
  char buf[128];
  if (!read_proc_file("/proc/loadavg", buf, sizeof buf)) return -1;
  const char *p = buf;
  for (int field = 0; field < 3 && p; ++field) {
    while (*p && *p != ' ') ++p;
    while (*p == ' ') ++p;
  }
  char *end = nullptr;
  const long running = strtol(p, &end, 10);
  return end != p && *end == '/' && running >= 0 ? int(running) : -1;
}

namespace {
thread_local bool t_progress_thread = false;
}  // namespace

void mark_progress_thread() { t_progress_thread = true; }

namespace {

// struct sched_attr of sched_setattr(2) / sched_getattr(2) (no glibc
// wrapper); the size names the version (48: SCHED_ATTR_SIZE_VER0).
struct SchedAttr {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime, deadline, period;
};

bool get_attr(SchedAttr *a, long tid = 0) {
  std::memset(a, 0, sizeof *a);
  if (syscall(SYS_sched_getattr, tid, a, sizeof *a, 0) != 0) return false;
  return a->policy == SCHED_OTHER || a->policy == SCHED_BATCH;
}

}  // namespace

int64_t thread_slice_us(long tid) {
  SchedAttr a;
  return get_attr(&a, tid) ? int64_t(a.runtime / 1000) : -1;
}

bool set_thread_slice_us(int64_t us) {
  SchedAttr a;
  if (us < 0 || !get_attr(&a)) return false;
  a.size = sizeof a;
  a.flags = 0;
  a.runtime = uint64_t(us) * 1000;  // policy and nice as read
  return syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

SleepSlice::SleepSlice(int64_t us) {
  if (us <= 0) return;
  const int64_t own = thread_slice_us();
  // Already that short (a progress thread keeps it for life): nothing to do.
  if (own > us && set_thread_slice_us(us)) restore_us_ = own;
}

SleepSlice::~SleepSlice() {
  if (restore_us_ >= 0) set_thread_slice_us(restore_us_);
}

bool own_cpus_shared(const cpu_set_t &own, const cpu_set_t *peers,
                     size_t npeers) {
  int ranks = 1;  // this one
  for (size_t i = 0; i < npeers; ++i) {
    cpu_set_t both;
    CPU_AND(&both, &own, &peers[i]);
    if (CPU_COUNT(&both)) ++ranks;
  }
  return ranks > CPU_COUNT(&own);
}

SpinPolicy::SpinPolicy(int ranks, int cpus, int64_t fixed_us,
                       std::function<int()> runnable, bool shared)
    : ranks_(ranks),
      cpus_(cpus),
      short_only_(fixed_us == kSpinAutoShort),
      shared_(shared),
      runnable_(std::move(runnable)) {
  if (fixed_us >= 0) fixed_ = std::chrono::microseconds(fixed_us);
}

std::chrono::nanoseconds SpinPolicy::budget(Clock::time_point now) {
  if (fixed_.count() >= 0) return fixed_;
  if (shared_) return std::chrono::nanoseconds(0);  // sleep at once
  if (ranks_ > cpus_ || t_progress_thread || short_only_)
    return kShort;  // the ranks alone fill the CPUs
  constexpr auto r = std::memory_order_relaxed;
  const int64_t t = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        now.time_since_epoch())
                        .count();
  if (t >= next_sample_ns_.load(r)) {
    next_sample_ns_.store(t + std::chrono::nanoseconds(kSampleEvery).count(),
                          r);
    // The sample counts the job's running ranks (the sampler among them):
    // the host fits when all runnable tasks do, and a sleeping peer's
    // absence is covered by asking for several fitting samples in a row.
    // Unreadable (no /proc): the CPU rule alone, as before.
    const int n = runnable_();
    if (n < 0 || n <= cpus_) {
      if (fits_.fetch_add(1, r) + 1 >= kFitsToGoLong) long_.store(true, r);
    } else {
      fits_.store(0, r);
      long_.store(false, r);
    }
  }
  return long_.load(r) ? std::chrono::nanoseconds(kLong) : kShort;
}

}  // namespace hb::comm
