#include "comm/mesh_connect.h"

#include "abi/error.h"
#include "comm/kv_gather.h"
#include "comm/tcp_pair.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

namespace hb {
namespace comm {
namespace {

// A host address as exchanged: the leading bytes of a sockaddr_storage,
// room for IPv6, port zero.
constexpr size_t kHostBytes = sizeof(sockaddr_in6);
static_assert(sizeof(sockaddr_in) <= kHostBytes, "IPv4 fits");

uint16_t *port_of(sockaddr_storage &ss) {
  if (ss.ss_family == AF_INET)
    return &reinterpret_cast<sockaddr_in *>(&ss)->sin_port;
  if (ss.ss_family == AF_INET6)
    return &reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port;
  return nullptr;
}

sockaddr_storage pair_sockaddr(const gloo::transport::Pair &pair) {
  auto *tcp =
      dynamic_cast<const gloo::transport::tcp::Address *>(&pair.address());
  if (!tcp) fail(HB_ERR_INTERNAL, "Gloo mesh: a pair without a TCP address");
  return tcp->getSockaddr();
}

// Gloo's Pair::connect rule (tcp/pair.cc): the side whose address is
// greater (host bytes, then the port's raw network-order value) connects,
// the other waits for it. Connecting needs nothing from the peer but its
// listening socket, which exists before its address is published.
bool connects_first(const sockaddr_storage &self,
                    const sockaddr_storage &peer) {
  int rv;
  if (self.ss_family == AF_INET) {
    auto *a = reinterpret_cast<const sockaddr_in *>(&self);
    auto *b = reinterpret_cast<const sockaddr_in *>(&peer);
    rv = std::memcmp(&a->sin_addr, &b->sin_addr, sizeof a->sin_addr);
    if (rv == 0) rv = int(a->sin_port) - int(b->sin_port);
  } else {
    auto *a = reinterpret_cast<const sockaddr_in6 *>(&self);
    auto *b = reinterpret_cast<const sockaddr_in6 *>(&peer);
    rv = std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr);
    if (rv == 0) rv = int(a->sin6_port) - int(b->sin6_port);
  }
  return rv > 0;
}

// Rank 0's routing: every rank's host address to all, and to each rank q
// the ports of every peer's pairs to q (context by context).
void route_ports(const std::vector<std::string> &all, size_t contexts,
                 std::string &common, std::vector<std::string> &each) {
  const size_t world = all.size();
  const size_t want = kHostBytes + 2 * contexts * world;
  for (size_t q = 0; q < world; ++q)
    if (all[q].size() != want)
      fail(HB_ERR_CORRUPT,
           "Gloo mesh bootstrap: rank %zu published %zu bytes, not %zu (a "
           "rank of another world size or hb version?)",
           q, all[q].size(), want);
  common.reserve(kHostBytes * world);
  for (size_t q = 0; q < world; ++q) common.append(all[q], 0, kHostBytes);
  for (size_t r = 0; r < world; ++r) {
    std::string &out = each[r];
    out.reserve(2 * contexts * world);
    for (size_t c = 0; c < contexts; ++c)
      for (size_t q = 0; q < world; ++q)
        out.append(all[q], kHostBytes + 2 * (c * world + r), 2);
  }
}

}  // namespace

void MeshContext::create_pairs(
    const std::shared_ptr<gloo::transport::Device> &dev) {
  // TcpPairs: a peer killed while they connect fails them, not the process.
  std::shared_ptr<gloo::transport::Context> tctx =
      make_tcp_context(dev, rank, size);
  tctx->setTimeout(getTimeout());
  for (int i = 0; i < size; ++i)
    if (i != rank) tctx->createPair(i);
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw gloo::IoException(why_);
  connecting_ = tctx;
}

std::string MeshContext::host_address() const {
  std::string host;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    sockaddr_storage ss = pair_sockaddr(*connecting_->getPair(i));
    uint16_t *port = port_of(ss);
    if (!port)
      fail(HB_ERR_INTERNAL, "Gloo mesh: address family %d is not IP",
           int(ss.ss_family));
    *port = 0;
    std::string h(reinterpret_cast<const char *>(&ss), kHostBytes);
    if (host.empty())
      host = h;
    else if (h != host)  // this Gloo binds every pair to the device's host
      fail(HB_ERR_INTERNAL, "Gloo mesh: rank %d's pairs listen on two hosts",
           rank);
  }
  if (host.empty()) host.assign(kHostBytes, '\0');  // a world of one
  return host;
}

