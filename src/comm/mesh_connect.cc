#include "comm/mesh_connect.h"

#include "abi/error.h"
#include "comm/kv_gather.h"
#include "comm/mesh_listener.h"
#include "comm/tcp_pair.h"
#include "common/clock.h"
#include "common/log.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
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
    const std::shared_ptr<gloo::transport::Device> &dev,
    const std::vector<bool> &reach) {
  // TcpPairs: a peer killed while they connect fails them, not the process.
  std::shared_ptr<gloo::transport::Context> tctx =
      make_tcp_context(dev, rank, size);
  tctx->setTimeout(getTimeout());
  for (int i = 0; i < size; ++i)
    if (i != rank && reach[size_t(i)]) tctx->createPair(i);
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw gloo::IoException(why_);
  pairs_ = tctx;
  state_.assign(size_t(size), kIdle);
  // Gloo's calls find their pairs here; those to peers not yet connected
  // are connected (LazyMesh::connect) before any call uses them.
  transportContext_ = tctx;
}

sockaddr_storage MeshContext::host_address() const {
  // Gloo bound each pair (then closed) on the device's address: any pair
  // tells it; a context without pairs asks the device.
  sockaddr_storage ss{};
  bool found = false;
  for (int q = 0; q < size && !found; ++q)
    if (q != rank && pairs_->getPair(q)) {
      ss = pair_sockaddr(*pairs_->getPair(q));
      found = true;
    }
  if (!found) fail(HB_ERR_INTERNAL, "Gloo mesh: a context without pairs");
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
      out[size_t(q)] = pairs_->getPair(q).get();
  return out;
}

void MeshContext::check_broken() {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw gloo::IoException(why_);
}

void MeshContext::start_pair(int q, const std::vector<std::string> &boot,
                             uint32_t context) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw gloo::IoException(why_);
  auto &pair = pairs_->getPair(q);
  if (!pair)
    fail(HB_ERR_INTERNAL, "Gloo mesh: rank %d has no pair to rank %d", rank, q);
  if (state_[size_t(q)] != kIdle) return;
  state_[size_t(q)] = kStarted;
  if (!mesh_dials(rank, q, size)) return;  // q dials this rank
  const std::string &b = boot[size_t(q)];
  sockaddr_storage ss{};
  std::memcpy(&ss, b.data(), kHostBytes);
  if (!port_in(ss))
    fail(HB_ERR_CORRUPT, "Gloo mesh bootstrap: rank %d's address family %d", q,
         int(ss.ss_family));
  MeshHello hello;
  hello.world = uint32_t(size);
  hello.rank = uint32_t(rank);
  hello.context = context;
  std::memcpy(&hello.nonce, b.data() + kHostBytes, 8);
  start_dial(*pair, ss, encode_hello(hello));
}

void MeshContext::wait_pair(int q) {
  gloo::transport::Pair *pair;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) throw gloo::IoException(why_);
    if (state_[size_t(q)] == kConnected) return;
    pair = pairs_->getPair(q).get();
  }
  // Without the lock: break_connect closes the pair to end this wait.
  wait_connected(*pair);
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw gloo::IoException(why_);
  // A closed pair also counts as "connected or later" for Gloo's wait.
  if (pair_socket(*pair) < 0)
    throw gloo::IoException(
        format("Gloo mesh: the pair to rank %d closed while connecting", q));
  state_[size_t(q)] = kConnected;
}

size_t MeshContext::connected_pairs() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (int q = 0; pairs_ && q < size; ++q)
    if (q != rank && pairs_->getPair(q) &&
        pair_socket(*pairs_->getPair(q)) >= 0)
      ++n;
  return n;
}

