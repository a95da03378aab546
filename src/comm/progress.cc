#include "comm/progress.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "abi/error.h"
#include "comm/backend.h"
#include "comm/communicator.h"
#include "comm/spin_policy.h"
#include "context/context.h"
#include "rendezvous/client.h"
#include "timeline/timeline.h"

namespace hb {
namespace comm {

namespace {

// The CPU time of every progress thread of this process so far.
std::atomic<int64_t> g_progress_cpu_ns{0};

int64_t thread_cpu_ns() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The calling thread's run delay (ns runnable but not running), the 2nd
// field of /proc/thread-self/schedstat; -1 if unreadable.
int64_t read_run_delay_ns() {
  char buf[96];
  if (!read_proc_file("/proc/thread-self/schedstat", buf, sizeof buf))
    return -1;
  char *end = nullptr;
  std::strtoll(buf, &end, 10);  // time on the CPU
  const char *p = end;
  const long long delay = std::strtoll(p, &end, 10);
  return end != p ? delay : -1;
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Each caller's own rule: its run delay is its own.
bool run_here_now() {
  thread_local InlineRule rule(read_run_delay_ns, [] {
    return g_progress_cpu_ns.load(std::memory_order_relaxed);
  });
  return rule.run_here(steady_ns());
}

}  // namespace

InlineRule::InlineRule(Reader run_delay, Reader progress_cpu)
    : run_delay_(std::move(run_delay)),
      progress_cpu_(std::move(progress_cpu)) {}

bool InlineRule::run_here(int64_t now_ns) {
  if (last_ns_ >= 0 && now_ns - last_ns_ < kWindowNs) return !threaded_;
  const int64_t delay = run_delay_(), cpu = progress_cpu_();
  if (delay < 0) return true;  // no schedstat: the CPU rule alone
  if (last_ns_ >= 0) {
    // Delay the process's own progress threads did not cause.
    const int64_t other =
        std::max<int64_t>(0, (delay - last_delay_) - (cpu - last_cpu_));
    if (other * 1000 > (now_ns - last_ns_) * kLoadedPermille) {
      threaded_ = true;
      quiet_ = 0;
    } else if (threaded_ && ++quiet_ >= kQuietWindows) {
      threaded_ = false;
    }
  }
  last_ns_ = now_ns, last_delay_ = delay, last_cpu_ = cpu;
  return !threaded_;
}

bool async_exchange_vote(int own_cpus, int online_cpus, int local_ranks) {
  const int share = online_cpus / (local_ranks > 0 ? local_ranks : 1);
  return std::min(own_cpus, share) >= 2;
}

class Progress {
 public:
  // auto_inline: cpu_async_exchange=-1 on a rank without a CPU to spare
  // (InlineRule decides per job).
  // slice_us > 0: option cpu_wait_slice_us (SleepSlice).
  Progress(std::shared_ptr<Backend> backend, int64_t timeout_ms,
           bool auto_inline, int64_t slice_us)
      : backend_(std::move(backend)),
        auto_inline_(auto_inline),
        // A job's rounds end within the backend's timeout (a lost peer
        // sooner); the margin covers the job's local work around them.
        settle_ms_(timeout_ms + 10000),
        slice_us_(slice_us),
        thread_([this] { loop(); }) {}
  ~Progress() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();  // after the jobs posted so far (each bounded)
  }
  Backend &backend() { return *backend_; }
  int64_t settle_ms() const { return settle_ms_; }
  int64_t slice_us() const { return slice_us_; }
  std::thread::id thread_id() const { return thread_.get_id(); }

  void post(std::function<void()> job) {
    if (auto_inline_ && run_here_now()) {
      settle();  // after the jobs posted before it
      try {
        job();  // as on the thread: the job keeps its own outcome
      } catch (...) {
      }
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

  void settle() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!running_ && jobs_.empty()) return;
    lock.unlock();
    SleepSlice slice(slice_us_);  // the job's end wakes this thread
    lock.lock();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(settle_ms_);
    if (!idle_.wait_until(lock, deadline,
                          [this] { return !running_ && jobs_.empty(); }))
      fail(HB_ERR_TIMEOUT,
           "an asynchronous exchange (hb_collection_lookup_start or "
           "hb_allreduce_start) did not finish within %lld ms",
           (long long)settle_ms_);
  }

