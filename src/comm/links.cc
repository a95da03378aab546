#include "comm/links.h"

#include "comm/tcp_pair.h"

#include <netinet/in.h>
#include <unistd.h>

#include <cctype>
#include <cstring>

#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

namespace hb {
namespace comm {
namespace {

bool same_endpoint(const sockaddr_storage &a, const sockaddr_storage &b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    auto &x = reinterpret_cast<const sockaddr_in &>(a);
    auto &y = reinterpret_cast<const sockaddr_in &>(b);
    return x.sin_port == y.sin_port &&
           std::memcmp(&x.sin_addr, &y.sin_addr, sizeof x.sin_addr) == 0;
  }
  if (a.ss_family == AF_INET6) {
    auto &x = reinterpret_cast<const sockaddr_in6 &>(a);
    auto &y = reinterpret_cast<const sockaddr_in6 &>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

// The socket's own address, or its peer's (false if not connected).
bool sock_name(int fd, sockaddr_storage *out, bool peer = false) {
  socklen_t len = sizeof *out;
  std::memset(out, 0, sizeof *out);
  auto *addr = reinterpret_cast<sockaddr *>(out);
  return (peer ? getpeername(fd, addr, &len) : getsockname(fd, addr, &len)) ==
         0;
}

// Whether peer is printed whole at message[at]: there, and its port not
// continued by another digit.
bool peer_at(const std::string &message, size_t at, const std::string &peer) {
  const size_t end = at + peer.size();
  return !peer.empty() && message.compare(at, peer.size(), peer) == 0 &&
         (end == message.size() ||
          !std::isdigit(static_cast<unsigned char>(message[end])));
}

}  // namespace

bool message_names_peer(const std::string &message, const std::string &peer) {
  if (peer.empty()) return false;
  for (size_t at = message.find(peer); at != std::string::npos;
       at = message.find(peer, at + 1))
    if (peer_at(message, at, peer)) return true;
  return false;
}

void Links::add_context(gloo::Context &ctx) {
  std::vector<int> peers;
  for (int r = 0; r < ctx.size; ++r)
    if (r != ctx.rank) peers.push_back(r);
  add_pairs(ctx, peers);
}

void Links::add_pairs(gloo::Context &ctx, const std::vector<int> &peers) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int r : peers) {
    if (r == ctx.rank) continue;
    auto &pair = ctx.getPair(r);
    if (!pair) continue;
    const int fd = pair_socket(*pair);
    sockaddr_storage self, peer;
    if (fd < 0 || !sock_name(fd, &self) || !sock_name(fd, &peer, true))
      continue;
    links_.push_back(Link{fd, r, self,
                          gloo::transport::tcp::Address(peer).str(),
                          address_text(peer)});
  }
}

void Links::break_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Link &l : links_) {
    if (l.fd < 0) continue;
    sockaddr_storage now;
    // Gloo may have closed the socket already and the number been reused:
    // only touch it if it is still the same endpoint.
    if (sock_name(l.fd, &now) && same_endpoint(now, l.self))
      ::shutdown(l.fd, SHUT_RDWR);
    l.fd = -1;
  }
}

std::string Links::readable(const std::string &message) const {
  std::lock_guard<std::mutex> lock(mu_);
  // One pass, left to right, trying each link where an address may start.
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size();) {
    const Link *hit = nullptr;
    if (message[i] == '[')
      for (const Link &l : links_)
        if (peer_at(message, i, l.peer)) {
          hit = &l;
          break;
        }
    if (hit) {
      out += hit->text;
      i += hit->peer.size();
    } else {
      out += message[i++];
    }
  }
  return out;
}

int Links::rank_in_message(const std::string &message) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Link &l : links_)
    if (message_names_peer(message, l.peer)) return l.rank;
  return -1;
}

}  // namespace comm
}  // namespace hb