LazyMesh::LazyMesh(rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
                   const std::shared_ptr<gloo::transport::Device> &dev,
                   std::vector<std::shared_ptr<MeshContext>> ctxs,
                   const std::vector<bool> &reach)
    : ctxs_(std::move(ctxs)) {
  if (ctxs_.empty()) return;
  const int rank = ctxs_[0]->rank, world = ctxs_[0]->size;
  done_.assign(size_t(world), false);
  bool any = false;
  for (int q = 0; q < world; ++q) any |= q != rank && reach[size_t(q)];
  for (const auto &ctx : ctxs_) {
    ctx->create_pairs(dev, reach);
    ctx->device_ = dev;
  }
  // Every rank takes part in the exchange (it is one gather for all), also
  // one without a pair (all its peers share its host): its value is only
  // read by peers that dial it, and none does.
  if (world < 2) return;
  auto tcp = std::dynamic_pointer_cast<gloo::transport::tcp::Device>(dev);
  if (!tcp) fail(HB_ERR_INTERNAL, "Gloo mesh: not a TCP device");
  const uint64_t nonce = random_nonce();
  std::string value(kBootBytes, '\0');
  if (any) {
    std::vector<std::vector<gloo::transport::Pair *>> waiting;
    for (const auto &ctx : ctxs_) waiting.push_back(ctx->dialled_pairs());
    sockaddr_storage host = ctxs_[0]->host_address();
    // Listening before the address is published: a dial finds it ready.
    listener_ = std::make_unique<MeshListener>(tcp, host, rank, world, nonce,
                                               std::move(waiting));
    *port_in(host) = listener_->port();
    value.assign(reinterpret_cast<const char *>(&host), kHostBytes);
    value.append(reinterpret_cast<const char *>(&nonce), 8);
  }
  boot_ = kv_allgather(kv, prefix, rank, world, value, timeout_ms);
  for (int q = 0; q < world; ++q)
    if (boot_[size_t(q)].size() != kBootBytes)
      fail(HB_ERR_CORRUPT,
           "Gloo mesh bootstrap: rank %d published %zu bytes, not %zu (a "
           "rank of another hb version?)",
           q, boot_[size_t(q)].size(), kBootBytes);
  formed_ms_ = now_ms();
}

LazyMesh::~LazyMesh() { close_listener(); }

void LazyMesh::close_listener() {
  std::lock_guard<std::mutex> lock(mu_);
  listener_.reset();
}

std::vector<int> LazyMesh::connect(const std::vector<int> &peers) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> todo;
  for (int q : peers)
    if (!done_[size_t(q)]) todo.push_back(q);
  if (todo.empty() || ctxs_.empty()) return {};
  const int rank = ctxs_[0]->rank, world = ctxs_[0]->size;
  // Every dial starts (non-blocking) before any wait: a rank waits for
  // nothing in its first pass, so no order of ranks can wait in a cycle,
  // and the waits that follow overlap instead of costing one hand-off to
  // the loop thread per peer (64 ranks on 2 cores: 126 blocking connects
  // took 7-8 s). Both passes start after this rank (round k: rank r with
  // r + k, a permutation), so no rank is every rank's first.
  std::sort(todo.begin(), todo.end(), [&](int a, int b) {
    return (a - rank + world) % world < (b - rank + world) % world;
  });
  const int64_t t0 = now_ms();
  for (size_t c = 0; c < ctxs_.size(); ++c)
    for (int q : todo) ctxs_[c]->start_pair(q, boot_, uint32_t(c));
  for (const auto &ctx : ctxs_)
    for (int q : todo) ctx->wait_pair(q);
  for (int q : todo) done_[size_t(q)] = true;
  size_t now = 0;
  for (bool d : done_) now += d;
  HB_LOG_DEBUG(
      "gloo mesh, rank %d of %d: %zu peer(s) connected in %lld ms, %lld ms "
      "after forming; %zu of %d peers now, %zu context(s)",
      rank, world, todo.size(), static_cast<long long>(now_ms() - t0),
      static_cast<long long>(t0 - formed_ms_), now, world - 1, ctxs_.size());
  return todo;
}

void connect_meshes(rdv::KV &kv, const std::string &prefix, int64_t timeout_ms,
                    const std::shared_ptr<gloo::transport::Device> &dev,
                    const std::vector<std::shared_ptr<MeshContext>> &ctxs) {
  if (ctxs.empty()) return;
  const int rank = ctxs[0]->rank, world = ctxs[0]->size;
  const int64_t t0 = now_ms();
  std::vector<bool> reach(size_t(world), true);
  reach[size_t(rank)] = false;
  LazyMesh mesh(kv, prefix, timeout_ms, dev, ctxs, reach);
  const int64_t t1 = now_ms();
  std::vector<int> peers;
  for (int q = 0; q < world; ++q)
    if (q != rank) peers.push_back(q);
  mesh.connect(peers);
  HB_LOG_DEBUG(
      "gloo mesh of %d ranks, %zu context(s), one listener: pairs and "
      "exchange %lld ms, connects %lld ms",
      world, ctxs.size(), static_cast<long long>(t1 - t0),
      static_cast<long long>(now_ms() - t1));
}

void MeshContext::break_connect(const std::string &why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return;
  broken_ = true;
  why_ = why;
  if (!pairs_) return;
  // Failing a pair closes it and wakes a connect waiting for its peer;
  // wait_pair then throws `why`. Connected pairs are comm/links.h's to
  // break (shutting their sockets down).
  for (int i = 0; i < size; ++i) {
    if (i == rank || state_[size_t(i)] == kConnected) continue;
    auto &pair = pairs_->getPair(i);
    if (pair) break_pair(*pair, why);
  }
}

}  // namespace comm
}  // namespace hb