 private:
  void loop() {
    mark_progress_thread();  // its waits spin briefly (comm/spin_policy.h)
    // Every post wakes this thread: it keeps the short slice for life (its
    // work is rounds, not compute), so its sleeps need no SleepSlice.
    if (slice_us_ > 0) set_thread_slice_us(slice_us_);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      // Asleep on the condition variable while nothing is posted.
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop_, and every job has run
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = true;
      lock.unlock();
      const int64_t cpu0 = thread_cpu_ns();
      try {
        job();  // jobs report their own failures; nothing may escape here
      } catch (...) {
      }
      g_progress_cpu_ns.fetch_add(thread_cpu_ns() - cpu0,
                                  std::memory_order_relaxed);
      job = nullptr;  // its captures go before the caller is told
      lock.lock();
      running_ = false;
      if (jobs_.empty()) idle_.notify_all();
    }
  }

  std::shared_ptr<Backend> backend_;
  const bool auto_inline_;
  const int64_t settle_ms_;
  const int64_t slice_us_;
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> jobs_;
  bool running_ = false, stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

namespace {

// Holds the channel weakly: the context owns it, and destroying the
// context joins the thread (after the job in flight), so a collection that
// outlives its context finds nothing in flight.
class ProgressExchange : public Exchange {
 public:
  ProgressExchange(hb_context &ctx, const std::shared_ptr<Progress> &p)
      : ctx_(ctx),
        p_(p),
        raw_(p.get()),
        thread_(p->thread_id()),
        rank_(ctx.cluster.rank),
        world_(ctx.cluster.world_size) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }

  void alltoall(const int64_t *send, int64_t *recv, size_t k) override {
    std::vector<int64_t> bytes(world(), static_cast<int64_t>(k * 8));
    alltoallv(send, bytes.data(), recv, bytes.data());
  }
  void alltoallv(const void *send, const int64_t *send_bytes, void *recv,
                 const int64_t *recv_bytes) override {
    std::shared_ptr<Progress> held;
    Progress *p = settled(held);
    timeline::Span span("alltoallv", "comm");
    std::vector<int64_t> so(world()), ro(world());
    for (int r = 1; r < world(); ++r) {
      so[r] = so[r - 1] + send_bytes[r - 1];
      ro[r] = ro[r - 1] + recv_bytes[r - 1];
    }
    p->backend().alltoallv(send, send_bytes, so.data(), recv, recv_bytes,
                           ro.data(), HB_UINT8);
  }
  bool sized_in_one_round() const override {
    if (std::this_thread::get_id() == thread_)
      return raw_->backend().sized_in_one_round();
    std::shared_ptr<Progress> p = p_.lock();
    return p && p->backend().sized_in_one_round();
  }
  void alltoallv_sized(const void *send, const int64_t *send_bytes,
                       const Deliver &deliver) override {
    std::shared_ptr<Progress> held;
    Progress *p = settled(held);
    timeline::Span span("alltoallv", "comm");
    p->backend().alltoallv_sized(send, send_bytes, deliver);
  }
  void alltoallv_fill(const int64_t *send_bytes, const int64_t *recv_bytes,
                      const Fill &fill, const Deliver &deliver) override {
    std::shared_ptr<Progress> held;
    Progress *p = settled(held);
    timeline::Span span("alltoallv", "comm");
    p->backend().alltoallv_fill(send_bytes, recv_bytes, fill, deliver);
  }
  void post(std::function<void()> job) override {
    if (std::shared_ptr<Progress> p = p_.lock())
      p->post(std::move(job));
    else
      job();  // fails in its first round: the context is gone
  }
  void settle() override {
    if (std::shared_ptr<Progress> p = p_.lock()) p->settle();
  }
  bool async() const override { return true; }

 private:
  // The channel for a round: on the progress thread it is alive (its owner
  // joins the thread before it goes); elsewhere held keeps it, after the
  // rounds posted before.
  Progress *settled(std::shared_ptr<Progress> &held) {
    Progress *p = raw_;
    if (std::this_thread::get_id() != thread_) {
      held = p_.lock();
      if (!held)
        fail(HB_ERR_INVALID_ARGUMENT,
             "the collection's context was destroyed before it");
      held->settle();
    }
    ctx_.check();
    return p;
  }

