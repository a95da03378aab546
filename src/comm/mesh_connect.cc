#include "comm/mesh_connect.h"

#include "abi/error.h"
#include "comm/kv_gather.h"
#include "comm/tcp_pair.h"
#include "common/clock.h"
#include "common/log.h"

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

void MeshContext::connect_pairs(const std::vector<std::vector<char>> &peer_addr,
                                bool wait) {
  // Every pair's connect starts (the dialling side's is a non-blocking
  // connect) before any wait: a rank waits for nothing in its first pass,
  // so no order of ranks can wait in a cycle, and the waits that follow
  // overlap instead of costing one hand-off to the loop thread per peer
  // (64 ranks on 2 cores: 126 blocking connects took 7-8 s). Both passes
  // start at the next rank (round k: rank r with r + k, a permutation), so
  // no rank is every rank's first.
  for (int k = 1; k < size; ++k) {
    const int q = (rank + k) % size;
    check_broken();
    auto &pair = *connecting_->getPair(q);
    if (!wait)
      start_connect(pair, peer_addr[size_t(q)]);
    else
      wait_connected(pair);
  }
  if (!wait) return;
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
  const int64_t t0 = now_ms();
  for (const auto &ctx : ctxs) ctx->create_pairs(dev);
  const int64_t t_pairs = now_ms();
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
  const int64_t t1 = now_ms();
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
    ctxs[c]->connect_pairs(peer_addr, false);
  }
  for (const auto &ctx : ctxs) {
    ctx->connect_pairs({}, true);
    ctx->device_ = dev;
  }
  HB_LOG_DEBUG(
      "gloo mesh of %d ranks, %zu context(s): pairs %lld ms, exchange %lld "
      "ms, connects %lld ms",
      world, contexts, static_cast<long long>(t_pairs - t0),
      static_cast<long long>(t1 - t_pairs),
      static_cast<long long>(now_ms() - t1));
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
