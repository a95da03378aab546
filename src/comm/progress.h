// A context's asynchronous CPU exchanges (docs/embedding-collections.md,
// "Pipelined lookup"; hb_allreduce_start, docs/collectives.md): each one a
// channel, i.e. a communicator of its own -- another CPU Backend,
// bootstrapped under its own rendezvous prefix, so its rounds never share
// a call board, ring or TCP pair with the context's collectives -- and one
// progress thread that runs the posted jobs in order. Collections share
// one channel; started allreduces have another.
//
// Why a second communicator and not non-blocking calls on the context's:
// every CPU transport (shared-memory call board, routed and region p2p,
// Gloo pairs) is built around one call at a time per communicator, with
// per-call sequence numbers and fingerprints. Two independent channels keep
// them untouched: the caller's collectives (the dense allreduce) run on the
// context's communicator while a job's rounds run on this one.
//
// The thread sleeps on a condition variable while nothing is posted (it
// never spins: on a host with fewer cores than ranks a spinning helper
// would take the core the caller computes on). A job's own waits are the
// backend's (bounded by timeout_ms; a lost peer fails the context's
// Health, which breaks them): on the thread they spin briefly, then sleep
// on the futex; a job the caller runs inline (auto, InlineRule) keeps the
// context's spin rule.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "common/agreement.h"
#include "hb.h"

namespace hb {
namespace comm {

class Progress;

// The exchange of ctx's progress channel: alltoall / alltoallv run on the
// channel's communicator; post() runs a job on the progress thread;
// settle() waits (bounded) for every posted job. A call made off the
// progress thread settles first, so rounds never interleave. Collective:
// the channel is created by the first call on every rank (world > 1).
std::unique_ptr<Exchange> make_progress_exchange(hb_context *ctx);

// cpu_async_exchange=-1 (auto), on a rank without a CPU to spare for its
// progress threads (async_exchange_vote): whether the thread that posts a
// job runs it itself, now (inline), instead of handing it to the progress
// thread. The job's rounds go over the channel's communicator either way,
// so each rank decides alone, call by call, and the bits are the same.
//
// Inline by default: a progress thread that shares its rank's only CPU
// preempts the caller for every round it runs, and every hand-over is a
// wake-up and a context switch (2 ranks on 2 quiet cores: 1.39x one rank
// with the threads, 1.55x inline; docs/performance.md). On the thread
// while other tasks keep the caller off its CPU: then a lock-step round on
// the caller waits for whichever rank was descheduled, where the thread
// lets the caller compute meanwhile (load average 12 from other builds:
// 2.13x one rank on the threads, 0.47x inline). The signal is the caller's
// run delay (/proc/thread-self/schedstat: time runnable but not running)
// over windows of kWindowNs, less the CPU time the process's progress
// threads took (they preempt the caller on its CPU, and are no other
// task): above kLoadedPermille of the window, threads, at once; back
// inline after kQuietWindows quiet windows in a row. A nice-19 co-tenant
// should barely count: a woken rank preempts it.
class InlineRule {
 public:
  using Reader = std::function<int64_t()>;  // ns; < 0: unreadable
  static constexpr int64_t kWindowNs = 50000000;
  static constexpr int64_t kLoadedPermille = 50;
  static constexpr int kQuietWindows = 20;
  // run_delay: the caller's run delay so far; progress_cpu: the CPU time
  // of the process's progress threads so far (tests inject fakes).
  InlineRule(Reader run_delay, Reader progress_cpu);
  // The caller's thread now (ns, steady clock): true = run the job here.
  bool run_here(int64_t now_ns);

 private:
  Reader run_delay_, progress_cpu_;
  int64_t last_ns_ = -1, last_delay_ = 0, last_cpu_ = 0;
  bool threaded_ = false;
  int quiet_ = 0;
};

// One rank's vote for its progress threads under auto: its CPUs are the
// fewer of those it may run on (own_cpus, sched_getaffinity: hbrun binds
// each rank to a slice) and its share of the host's (online_cpus /
// local_ranks, for ranks left unbound); a thread of its own pays where
// that is at least 2 (then every job runs on the thread).
bool async_exchange_vote(int own_cpus, int online_cpus, int local_ranks);

// The outcome of one call posted to the progress channel (hb_allreduce_start):
// the job finishes it, any thread waits for it. It holds no reference to the
// context, so it can be waited for after the context is destroyed (whose
// destructor joins the thread once the job has ended).
class AsyncCall {
 public:
  // slice_us > 0: option cpu_wait_slice_us (comm/spin_policy.h, SleepSlice).
  AsyncCall(int64_t wait_ms, int64_t slice_us)
      : wait_ms_(wait_ms), slice_us_(slice_us) {}
  void finish(std::exception_ptr error);
  // Bounded by the channel's timeout plus a margin (the job's rounds end
  // within the timeout, a lost peer sooner): false while the job is still
  // in flight then; else rethrows the job's failure, or true.
  bool wait();

 private:
  bool wait_locked(std::unique_lock<std::mutex> &lock);
  const int64_t wait_ms_, slice_us_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// hb_allreduce_start on host buffers: the rank-order allreduce of the
// context's backend (comm/rank_order.h), the same bits as comm::allreduce,
// run after every allreduce started before it, on a channel of its own
// (not the collections': their rounds, e.g. the sparse update's, would
// otherwise queue behind the allreduce instead of running beside it). In a
// world of one, or with cpu_async_exchange=0, it runs here, on the context's
// communicator, and the call is born finished; run inline (InlineRule), on
// the channel's communicator, likewise. Either way its failure, if any, is
// the call's, so hb_allreduce_wait reports it in every mode.
std::shared_ptr<AsyncCall> allreduce_async(hb_context &ctx, const void *send,
                                           void *recv, size_t count,
                                           hb_dtype dtype, hb_reduce_op op);

}  // namespace comm
}  // namespace hb
