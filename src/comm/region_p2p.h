// P2P (comm/p2p.h) over Gloo pair buffers registered once
// (comm/parity_regions.h), for the rank-order reduction (comm/rank_order.h)
// of small and medium buffers between TCP peers: a message goes straight
// into a region of the peer's memory in one hop, where a per-call (unbound)
// buffer first waits for the receiver's "ready" notice and is sent from the
// sender's event-loop thread -- several thread hand-offs per message, which
// dominate below a few MiB (measured: 4 KiB at 4 ranks took 5x longer).
// The price: a send is copied into the registered send region (one copy
// when the same buffer goes to several peers in a row) and a receive out of
// its region when it is waited for; cheap at these sizes.
//
// Layout: each (peer, call parity) has a receive region of kChannels equal
// areas; channel c's messages from a peer fill area c in posting order, so
// both sides compute the same offsets from the byte counts alone.
//
// Order: a pair buffer only says "one more message arrived", so the k-th
// receive posted from a peer is taken to be the k-th message that peer
// sent to this rank, across channels. An algorithm over this P2P must post
// its receives from each peer in the order that peer sends to it; the
// rank-order reduction does (reduce pieces in order, then gather pieces).
//
// Regions are double-buffered by call parity: a peer can run at most one
// call ahead of this rank (it cannot finish call t+1 without this rank's
// data of call t+1, sent after this rank finished call t), so its data of
// the next call never lands in a region still being read. That holds for
// every pair that exchanges a message each way in every call on these
// regions: the callers only take them for such calls (the routed
// alltoallv sends a one-byte token where it has nothing that fits,
// comm/hier_alltoallv.h).
//
// Memory per rank is bounded whatever the world's size (docs/scaling.md):
// the direct reduction's area per peer shrinks as 1/N (its blocks do), and
// the leaders' regions hold only the other hosts' leaders, each a share of
// a fixed budget; calls that do not fit take per-call buffers instead.
// Registration is per peer (comm/parity_regions.h): where pairs are made
// on first use, only the peers a route uses register, in the call that
// first takes the regions, on both sides of each pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "comm/p2p.h"
#include "comm/parity_regions.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace hb {
namespace comm {

// The registered regions and the per-call bookkeeping (kept, so a small
// call allocates nothing).
class PairRegions {
 public:
  // With every peer, for the direct rank-order reduction. Takes two slots
  // of ctx now (call it at the same point on every rank); buffers are
  // registered on first use. A call fits when its input is at most
  // max_bytes (its blocks are then at most max_bytes / world), or when it
  // is one round (shared block), whose buffer is at most
  // one_round_bytes / (world - 1) (GlooBackend::allreduce_rank_order).
  PairRegions(gloo::Context &ctx, size_t max_bytes, size_t one_round_bytes);
  // The same, sized alike, but registering only the given peers: in a
  // world whose TCP pairs are made on first use, the other hosts' ranks
  // (no pair to a peer of this rank's host exists; GlooBackend registers
  // them in the call that first takes the regions, after connecting them).
  PairRegions(gloo::Context &ctx, size_t max_bytes, size_t one_round_bytes,
              std::vector<int> peers);
  // With the given peers only (none: this rank registers nothing), of
  // area_bytes per (peer, channel, parity) and send_bytes per parity; also
  // takes two slots on every rank. fits() is the caller's to decide.
  PairRegions(gloo::Context &ctx, std::vector<int> peers, size_t area_bytes,
              size_t send_bytes);
  ~PairRegions();
  bool fits(size_t bytes) const { return bytes <= max_bytes_; }
  size_t area_bytes() const { return area_bytes_; }
  size_t send_bytes() const { return send_bytes_; }
  // What the regions take once registered (2 parities x (registered peers
  // x kChannels x area_bytes + send_bytes)).
  size_t reserved_bytes() const;
  uint64_t messages() const { return messages_; }  // sent on the regions

 private:
  friend class RegionP2P;
  struct Op {
    int peer;
    bool is_send, done;
    uint64_t seq;      // among this call's sends to / receives from peer
    const char *from;  // receive: where the message lands
    void *to;          // receive: the caller's buffer
    size_t bytes;
  };
  gloo::Context &ctx_;
  int slot_base_;
  size_t max_bytes_ = 0, area_bytes_, send_bytes_;
  bool all_peers_;
  std::vector<int> peers_;  // when not all
  uint64_t calls_ = 0, messages_ = 0;
  ParityRegions regions_;
  std::vector<size_t> out_at_, in_at_;  // per (peer, channel): bytes used
  std::vector<uint64_t> sends_, sends_done_, recvs_, arrived_;  // per peer
  std::vector<Op> ops_;
};

class RegionP2P final : public P2P {
 public:
  static constexpr int kChannels = 2;
  // One call on the next parity (registers the regions on first use).
  explicit RegionP2P(PairRegions &r);
  ~RegionP2P() override;

  int rank() const override;
  int world_size() const override;
  int send(int peer, int channel, const void *data, size_t bytes) override;
  int recv(int peer, int channel, void *data, size_t bytes) override;
  void wait(int id) override;
  void finish() override;

 private:
  size_t area_offset(std::vector<size_t> &at, int peer, int channel,
                     size_t bytes, const char *what);
  // Where data lies in the send region (copied there unless it is the
  // buffer the previous send copied).
  size_t staged(const void *data, size_t bytes);

  PairRegions &r_;
  const size_t parity_;
  size_t send_used_ = 0;
  const void *last_data_ = nullptr;
  size_t last_bytes_ = 0, last_at_ = 0;
};

// A call's TCP messages split by channel: channels from kRegions up go on
// the registered regions (as channel - kRegions), the others on per-call
// buffers. For algorithms that know, message by message, what fits the
// regions and keep their parity rule (comm/hier_alltoallv.h).
class SplitP2P final : public P2P {
 public:
  static constexpr int kRegions = 16;
  SplitP2P(RegionP2P &regions, P2P &per_call)
      : regions_(regions), per_call_(per_call) {}
  int rank() const override { return per_call_.rank(); }
  int world_size() const override { return per_call_.world_size(); }
  int send(int peer, int channel, const void *data, size_t bytes) override;
  int recv(int peer, int channel, void *data, size_t bytes) override;
  void wait(int id) override;
  void finish() override;

 private:
  RegionP2P &regions_;
  P2P &per_call_;
  std::vector<std::pair<bool, int>> ops_;  // (on the regions, id there)
};

}  // namespace comm
}  // namespace hb
