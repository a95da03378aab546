// The GPU side of one context: its CUDA device, its stream (the context's
// own, or one set with hb_context_set_cuda_stream) and its NCCL
// communicator, created on the first GPU collective. Every wait is a
// bounded poll that also watches the context's Health, so a lost peer or an
// abort breaks it (ncclCommAbort) instead of hanging.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/health.h"
#include "gpu/gpu.h"
#include "plugin_api.h"

namespace hb {
namespace rdv {
class KV;
}
namespace gpu {

// Who takes part in the communicator, and where its NCCL id travels.
struct Peers {
  int rank = 0;
  int world = 1;
  rdv::KV *kv = nullptr;  // needed when world > 1
  // Prefix of the context's keys in the store (hb_context::scope): the
  // NCCL id goes under "<scope>/gpu/nccl_id", one per context.
  std::string scope;
};

struct HealthLink;

struct ContextState {
  // health must outlive the state. Throws HB_ERR_UNSUPPORTED when the
  // plugin lacks a function the GPU path needs.
  ContextState(const hb_cuda_plugin &plugin, int device, Health *health);
  ~ContextState();
  ContextState(const ContextState &) = delete;
  ContextState &operator=(const ContextState &) = delete;

  int device() const { return device_; }
  // The stream hb enqueues on (created on first use when none was set).
  void *stream();
  // nullptr: back to the context's own stream. Waits (bounded) for what hb
  // enqueued on the previous stream first, so synchronize misses nothing.
  void set_stream(void *stream, int64_t timeout_ms);
  // Enqueues call (creating the communicator on first use); returns once
  // NCCL accepted it.
  void collective(const CollectiveCall &call, const Peers &peers,
                  int64_t timeout_ms);
  // Waits until the stream is idle; HB_ERR_TIMEOUT / HB_ERR_DEVICE /
  // HB_ERR_PEER_FAILED / HB_ERR_ABORTED (the last two from Health).
  void synchronize(int64_t timeout_ms);
  // True once the communicator was aborted (it is not rebuilt).
  bool comm_aborted() const;
  const hb_cuda_plugin &plugin() const { return p_; }

 private:
  void make_current();
  void *stream_locked();
  void sync_locked(const char *what, int64_t timeout_ms);
  bool comm_busy_locked(const char *what);
  void ensure_comm(const Peers &peers, int64_t timeout_ms);
  void exchange_unique_id(const Peers &peers, int64_t timeout_ms, uint8_t *id);
  // Polls until *done; throws on Health failure, device error or deadline.
  template <class Poll>
  void poll_until(const char *what, const Deadline &deadline,
                  int64_t timeout_ms, bool abort_on_timeout, Poll poll);
  void fail_health_locked();  // aborts the communicator, throws Health's error
  void abort_comm_locked(const std::string &why);
  void on_health_failure();

  const hb_cuda_plugin &p_;
  const int device_;
  Health *health_;
  int health_sub_ = -1;
  std::shared_ptr<HealthLink> link_;

  mutable std::mutex mu_;
  void *own_stream_ = nullptr;
  void *stream_ = nullptr;  // own_stream_ or the user's
  void *comm_ = nullptr;
  int comm_world_ = 0;
  std::string abort_reason_;  // set once the communicator was aborted
  int64_t pending_ops_ = 0;   // NCCL operations enqueued since the last sync
};

// Picks the device of a rank: "cuda:N" in device_hint, else local_rank
// modulo the number of devices. Throws HB_ERR_UNSUPPORTED without devices.
int pick_device(const std::string &device_hint, int local_rank,
                int device_count);

}  // namespace gpu
}  // namespace hb
