#include "comm/mesh_listener.h"

#include "abi/error.h"
#include "comm/tcp_pair.h"
#include "common/log.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>

namespace hb {
namespace comm {

// An accepted connection until its hello is read. The loop reads it (and
// closes it); the listener's destructor closes what is left. Both hold mu
// for that; the loop only tries it, as Gloo's pairs do: the destructor
// holds it while it waits for the loop's tick.
struct MeshListener::Conn : gloo::transport::tcp::Handler {
  Conn(MeshListener *owner, int fd) : owner(owner), fd(fd) {}
  void handleEvents(int events) override;
  // In the loop: stops watching fd and closes it.
  void drop();
  std::string peer() const;

  MeshListener *const owner;
  std::mutex mu;
  int fd;
  char hello[kHelloBytes];
  size_t got = 0;
};

uint16_t *port_in(sockaddr_storage &ss) {
  if (ss.ss_family == AF_INET)
    return &reinterpret_cast<sockaddr_in *>(&ss)->sin_port;
  if (ss.ss_family == AF_INET6)
    return &reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port;
  return nullptr;
}

bool mesh_dials(int rank, int peer, int world) {
  const int d = ((peer - rank) % world + world) % world;
  return 2 * d < world || (2 * d == world && rank < peer);
}

MeshListener::MeshListener(
    const std::shared_ptr<gloo::transport::tcp::Device> &dev,
    const sockaddr_storage &host, int rank, int world, uint64_t nonce,
    std::vector<std::vector<gloo::transport::Pair *>> waiting)
    : dev_(dev),
      rank_(rank),
      world_(world),
      nonce_(nonce),
      waiting_(std::move(waiting)) {
  sockaddr_storage addr = host;
  uint16_t *port = port_in(addr);
  if (!port)
    fail(HB_ERR_INTERNAL, "Gloo mesh: address family %d is not IP",
         int(addr.ss_family));
  *port = 0;
  const socklen_t len =
      addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  fd_ = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ == -1)
    fail(HB_ERR_INTERNAL, "Gloo mesh listener: socket: %s",
         std::strerror(errno));
  // Every peer may dial at once, and a full backlog costs a dialler a SYN
  // retransmission (1 s): the kernel's largest (net.core.somaxconn).
  const int backlog = SOMAXCONN;
  sockaddr_storage bound{};
  socklen_t n = sizeof bound;
  if (::bind(fd_, reinterpret_cast<const sockaddr *>(&addr), len) == -1 ||
      ::listen(fd_, backlog) == -1 ||
      getsockname(fd_, reinterpret_cast<sockaddr *>(&bound), &n) == -1) {
    const int err = errno;
    ::close(fd_);
    fail(HB_ERR_INTERNAL, "Gloo mesh listener of rank %d: %s", rank,
         std::strerror(err));
  }
  port_ = *port_in(bound);
  dev_->registerDescriptor(fd_, EPOLLIN, this);
}

MeshListener::~MeshListener() {
  // Closing fds drops them from the loop's epoll set; a Conn whose event
  // the loop already fetched finds fd -1 (under its lock) and returns. One
  // tick (the listener's unregister) then separates the last such call
  // from the Conns' destruction: one wait in all, not one per connection.
  std::vector<Conn *> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;  // accepts from now on are closed at once
    for (auto &c : conns_) left.push_back(c.get());
  }
  for (Conn *c : left) {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->fd == -1) continue;
    HB_LOG_DEBUG("Gloo mesh listener of rank %d: no hello from %s", rank_,
                 c->peer().c_str());
    ::close(c->fd);
    c->fd = -1;
  }
  dev_->unregisterDescriptor(fd_, this);
  ::close(fd_);
}

void MeshListener::handleEvents(int) {
  for (;;) {
    const int fd =
        ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd == -1) {
      // EAGAIN: nothing left; anything else (a connection reset before
      // accept, no fds) is the dialler's to see: it fails its own pair.
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        HB_LOG_DEBUG("Gloo mesh listener of rank %d: accept: %s", rank_,
                     std::strerror(errno));
      return;
    }
    auto conn = std::make_unique<Conn>(this, fd);
    Conn *c = conn.get();
    // Held until the fd is watched (or closed): the destructor closes
    // connections under it and must not close one being registered.
    std::lock_guard<std::mutex> conn_lock(c->mu);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_) {  // the mesh formed or failed: nobody waits
        ::close(fd);
        continue;
      }
      conns_.push_back(std::move(conn));
    }
    try {
      dev_->registerDescriptor(fd, EPOLLIN, c);
    } catch (const std::exception &e) {
      HB_LOG_DEBUG("Gloo mesh listener of rank %d: %s", rank_, e.what());
      ::close(c->fd);
      c->fd = -1;
    }
  }
}

void MeshListener::Conn::handleEvents(int) {
  std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
  if (!lock || fd == -1) return;
  const ssize_t n = ::recv(fd, hello + got, kHelloBytes - got, MSG_DONTWAIT);
  if (n > 0) {
    got += size_t(n);
    if (got < kHelloBytes) return;
    try {
      owner->answer(*this);
    } catch (const std::exception &e) {  // never into Gloo's loop thread
      HB_LOG_DEBUG("Gloo mesh listener of rank %d: %s", owner->rank_, e.what());
      if (fd != -1) {
        ::close(fd);  // leaves the epoll set with it
        fd = -1;
      }
    }
    return;
  }
  if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  // Closed before its hello: a rank that died while dialling (the
  // rendezvous reports it) or a stranger.
  HB_LOG_DEBUG("Gloo mesh listener of rank %d: %s closed before its hello",
               owner->rank_, peer().c_str());
  drop();
}

void MeshListener::Conn::drop() {
  owner->dev_->unregisterDescriptor(fd, this);  // the loop: no wait
  ::close(fd);
  fd = -1;
}

std::string MeshListener::Conn::peer() const {
  sockaddr_storage ss{};
  socklen_t n = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &n) == -1)
    return "a peer";
  return address_text(ss);
}

void MeshListener::answer(Conn &c) {
  MeshHello h;
  uint8_t reply = kHelloAccepted;
  gloo::transport::Pair *pair = nullptr;
  if (!decode_hello(c.hello, h))
    reply = kHelloNotMesh;
  else if (h.nonce != nonce_)
    reply = kHelloWrongNonce;
  else if (h.world != uint32_t(world_) || h.rank >= uint32_t(world_) ||
           h.context >= waiting_.size())
    reply = kHelloBadRank;
  else if (!(pair = waiting_[h.context][h.rank]))
    reply = kHelloUnexpected;
  if (reply != kHelloAccepted) {
    HB_LOG_WARN(
        "Gloo mesh listener of rank %d: refused a connection from %s: %s",
        rank_, c.peer().c_str(), hello_reply_text(reply));
    (void)!::send(c.fd, &reply, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return c.drop();
  }
  waiting_[h.context][h.rank] = nullptr;  // one connection per pair
  const int fd = c.fd;
  dev_->unregisterDescriptor(fd, &c);  // the loop: no wait
  c.fd = -1;
  // The answer goes before the pair's first message: the dialler reads
  // exactly this byte, then hands the socket to Gloo.
  if (::send(fd, &reply, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    const int err = errno;
    ::close(fd);
    return fail_accept(*pair,
                       "Gloo mesh: rank " + std::to_string(h.rank) +
                           "'s connection broke while answering its hello: " +
                           std::strerror(err));
  }
  hand_accepted(*pair, fd);
}

}  // namespace comm
}  // namespace hb
