// What a backend's calls put on each transport: messages and bytes this
// rank sent, by transport, for the per-step costs of docs/scaling.md
// (logged at debug level when the backend is destroyed, which is what
// bench/comm_bench/hier_compare.sh reads).
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/p2p.h"

namespace hb {
namespace comm {

struct Traffic {
  uint64_t calls = 0;  // collective calls
  uint64_t shm_messages = 0, shm_bytes = 0;
  uint64_t tcp_messages = 0, tcp_bytes = 0;
  // Connected TCP pairs (sockets) of the mesh, all contexts, when asked:
  // pairs are made on first use (comm/mesh_connect.h).
  uint64_t tcp_pairs = 0;
  // Of tcp_messages: those sent on registered pair buffers (one hop; the
  // others on per-call buffers). And the bytes those buffers' regions take
  // (docs/scaling.md, memory per rank).
  uint64_t tcp_registered = 0, region_bytes = 0;
  void add(bool shm, size_t bytes) {
    (shm ? shm_messages : tcp_messages) += 1;
    (shm ? shm_bytes : tcp_bytes) += bytes;
  }
};

// Counts the sends of a P2P into t; `shm_peer(peer)` says which transport
// carries them.
template <class ShmPeer>
class CountingP2P final : public P2P {
 public:
  CountingP2P(P2P &in, Traffic &t, ShmPeer shm_peer)
      : in_(in), t_(t), shm_peer_(shm_peer) {}
  int rank() const override { return in_.rank(); }
  int world_size() const override { return in_.world_size(); }
  int send(int peer, int channel, const void *data, size_t bytes) override {
    t_.add(shm_peer_(peer), bytes);
    return in_.send(peer, channel, data, bytes);
  }
  int recv(int peer, int channel, void *data, size_t bytes) override {
    return in_.recv(peer, channel, data, bytes);
  }
  void wait(int id) override { in_.wait(id); }
  void finish() override { in_.finish(); }

 private:
  P2P &in_;
  Traffic &t_;
  ShmPeer shm_peer_;
};

}  // namespace comm
}  // namespace hb
