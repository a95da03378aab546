// Gloo pair buffers registered once, double-buffered by call parity: one
// receive region per (peer, parity) and one send region per parity, on two
// slots. What comm/region_p2p.h and comm/pair_exchange.h send over:
// a message then goes straight into the peer's memory in one hop.
#pragma once

#include <memory>
#include <vector>

#include "comm/scratch.h"

namespace gloo {
class Context;
namespace transport {
class Buffer;
}
}  // namespace gloo

namespace hb {
namespace comm {

class ParityRegions {
 public:
  ParityRegions();
  ~ParityRegions();
  bool registered() const { return !to_.empty(); }
  // Registers every buffer, in the same order on every rank; with peers
  // given, only those of the peers q with peers[q] (the others have no
  // TCP pair: they share this rank's host, comm/mesh_connect.h).
  void register_all(gloo::Context &ctx, int slot_base, size_t region_bytes,
                    size_t send_bytes,
                    const std::vector<bool> *peers = nullptr);
  gloo::transport::Buffer *to(int peer, size_t parity) const {
    return to_[size_t(peer) * 2 + parity].get();
  }
  gloo::transport::Buffer *from(int peer, size_t parity) const {
    return from_[size_t(peer) * 2 + parity].get();
  }
  char *region(int peer, size_t parity) const {
    return recv_[size_t(peer) * 2 + parity].data();
  }
  char *send(size_t parity) const { return send_[parity].data(); }
  void reset();  // unregisters (before the pairs close)

 private:
  Scratch send_[2];
  std::vector<Scratch> recv_;  // per (peer, parity)
  std::vector<std::unique_ptr<gloo::transport::Buffer>> to_, from_;
};

}  // namespace comm
}  // namespace hb
