// The CPU backend across processes: Gloo's TCP transport, bootstrapped
// through hb's rendezvous KV (comm/mesh_connect.h).
//
// Allreduce, reduce_scatter and fused buckets run hb's rank-order reduction
// by default (comm/rank_order.h: same bits on every rank and whatever the
// bucketing, no copy of the caller's buffers), one algorithm over P2P:
// small buffers over pair buffers registered once (comm/region_p2p.h) on
// algo_ctx_, large ones over per-call buffers (comm/gloo_p2p.h) on
// coll_ctx_, same-host peers over shared memory. A world whose every pair
// shares memory makes no socket at all (its calls never touch one).
// In a world of several hosts both of their rounds may route through one
// leader per host instead (option cpu_allreduce_route, comm/hier_reduce.h;
// same bits), as alltoallv may (cpu_alltoallv, comm/hier_alltoallv.h).
//
// Option cpu_allreduce can pick one of Gloo's algorithms instead. Their
// objects are bound to one buffer and to slots taken from the context in
// construction order, and a peer may send the next call's data before this
// rank has finished the current call. So an object is only ever bound to
// our reusable scratch buffer (input copied in, result copied out), is
// cached per (count, wire type, op), and every (re)construction happens in
// an order that depends only on the call sequence, so every rank takes the
// same fresh slots.
//
// The v-collectives and broadcast use Gloo's unbound-buffer collectives on
// coll_ctx_ (mixing both kinds of buffers on one context stalled in our
// tests of Debian's Gloo).
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "comm/backend.h"
#include "comm/fingerprint.h"
#include "comm/gloo_p2p.h"
#include "comm/hier_alltoallv.h"
#include "comm/rank_order.h"
#include "comm/scratch.h"
#include "comm/traffic.h"

