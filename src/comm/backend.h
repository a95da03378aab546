// The communicator behind the collectives: one Backend per context and
// buffer location. It is built from plain parts (rank, world, a rendezvous
// KV, the context Health, options), never from hb_context, so tests can run
// several ranks as threads in one process over rdv::MemoryKV.
//
// make_backend picks the implementation: a world of one copies locally (no
// network, no Gloo); otherwise Gloo over TCP, with shared memory between
// the ranks of a host (alltoallv routed through one leader per host when
// the world spans several hosts); callers only ever see this interface.
//
// Arguments reaching a Backend are already validated (src/comm/validate.h):
// dtype and op known, counts consistent, pointers non-NULL where needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/scratch.h"
#include "comm/traffic.h"
#include "hb.h"

namespace hb {
class Health;
namespace rdv {
class KV;
}  // namespace rdv

namespace comm {

struct BackendConfig {
  int rank = 0;
  int world_size = 1;
  int64_t timeout_ms = 300000;
  // How long to wait, after a broken connection, for the rendezvous to name
  // the lost rank before reporting the failure with what Gloo knows.
  int64_t peer_report_grace_ms = 1000;
  std::string key_prefix = "hb/comm/cpu/";   // namespace in the KV
  std::string hostname = "127.0.0.1";        // address peers connect to
  std::string allreduce_algorithm = "auto";  // option cpu_allreduce
  // Option cpu_transport: auto (shared memory between the ranks that share
  // a host, TCP otherwise), shm (every pair must share memory) or tcp.
  std::string transport = "auto";
  // Option cpu_shm_reduce: how reductions too large for the call board's
  // inline payload run where every pair shares memory: "board" (staged
  // through the board's slots), "rings" or "auto" (board from 3 ranks).
  std::string shm_reduce = "auto";
  // Option cpu_alltoallv: how alltoallv routes in a world of several hosts
  // (comm/hier_alltoallv.h): "auto" (through one leader per host from 64
  // ranks, when some host has several), "hier" (through the leaders
  // wherever ranks share memory with some peer) or "direct" (every pair).
  std::string alltoallv = "auto";
  // Option cpu_allreduce_route: the same choice for the rank-order
  // reductions (allreduce, fused buckets, reduce_scatter;
  // comm/hier_reduce.h), same auto rule. Same bits either way.
  std::string allreduce_route = "auto";
  // Option cpu_wait_spin_us: how long a shared-memory wait spins before it
  // sleeps on its futex (-1: auto, by the CPUs this host's ranks share
  // and the host's load, comm/spin_policy.h; kSpinAutoShort there: auto,
  // short at most, for the progress threads' channels).
  int64_t wait_spin_us = -1;
  // Option cpu_wait_slice_us: > 0, the scheduler slice a thread asks for
  // while a wait sleeps (comm/spin_policy.h, SleepSlice); 0: unchanged.
  int64_t wait_slice_us = 0;
  // Fingerprint every call (comm/fingerprint.h), option cpu_check_calls;
  // check_calls_where_free: only where the print rides along with the
  // call's data (the shared-memory call board), not as a TCP round of its
  // own ("auto" in release builds).
  bool check_calls = true;
  bool check_calls_where_free = false;
  // Tests only: > 0 splits the ranks into this many pretend hosts (rank r
  // on host r * hosts / world) that cannot share memory, as the mixed
  // topology of several machines would.
  int test_hosts = 0;
  // Rank-order allreduce (comm/rank_order.h): blocks travel in pieces of
  // this many bytes; below one_round_bytes of traffic per rank
  // (bytes x (world - 1)) it takes one round instead of two.
  int64_t piece_bytes = 4 << 20;
  int64_t one_round_bytes = 64 << 10;
  // Up to this many input bytes it runs over pre-registered pair buffers
  // (comm/region_p2p.h), above it over per-call buffers.
  int64_t staged_bytes = 2 << 20;
  // Gradient fusion (hb_allreduce_many).
  int64_t grad_nbuckets = 0;
  int64_t grad_bucket_bytes = 16 << 20;
};

// One tensor of a fused allreduce: reduced in place.
struct Tensor {
  void *data;
  size_t count;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  int rank() const { return rank_; }
  int world_size() const { return world_; }

