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

bool sock_name(int fd, sockaddr_storage *out) {
  socklen_t len = sizeof *out;
  std::memset(out, 0, sizeof *out);
  return getsockname(fd, reinterpret_cast<sockaddr *>(out), &len) == 0;
}

bool connected(int fd) {
  sockaddr_storage peer;
  socklen_t len = sizeof peer;
  return getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &len) == 0;
}

}  // namespace

bool message_names_peer(const std::string &message, const std::string &peer) {
  if (peer.empty()) return false;
  for (size_t at = message.find(peer); at != std::string::npos;
       at = message.find(peer, at + 1)) {
    const size_t end = at + peer.size();
    if (end == message.size() ||
        !std::isdigit(static_cast<unsigned char>(message[end])))
      return true;
  }
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
    sockaddr_storage self;
    if (fd < 0 || !sock_name(fd, &self) || !connected(fd)) continue;
    links_.push_back(Link{
        fd, r, self, gloo::transport::tcp::Address::fromPeerName(fd).str()});
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

int Links::rank_in_message(const std::string &message) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Link &l : links_)
    if (message_names_peer(message, l.peer)) return l.rank;
  return -1;
}

}  // namespace comm
}  // namespace hb