namespace gloo {
class Algorithm;
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace hb {
namespace comm {

class LazyMesh;
class Links;
class MeshContext;
class PairExchange;
class ShmTransport;
class PairRegions;

class GlooBackend final : public Backend {
 public:
  GlooBackend(const BackendConfig &cfg, rdv::KV &kv, Health &health);
  ~GlooBackend() override;
  const char *name() const override { return "gloo"; }
  Traffic traffic() const override;

  void allreduce(const void *send, void *recv, size_t count, hb_dtype dtype,
                 hb_reduce_op op) override;
  void allreduce_buckets(const std::vector<std::vector<Tensor>> &buckets,
                         hb_dtype dtype, hb_reduce_op op) override;
  void allgatherv(const void *send, size_t send_count, void *recv,
                  const int64_t *recv_counts, const int64_t *recv_offsets,
                  hb_dtype dtype) override;
  void alltoallv(const void *send, const int64_t *send_counts,
                 const int64_t *send_offsets, void *recv,
                 const int64_t *recv_counts, const int64_t *recv_offsets,
                 hb_dtype dtype) override;
  void broadcast(const void *send, void *recv, size_t count, hb_dtype dtype,
                 int root) override;
  // On the call board when calls are checked (the print keeps a peer's
  // other call from being read as sizes).
  bool sized_in_one_round() const override {
    return board_ && cfg_.check_calls;
  }
  void alltoallv_sized(const void *send, const int64_t *send_bytes,
                       const Deliver &deliver) override;
  // On the call board (calls checked): each rank fills its blocks straight
  // into its slot and reads its peers' blocks in theirs, with the print in
  // one round; the rings when some rank's do not fit (from the slot, or
  // staged when this rank's did not fit). Elsewhere staged (Backend's).
  void alltoallv_fill(const int64_t *send_bytes, const int64_t *recv_bytes,
                      const Fill &fill, const Deliver &deliver) override;
  void reduce_scatter(const void *send, void *recv, size_t recv_count,
                      hb_dtype dtype, hb_reduce_op op) override;

 private:
  enum class Algo { kRankOrder, kRing, kRingChunked, kHalvingDoubling, kBcube };
  struct AlgoKey {
    size_t offset;  // elements into the scratch (tensors over 2^30)
    size_t count;
    hb_dtype wire;
    hb_reduce_op op;
    Algo algo;
    bool operator<(const AlgoKey &o) const {
      if (algo != o.algo) return algo < o.algo;
      if (offset != o.offset) return offset < o.offset;
      if (count != o.count) return count < o.count;
      if (wire != o.wire) return wire < o.wire;
      return op < o.op;
    }
  };
  struct AlgoEntry {
    const void *bound = nullptr;  // scratch address it was built on
    size_t bytes = 0;
    uint64_t last_use = 0;
    std::unique_ptr<gloo::Algorithm> algo;
  };

  // Runs fn; turns Gloo's exceptions into hb errors and fails the health.
  template <class F>
  void guarded(const char *what, F &&fn);
  // peer: the rank known to be lost, else -1 (found from the message).
  [[noreturn]] void fail_from_gloo(const char *what, const std::string &msg,
                                   int peer = -1);

  // comm/rank_order.h over this call's P2P on coll_ctx_.
  void reduce_rank_order(const char *x, const Blocks &b, char *own_out,
                         char *gather, hb_dtype wire, hb_reduce_op op);
  // y = the rank-order allreduce of count wire elements at x (one round
  // below one_round_bytes of traffic, else reduce phase + gather); x may be
  // y.
  void allreduce_rank_order(const char *x, char *y, size_t count, hb_dtype wire,
                            hb_reduce_op op);
  // send as wire elements: send itself when it already is (and no copy is
  // needed), else packed into in_stage_.
  const char *wire_input(const void *send, size_t count, hb_dtype dtype,
                         hb_reduce_op op, bool must_copy);
  // Legacy algorithms: allreduce of the first count wire elements of the
  // reduce scratch.
  void reduce_scratch(size_t count, hb_dtype wire, hb_reduce_op op);
  gloo::Algorithm &algorithm_for(size_t offset, size_t count, hb_dtype wire,
                                 hb_reduce_op op);
  void evict_if_full(size_t incoming_bytes);
  uint32_t next_tag() { return tag_++; }
  // The constructor's connect: same-host peers (comm/shm_transport.h),
  // then the TCP mesh (comm/mesh_connect.h) unless the world never uses it
  // (every pair shares memory and the algorithm is rank order).
  void connect_mesh(const BackendConfig &cfg, rdv::KV &kv,
                    const std::shared_ptr<MeshContext> &algo,
                    const std::shared_ptr<MeshContext> &coll);
  // True when the world's collectives run over P2P (some pair shares
  // memory): then every call of every rank does, whatever its own peers.
  // Every rank's cpu_alltoallv and cpu_allreduce_route, gathered:
  // HB_ERR_CONFIG on every rank naming them when one differs (mixed
  // worlds, where the route matters).
  void agree_route(const BackendConfig &cfg, rdv::KV &kv);
  void make_leader_regions();  // leader_regions_, on every rank
  bool p2p_world() const;
  // True when small allreduces and the call checks take the registered TCP
  // buffers (one hop) although the world runs over P2P: unless every pair
  // shares memory, per-call TCP messages (and routing) cost more there than
  // the shared-memory pairs save. Same on every rank; same bits either way.
  bool registered_first() const;
  // The TCP peers a call may exchange with: every other host's rank, or
  // (routes through the host leaders) a leader's other leaders, none for
  // the other ranks. Same choice on every rank for a call.
  enum class Peers { kFar, kLeaders };
  // Connects the pairs to `which` unless they are (pairs made on first use,
  // comm/mesh_connect.h); a no-op where the mesh connected at formation.
  void connect_peers(Peers which);
  // Connects only the pairs to `peers` (far peers): a direct alltoallv's
  // peers with bytes either way, which both sides of a pair know from
  // their own counts.
  void connect_peers(const std::vector<int> &peers);
  // Runs fn(P2P &) over this call's P2P: shared memory, TCP or routed
  // per peer, TCP peers among `which` (connected first, where pairs are
  // made on first use; only those in `only` when given); to other hosts'
  // ranks over the registered pair buffers of `regions` when given
  // (registered in the call that first takes them, after the connection,
  // on both sides of each pair; with per-call buffers as well when split),
  // else per-call TCP buffers; counted in traffic_ when `count`. Takes one
  // tag on every rank.
  template <class F>
  void over_p2p(F &&fn, Peers which = Peers::kFar,
                PairRegions *regions = nullptr, bool count = true,
                bool split = false, const std::vector<int> *only = nullptr);
  // The call prints' allgather (all: world x wire bytes, this rank's at
  // rank x) through the host leaders.
  void allgather_prints(P2P &p2p, char *all);
  // The call's fingerprint, checked across ranks (comm/fingerprint.h)
  // before anything of a size that depends on it is posted. On the call
  // board (every peer shares memory) it is only kept here, and travels
  // with the call's first board post: the inline payload of a small
  // reduction, else a post of its own (flush_check) before the first
  // message.
  void check(CallPrint print);
  void flush_check();
  // Posts the pending print (if any) and payload on the call board, waits
  // for every peer's post and checks them all: every rank reaches the same
  // verdict (HB_ERR_MISMATCH) from the same slots. Returns the call number.
  // sizes_vary: the ranks' payloads may differ in size (the caller checks
  // what it reads).
  uint64_t board_exchange(const char *payload, size_t bytes,
                          bool sizes_vary = false);
  // The rank-order reduction straight from the peers' board slots: x (bytes
  // of it) is written once, every rank folds every slot in rank order.
  void board_reduce(const RankOrderOp &ro, const char *x, size_t bytes,
                    const Blocks &b, char *own_out, char *gather);
  // Large reductions on the board, a piece of every block at a time, two
  // rounds per piece: every rank writes its pieces into its slot's staging
  // area and folds its own block's piece from every slot in rank order;
  // then (gather) it posts the result and copies the others' from their
  // slots. Same bits as rank_order_reduce; each input byte is copied once.
  void board_reduce_staged(const RankOrderOp &ro, const char *x,
                           const Blocks &b, char *own_out, char *gather);
  // True when reductions too large for the inline payload take
  // board_reduce_staged rather than the rings (option cpu_shm_reduce).
  bool staged_board_ = false;
  // alltoallv with its print pending: every rank posts its sends
  // (send_counts[q] x es bytes to q, written packed into its slot by
  // fill(q, dst) when they all fit) with the print; true when every rank's
  // did: then board_from_[q] is q's block to this rank, read in place from
  // q's slot (until this rank's next post). False when the call must go on
  // over the rings (the print is checked either way); *in_slot (if given)
  // is then this rank's blocks in its slot, or nullptr where they did not
  // fit (nothing was filled).
  bool board_alltoallv(const int64_t *send_counts, size_t es, const Fill &fill,
                       const char **in_slot);
  // alltoallv once its print is checked, off the board: over P2P (rings,
  // routed, hierarchical) or Gloo's own.
  void alltoallv_unboarded(const void *send, const int64_t *send_counts,
                           const int64_t *send_offsets, void *recv,
                           const int64_t *recv_counts,
                           const int64_t *recv_offsets, hb_dtype dtype);
  static CallPrint alltoallv_print(const int64_t *send_counts,
                                   const int64_t *recv_counts, hb_dtype dtype,
                                   int n);

  BackendConfig cfg_;
  Health &health_;
  rdv::KV &kv_;  // the rendezvous client: outlives the backend
  Algo algo_kind_;
  std::shared_ptr<gloo::transport::Device> dev_;
  std::shared_ptr<gloo::Context> algo_ctx_;  // cached legacy algorithms
  std::shared_ptr<gloo::Context> coll_ctx_;  // unbound-buffer collectives
  std::shared_ptr<MeshContext> algo_mesh_, coll_mesh_;  // the same two
  // The listener and the pairs still to connect: a world of several hosts
  // running rank order over P2P connects no pair when it forms, and none
  // to a peer of its own host, ever (lazy_); others connect all at once.
  std::unique_ptr<LazyMesh> mesh_;
  bool lazy_ = false;
  std::vector<int> far_peers_, leader_peers_;
  std::vector<int> call_peers_;  // a direct alltoallv's far peers with bytes
  bool far_up_ = false, leaders_up_ = false;
  std::shared_ptr<Links> links_;
  std::shared_ptr<WaitBreaker> breaker_ = std::make_shared<WaitBreaker>();
  int health_sub_ = -1;
  uint32_t tag_ = 1;
  uint64_t use_clock_ = 0;
  size_t live_algos_ = 0;
  size_t live_bytes_ = 0;
  std::map<AlgoKey, AlgoEntry> algos_;
  std::unique_ptr<PairRegions> regions_;  // rank-order, small buffers
  // The routed rank-order reduction's and the routed alltoallv's
  // leader-to-leader messages (cpu_allreduce_route=hier, cpu_alltoallv=
  // hier): registered with the other hosts' leaders only, on a leader;
  // nothing on the other ranks.
  std::unique_ptr<PairRegions> leader_regions_;
  std::unique_ptr<PairExchange> prints_;  // fingerprints over TCP
  std::shared_ptr<ShmTransport> shm_;     // same-host peers, if any
  // What the health subscription trips: made before the mesh connects, the
  // transport only after it.
  struct ShmSlot {
    std::mutex mu;
    std::shared_ptr<ShmTransport> shm;
    bool tripped = false;
    void set(const std::shared_ptr<ShmTransport> &s);
    void trip();
  };
  std::shared_ptr<ShmSlot> shm_slot_ = std::make_shared<ShmSlot>();
  uint64_t seq_ = 0;  // collective calls so far
  // alltoallv through one leader per host (option cpu_alltoallv).
  HostGroups hosts_;
  bool hier_ = false;
  // The rank-order reductions likewise (option cpu_allreduce_route).
  bool hier_reduce_ = false;
  HierScratch hier_scratch_;
  Traffic traffic_;  // what this rank sent, logged at destruction
  // The call board (comm/shm_transport.h): used when every peer shares
  // memory. Such a world's rank-order calls touch no socket, so they skip
  // the SIGPIPE guard too.
  bool board_ = false;
  bool sockets_free_ = false;
  uint64_t board_calls_ = 0;
  bool print_pending_ = false;
  CallPrint pending_;
  std::vector<char> board_wire_;
  std::vector<CallPrint> board_prints_;
  std::vector<const char *> board_in_;
  std::vector<const char *> board_from_;  // board_alltoallv's blocks
  Scratch reduce_scratch_;  // what the cached algorithms reduce; buckets
  Scratch peer_scratch_;    // rank-order: the peers' parts of my block
  Scratch in_stage_;        // overlapping or strided inputs
  Scratch out_stage_;       // strided outputs
};

}  // namespace comm
}  // namespace hb
