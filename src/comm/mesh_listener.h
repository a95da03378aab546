// One listening socket per rank for the TCP mesh (issue 34). Gloo's pairs
// each listened on a port of their own, 2(N-1) bound ports per rank; here
// a rank binds one, every peer that dials it says who it is in the mesh
// hello (comm/tcp_pair.h: its rank, the context, and the nonce this rank
// published in the bootstrap), and the listener hands the accepted socket
// to the pair waiting for that rank. A hello that is not the mesh's, names
// no waiting pair, or carries another nonce (a stranger, or a rank of an
// earlier world dialling a reused address) is answered with its reason,
// logged and closed; the pairs keep waiting.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <gloo/transport/tcp/loop.h>

namespace gloo {
namespace transport {
class Pair;
namespace tcp {
class Device;
}
}  // namespace transport
}  // namespace gloo

namespace hb {
namespace comm {

class MeshListener : public gloo::transport::tcp::Handler {
 public:
  // Listens on host (its port ignored) through dev's event loop.
  // waiting[c][q]: the pair of context c that rank q dials, null where
  // nobody dials (this rank dials q, or q is this rank).
  MeshListener(const std::shared_ptr<gloo::transport::tcp::Device> &dev,
               const sockaddr_storage &host, int rank, int world,
               uint64_t nonce,
               std::vector<std::vector<gloo::transport::Pair *>> waiting);
  // Stops listening and closes the connections whose hello never came.
  ~MeshListener() override;
  MeshListener(const MeshListener &) = delete;
  MeshListener &operator=(const MeshListener &) = delete;

  // The listening port, network order.
  uint16_t port() const { return port_; }
  // The device's loop: accepts.
  void handleEvents(int events) override;

 private:
  struct Conn;
  // The loop: a full hello arrived on c; answers it and hands the socket.
  void answer(Conn &c);

  std::shared_ptr<gloo::transport::tcp::Device> dev_;
  const int rank_, world_;
  const uint64_t nonce_;
  std::vector<std::vector<gloo::transport::Pair *>> waiting_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::mutex mu_;  // conns_, closing_ (the loop adds, the destructor closes)
  std::vector<std::unique_ptr<Conn>> conns_;
  bool closing_ = false;
};

// The port field of an IPv4 or IPv6 address (network order), or null.
uint16_t *port_in(sockaddr_storage &ss);

// Whether rank dials peer in a world of world ranks (else peer dials it):
// each rank dials the next half of the ring, so dials and accepts split
// evenly.
bool mesh_dials(int rank, int peer, int world);

}  // namespace comm
}  // namespace hb
