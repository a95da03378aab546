#include "comm/gloo_backend.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoallv.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "abi/error.h"
#include "comm/gloo_p2p.h"
#include "comm/hier_alltoallv.h"
#include "comm/hier_reduce.h"
#include "comm/kv_gather.h"
#include "comm/links.h"
#include "comm/mesh_connect.h"
#include "comm/p2p_collectives.h"
#include "comm/pair_exchange.h"
#include "comm/rank_order.h"
#include "comm/reduce_kernels.h"
#include "comm/region_p2p.h"
#include "comm/routed_p2p.h"
#include "comm/shm_transport.h"
#include "comm/traffic.h"
#include "common/clock.h"
#include "common/fd_limit.h"
#include "common/health.h"
#include "common/log.h"
#include "rendezvous/kv.h"

namespace hb {
namespace comm {

namespace {

// P2P channels: the rank-order reduction takes 0 and 1, fingerprints 2.
constexpr int kDataChannel = 0;
constexpr int kPrintChannel = 2;
// cpu_alltoallv=auto routes through host leaders from this many ranks:
// below it the model of docs/scaling.md has the leader's copies and two
// extra hops per round cost about what the saved network messages do.
constexpr int kHierMinWorld = 64;
// cpu_allreduce_route=auto from this many: with the leaders' messages on
// registered buffers the routed reduction measured no slower than direct
// at 2 hosts x 2 ranks (median step ratio 0.99) and faster at 2 x 4 (0.91;
// bench/step_cost, 7 interleaved launches, docs/scaling.md).
constexpr int kHierReduceMinWorld = 8;

// Legacy algorithms take an int count; larger tensors go in pieces.
constexpr size_t kMaxPiece = size_t(1) << 30;
// Cached algorithms alive at once, and the bytes they cover (each holds
// receive buffers about as large as its tensor); past either, the least
// recently used is dropped and rebuilt on its next use. Eviction depends
// only on the call sequence, so every rank evicts the same ones.
constexpr size_t kMaxLiveAlgos = 64;
constexpr size_t kMaxLiveBytes = size_t(256) << 20;

template <class T>
const gloo::ReductionFunction<T> *reduction(hb_reduce_op op) {
  static const gloo::ReductionFunction<T> sum(gloo::SUM, &Kernels<T>::sum);
  static const gloo::ReductionFunction<T> prod(gloo::PRODUCT,
                                               &Kernels<T>::prod);
  static const gloo::ReductionFunction<T> mn(gloo::MIN, &Kernels<T>::min);
  static const gloo::ReductionFunction<T> mx(gloo::MAX, &Kernels<T>::max);
  switch (op) {
    case HB_PROD:
      return &prod;
    case HB_MIN:
      return &mn;
    case HB_MAX:
      return &mx;
    default:
      return &sum;  // HB_SUM, HB_AVG
  }
}

template <class T, class Kind>
std::unique_ptr<gloo::Algorithm> make_typed(
    Kind kind, const std::shared_ptr<gloo::Context> &ctx, void *buf, int n,
    hb_reduce_op op) {
  std::vector<T *> ptrs{static_cast<T *>(buf)};
  const gloo::ReductionFunction<T> *fn = reduction<T>(op);
  switch (kind) {
    case Kind::kRing:
      return std::make_unique<gloo::AllreduceRing<T>>(ctx, ptrs, n, fn);
    case Kind::kRingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<T>>(ctx, ptrs, n, fn);
    case Kind::kBcube:
      return std::make_unique<gloo::AllreduceBcube<T>>(ctx, ptrs, n, fn);
    case Kind::kHalvingDoubling:
    case Kind::kRankOrder:
      break;
  }
  return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx, ptrs, n, fn);
}

bool is_timeout_message(const std::string &m) {
  return m.find("Timed out") != std::string::npos ||
         m.find("timeout") != std::string::npos ||
         m.find("Timeout") != std::string::npos;
}

bool overlaps(const void *a, size_t an, const void *b, size_t bn) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

// True when offsets are the prefix sums of counts (blocks packed in rank
// order from 0), so a Gloo call can write or read the user buffer directly.
bool packed(const int64_t *counts, const int64_t *offsets, int n) {
  int64_t at = 0;
  for (int r = 0; r < n; ++r) {
    if (offsets[r] != at) return false;
    at += counts[r];
  }
  return true;
}

// Gloo writes to its sockets without MSG_NOSIGNAL: once a peer is gone, a
// write would raise SIGPIPE and kill the host process. SIGPIPE is blocked on
// the calling thread for the duration of a call (a pending one raised by the
// call is consumed), and Gloo's event-loop thread, created under this guard,
// inherits the blocked mask for good.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &s, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    sigset_t pending;
    if (!was_pending_ && sigpending(&pending) == 0 &&
        sigismember(&pending, SIGPIPE) == 1) {
      sigset_t s;
      sigemptyset(&s);
      sigaddset(&s, SIGPIPE);
      timespec zero{0, 0};
      sigtimedwait(&s, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

// Blocks of bytes[r] bytes at base + offsets[r] * es <-> packed in rank
// order.
template <class N>
void pack_blocks(char *packed, const char *base, const int64_t *offsets,
                 size_t es, const std::vector<N> &bytes) {
  size_t at = 0;
  for (size_t r = 0; r < bytes.size(); at += size_t(bytes[r]), ++r)
    if (bytes[r])
      std::memcpy(packed + at, base + offsets[r] * es, size_t(bytes[r]));
}
template <class N>
void unpack_blocks(char *base, const int64_t *offsets, size_t es,
                   const char *packed, const std::vector<N> &bytes) {
  size_t at = 0;
  for (size_t r = 0; r < bytes.size(); at += size_t(bytes[r]), ++r)
    if (bytes[r])
      std::memcpy(base + offsets[r] * es, packed + at, size_t(bytes[r]));
}

// Bytes from base to the end of the last non-empty block.
size_t total_span(const int64_t *counts, const int64_t *offsets, int n,
                  size_t es) {
  int64_t span = 0;
  for (int r = 0; r < n; ++r)
    if (counts[r]) span = std::max(span, offsets[r] + counts[r]);
  return size_t(span) * es;
}

uint8_t g_empty;  // non-NULL target for zero-byte Gloo buffers

uint8_t *bytes(const void *p) {
  return p ? static_cast<uint8_t *>(const_cast<void *>(p)) : &g_empty;
}

}  // namespace

GlooBackend::GlooBackend(const BackendConfig &cfg, rdv::KV &kv, Health &health)
    : Backend(cfg.rank, cfg.world_size),
      cfg_(cfg),
      health_(health),
      kv_(kv),
      links_(std::make_shared<Links>()) {
  const std::string &a = cfg.allreduce_algorithm;
  if (a == "auto" || a == "rank_order")
    algo_kind_ = Algo::kRankOrder;
  else if (a == "halving_doubling")
    algo_kind_ = Algo::kHalvingDoubling;
  else if (a == "ring")
    algo_kind_ = Algo::kRing;
  else if (a == "ring_chunked")
    algo_kind_ = Algo::kRingChunked;
  else if (a == "bcube")
    algo_kind_ = Algo::kBcube;
  else
    fail(HB_ERR_CONFIG, "option cpu_allreduce: unknown algorithm '%s'",
         a.c_str());
  for (const auto &[option, route] :
       {std::pair<const char *, const std::string &>{"cpu_alltoallv",
                                                     cfg.alltoallv},
        {"cpu_allreduce_route", cfg.allreduce_route}})
    if (route != "auto" && route != "direct" && route != "hier")
      fail(HB_ERR_CONFIG, "option %s: unknown route '%s'", option,
           route.c_str());
  if (algo_kind_ == Algo::kBcube && (world_size() & (world_size() - 1)))
    fail(HB_ERR_CONFIG,
         "option cpu_allreduce=bcube needs a power-of-two world size, not %d",
         world_size());

  // Subscribed before the mesh connects: a rank lost (or an abort) while it
  // forms breaks the connect at once instead of after Gloo's own timeout.
  auto algo = std::make_shared<MeshContext>(cfg.rank, cfg.world_size);
  auto coll = std::make_shared<MeshContext>(cfg.rank, cfg.world_size);
  std::shared_ptr<Links> links = links_;
  std::shared_ptr<WaitBreaker> breaker = breaker_;
  std::shared_ptr<ShmSlot> shm_slot = shm_slot_;
  health_sub_ = health_.subscribe([links, breaker, algo, coll, shm_slot](
                                      hb_status, const std::string &why) {
    algo->break_connect(why);
    coll->break_connect(why);
    links->break_all();
    breaker->trip();
    shm_slot->trip();
  });
  try {
    connect_mesh(cfg, kv, algo, coll);
  } catch (...) {
    health_.unsubscribe(health_sub_);  // the destructor will not run
    throw;
  }
}

void GlooBackend::connect_mesh(const BackendConfig &cfg, rdv::KV &kv,
                               const std::shared_ptr<MeshContext> &algo,
                               const std::shared_ptr<MeshContext> &coll) {
  // Same-host peers first (comm/shm_transport.h), found through the KV: they
  // decide whether the world needs sockets at all. The health subscription
  // (made before) trips the transport from the moment it exists.
  const std::string host =
      cfg.test_hosts > 0
          ? "test-host-" +
                std::to_string(cfg.rank * cfg.test_hosts / cfg.world_size)
          : (cfg.hostname.empty() ? "-" : cfg.hostname);
  auto shm = std::make_shared<ShmTransport>(
      cfg.rank, cfg.world_size, kv, cfg.key_prefix, cfg.transport,
      cfg.timeout_ms, host, cfg.wait_spin_us, cfg.wait_slice_us);
  HB_LOG_DEBUG("cpu transport, rank %d (host %s) to each peer: %s", cfg.rank,
               host.c_str(), shm->describe().c_str());
  if (shm->world_uses_shm()) {
    shm_slot_->set(shm);
    shm_ = shm;
    board_ = shm->world_all_shm();  // a world-wide choice
    // Measured (bench/comm_bench): at 2 ranks the rings' two copies beat the
    // board's rounds; from 3 ranks the board's direct folds win.
    staged_board_ = cfg.shm_reduce == "board" ||
                    (cfg.shm_reduce == "auto" && cfg.world_size >= 3);
    sockets_free_ = board_ && algo_kind_ == Algo::kRankOrder;
    // Mixed worlds: alltoallv through one leader per host (comm/
    // hier_alltoallv.h) on request, or (auto) from kHierMinWorld ranks,
    // where the network messages it saves outweigh its two extra hops and
    // the leader's copies (docs/scaling.md); the reductions likewise from
    // kHierReduceMinWorld.
    hosts_ = HostGroups::from_leaders(shm->host_leaders());
    if (!board_) agree_route(cfg, kv);
    auto leaders = [&](const std::string &route, int min_world) {
      return !board_ && !hosts_.members.empty() &&
             (route == "hier" || (route == "auto" && hosts_.hierarchical() &&
                                  cfg.world_size >= min_world));
    };
    hier_ = leaders(cfg.alltoallv, kHierMinWorld);
    hier_reduce_ = leaders(cfg.allreduce_route, kHierReduceMinWorld);
  }
  HB_LOG_DEBUG("cpu alltoallv, rank %d: %s; reductions: %s", cfg.rank,
               hier_ ? "hierarchical" : "direct",
               hier_reduce_ ? "hierarchical" : "direct");
  // Every call of such a world runs on the board or the shared-memory rings
  // (the same choice on every rank): no pair of the mesh would ever carry a
  // byte. Skipping it is what lets one host hold 128 ranks (docs/scaling.md:
  // the mesh is 2(N-1) sockets per rank, 82 s to form at 128 ranks).
  if (sockets_free_) return;
  // A world of several hosts whose calls all run over P2P (rank order, shm
  // to the same host's peers) connects pairs on first use, and never to a
  // peer of its own host: Gloo's algorithms (cpu_allreduce) and the
  // collectives of an all-TCP world use every pair, so there all connect
  // when the world forms, as before. Same choice on every rank.
  lazy_ = shm_ && !board_ && algo_kind_ == Algo::kRankOrder;
  std::vector<bool> reach(size_t(cfg.world_size), true);
  reach[size_t(cfg.rank)] = false;
  for (int q = 0; q < cfg.world_size; ++q) {
    if (lazy_ && shm_->reaches(q)) reach[size_t(q)] = false;
    if (reach[size_t(q)]) far_peers_.push_back(q);
  }
  // A leader's TCP peers on the routes through the leaders (pairs made on
  // first use connect only these there; the leaders' registered regions
  // hold only these).
  if (!hosts_.members.empty()) {
    const int host = hosts_.host_of[size_t(cfg.rank)];
    if (hosts_.members[size_t(host)][0] == cfg.rank)
      for (size_t h = 0; h < hosts_.members.size(); ++h)
        if (int(h) != host) leader_peers_.push_back(hosts_.members[h][0]);
  }
  // Two contexts of a socket per TCP peer, plus the device's listener.
  raise_fd_limit(2 * far_peers_.size() + 64);
  guarded("connecting the Gloo full mesh", [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = cfg.hostname;
    dev_ = gloo::transport::tcp::CreateDevice(attr);
    for (const auto &ctx : {algo, coll})
      ctx->setTimeout(std::chrono::milliseconds(cfg.timeout_ms));
    // Both contexts in one exchange through the rendezvous (O(N) bytes per
    // rank; comm/mesh_connect.h).
    const int64_t t0 = now_ms();
    mesh_ = std::make_unique<LazyMesh>(
        kv, cfg.key_prefix + "mesh/", cfg.timeout_ms, dev_,
        std::vector<std::shared_ptr<MeshContext>>{algo, coll}, reach);
    algo_ctx_ = algo;
    coll_ctx_ = coll;
    algo_mesh_ = algo;
    coll_mesh_ = coll;
    if (!lazy_) {
      far_up_ = leaders_up_ = true;
      mesh_->connect(far_peers_);
      mesh_->close_listener();  // every pair is connected
      links_->add_context(*algo);
      links_->add_context(*coll);
    }
    HB_LOG_DEBUG(
        "gloo mesh of %d ranks, rank %d: %s, %zu TCP peer(s) (%zu "
        "leader(s)), %zu pair(s) connected after %lld ms",
        cfg.world_size, cfg.rank,
        lazy_ ? "pairs on first use, none to this host" : "full mesh",
        far_peers_.size(), leader_peers_.size(),
        algo->connected_pairs() + coll->connected_pairs(),
        static_cast<long long>(now_ms() - t0));
    // In a lazy world the prints travel over P2P, not prints_ (which would
    // use every pair).
    if (!lazy_)
      prints_ = std::make_unique<PairExchange>(
          *algo_ctx_, CallPrint::wire_bytes(cfg.world_size));
    // In a lazy world the direct regions register only the other hosts'
    // ranks (the only TCP peers), in the first call that takes them.
    if (algo_kind_ == Algo::kRankOrder)
      regions_ = lazy_ ? std::make_unique<PairRegions>(
                             *algo_ctx_, size_t(cfg.staged_bytes),
                             size_t(cfg.one_round_bytes), far_peers_)
                       : std::make_unique<PairRegions>(
                             *algo_ctx_, size_t(cfg.staged_bytes),
                             size_t(cfg.one_round_bytes));
    if (algo_kind_ == Algo::kRankOrder && (hier_reduce_ || hier_))
      make_leader_regions();
  });
}

void GlooBackend::connect_peers(Peers which) {
  bool &up = which == Peers::kLeaders ? leaders_up_ : far_up_;
  if (up || !mesh_) return;  // no mesh: every peer shares memory
  const std::vector<int> &peers =
      which == Peers::kLeaders ? leader_peers_ : far_peers_;
  const std::vector<int> fresh = mesh_->connect(peers);
  links_->add_pairs(*algo_ctx_, fresh);
  links_->add_pairs(*coll_ctx_, fresh);
  up = true;
  if (which == Peers::kFar) leaders_up_ = true;  // a subset
}

void GlooBackend::connect_peers(const std::vector<int> &peers) {
  if (far_up_ || !mesh_) return;
  const std::vector<int> fresh = mesh_->connect(peers);
  links_->add_pairs(*algo_ctx_, fresh);
  links_->add_pairs(*coll_ctx_, fresh);
}

void GlooBackend::make_leader_regions() {
  // A leader's share of cpu_staged_bytes per other leader, per channel and
  // parity, and room to send as much as all its peers' areas take: about
  // 8 x cpu_staged_bytes per leader whatever the number of hosts (as the
  // direct route's regions, ~6 x, on every rank). Registered with the
  // other hosts' leaders only (leader_peers_; none on the other ranks), in
  // the first call that takes them, after those pairs connect.
  const size_t nh = hosts_.members.size();
  const size_t area = size_t(cfg_.staged_bytes) / std::max<size_t>(1, nh - 1);
  const size_t send = 2 * std::max<size_t>(1, nh - 1) * area;
  leader_regions_ =
      std::make_unique<PairRegions>(*algo_ctx_, leader_peers_, area, send);
}

void GlooBackend::agree_route(const BackendConfig &cfg, rdv::KV &kv) {
  // Ranks on different routes would post messages their peers do not
  // expect: every rank reads every rank's choices (both options in one
  // round of the rendezvous) and all fail alike.
  const std::vector<std::string> routes =
      kv_allgather(kv, cfg.key_prefix + "alltoallv/", cfg.rank, cfg.world_size,
                   cfg.alltoallv + " " + cfg.allreduce_route, cfg.timeout_ms);
  const char *options[] = {"cpu_alltoallv", "cpu_allreduce_route"};
  for (size_t i = 0; i < 2; ++i) {
    std::map<std::string, std::string> ranks_of;
    for (int q = 0; q < cfg.world_size; ++q) {
      const std::string &both = routes[size_t(q)];
      const size_t space = both.find(' ');
      std::string &r =
          ranks_of[i == 0 ? both.substr(0, space) : both.substr(space + 1)];
      r += (r.empty() ? "" : ",") + std::to_string(q);
    }
    if (ranks_of.size() == 1) continue;
    std::string what;
    for (const auto &kv_ranks : ranks_of)
      what += format("%s%s (ranks %s)", what.empty() ? "" : " vs ",
                     kv_ranks.first.c_str(), kv_ranks.second.c_str());
    fail(HB_ERR_CONFIG, "option %s differs across ranks: %s", options[i],
         what.c_str());
  }
}

void GlooBackend::ShmSlot::set(const std::shared_ptr<ShmTransport> &s) {
  std::lock_guard<std::mutex> lock(mu);
  shm = s;
  if (tripped) shm->trip();
}

void GlooBackend::ShmSlot::trip() {
  std::lock_guard<std::mutex> lock(mu);
  tripped = true;
  if (shm) shm->trip();
}

GlooBackend::~GlooBackend() {
  if (health_sub_ >= 0) health_.unsubscribe(health_sub_);
  HB_LOG_DEBUG(
      "cpu traffic, rank %d of %d (alltoallv %s, reductions %s): %llu calls, "
      "tcp %llu messages %llu bytes, shm %llu messages %llu bytes; tcp "
      "pairs %llu",
      rank(), world_size(), hier_ ? "hierarchical" : "direct",
      hier_reduce_ ? "hierarchical" : "direct",
      static_cast<unsigned long long>(seq_),
      static_cast<unsigned long long>(traffic_.tcp_messages),
      static_cast<unsigned long long>(traffic_.tcp_bytes),
      static_cast<unsigned long long>(traffic_.shm_messages),
      static_cast<unsigned long long>(traffic_.shm_bytes),
      static_cast<unsigned long long>(traffic().tcp_pairs));
  // Buffers unregister from the pairs before they close; the listener
  // (which hands sockets to pairs) closes before them too.
  leader_regions_.reset();
  regions_.reset();
  prints_.reset();
  algos_.clear();
  mesh_.reset();
}

template <class F>
void GlooBackend::guarded(const char *what, F &&fn) {
  health_.check();
  std::optional<SigpipeBlock> no_sigpipe;  // 4 syscalls: only near sockets
  if (!sockets_free_) no_sigpipe.emplace();
  try {
    fn();
    flush_check();
  } catch (const Error &) {
    throw;
  } catch (const std::bad_alloc &) {
    throw;
  } catch (const ShmPeerLost &e) {
    fail_from_gloo(what, e.what(), e.peer());
  } catch (const std::exception &e) {
    fail_from_gloo(what, e.what());
  }
}

Traffic GlooBackend::traffic() const {
  Traffic t = traffic_;
  t.calls = seq_;
  for (const auto *r : {regions_.get(), leader_regions_.get()})
    if (r) {
      t.tcp_registered += r->messages();
      t.region_bytes += r->reserved_bytes();
    }
  if (prints_) t.region_bytes += prints_->reserved_bytes();
  if (algo_mesh_) t.tcp_pairs = algo_mesh_->connected_pairs();
  if (coll_mesh_) t.tcp_pairs += coll_mesh_->connected_pairs();
  return t;
}

bool GlooBackend::p2p_world() const { return shm_ != nullptr; }

bool GlooBackend::registered_first() const {
  return !shm_ || !shm_->world_all_shm();
}

template <class F>
void GlooBackend::over_p2p(F &&fn, Peers which, PairRegions *regions,
                           bool count, bool split,
                           const std::vector<int> *only) {
  flush_check();
  const uint32_t tag = next_tag();
  const ShmTransport *shm = shm_.get();
  Traffic uncounted;
  auto counted = [&](P2P &p2p) {
    CountingP2P<std::function<bool(int)>> c(
        p2p, count ? traffic_ : uncounted,
        [shm](int q) { return shm && shm->reaches(q); });
    fn(static_cast<P2P &>(c));
  };
  if (shm_ && shm_->reaches_all()) {
    ShmP2P p2p(*shm_);
    return counted(p2p);
  }
  // Pairs made on first use connect before the regions register on them
  // (RegionP2P registers in the first call that takes them).
  if (only)
    connect_peers(*only);
  else
    connect_peers(which);
  std::optional<RegionP2P> registered;
  std::optional<GlooP2P> unbound;
  std::optional<SplitP2P> both;
  if (regions) registered.emplace(*regions);
  if (!regions || split)
    unbound.emplace(*coll_ctx_, tag, std::chrono::milliseconds(cfg_.timeout_ms),
                    *breaker_);
  P2P &tcp = !regions ? static_cast<P2P &>(*unbound)
             : split  ? both.emplace(*registered, *unbound)
                      : static_cast<P2P &>(*registered);
  if (shm_ && shm_->reaches_any()) {
    ShmP2P near(*shm_);
    RoutedP2P p2p(*shm_, near, tcp);
    return counted(p2p);
  }
  counted(tcp);  // e.g. the leader of a host of one rank
}

void GlooBackend::check(CallPrint print) {
  print.seq = ++seq_;
  print_pending_ = false;
  if (!cfg_.check_calls || (cfg_.check_calls_where_free && !board_)) return;
  if (board_) {
    pending_ = std::move(print);
    print_pending_ = true;
    return;
  }
  if (registered_first() && prints_)  // registered pair buffers: one hop
    return check_call(
        rank(), world_size(), [&](char *all) { prints_->run(all); }, print);
  // Pairs on first use: the prints take the call's own TCP peers, through
  // the leaders on the hierarchical routes (an allgather as one
  // hierarchical alltoallv: every block is this rank's print), so checking
  // connects no pair the calls would not. Not counted as the calls'
  // traffic, as on the registered buffers.
  if (lazy_ && (hier_ || hier_reduce_))
    return over_p2p(
        [&](P2P &p2p) {
          check_call(
              rank(), world_size(),
              [&](char *all) { allgather_prints(p2p, all); }, print);
        },
        Peers::kLeaders, nullptr, false);
  over_p2p([&](P2P &p2p) { check_call(p2p, kPrintChannel, print); },
           Peers::kFar, nullptr, !lazy_);
}

void GlooBackend::allgather_prints(P2P &p2p, char *all) {
  const int n = world_size(), r = rank();
  const int64_t w = int64_t(CallPrint::wire_bytes(n));
  const size_t ns = static_cast<size_t>(n);
  std::vector<int64_t> sc(ns, w), so(ns, r * w), rc(ns, w), ro(ns, 0);
  sc[size_t(r)] = rc[size_t(r)] = 0;
  for (int q = 0; q < n; ++q) ro[size_t(q)] = q * w;
  hier_alltoallv(p2p, hosts_, hier_scratch_, kPrintChannel, all, sc.data(),
                 so.data(), all, rc.data(), ro.data(), 1);
}

void GlooBackend::flush_check() {
  if (print_pending_) board_exchange(nullptr, 0);
}

uint64_t GlooBackend::board_exchange(const char *payload, size_t bytes,
                                     bool sizes_vary) {
  const int n = world_size();
  const uint64_t call = ++board_calls_;
  size_t head = 0;
  if (print_pending_) {
    print_pending_ = false;
    head = CallPrint::wire_bytes(n);
    if (head > shm_->board_header_bytes())
      fail(HB_ERR_INTERNAL, "call print of %zu bytes does not fit the board",
           head);
    board_wire_.resize(head);
    pending_.to_wire(n, board_wire_.data());
  }
  traffic_.add(true, head + bytes);  // one post, read in place by all
  shm_->board_post(call, board_wire_.data(), head,
                   head ? CallPrint::wire_hash(board_wire_.data(), head) : 0,
                   payload, bytes);
  shm_->board_wait(call);
  // Every rank reads every slot, so every rank reaches the same verdict;
  // the prints first, as they say the most.
  const ShmTransport::BoardSlot first = shm_->board_slot(0, call);
  bool same_head = true;
  for (int q = 1; q < n; ++q)
    same_head &= shm_->board_slot(q, call).head_bytes == first.head_bytes;
  // Equal prints are one call (the wire form is canonical), except
  // alltoallv's, whose counts must also match pairwise. Their digests sit
  // in the flags' lines, which the wait already brought in.
  bool equal = same_head && pending_.kind != CallPrint::kAlltoallv;
  for (int q = 1; q < n && equal && first.head_bytes; ++q)
    equal = shm_->board_slot(q, call).head_hash == first.head_hash;
  if (same_head && first.head_bytes && !equal) {
    board_prints_.resize(size_t(n));
    for (int q = 0; q < n; ++q)
      board_prints_[size_t(q)] =
          CallPrint::from_wire(n, shm_->board_slot(q, call).head);
    check_prints(board_prints_);
  }
  // Checked alltoallv prints: each rank posts its own send total.
  const bool ragged =
      sizes_vary || (same_head && first.head_bytes && !equal &&
                     board_prints_[0].kind == CallPrint::kAlltoallv);
  for (int q = 1; q < n; ++q) {
    const ShmTransport::BoardSlot s = shm_->board_slot(q, call);
    if (s.head_bytes != first.head_bytes ||
        (!ragged && s.payload_bytes != first.payload_bytes))
      fail(HB_ERR_MISMATCH,
           "mismatched collective calls: rank 0 posted a %zu-byte call print "
           "and %zu bytes of data, rank %d %zu and %zu (are cpu_check_calls "
           "and the calls the same on every rank?)",
           first.head_bytes, first.payload_bytes, q, s.head_bytes,
           s.payload_bytes);
  }
  return call;
}

void GlooBackend::board_reduce(const RankOrderOp &ro, const char *x,
                               size_t bytes, const Blocks &b, char *own_out,
                               char *gather) {
  const uint64_t call = board_exchange(x, bytes);
  const int n = world_size();
  const size_t es = ro.elem_size;
  board_in_.resize(size_t(n));
  auto fold = [&](size_t lo, size_t len, char *out) {
    for (int p = 0; p < n; ++p)
      board_in_[size_t(p)] = shm_->board_slot(p, call).payload + lo * es;
    fold_in_rank_order_into(ro, n, board_in_.data(), out, len);
  };
  if (!gather)
    return fold(b.lo[size_t(rank())], b.len[size_t(rank())], own_out);
  for (size_t p = 0; p < b.lo.size() && !(b.shared && p > 0); ++p)
    fold(b.lo[p], b.len[p], gather + b.lo[p] * es);
}

void GlooBackend::board_reduce_staged(const RankOrderOp &ro, const char *x,
                                      const Blocks &b, char *own_out,
                                      char *gather) {
  const int n = world_size(), r = rank();
  const size_t es = ro.elem_size;
  // One shared block (the one-round form) is the same fold over balanced
  // blocks, gathered into own_out: same bits, 1/n of the work per rank.
  const Blocks blocks = b.shared ? Blocks::balanced(b.len[0], n) : b;
  char *const out_all = b.shared ? own_out : gather;
  // Piece k of block p: elements lo[p] + k * per .. (at most per of them),
  // at offset p * per in the staging payload.
  const size_t per =
      std::max<size_t>(1, shm_->board_payload_bytes() / (size_t(n) * es));
  size_t pieces = 0;
  for (size_t len : blocks.len)
    pieces = std::max(pieces, (len + per - 1) / per);
  auto piece_len = [&](int p, size_t k) {
    const size_t len = blocks.len[size_t(p)];
    return k * per < len ? std::min(per, len - k * per) : 0;
  };
  board_in_.resize(size_t(n));
  for (size_t k = 0; k < pieces; ++k) {
    // Round 1: my input pieces into my slot, then my block's fold.
    char *stage = shm_->board_payload(board_calls_ + 1);
    for (int p = 0; p < n; ++p)
      std::memcpy(stage + size_t(p) * per * es,
                  x + (blocks.lo[size_t(p)] + k * per) * es,
                  piece_len(p, k) * es);
    const uint64_t call = board_exchange(stage, size_t(n) * per * es);
    for (int p = 0; p < n; ++p)
      board_in_[size_t(p)] =
          shm_->board_slot(p, call).payload + size_t(r) * per * es;
    const size_t mine = piece_len(r, k);
    char *out = out_all ? out_all + (blocks.lo[size_t(r)] + k * per) * es
                        : own_out + k * per * es;
    fold_in_rank_order_into(ro, n, board_in_.data(), out, mine);
    if (!out_all) continue;
    // Round 2: my folded piece to the others, theirs to me. The next
    // slot, as peers may still read this one until they post the next.
    char *done = shm_->board_payload(board_calls_ + 1);
    std::memcpy(done, out, mine * es);
    const uint64_t call2 = board_exchange(done, mine * es, true);
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      const ShmTransport::BoardSlot s = shm_->board_slot(q, call2);
      const size_t len = piece_len(q, k);
      if (s.payload_bytes != len * es)
        fail(HB_ERR_MISMATCH,
             "rank %d posted %zu bytes of its reduced block, %zu expected "
             "(are the calls the same on every rank?)",
             q, s.payload_bytes, len * es);
      std::memcpy(out_all + (blocks.lo[size_t(q)] + k * per) * es, s.payload,
                  len * es);
    }
  }
}

bool GlooBackend::board_alltoallv(const int64_t *send_counts, size_t es,
                                  const Fill &fill, const char **in_slot) {
  const int n = world_size(), r = rank();
  // Blocks up to the slot's whole payload (inline part and staging area)
  // ride with the print: one rendezvous per call. The rings would take a
  // second one after the print's round for the same two copies (post, read
  // out), which cost a round per exchange of a collection step at 2 ranks
  // (docs/performance.md, "Rendezvous per step").
  const size_t cap = shm_->board_payload_bytes();
  size_t mine = 0;
  for (int q = 0; q < n; ++q) mine += size_t(send_counts[q]) * es;
  // Written straight into this rank's slot (board_post then copies
  // nothing): writable, as the last call's wait has returned.
  char *slot = shm_->board_payload(board_calls_ + 1);
  const bool fits = mine <= cap;  // else: the print alone
  if (fits)
    for (size_t q = 0, at = 0; q < size_t(n); ++q) {
      const size_t b = size_t(send_counts[q]) * es;
      if (b) fill(int(q), slot + at);
      at += b;
    }
  if (in_slot) *in_slot = fits ? slot : nullptr;
  const uint64_t call = board_exchange(fits ? slot : nullptr, fits ? mine : 0);
  // The board carries the call only if every rank's sends fit: decided
  // from the checked prints and the posted sizes, so alike on every rank.
  if (board_prints_.size() != size_t(n)) return false;
  for (int q = 0; q < n; ++q) {
    size_t total = 0;
    for (int j = 0; j < n; ++j)
      total += size_t(board_prints_[size_t(q)].counts[size_t(j)]) * es;
    if (total > cap || shm_->board_slot(q, call).payload_bytes != total)
      return false;
  }
  // My block from q sits after q's blocks for ranks below me.
  board_from_.resize(size_t(n));
  for (int q = 0; q < n; ++q) {
    size_t at = 0;
    for (int j = 0; j < r; ++j)
      at += size_t(board_prints_[size_t(q)].counts[size_t(j)]) * es;
    board_from_[size_t(q)] = shm_->board_slot(q, call).payload + at;
  }
  return true;
}

void GlooBackend::alltoallv_fill(const int64_t *send_bytes,
                                 const int64_t *recv_bytes, const Fill &fill,
                                 const Deliver &deliver) {
  // Only a checked call's print says where each block sits in a slot.
  if (!board_ || !cfg_.check_calls)
    return Backend::alltoallv_fill(send_bytes, recv_bytes, fill, deliver);
  const int n = world_size();
  const CallPrint print = alltoallv_print(send_bytes, recv_bytes, HB_UINT8, n);
  guarded("alltoallv", [&] {
    check(print);
    const char *in = nullptr;
    if (board_alltoallv(send_bytes, 1, fill, &in)) return;
    // Over the rings, as alltoallv: this rank's blocks from its slot (no
    // later post overwrites it before they are sent), else filled now.
    const char *got = alltoallv_staged(
        send_bytes, recv_bytes, fill, in,
        [&](const char *s, const int64_t *so, char *out, const int64_t *ro) {
          alltoallv_unboarded(s, send_bytes, so, out, recv_bytes, ro, HB_UINT8);
        });
    const std::vector<int64_t> ro = packed_offsets(recv_bytes);
    board_from_.resize(size_t(n));
    for (int q = 0; q < n; ++q) board_from_[size_t(q)] = got + ro[size_t(q)];
  });
  for (int q = 0; q < n; ++q)
    deliver(q, board_from_[size_t(q)], size_t(recv_bytes[q]));
}

void GlooBackend::alltoallv_sized(const void *send, const int64_t *send_bytes,
                                  const Deliver &deliver) {
  if (!sized_in_one_round())
    return Backend::alltoallv_sized(send, send_bytes, deliver);
  const int n = world_size(), r = rank();
  const size_t head = size_t(n) * sizeof(int64_t);
  CallPrint print;
  print.kind = CallPrint::kAlltoallvSized;
  print.dtype = HB_UINT8;
  std::vector<int64_t> recv_bytes(static_cast<size_t>(n));
  std::vector<const char *> from(static_cast<size_t>(n));
  bool carried = true;
  guarded("alltoallv", [&] {
    check(print);
    // This rank's slot: its sizes, then (when they fit) its blocks, packed
    // straight in (writable: the last call's wait has returned).
    size_t mine = 0;
    for (int q = 0; q < n; ++q) mine += size_t(send_bytes[q]);
    const bool fits = head + mine <= shm_->board_payload_bytes();
    char *slot = shm_->board_payload(board_calls_ + 1);
    std::memcpy(slot, send_bytes, head);
    if (fits && mine) std::memcpy(slot + head, send, mine);
    const uint64_t call = board_exchange(slot, fits ? head + mine : head, true);
    // The prints matched: every slot starts with its sizes. It carries its
    // blocks too unless they did not fit: decided from the posted sizes,
    // so alike on every rank.
    for (int q = 0; q < n; ++q) {
      const ShmTransport::BoardSlot s = shm_->board_slot(q, call);
      if (s.payload_bytes < head)
        fail(HB_ERR_MISMATCH,
             "alltoallv: rank %d posted %zu bytes, less than its sizes", q,
             s.payload_bytes);
      size_t at = head, total = 0;
      for (int j = 0; j < n; ++j) {
        int64_t b;
        std::memcpy(&b, s.payload + size_t(j) * sizeof(int64_t), sizeof b);
        if (b < 0)
          fail(HB_ERR_MISMATCH, "alltoallv: rank %d announced %lld bytes", q,
               (long long)b);
        if (j < r) at += size_t(b);
        if (j == r) recv_bytes[size_t(q)] = b;
        total += size_t(b);
      }
      from[size_t(q)] = s.payload + at;
      carried &= s.payload_bytes == head + total;
    }
  });
  if (!carried)  // this round carried the sizes; the data take a call more
    return alltoallv_known(send, send_bytes, recv_bytes, deliver);
  // The slots stay readable until this rank's next post.
  for (int q = 0; q < n; ++q)
    deliver(q, from[size_t(q)], size_t(recv_bytes[size_t(q)]));
}

void GlooBackend::fail_from_gloo(const char *what, const std::string &msg,
                                 int peer) {
  hb_status status;
  std::string text;
  // Gloo's message with its peers' ports as the sockets have them.
  const std::string shown = links_->readable(msg);
  if (health_.ok() && is_timeout_message(msg)) {
    status = HB_ERR_TIMEOUT;
    text =
        format("rank %d: %s: no progress within timeout_ms=%lld (%s)", rank(),
               what, static_cast<long long>(cfg_.timeout_ms), shown.c_str());
  } else {
    // A broken connection: give the rendezvous a moment to name the lost
    // rank (or deliver an abort), which is the more useful report. A peer
    // that left on purpose (said BYE) is reported at once.
    if (peer < 0) peer = links_->rank_in_message(msg);
    Deadline grace(cfg_.peer_report_grace_ms);
    while (health_.ok() && !grace.expired() && kv_.ranks_left().empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!health_.ok())
      throw Error(health_.status(),
                  format("%s: %s", what, health_.message().c_str()));
    if (peer < 0) peer = links_->rank_in_message(msg);
    status = HB_ERR_PEER_FAILED;
    std::vector<int> left = kv_.ranks_left();
    if (!left.empty()) {  // the first to leave broke the call
      std::string others;
      for (size_t i = 1; i < left.size(); ++i)
        others += format("%s%d", i > 1 ? "," : "", left[i]);
      text = format(
          "rank %d: %s: rank %d left the job (it destroyed its "
          "context) during the call%s%s",
          rank(), what, left[0], others.empty() ? "" : "; then left: rank ",
          others.c_str());
    } else if (peer >= 0)
      text = format("rank %d: %s: connection to rank %d lost (%s)", rank(),
                    what, peer, shown.c_str());
    else
      text = format("rank %d: %s: a peer connection broke (%s)", rank(), what,
                    shown.c_str());
  }
  // The mesh is in an unknown state: nothing may use it any more.
  health_.fail(status, text);
  throw Error(health_.status(), health_.ok() ? text : health_.message());
}

void GlooBackend::evict_if_full(size_t incoming_bytes) {
  while (live_algos_ >= kMaxLiveAlgos ||
         (live_algos_ > 0 && live_bytes_ + incoming_bytes > kMaxLiveBytes)) {
    AlgoEntry *oldest = nullptr;
    for (auto &kv : algos_)
      if (kv.second.algo && (!oldest || kv.second.last_use < oldest->last_use))
        oldest = &kv.second;
    if (!oldest) return;
    oldest->algo.reset();
    oldest->bound = nullptr;
    live_bytes_ -= oldest->bytes;
    --live_algos_;
  }
}

gloo::Algorithm &GlooBackend::algorithm_for(size_t offset, size_t count,
                                            hb_dtype wire, hb_reduce_op op) {
  if (op == HB_AVG) op = HB_SUM;
  char *buf = reduce_scratch_.data() + offset * hb_dtype_size(wire);
  const Algo kind = algo_kind_;
  AlgoEntry &e = algos_[AlgoKey{offset, count, wire, op, kind}];
  e.last_use = ++use_clock_;
  if (e.algo && e.bound == buf) return *e.algo;
  if (e.algo) {  // the scratch moved when it grew
    e.algo.reset();
    live_bytes_ -= e.bytes;
    --live_algos_;
  }
  e.bytes = count * hb_dtype_size(wire);
  evict_if_full(e.bytes);
  // The constructor takes fresh slots from algo_ctx_; every rank gets here
  // at the same point of the same call sequence, so they agree.
  const int n = static_cast<int>(count);
  switch (wire) {
    case HB_FLOAT32:
      e.algo = make_typed<float>(kind, algo_ctx_, buf, n, op);
      break;
    case HB_FLOAT64:
      e.algo = make_typed<double>(kind, algo_ctx_, buf, n, op);
      break;
    case HB_INT32:
      e.algo = make_typed<int32_t>(kind, algo_ctx_, buf, n, op);
      break;
    case HB_INT64:
      e.algo = make_typed<int64_t>(kind, algo_ctx_, buf, n, op);
      break;
    case HB_UINT8:
      e.algo = make_typed<uint8_t>(kind, algo_ctx_, buf, n, op);
      break;
    default:
      fail(HB_ERR_INTERNAL, "no Gloo algorithm for wire dtype %d", wire);
  }
  e.bound = buf;
  live_bytes_ += e.bytes;
  ++live_algos_;
  return *e.algo;
}

void GlooBackend::reduce_scratch(size_t count, hb_dtype wire, hb_reduce_op op) {
  flush_check();
  for (size_t at = 0; at < count; at += kMaxPiece)
    algorithm_for(at, std::min(kMaxPiece, count - at), wire, op).run();
}

void GlooBackend::reduce_rank_order(const char *x, const Blocks &b,
                                    char *own_out, char *gather, hb_dtype wire,
                                    hb_reduce_op op) {
  const OpKernels k = op_kernels(wire, op);
  RankOrderOp ro{hb_dtype_size(wire), k.acc, k.combine,
                 static_cast<size_t>(cfg_.piece_bytes)};
  size_t bytes = 0;
  for (size_t p = 0; p < b.lo.size(); ++p)
    bytes = std::max(bytes, (b.lo[p] + b.len[p]) * ro.elem_size);
  // Staged, each rank folds 1/n of the data instead of all of it: from
  // 16 KiB that paid for its second round at 3 and 4 ranks (2 cores).
  const size_t inline_max =
      staged_board_ ? size_t(16) << 10 : ShmTransport::kInlineBytes;
  if (board_ && bytes <= inline_max)
    return board_reduce(ro, x, bytes, b, own_out, gather);
  if (board_ && staged_board_)  // the print rides on its first post
    return board_reduce_staged(ro, x, b, own_out, gather);
  if (hier_reduce_) {
    auto routed = [&](P2P &p2p) {
      hier_rank_order_reduce(p2p, hosts_, hier_scratch_, kDataChannel, ro, x, b,
                             own_out, gather, peer_scratch_);
    };
    // The leaders' messages on their registered regions (one hop, no
    // per-call buffer) when the call's fit; the same decision on every
    // rank, from the call's shape. Pairs made on first use: only the
    // leaders' pairs connect (then register).
    const bool fits =
        leader_regions_ &&
        hier_leader_bytes(hosts_, b, ro.elem_size, gather != nullptr) <=
            leader_regions_->area_bytes();
    return over_p2p(routed, Peers::kLeaders,
                    fits ? leader_regions_.get() : nullptr);
  }
  if (lazy_ && regions_->fits(bytes))  // registered to the other hosts
    return over_p2p(
        [&](P2P &p2p) {
          rank_order_reduce(p2p, ro, x, b, own_out, gather, peer_scratch_);
        },
        Peers::kFar, regions_.get());
  if (registered_first() && regions_ && regions_->fits(bytes)) {
    RegionP2P regions(*regions_);
    CountingP2P<bool (*)(int)> p2p(regions, traffic_,
                                   [](int) { return false; });
    return rank_order_reduce(p2p, ro, x, b, own_out, gather, peer_scratch_);
  }
  over_p2p([&](P2P &p2p) {
    rank_order_reduce(p2p, ro, x, b, own_out, gather, peer_scratch_);
  });
}

void GlooBackend::allreduce_rank_order(const char *x, char *y, size_t count,
                                       hb_dtype wire, hb_reduce_op op) {
  const size_t ws = hb_dtype_size(wire);
  if (count * ws * size_t(world_size() - 1) <= size_t(cfg_.one_round_bytes))
    return reduce_rank_order(x, Blocks::whole(count, world_size()), y, nullptr,
                             wire, op);
  Blocks b = Blocks::balanced(count, world_size());
  reduce_rank_order(x, b, y + b.lo[size_t(rank())] * ws, y, wire, op);
}

const char *GlooBackend::wire_input(const void *send, size_t count,
                                    hb_dtype dtype, hb_reduce_op op,
                                    bool must_copy) {
  const hb_dtype wire = wire_dtype(dtype, op);
  if (wire == dtype && !must_copy) return static_cast<const char *>(send);
  char *s = in_stage_.ensure(count * hb_dtype_size(wire));
  pack(send, dtype, op, s, count);
  return s;
}

void GlooBackend::allreduce(const void *send, void *recv, size_t count,
                            hb_dtype dtype, hb_reduce_op op) {
  CallPrint print;
  print.kind = CallPrint::kAllreduce;
  print.dtype = dtype;
  print.op = op;
  print.count = count;
  if (count == 0) return guarded("allreduce", [&] { check(print); });
  const hb_dtype wire = wire_dtype(dtype, op);
  const size_t ws = hb_dtype_size(wire);
  if (algo_kind_ != Algo::kRankOrder) {
    guarded("allreduce", [&] {
      check(print);
      char *s = reduce_scratch_.ensure(count * ws);
      pack(send, dtype, op, s, count);
      reduce_scratch(count, wire, op);
      unpack(s, dtype, op, world_size(), recv, count);
    });
    return;
  }
  guarded("allreduce", [&] {
    check(print);
    const size_t bytes = count * ws;
    // In place is fine; a partial overlap is not.
    const bool overlap =
        send != recv && overlaps(send, count * hb_dtype_size(dtype), recv,
                                 count * hb_dtype_size(dtype));
    const char *x = wire_input(send, count, dtype, op, overlap);
    char *y =
        wire == dtype ? static_cast<char *>(recv) : out_stage_.ensure(bytes);
    allreduce_rank_order(x, y, count, wire, op);
    if (wire != dtype || op == HB_AVG)
      unpack(y, dtype, op, world_size(), recv, count);
  });
}

void GlooBackend::allreduce_buckets(
    const std::vector<std::vector<Tensor>> &buckets, hb_dtype dtype,
    hb_reduce_op op) {
  const hb_dtype wire = wire_dtype(dtype, op);
  const size_t ws = hb_dtype_size(wire);
  CallPrint print;
  print.kind = CallPrint::kAllreduceMany;
  print.dtype = dtype;
  print.op = op;
  std::vector<size_t> counts;
  for (const auto &bucket : buckets) {
    for (const Tensor &t : bucket) counts.push_back(t.count);
    counts.push_back(0);  // bucket boundary
  }
  for (size_t c : counts) print.count += c;
  print.extra = hash_counts(counts.data(), counts.size());
  guarded("allreduce_many", [&] { check(print); });
  for (const auto &bucket : buckets) {
    size_t total = 0;
    for (const Tensor &t : bucket) total += t.count;
    if (total == 0) continue;
    guarded("allreduce_many", [&] {
      char *s = reduce_scratch_.ensure(total * ws);
      size_t at = 0;
      for (const Tensor &t : bucket) {
        pack(t.data, dtype, op, s + at * ws, t.count);
        at += t.count;
      }
      if (algo_kind_ != Algo::kRankOrder) {
        reduce_scratch(total, wire, op);
      } else {
        allreduce_rank_order(s, s, total, wire, op);
      }
      at = 0;
      for (const Tensor &t : bucket) {
        unpack(s + at * ws, dtype, op, world_size(), t.data, t.count);
        at += t.count;
      }
    });
  }
}

void GlooBackend::reduce_scatter(const void *send, void *recv,
                                 size_t recv_count, hb_dtype dtype,
                                 hb_reduce_op op) {
  CallPrint print;
  print.kind = CallPrint::kReduceScatter;
  print.dtype = dtype;
  print.op = op;
  print.count = recv_count;
  if (recv_count == 0) return guarded("reduce_scatter", [&] { check(print); });
  const hb_dtype wire = wire_dtype(dtype, op);
  const size_t ws = hb_dtype_size(wire);
  const size_t total = recv_count * static_cast<size_t>(world_size());
  if (algo_kind_ != Algo::kRankOrder) {
    // An allreduce of the whole input, keeping our block: twice the
    // traffic, but the legacy algorithm's reduction tree.
    guarded("reduce_scatter", [&] {
      check(print);
      char *s = reduce_scratch_.ensure(total * ws);
      pack(send, dtype, op, s, total);
      reduce_scratch(total, wire, op);
      unpack(s + static_cast<size_t>(rank()) * recv_count * ws, dtype, op,
             world_size(), recv, recv_count);
    });
    return;
  }
  guarded("reduce_scatter", [&] {
    check(print);
    const size_t es = hb_dtype_size(dtype);
    const char *own_in =
        static_cast<const char *>(send) + size_t(rank()) * recv_count * es;
    // recv may be exactly this rank's block of send (in place, as NCCL);
    // any other overlap reads from a copy.
    const bool overlap =
        own_in != recv && overlaps(send, total * es, recv, recv_count * es);
    const char *x = wire_input(send, total, dtype, op, overlap);
    char *y = wire == dtype ? static_cast<char *>(recv)
                            : out_stage_.ensure(recv_count * ws);
    reduce_rank_order(x, Blocks::equal(recv_count, world_size()), y, nullptr,
                      wire, op);
    if (wire != dtype || op == HB_AVG)
      unpack(y, dtype, op, world_size(), recv, recv_count);
  });
}

void GlooBackend::allgatherv(const void *send, size_t send_count, void *recv,
                             const int64_t *recv_counts,
                             const int64_t *recv_offsets, hb_dtype dtype) {
  const size_t es = hb_dtype_size(dtype);
  const int n = world_size();
  std::vector<size_t> block(n);
  size_t total = 0;
  for (int r = 0; r < n; ++r) total += block[r] = size_t(recv_counts[r]) * es;
  CallPrint print;
  print.kind = CallPrint::kAllgatherv;
  print.dtype = dtype;
  print.counts.assign(recv_counts, recv_counts + n);
  guarded("allgatherv", [&] {
    check(print);
    if (total == 0) return;
    const size_t in_bytes = send_count * es;
    if (p2p_world()) {
      const char *in = static_cast<const char *>(send);
      char *own = static_cast<char *>(recv) + recv_offsets[rank()] * es;
      if (in != own && overlaps(send, in_bytes, recv,
                                total_span(recv_counts, recv_offsets, n, es)))
        in = static_cast<char *>(
            std::memcpy(in_stage_.ensure(in_bytes), send, in_bytes));
      return over_p2p([&](P2P &p2p) {
        p2p_allgatherv(p2p, kDataChannel, in, static_cast<char *>(recv),
                       recv_counts, recv_offsets, es);
      });
    }
    const bool direct = packed(recv_counts, recv_offsets, n);
    const void *in = send;
    if (overlaps(send, in_bytes, recv, total) || !direct) {
      // Gloo copies our input into the output first: never let them alias.
      if (in_bytes)
        in = std::memcpy(in_stage_.ensure(in_bytes), send, in_bytes);
    }
    char *out = direct ? static_cast<char *>(recv) : out_stage_.ensure(total);
    gloo::AllgathervOptions o(coll_ctx_);
    o.setInput<uint8_t>(bytes(in), in_bytes);
    o.setOutput<uint8_t>(bytes(out), block);
    o.setTag(next_tag());
    o.setTimeout(std::chrono::milliseconds(cfg_.timeout_ms));
    gloo::allgatherv(o);
    if (!direct)
      unpack_blocks(static_cast<char *>(recv), recv_offsets, es, out, block);
  });
}

CallPrint GlooBackend::alltoallv_print(const int64_t *send_counts,
                                       const int64_t *recv_counts,
                                       hb_dtype dtype, int n) {
  CallPrint print;
  print.kind = CallPrint::kAlltoallv;
  print.dtype = dtype;
  print.counts.assign(send_counts, send_counts + n);
  print.counts.insert(print.counts.end(), recv_counts, recv_counts + n);
  return print;
}

void GlooBackend::alltoallv(const void *send, const int64_t *send_counts,
                            const int64_t *send_offsets, void *recv,
                            const int64_t *recv_counts,
                            const int64_t *recv_offsets, hb_dtype dtype) {
  const size_t es = hb_dtype_size(dtype);
  const int n = world_size();
  const CallPrint print = alltoallv_print(send_counts, recv_counts, dtype, n);
  guarded("alltoallv", [&] {
    check(print);
    if (board_ && print_pending_) {
      // Copied into the slot and out of the peers' (never aliasing the
      // caller's buffers).
      const char *s = static_cast<const char *>(send);
      auto fill = [&](int q, char *dst) {
        std::memcpy(dst, s + size_t(send_offsets[q]) * es,
                    size_t(send_counts[q]) * es);
      };
      if (board_alltoallv(send_counts, es, fill, nullptr)) {
        for (int q = 0; q < n; ++q)
          if (recv_counts[q])
            std::memcpy(
                static_cast<char *>(recv) + size_t(recv_offsets[q]) * es,
                board_from_[size_t(q)], size_t(recv_counts[q]) * es);
        return;
      }
    }
    alltoallv_unboarded(send, send_counts, send_offsets, recv, recv_counts,
                        recv_offsets, dtype);
  });
}

void GlooBackend::alltoallv_unboarded(const void *send,
                                      const int64_t *send_counts,
                                      const int64_t *send_offsets, void *recv,
                                      const int64_t *recv_counts,
                                      const int64_t *recv_offsets,
                                      hb_dtype dtype) {
  const int64_t es = static_cast<int64_t>(hb_dtype_size(dtype));
  const int n = world_size();
  std::vector<int64_t> sb(n), rb(n);
  int64_t stotal = 0, rtotal = 0, send_span = 0, recv_span = 0;
  for (int r = 0; r < n; ++r) {
    stotal += sb[r] = send_counts[r] * es;
    rtotal += rb[r] = recv_counts[r] * es;
    if (send_counts[r])
      send_span = std::max(send_span, (send_offsets[r] + send_counts[r]) * es);
    if (recv_counts[r])
      recv_span = std::max(recv_span, (recv_offsets[r] + recv_counts[r]) * es);
  }
  if (p2p_world()) {
    const char *in = static_cast<const char *>(send);
    const int64_t *in_off = send_offsets;
    std::vector<int64_t> staged_off;
    if (stotal && overlaps(send, size_t(send_span), recv, size_t(recv_span))) {
      char *s = in_stage_.ensure(size_t(stotal));
      pack_blocks(s, in, send_offsets, size_t(es), sb);
      staged_off.resize(size_t(n));
      int64_t at = 0;
      for (int r = 0; r < n; at += send_counts[r], ++r)
        staged_off[size_t(r)] = at;
      in = s;
      in_off = staged_off.data();
    }
    if (hier_) {
      // The leaders' messages on their registered regions, each that
      // fits (sizes from the call's counts round, the same choice on
      // both sides), the others on per-call buffers; every call that
      // has regions takes them (the same on every rank).
      PairRegions *lr = leader_regions_.get();
      return over_p2p(
          [&](P2P &p2p) {
            hier_alltoallv(p2p, hosts_, hier_scratch_, kDataChannel, in,
                           send_counts, in_off, static_cast<char *>(recv),
                           recv_counts, recv_offsets, size_t(es),
                           lr ? lr->area_bytes() : 0);
          },
          Peers::kLeaders, lr, true, true);
    }
    // Pairs made on first use: only the pairs with bytes either way
    // connect; both sides of a pair know that from their own counts
    // (checked consistent by the call's print).
    call_peers_.clear();
    for (int q : far_peers_)
      if (send_counts[q] || recv_counts[q]) call_peers_.push_back(q);
    return over_p2p(
        [&](P2P &p2p) {
          p2p_alltoallv(p2p, kDataChannel, in, send_counts, in_off,
                        static_cast<char *>(recv), recv_counts, recv_offsets,
                        size_t(es));
        },
        Peers::kFar, nullptr, true, false, &call_peers_);
  }
  const bool send_direct =
      packed(send_counts, send_offsets, n) &&
      !overlaps(send, size_t(send_span), recv, size_t(recv_span));
  const bool recv_direct = packed(recv_counts, recv_offsets, n);
  const char *in = static_cast<const char *>(send);
  if (!send_direct && stotal) {
    char *s = in_stage_.ensure(size_t(stotal));
    pack_blocks(s, in, send_offsets, size_t(es), sb);
    in = s;
  }
  char *out = recv_direct
                  ? static_cast<char *>(recv)
                  : out_stage_.ensure(size_t(std::max<int64_t>(rtotal, 1)));
  for (int q = 0; q < n; ++q)
    if (q != rank() && sb[size_t(q)]) traffic_.add(false, size_t(sb[q]));
  gloo::AlltoallvOptions o(coll_ctx_);
  o.setInput<uint8_t>(bytes(in), sb);
  o.setOutput<uint8_t>(bytes(out), rb);
  o.setTag(next_tag());
  o.setTimeout(std::chrono::milliseconds(cfg_.timeout_ms));
  gloo::alltoallv(o);
  if (!recv_direct)
    unpack_blocks(static_cast<char *>(recv), recv_offsets, size_t(es), out, rb);
}

void GlooBackend::broadcast(const void *send, void *recv, size_t count,
                            hb_dtype dtype, int root) {
  const size_t nbytes = count * hb_dtype_size(dtype);
  CallPrint print;
  print.kind = CallPrint::kBroadcast;
  print.dtype = dtype;
  print.root = root;
  print.count = count;
  guarded("broadcast", [&] {
    check(print);
    if (nbytes == 0) return;
    if (p2p_world())
      return over_p2p([&](P2P &p2p) {
        p2p_broadcast(p2p, kDataChannel, static_cast<const char *>(send),
                      static_cast<char *>(recv), nbytes, root);
      });
    if (rank() == root && send != recv) std::memmove(recv, send, nbytes);
    gloo::BroadcastOptions o(coll_ctx_);
    o.setRoot(root);
    o.setOutput<uint8_t>(bytes(recv), nbytes);
    o.setTag(next_tag());
    o.setTimeout(std::chrono::milliseconds(cfg_.timeout_ms));
    gloo::broadcast(o);
  });
}

}  // namespace comm
}  // namespace hb