  virtual void allreduce(const void *send, void *recv, size_t count,
                         hb_dtype dtype, hb_reduce_op op) = 0;
  // Reduces every tensor in place; `buckets` groups consecutive tensors
  // (each inner vector is one fused call). Same result as one allreduce per
  // tensor.
  virtual void allreduce_buckets(
      const std::vector<std::vector<Tensor>> &buckets, hb_dtype dtype,
      hb_reduce_op op) = 0;
  // recv_offsets is never NULL here (the caller packs the default).
  virtual void allgatherv(const void *send, size_t send_count, void *recv,
                          const int64_t *recv_counts,
                          const int64_t *recv_offsets, hb_dtype dtype) = 0;
  virtual void alltoallv(const void *send, const int64_t *send_counts,
                         const int64_t *send_offsets, void *recv,
                         const int64_t *recv_counts,
                         const int64_t *recv_offsets, hb_dtype dtype) = 0;
  virtual void broadcast(const void *send, void *recv, size_t count,
                         hb_dtype dtype, int root) = 0;
  // An alltoallv of bytes whose receive sizes travel with the data, for
  // callers that cannot know them before the round (the lookup's ids:
  // docs/embedding-collections.md). send is packed in rank order,
  // send_bytes[q] of it to rank q; deliver(q, data, bytes) then runs once
  // per rank q, in rank order, with the block q sent this rank (data valid
  // until this backend's next call). Where sized_in_one_round() (the same
  // answer on every rank) that is one rendezvous: on the shared-memory
  // call board every slot carries its sender's sizes ahead of its blocks.
  // Elsewhere it takes a round of sizes first; a caller with a first round
  // of its own (the lookup's header) runs that instead.
  using Deliver = std::function<void(int, const char *, size_t)>;
  virtual bool sized_in_one_round() const { return false; }
  virtual void alltoallv_sized(const void *send, const int64_t *send_bytes,
                               const Deliver &deliver);
  // An alltoallv of bytes whose caller writes each block it sends and reads
  // each block it receives in place (the collections' rows and partial
  // sums: docs/embedding-collections.md): fill(q, dst) runs once for every
  // rank q with send_bytes[q] > 0, in rank order, before anything is sent,
  // and writes those bytes at dst; deliver(q, data, bytes) then runs once
  // per rank q, in rank order, with q's block to this rank (recv_bytes[q]
  // of them; data valid until this backend's next call). The same call,
  // print and rounds as alltoallv of the packed blocks. Here (and wherever
  // a transport has no place of its own for them) the blocks are staged:
  // filled into a buffer, exchanged by alltoallv, delivered from another.
  using Fill = std::function<void(int, char *)>;
  virtual void alltoallv_fill(const int64_t *send_bytes,
                              const int64_t *recv_bytes, const Fill &fill,
                              const Deliver &deliver);
  virtual void reduce_scatter(const void *send, void *recv, size_t recv_count,
                              hb_dtype dtype, hb_reduce_op op) = 0;
  // What this rank sent so far, by transport (comm/traffic.h).
  virtual Traffic traffic() const { return Traffic(); }

 protected:
  Backend(int rank, int world) : rank_(rank), world_(world) {}
  // alltoallv_sized's data once every rank knows its receive sizes
  // (recv_bytes[q] from rank q): one alltoallv into a buffer, then
  // deliver.
  void alltoallv_known(const void *send, const int64_t *send_bytes,
                       const std::vector<int64_t> &recv_bytes,
                       const Deliver &deliver);
  // Where each rank's blocks start in a buffer packed in rank order.
  std::vector<int64_t> packed_offsets(const int64_t *bytes) const;
  // alltoallv_fill's staged form: the blocks filled into fill_send_ (or
  // already at `in`, packed, when not null), exchanged into fill_recv_ by
  // move(in, send offsets, out, recv offsets) (default: alltoallv of
  // bytes); returns fill_recv_ (rank q's block at its packed offset).
  using Move = std::function<void(const char *, const int64_t *, char *,
                                  const int64_t *)>;
  const char *alltoallv_staged(const int64_t *send_bytes,
                               const int64_t *recv_bytes, const Fill &fill,
                               const char *in = nullptr,
                               const Move &move = nullptr);
  Scratch fill_send_, fill_recv_;

 private:
  int rank_;
  int world_;
};

// world_size 1: a local backend (kv may be NULL). Otherwise Gloo over TCP,
// bootstrapped through kv under cfg.key_prefix; collective over the world.
// health must outlive the backend.
std::shared_ptr<Backend> make_backend(const BackendConfig &cfg, rdv::KV *kv,
                                      Health &health);

}  // namespace comm
}  // namespace hb
