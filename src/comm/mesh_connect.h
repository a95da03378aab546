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
// Pairs connect on first use where the backend asks (LazyMesh: in a world
// of several hosts, only the other hosts' ranks a call exchanges with;
// docs/scaling.md), so the listener stays open while the mesh lives.
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

class MeshListener;

class MeshContext : public gloo::rendezvous::Context {
 public:
  MeshContext(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  // Thread-safe: from now on every pair not yet connected is closed (a
  // connect waiting for one throws `why`); connected pairs are left to
  // comm/links.h.
  void break_connect(const std::string &why);
  // Pairs of this context with a connected socket.
  size_t connected_pairs();

 private:
  friend class LazyMesh;
  // Makes one pair per peer q with reach[q] (none listens:
  // comm/tcp_pair.h); the others stay null.
  void create_pairs(const std::shared_ptr<gloo::transport::Device> &dev,
                    const std::vector<bool> &reach);
  // The device's host address (sockaddr_in/in6, port 0), as its pairs
  // were bound.
  sockaddr_storage host_address() const;
  // The pairs that peers dial (null where this rank dials), by peer.
  std::vector<gloo::transport::Pair *> dialled_pairs() const;
  // Starts the dial of context number `context` to q when this rank dials
  // q and nobody started it (boot[q]: rank q's published address and
  // nonce); else nothing.
  void start_pair(int q, const std::vector<std::string> &boot,
                  uint32_t context);
  // Waits until the pair to q is connected. Throws what Gloo throws, or
  // gloo::IoException carrying `why` once break_connect ran.
  void wait_pair(int q);
  void check_broken();

  enum PairState : uint8_t { kIdle, kStarted, kConnected };
  std::mutex mu_;
  std::shared_ptr<gloo::transport::Context> pairs_;  // also transportContext_
  std::vector<PairState> state_;                     // by peer
  bool broken_ = false;
  std::string why_;
};

// A formed mesh whose pairs connect when asked (first use): one listener
// per rank, which stays open while this lives, and every peer's bootstrap
// address. Formation is one kv_allgather under prefix (38 bytes per rank);
// no pair connects in it.
class LazyMesh {
 public:
  // ctxs all on dev (a TCP device); reach[q]: whether the contexts have a
  // pair to q at all (a peer without one is refused when it dials).
  LazyMesh(rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
           const std::shared_ptr<gloo::transport::Device> &dev,
           std::vector<std::shared_ptr<MeshContext>> ctxs,
           const std::vector<bool> &reach);
  // Closes the listener (before the contexts' pairs can go).
  ~LazyMesh();
  LazyMesh(const LazyMesh &) = delete;
  LazyMesh &operator=(const LazyMesh &) = delete;

  // Connects every context's pair to each of peers (all reachable). Both
  // sides of a pair must ask for it at the same point of their call
  // sequence (or earlier): every dial this rank makes starts before it
  // waits for any pair, so ranks asking for any symmetric sets cannot wait
  // in a cycle. Every wait is bounded by the pairs' timeout and ends at a
  // break_connect. Thread-safe; pairs already connected cost nothing.
  // Returns the peers whose pairs this call waited for.
  std::vector<int> connect(const std::vector<int> &peers);
  // Stops accepting (every pair this rank will have is connected).
  void close_listener();

 private:
  std::vector<std::shared_ptr<MeshContext>> ctxs_;
  std::vector<std::string> boot_;
  std::unique_ptr<MeshListener> listener_;
  std::mutex mu_;           // one connect at a time
  std::vector<bool> done_;  // by peer: connected in every context
  int64_t formed_ms_ = 0;
};

// Connects the full mesh of every context in ctxs (all on dev, a TCP
// device) with one kv_allgather under prefix; every wait is bounded by
// timeout_ms and ends early when the KV's calls or a break_connect do.
void connect_meshes(rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
                    const std::shared_ptr<gloo::transport::Device> &dev,
                    const std::vector<std::shared_ptr<MeshContext>> &ctxs);

}  // namespace comm
}  // namespace hb