uint16_t MeshContext::port_to(int peer) const {
  if (peer == rank) return 0;
  sockaddr_storage ss = pair_sockaddr(*connecting_->getPair(peer));
  return *port_of(ss);
}

void MeshContext::check_broken() {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw gloo::IoException(why_);
}

void MeshContext::connect_pairs(
    const std::vector<std::vector<char>> &peer_addr) {
  // Two passes, each starting at the next rank (round k: rank r with
  // r + k, a permutation, so no rank is every rank's first). The connecting
  // sides first: they wait only for their own loop thread. The waiting
  // sides then find their peers' connections already accepted (or on the
  // way), whatever order those ranks take: no cycle of waits, and no rank
  // waits on another's progress through its list.
  for (int pass = 0; pass < 2; ++pass) {
    for (int k = 1; k < size; ++k) {
      const int q = (rank + k) % size;
      auto &pair = connecting_->getPair(q);
      const gloo::transport::tcp::Address peer(peer_addr[size_t(q)]);
      const bool first =
          connects_first(pair_sockaddr(*pair), peer.getSockaddr());
      if (first != (pass == 0)) continue;
      check_broken();
      pair->connect(peer_addr[size_t(q)]);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  connecting_.swap(transportContext_);
  connecting_.reset();
  if (broken_) throw gloo::IoException(why_);
}

void connect_meshes(rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
                    const std::shared_ptr<gloo::transport::Device> &dev,
                    const std::vector<std::shared_ptr<MeshContext>> &ctxs) {
  if (ctxs.empty()) return;
  const int rank = ctxs[0]->rank, world = ctxs[0]->size;
  for (const auto &ctx : ctxs) ctx->create_pairs(dev);
  std::string value = ctxs[0]->host_address();
  for (const auto &ctx : ctxs)
    for (int q = 0; q < world; ++q) {
      const uint16_t port = ctx->port_to(q);
      value.append(reinterpret_cast<const char *>(&port), 2);
    }
  const size_t contexts = ctxs.size();
  Routed got =
      kv_route(kv, prefix, rank, world, value, timeout_ms,
               [contexts](const std::vector<std::string> &all,
                          std::string &common, std::vector<std::string> &each) {
                 route_ports(all, contexts, common, each);
               });
  if (got.common.size() != kHostBytes * size_t(world) ||
      got.mine.size() != 2 * contexts * size_t(world))
    fail(HB_ERR_CORRUPT,
         "Gloo mesh bootstrap: rank 0 routed %zu + %zu bytes to rank %d, not "
         "%zu + %zu",
         got.common.size(), got.mine.size(), rank, kHostBytes * size_t(world),
         2 * contexts * size_t(world));
  for (size_t c = 0; c < contexts; ++c) {
    std::vector<std::vector<char>> peer_addr(static_cast<size_t>(world));
    for (int q = 0; q < world; ++q) {
      if (q == rank) continue;
      sockaddr_storage ss{};
      std::memcpy(&ss, got.common.data() + kHostBytes * size_t(q), kHostBytes);
      uint16_t *port = port_of(ss);
      if (!port)
        fail(HB_ERR_CORRUPT, "Gloo mesh bootstrap: rank %d's address family %d",
             q, int(ss.ss_family));
      std::memcpy(port, got.mine.data() + 2 * (c * size_t(world) + size_t(q)),
                  2);
      peer_addr[size_t(q)] = gloo::transport::tcp::Address(ss).bytes();
    }
    ctxs[c]->connect_pairs(peer_addr);
    ctxs[c]->device_ = dev;
  }
}

void MeshContext::break_connect(const std::string &why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return;
  broken_ = true;
  why_ = why;
  if (!connecting_) return;
  // Closing a pair wakes a Pair::connect waiting for its peer (it waits
  // for "connected or later"); connect_pairs then throws `why`.
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    auto &pair = connecting_->getPair(i);
    if (pair) pair->close();
  }
}

}  // namespace comm
}  // namespace hb
