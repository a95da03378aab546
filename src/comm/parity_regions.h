// Gloo pair buffers registered once, double-buffered by call parity: one
// receive region per (peer, parity) and one send region per parity, on two
// slots. What comm/region_p2p.h and comm/pair_exchange.h send over:
// a message then goes straight into the peer's memory in one hop.
//
// Registration is per peer (register_peer), so a caller may register only
// the peers it talks to (the host leaders' regions, comm/region_p2p.h) or
// register a pair when it is first used; both sides of a pair must register
// it before either sends on it.
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
  // Sizes the regions (no peer registered yet); register_peer then adds
  // peers one by one.
  void init(gloo::Context &ctx, int slot_base, size_t region_bytes,
            size_t send_bytes);
  bool initialized() const { return !to_.empty(); }
  void register_peer(int peer);
  bool registered(int peer) const {
    return initialized() && to_[size_t(peer) * 2] != nullptr;
  }
  // init, then every peer, in the same order on every rank.
  void register_all(gloo::Context &ctx, int slot_base, size_t region_bytes,
                    size_t send_bytes);
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
  // Bytes allocated for the registered peers' regions and the send regions.
  size_t reserved_bytes() const;
  void reset();  // unregisters (before the pairs close)

 private:
  gloo::Context *ctx_ = nullptr;
  int slot_base_ = 0;
  size_t region_bytes_ = 0, send_bytes_ = 0, peers_ = 0;
  Scratch send_[2];
  std::vector<Scratch> recv_;  // per (peer, parity)
  std::vector<std::unique_ptr<gloo::transport::Buffer>> to_, from_;
};

}  // namespace comm
}  // namespace hb