  hb_context &ctx_;
  std::weak_ptr<Progress> p_;
  Progress *raw_;  // for the thread's own rounds
  std::thread::id thread_;
  int rank_, world_;
};

}  // namespace

namespace {

// One of ctx's channels, created by the first call on every rank
// (collective): slot is c.cpu_progress or c.cpu_async_allreduce, each with
// its own rendezvous prefix.
const std::shared_ptr<Progress> &channel(hb_context &c,
                                         std::shared_ptr<Progress> &slot,
                                         const char *prefix) {
  if (!slot) {
    cpu_backend(c);  // the context's own first (the same order on every rank)
    BackendConfig cfg = cpu_backend_config(c);
    cfg.key_prefix = prefix;
    cpu_set_t set;
    CPU_ZERO(&set);
    const int online = int(sysconf(_SC_NPROCESSORS_ONLN));
    const int own =
        sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : online;
    const bool auto_inline =
        c.options.get_int("cpu_async_exchange") < 0 &&
        !async_exchange_vote(own, online, c.cluster.local_world_size);
    // The thread's waits overlap its own process's compute: a long spin
    // there takes the core the caller's MLP runs on (2 ranks on 2 cores
    // halved the overlapped step, docs/performance.md). So they spin
    // briefly (or not at all where the rank's CPU is shared with another
    // rank: SpinPolicy), then sleep on the futex, unless the option says
    // otherwise (mark_progress_thread); where jobs may run inline, the
    // caller's waits on the channel keep the context's rule, as its own
    // waits do.
    if (cfg.wait_spin_us < 0 && !auto_inline) cfg.wait_spin_us = kSpinAutoShort;
    slot = std::make_shared<Progress>(
        make_backend(cfg, c.client.get(), c.health), cfg.timeout_ms,
        auto_inline, cfg.wait_slice_us);
  }
  return slot;
}

}  // namespace

std::unique_ptr<Exchange> make_progress_exchange(hb_context *ctx) {
  hb_context &c = ctx_ref(ctx);
  c.check();
  return std::unique_ptr<Exchange>(new ProgressExchange(
      c, channel(c, c.cpu_progress, "hb/comm/cpu-progress/")));
}

void AsyncCall::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

bool AsyncCall::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_) return wait_locked(lock);
  lock.unlock();  // no syscalls under the lock the job finishes with
  SleepSlice slice(slice_us_);  // the job's end wakes this thread
  lock.lock();
  return wait_locked(lock);
}

bool AsyncCall::wait_locked(std::unique_lock<std::mutex> &lock) {
  if (!cv_.wait_for(lock, std::chrono::milliseconds(wait_ms_),
                    [this] { return done_; }))
    return false;
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::shared_ptr<AsyncCall> allreduce_async(hb_context &c, const void *send,
                                           void *recv, size_t count,
                                           hb_dtype dtype, hb_reduce_op op) {
  c.check();
  if (c.cluster.world_size == 1 ||
      c.options.get_int("cpu_async_exchange") == 0) {
    auto call = std::make_shared<AsyncCall>(0, 0);
    try {
      allreduce(c, Memory::kHost, send, recv, count, dtype, op);
      call->finish(nullptr);
    } catch (...) {
      call->finish(std::current_exception());
    }
    return call;
  }
  const std::shared_ptr<Progress> &p =
      channel(c, c.cpu_async_allreduce, "hb/comm/cpu-async-allreduce/");
  auto call = std::make_shared<AsyncCall>(p->settle_ms(), p->slice_us());
  Progress *raw = p.get();  // alive while its thread runs the job
  p->post([raw, call, send, recv, count, dtype, op] {
    try {
      timeline::Span span("allreduce_async", "comm",
                          static_cast<int64_t>(count * hb_dtype_size(dtype)));
      raw->backend().allreduce(send, recv, count, dtype, op);
      call->finish(nullptr);
    } catch (...) {
      call->finish(std::current_exception());
    }
  });
  return call;
}

}  // namespace comm
}  // namespace hb
