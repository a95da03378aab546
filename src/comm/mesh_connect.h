// Gloo contexts whose TCP full mesh forms through one routed exchange and
// can be broken from another thread.
//
// Gloo's own connectFullMesh has every rank publish one key of its N-1 pair
// addresses (136 bytes each) and read every peer's: N(N-1) reads of
// (N-1) x 136 bytes through the one store thread (145 GB at 1024 ranks).
// Here every rank publishes its host address once and one 2-byte port per
// peer (this Gloo's pairs listen on a port of their own, the only part of
// their addresses that differs) and reads back, through rank 0
// (comm/kv_gather.h), every peer's host address and the ports of the
// peers' pairs to it: O(N) bytes per rank, both contexts in one exchange.
//
// Gloo's connect also waits for each peer in Pair::connect for up to five
// times the context timeout with its pairs out of reach: a rank killed or
// stopped while the mesh forms left the others there long after the
// rendezvous had reported it lost. These pairs stay reachable, so a health
// failure (a lost peer, an abort) ends the connect at once.
#pragma once

#include <gloo/rendezvous/context.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hb {
namespace rdv {
class KV;
}
namespace comm {

class MeshContext : public gloo::rendezvous::Context {
 public:
  MeshContext(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  // Thread-safe; a no-op once the mesh is connected.
  void break_connect(const std::string &why);

 private:
  friend void connect_meshes(
      rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
      const std::shared_ptr<gloo::transport::Device> &dev,
      const std::vector<std::shared_ptr<MeshContext>> &ctxs);
  // Makes (and listens on) one pair per peer.
  void create_pairs(const std::shared_ptr<gloo::transport::Device> &dev);
  // Host address of this rank's pairs (port 0) and each pair's port
  // (network order, 0 for this rank); throws if the pairs' hosts differ.
  std::string host_address() const;
  uint16_t port_to(int peer) const;
  // Starts every pair's connect to peer_addr[q] (wait false: comm/
  // tcp_pair.h's start_connect), or waits for them all and makes them the
  // context's (wait true). Throws what Gloo throws, or gloo::IoException
  // carrying `why` once break_connect ran.
  void connect_pairs(const std::vector<std::vector<char>> &peer_addr,
                     bool wait);
  void check_broken();

  std::mutex mu_;
  std::shared_ptr<gloo::transport::Context> connecting_;
  bool broken_ = false;
  std::string why_;
};

// Connects the full mesh of every context in ctxs (all on dev, a TCP
// device) with one kv_route under prefix; every wait is bounded by
// timeout_ms and ends early when the KV's calls or a break_connect do.
void connect_meshes(rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
                    const std::shared_ptr<gloo::transport::Device> &dev,
                    const std::vector<std::shared_ptr<MeshContext>> &ctxs);

}  // namespace comm
}  // namespace hb
