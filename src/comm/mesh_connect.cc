#include "comm/mesh_connect.h"

#include "abi/error.h"
#include "comm/kv_gather.h"
#include "comm/mesh_listener.h"
#include "comm/tcp_pair.h"
#include "common/clock.h"
#include "common/log.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <random>

#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

namespace hb {
namespace comm {
namespace {

// A rank's bootstrap value: its host address (the leading bytes of a
// sockaddr_storage, room for IPv6, port set), then its nonce.
constexpr size_t kHostBytes = sizeof(sockaddr_in6);
constexpr size_t kBootBytes = kHostBytes + 8;
static_assert(sizeof(sockaddr_in) <= kHostBytes, "IPv4 fits");

sockaddr_storage pair_sockaddr(const gloo::transport::Pair &pair) {
  auto *tcp =
      dynamic_cast<const gloo::transport::tcp::Address *>(&pair.address());
  if (!tcp) fail(HB_ERR_INTERNAL, "Gloo mesh: a pair without a TCP address");
  return tcp->getSockaddr();
}

uint64_t random_nonce() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
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

sockaddr_storage MeshContext::host_address() const {
  // Gloo bound each pair (then closed) on the device's address.
  sockaddr_storage ss = pair_sockaddr(*connecting_->getPair((rank + 1) % size));
  uint16_t *port = port_in(ss);
  if (!port)
    fail(HB_ERR_INTERNAL, "Gloo mesh: address family %d is not IP",
         int(ss.ss_family));
  *port = 0;
  return ss;
}

std::vector<gloo::transport::Pair *> MeshContext::dialled_pairs() const {
  std::vector<gloo::transport::Pair *> out(size_t(size), nullptr);
  for (int q = 0; q < size; ++q)
    if (q != rank && !mesh_dials(rank, q, size))
      out[size_t(q)] = connecting_->getPair(q).get();
  return out;
}

void MeshContext::check_broken() {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw gloo::IoException(why_);
}

void MeshContext::connect_pairs(const std::vector<std::string> &boot,
                                uint32_t context, bool wait) {
  // Every dial starts (non-blocking) before any wait: a rank waits for
  // nothing in its first pass, so no order of ranks can wait in a cycle,
  // and the waits that follow overlap instead of costing one hand-off to
  // the loop thread per peer (64 ranks on 2 cores: 126 blocking connects
  // took 7-8 s). Both passes start at the next rank (round k: rank r with
  // r + k, a permutation), so no rank is every rank's first.
  for (int k = 1; k < size; ++k) {
    const int q = (rank + k) % size;
    check_broken();
    auto &pair = *connecting_->getPair(q);
    if (wait) {
      wait_connected(pair);
    } else if (mesh_dials(rank, q, size)) {
      const std::string &b = boot[size_t(q)];
      sockaddr_storage ss{};
      std::memcpy(&ss, b.data(), kHostBytes);
      if (!port_in(ss))
        fail(HB_ERR_CORRUPT, "Gloo mesh bootstrap: rank %d's address family %d",
             q, int(ss.ss_family));
      MeshHello hello;
      hello.world = uint32_t(size);
      hello.rank = uint32_t(rank);
      hello.context = context;
      std::memcpy(&hello.nonce, b.data() + kHostBytes, 8);
      start_dial(pair, ss, encode_hello(hello));
    }
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
  std::unique_ptr<MeshListener> listener;
  std::vector<std::string> boot;
  if (world > 1) {
    auto tcp = std::dynamic_pointer_cast<gloo::transport::tcp::Device>(dev);
    if (!tcp) fail(HB_ERR_INTERNAL, "Gloo mesh: not a TCP device");
    std::vector<std::vector<gloo::transport::Pair *>> waiting;
    for (const auto &ctx : ctxs) waiting.push_back(ctx->dialled_pairs());
    const uint64_t nonce = random_nonce();
    sockaddr_storage host = ctxs[0]->host_address();
    // Listening before the address is published: a dial finds it ready.
    listener = std::make_unique<MeshListener>(tcp, host, rank, world, nonce,
                                              std::move(waiting));
    *port_in(host) = listener->port();
    std::string value(reinterpret_cast<const char *>(&host), kHostBytes);
    value.append(reinterpret_cast<const char *>(&nonce), 8);
    boot = kv_allgather(kv, prefix, rank, world, value, timeout_ms);
    for (int q = 0; q < world; ++q)
      if (boot[size_t(q)].size() != kBootBytes)
        fail(HB_ERR_CORRUPT,
             "Gloo mesh bootstrap: rank %d published %zu bytes, not %zu (a "
             "rank of another hb version?)",
             q, boot[size_t(q)].size(), kBootBytes);
  }
  const int64_t t1 = now_ms();
  for (size_t c = 0; c < ctxs.size(); ++c)
    ctxs[c]->connect_pairs(boot, uint32_t(c), false);
  for (const auto &ctx : ctxs) {
    ctx->connect_pairs({}, 0, true);
    ctx->device_ = dev;
  }
  HB_LOG_DEBUG(
      "gloo mesh of %d ranks, %zu context(s), one listener: pairs %lld ms, "
      "exchange %lld ms, connects %lld ms",
      world, ctxs.size(), static_cast<long long>(t_pairs - t0),
      static_cast<long long>(t1 - t_pairs),
      static_cast<long long>(now_ms() - t1));
}

void MeshContext::break_connect(const std::string &why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return;
  broken_ = true;
  why_ = why;
  if (!connecting_) return;
  // Closing a pair wakes a connect waiting for its peer (it waits for
  // "connected or later"); connect_pairs then throws `why`.
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    auto &pair = connecting_->getPair(i);
    if (pair) pair->close();
  }
}

}  // namespace comm
}  // namespace hb
