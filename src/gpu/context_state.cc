#include "gpu/context_state.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "abi/error.h"
#include "common/log.h"
#include "gpu/plugin_call.h"
#include "rendezvous/kv.h"

namespace hb {
namespace gpu {
namespace {

bool is_integer(hb_dtype d) {
  return d == HB_INT32 || d == HB_INT64 || d == HB_UINT8;
}

int32_t plugin_kind(CollectiveCall::Kind k) {
  switch (k) {
    case CollectiveCall::kAllreduce:
      return HB_CUDA_ALLREDUCE;
    case CollectiveCall::kAllgather:
      return HB_CUDA_ALLGATHER;
    case CollectiveCall::kAllgatherv:
      return HB_CUDA_ALLGATHERV;
    case CollectiveCall::kAlltoall:
      return HB_CUDA_ALLTOALL;
    case CollectiveCall::kAlltoallv:
      return HB_CUDA_ALLTOALLV;
    case CollectiveCall::kBroadcast:
      return HB_CUDA_BROADCAST;
    case CollectiveCall::kReduceScatter:
      return HB_CUDA_REDUCE_SCATTER;
  }
  fail(HB_ERR_INVALID_ARGUMENT, "unknown GPU collective kind %d",
       static_cast<int>(k));
}

// How long the destructor lets ncclCommFinalize flush before aborting.
constexpr int64_t kFinalizeTimeoutMs = 10000;

}  // namespace

// The Health callback may run on another thread, even while the state is
// being destroyed: it reaches the state only through this guard.
struct HealthLink {
  std::mutex mu;
  ContextState *state = nullptr;
};

int pick_device(const std::string &device_hint, int local_rank,
                int device_count) {
  if (device_count <= 0)
    fail(HB_ERR_UNSUPPORTED, "no CUDA device is visible to this process");
  if (device_hint.rfind("cuda:", 0) == 0) {
    char *end = nullptr;
    long d = std::strtol(device_hint.c_str() + 5, &end, 10);
    if (!end || *end || d < 0 || d >= device_count)
      fail(HB_ERR_CONFIG,
           "context device '%s' is not one of the %d visible CUDA devices",
           device_hint.c_str(), device_count);
    return static_cast<int>(d);
  }
  return (local_rank < 0 ? 0 : local_rank) % device_count;
}

ContextState::ContextState(const hb_cuda_plugin &plugin, int device,
                           Health *health)
    : p_(plugin), device_(device), health_(health) {
  HB_GPU_REQUIRE_MEMBER(&p_, set_device);
  HB_GPU_REQUIRE_MEMBER(&p_, stream_create);
  HB_GPU_REQUIRE_MEMBER(&p_, stream_query);
  HB_GPU_REQUIRE_MEMBER(&p_, nccl_comm_init);
  HB_GPU_REQUIRE_MEMBER(&p_, nccl_collective);
  HB_GPU_REQUIRE_MEMBER(&p_, divide_async);
  auto link = std::make_shared<HealthLink>();
  link->state = this;
  link_ = link;
  health_sub_ = health_->subscribe([link](hb_status, const std::string &) {
    std::lock_guard<std::mutex> lock(link->mu);
    if (link->state) link->state->on_health_failure();
  });
}

ContextState::~ContextState() {
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    link_->state = nullptr;
  }
  health_->unsubscribe(health_sub_);
  std::lock_guard<std::mutex> lock(mu_);
  std::string msg;
  if (plugin_try(&msg, p_.set_device, device_) != HB_OK)
    HB_LOG_WARN("GPU context teardown: cudaSetDevice(%d): %s", device_,
                msg.c_str());
  if (comm_) {
    bool clean = health_->ok() &&
                 plugin_try(&msg, p_.nccl_comm_finalize, comm_) == HB_OK;
    Deadline deadline(kFinalizeTimeoutMs);
    int32_t in_progress = 1;
    while (clean && in_progress) {
      clean = plugin_try(&msg, p_.nccl_comm_poll, comm_, &in_progress) == HB_OK;
      if (clean && in_progress) {
        if (deadline.expired()) {
          msg = "ncclCommFinalize did not finish in time";
          clean = false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (clean) clean = plugin_try(&msg, p_.nccl_comm_destroy, comm_) == HB_OK;
    if (!clean) {
      if (!msg.empty())
        HB_LOG_WARN("GPU context teardown: %s; aborting the communicator",
                    msg.c_str());
      plugin_try(nullptr, p_.nccl_comm_abort, comm_);
    }
    comm_ = nullptr;
  }
  if (own_stream_ && plugin_try(&msg, p_.stream_destroy, own_stream_) != HB_OK)
    HB_LOG_WARN("GPU context teardown: %s", msg.c_str());
}

void ContextState::make_current() {
  plugin_call("cudaSetDevice", p_.set_device, device_);
}

void *ContextState::stream() {
  std::lock_guard<std::mutex> lock(mu_);
  return stream_locked();
}

void *ContextState::stream_locked() {
  if (stream_) return stream_;
  if (!own_stream_) {
    make_current();
    plugin_call("creating the context's CUDA stream", p_.stream_create,
                &own_stream_);
  }
  stream_ = own_stream_;
  return stream_;
}

void ContextState::set_stream(void *stream, int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ && pending_ops_ > 0)
    sync_locked("hb_context_set_cuda_stream", timeout_ms);
  stream_ = stream;  // nullptr: stream_locked() falls back to the own stream
}

bool ContextState::comm_aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !abort_reason_.empty();
}

void ContextState::on_health_failure() {
  // Break NCCL kernels that wait for a lost peer at once. If a call holds
  // the lock, its poll loop sees the failure itself within a millisecond.
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock() && comm_)
    abort_comm_locked("the context failed: " + health_->message());
}

void ContextState::abort_comm_locked(const std::string &why) {
  if (abort_reason_.empty()) abort_reason_ = why;
  if (!comm_) return;
  std::string msg;
  if (plugin_try(&msg, p_.nccl_comm_abort, comm_) != HB_OK)
    HB_LOG_WARN("ncclCommAbort (device %d): %s", device_, msg.c_str());
  comm_ = nullptr;
  pending_ops_ = 0;
}

void ContextState::fail_health_locked() {
  abort_comm_locked("the context failed: " + health_->message());
  health_->check();
  fail(HB_ERR_INTERNAL, "context health changed while checking it");
}

template <class Poll>
void ContextState::poll_until(const char *what, const Deadline &deadline,
                              int64_t timeout_ms, bool abort_on_timeout,
                              Poll poll) {
  int64_t sleep_us = 5;
  for (;;) {
    if (!health_->ok()) fail_health_locked();
    if (poll()) return;
    if (deadline.expired()) {
      std::string why =
          format("%s: not finished after %lld ms (device %d)", what,
                 static_cast<long long>(timeout_ms), device_);
      if (abort_on_timeout) abort_comm_locked(why);
      fail(HB_ERR_TIMEOUT, "%s", why.c_str());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min<int64_t>(sleep_us * 2, 1000);
  }
}

// Throws HB_ERR_DEVICE (after aborting the communicator) on an
// asynchronous NCCL error; returns true while NCCL is still busy setting up.
bool ContextState::comm_busy_locked(const char *what) {
  if (!comm_) return false;
  int32_t in_progress = 0;
  std::string msg;
  if (plugin_try(&msg, p_.nccl_comm_poll, comm_, &in_progress) != HB_OK) {
    std::string why = format("%s (device %d): %s", what, device_, msg.c_str());
    abort_comm_locked(why);
    fail(HB_ERR_DEVICE, "%s", why.c_str());
  }
  return in_progress != 0;
}

void ContextState::sync_locked(const char *what, int64_t timeout_ms) {
  make_current();
  Deadline deadline(timeout_ms);
  poll_until(what, deadline, timeout_ms, pending_ops_ > 0, [&] {
    int32_t done = 0;
    std::string msg;
    if (plugin_try(&msg, p_.stream_query, stream_, &done) != HB_OK) {
      std::string why =
          format("%s: work on the context's CUDA stream failed (device %d): %s",
                 what, device_, msg.c_str());
      abort_comm_locked(why);
      fail(HB_ERR_DEVICE, "%s", why.c_str());
    }
    bool busy = comm_busy_locked(what);
    return done && !busy;
  });
  pending_ops_ = 0;
}

void ContextState::synchronize(int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stream_) return;  // nothing was ever enqueued through hb
  sync_locked("hb_context_synchronize", timeout_ms);
}

void ContextState::exchange_unique_id(const Peers &peers, int64_t timeout_ms,
                                      uint8_t *id) {
  if (peers.world == 1) {
    plugin_call("ncclGetUniqueId", p_.nccl_get_unique_id, id);
    return;
  }
  if (!peers.kv)
    fail(HB_ERR_INTERNAL,
         "GPU communicator of %d ranks needs a rendezvous store", peers.world);
  // One communicator per context, so the context's scope makes the key
  // unique even on a store that outlives the context (hbrun's).
  std::string key = peers.scope + "/gpu/nccl_id";
  if (peers.rank == 0) {
    plugin_call("ncclGetUniqueId", p_.nccl_get_unique_id, id);
    peers.kv->set(key, std::string(reinterpret_cast<const char *>(id),
                                   HB_CUDA_NCCL_ID_BYTES));
    return;
  }
  std::string v = peers.kv->get(key, timeout_ms);
  if (v.size() != HB_CUDA_NCCL_ID_BYTES)
    fail(
        HB_ERR_CORRUPT,
        "rendezvous key '%s' holds %zu bytes, not an NCCL unique id (%d bytes)",
        key.c_str(), v.size(), HB_CUDA_NCCL_ID_BYTES);
  std::copy(v.begin(), v.end(), id);
}

void ContextState::ensure_comm(const Peers &peers, int64_t timeout_ms) {
  if (comm_) {
    if (comm_world_ != peers.world)
      fail(HB_ERR_INTERNAL, "GPU communicator has %d ranks, the context %d",
           comm_world_, peers.world);
    return;
  }
  if (!abort_reason_.empty())
    fail(HB_ERR_DEVICE,
         "the context's NCCL communicator was aborted (%s); GPU collectives "
         "need a "
         "new context",
         abort_reason_.c_str());
  Deadline deadline(timeout_ms);
  uint8_t id[HB_CUDA_NCCL_ID_BYTES];
  exchange_unique_id(peers, timeout_ms, id);
  std::string what = format("NCCL communicator init (rank %d of %d, device %d)",
                            peers.rank, peers.world, device_);
  plugin_call(what.c_str(), p_.nccl_comm_init, &comm_,
              static_cast<int32_t>(peers.world),
              static_cast<int32_t>(peers.rank),
              static_cast<const uint8_t *>(id));
  comm_world_ = peers.world;
  poll_until(what.c_str(), deadline, timeout_ms, true,
             [&] { return !comm_busy_locked(what.c_str()); });
}

void ContextState::collective(const CollectiveCall &call, const Peers &peers,
                              int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!health_->ok()) fail_health_locked();
  make_current();
  void *s = stream_locked();
  ensure_comm(peers, timeout_ms);
  // Integer averages: an exact NCCL sum, then C's truncating division.
  bool int_avg = call.op == HB_AVG && is_integer(call.dtype);
  hb_cuda_collective c = {};
  c.kind = plugin_kind(call.kind);
  c.dtype = call.dtype;
  c.op = int_avg ? HB_SUM : call.op;
  c.root = call.root;
  c.rank = peers.rank;
  c.nranks = peers.world;
  c.send = call.send;
  c.recv = call.recv;
  c.count = call.count;
  c.send_counts = call.send_counts;
  c.send_offsets = call.send_offsets;
  c.recv_counts = call.recv_counts;
  c.recv_offsets = call.recv_offsets;
  int32_t in_progress = 0;
  std::string msg;
  int32_t st =
      plugin_try(&msg, p_.nccl_collective, comm_, s,
                 static_cast<const hb_cuda_collective *>(&c), &in_progress);
  if (st != HB_OK) {
    std::string why = format("GPU collective (rank %d of %d, device %d): %s",
                             peers.rank, peers.world, device_, msg.c_str());
    if (st == HB_ERR_DEVICE) abort_comm_locked(why);
    fail(st, "%s", why.c_str());
  }
  ++pending_ops_;
  if (in_progress) {
    Deadline deadline(timeout_ms);
    poll_until("enqueueing a GPU collective", deadline, timeout_ms, true,
               [&] { return !comm_busy_locked("GPU collective"); });
  }
  if (int_avg && peers.world > 1 && call.count > 0)
    plugin_call("integer average", p_.divide_async, call.recv, call.count,
                static_cast<int32_t>(call.dtype),
                static_cast<int64_t>(peers.world), s);
}

}  // namespace gpu
}  // namespace hb
