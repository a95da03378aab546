// Gloo contexts whose TCP full mesh forms through one exchange and one
// listener per rank, and can be broken from another thread.
//
// Gloo's own connectFullMesh has every rank publish one key of its N-1 pair
// addresses (136 bytes each) and read every peer's: N(N-1) reads of
// (N-1) x 136 bytes through the one store thread (145 GB at 1024 ranks),
// and its pairs listen on 2(N-1) ports per rank. Here every rank listens on
// one port (comm/mesh_listener.h) and publishes its host address, that
// port and a nonce once (38 bytes); each reads all ranks' through rank 0
// (comm/kv_gather.h), O(N) bytes, both contexts in one exchange. A rank
// dials half of its peers (mesh_dials) with a hello naming itself, the
// context and the peer's nonce; the other half dial it.
//
// Gloo's connect also waits for each peer in Pair::connect for up to five
// times the context timeout with its pairs out of reach: a rank killed or
// stopped while the mesh forms left the others there long after the
// rendezvous had reported it lost. These pairs stay reachable, so a health
// failure (a lost peer, an abort) ends the connect at once.
#pragma once

#include <sys/socket.h>

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
  // Makes one pair per peer (none listens: comm/tcp_pair.h).
  void create_pairs(const std::shared_ptr<gloo::transport::Device> &dev);
  // The device's host address (sockaddr_in/in6, port 0), as its pairs
  // were bound.
  sockaddr_storage host_address() const;
  // The pairs that peers dial (null where this rank dials), by peer.
  std::vector<gloo::transport::Pair *> dialled_pairs() const;
  // Starts the dials of context number `context` to the peers this rank
  // dials (wait false; boot[q]: rank q's published address and nonce), or
  // waits for every pair and makes them the context's (wait true). Throws
  // what Gloo throws, or gloo::IoException carrying `why` once
  // break_connect ran.
  void connect_pairs(const std::vector<std::string> &boot, uint32_t context,
                     bool wait);
  void check_broken();

  std::mutex mu_;
  std::shared_ptr<gloo::transport::Context> connecting_;
  bool broken_ = false;
  std::string why_;
};

// Connects the full mesh of every context in ctxs (all on dev, a TCP
// device) with one kv_allgather under prefix; every wait is bounded by
// timeout_ms and ends early when the KV's calls or a break_connect do.
void connect_meshes(rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
                    const std::shared_ptr<gloo::transport::Device> &dev,
                    const std::vector<std::shared_ptr<MeshContext>> &ctxs);

}  // namespace comm
}  // namespace hb
