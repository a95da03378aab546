// The TCP mesh's bootstrap (comm/mesh_connect.h) at 16 ranks as threads:
// what each rank reads from the store grows as O(N), not O(N^2) (Gloo's
// connectFullMesh read every peer's N-1 addresses: 30 KB per rank here,
// 145 GB over a 1024-rank world), and the world it forms reduces bit-exact.
// At 6 ranks: each rank listens on one socket (Gloo's pairs listened on
// 2(N-1)), and its listener refuses strangers' hellos while the world forms.
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "comm/gloo_p2p.h"
#include "comm/links.h"
#include "comm/mesh_connect.h"
#include "comm/tcp_pair.h"

#include "comm/backend.h"
#include "common/health.h"
#include "rendezvous/memory_kv.h"

#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

namespace {

// Counts the bytes every get returns (the store's outbound traffic).
class CountingKV : public hb::rdv::KV {
 public:
  void set(const std::string &key, const std::string &value) override {
    if (on_key) on_key(key);
    kv_.set(key, value);
  }
  std::string get(const std::string &key, int64_t timeout_ms) override {
    if (on_key) on_key(key);
    std::string v = kv_.get(key, timeout_ms);
    read_ += v.size();
    return v;
  }
  int64_t add(const std::string &key, int64_t delta) override {
    return kv_.add(key, delta);
  }
  void wait(const std::vector<std::string> &keys, int64_t timeout_ms) override {
    kv_.wait(keys, timeout_ms);
  }
  size_t bytes_read() const { return read_; }
  std::function<void(const std::string &)> on_key;  // before each set/get

 private:
  hb::rdv::MemoryKV kv_;
  std::atomic<size_t> read_{0};
};

// n TCP ranks as threads on kv: each makes its backend (the mesh) and
// allreduces order-sensitive values; every rank must get the rank-order
// sum, bit for bit.
void run_world(int n, hb::rdv::KV &kv, const std::string &prefix) {
  std::vector<hb::Health> health(n);
  std::vector<std::shared_ptr<hb::comm::Backend>> b(n);
  std::vector<std::vector<float>> out(n, std::vector<float>(257));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        hb::comm::BackendConfig cfg;
        cfg.transport = "tcp";
        cfg.key_prefix = prefix;
        cfg.world_size = n;
        cfg.rank = r;
        cfg.timeout_ms = 60000;
        b[r] = hb::comm::make_backend(cfg, &kv, health[r]);
        std::vector<float> in(out[r].size());
        for (size_t i = 0; i < in.size(); ++i)
          in[i] = 1.0f / float(1 + r + 3 * int(i));  // order-sensitive sums
        b[r]->allreduce(in.data(), out[r].data(), in.size(), HB_FLOAT32,
                        HB_SUM);
      } catch (const std::exception &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  // Rank order, as hb's default algorithm folds.
  for (size_t i = 0; i < out[0].size(); ++i) {
    float want = 0;
    for (int q = 0; q < n; ++q) want += 1.0f / float(1 + q + 3 * int(i));
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(out[r][i], want) << "rank " << r << " index " << i;
  }
}

TEST(MeshConnect, SixteenTcpRanksReadLinearBytesAndReduceExactly) {
  const int n = 16;
  CountingKV kv;
  run_world(n, kv, "mesh_test/");
  if (HasFatalFailure()) return;
  // Per rank: every host address (28 bytes) and a 2-byte port per peer and
  // context, plus the backend's other small keys. Gloo's exchange read
  // 2 x 15 keys of 15 x 136 bytes per rank (61 KB).
  const size_t per_rank = kv.bytes_read() / n;
  EXPECT_LT(per_rank, size_t(n) * 64) << "bytes read per rank";
  std::printf("[ note ] %zu bytes read from the store per rank at %d ranks\n",
              per_rank, n);
}

// This process's listening TCP sockets, with their ports (network order).
std::vector<uint16_t> listening_ports() {
  std::vector<uint16_t> ports;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return ports;
  while (dirent *e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    int on = 0;
    socklen_t n = sizeof on;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (e->d_name[0] == '.' || fd == dirfd(d) ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &n) != 0 || !on ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0)
      continue;
    if (ss.ss_family == AF_INET)
      ports.push_back(reinterpret_cast<sockaddr_in &>(ss).sin_port);
    else if (ss.ss_family == AF_INET6)
      ports.push_back(reinterpret_cast<sockaddr_in6 &>(ss).sin6_port);
  }
  closedir(d);
  return ports;
}

// Sends bytes to the loopback port and returns the one-byte answer (0 for
// none within 10 s).
int dial_and_answer(uint16_t port, const std::string &bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = port;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  uint8_t reply = 0;
  if (connect(fd, reinterpret_cast<sockaddr *>(&to), sizeof to) != 0 ||
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
          ssize_t(bytes.size()) ||
      recv(fd, &reply, 1, 0) != 1)
    reply = 0;
  close(fd);
  return reply;
}

TEST(MeshConnect, OneListenerPerRankRefusesStrangers) {
  const int n = 6;
  CountingKV kv;
  // Every rank stops at its first mesh bootstrap key (its listener is up,
  // its address not yet published); the last to arrive counts the
  // process's listeners and dials each with a stranger's hellos.
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> arrived;
  std::vector<uint16_t> ports;
  std::vector<int> wrong_nonce, not_mesh;
  kv.on_key = [&](const std::string &key) {
    if (key.rfind("listen_test/mesh/", 0) != 0) return;
    std::unique_lock<std::mutex> lock(mu);
    if (!arrived.insert(std::this_thread::get_id()).second) return;
    if (int(arrived.size()) < n) {
      cv.wait(lock, [&] { return int(arrived.size()) > n; });
      return;
    }
    ports = listening_ports();
    if (ports.size() == size_t(n)) {  // else the world may not survive it
      hb::comm::MeshHello stranger;
      stranger.world = n;
      stranger.rank = 1;
      stranger.nonce = 0x5eed;  // not any rank's
      for (uint16_t port : ports) {
        wrong_nonce.push_back(
            dial_and_answer(port, hb::comm::encode_hello(stranger)));
        not_mesh.push_back(
            dial_and_answer(port, std::string(hb::comm::kHelloBytes, 'x')));
      }
    }
    arrived.insert(std::thread::id());  // n + 1: release the others
    cv.notify_all();
  };
  run_world(n, kv, "listen_test/");
  // Gloo's pairs listened on one port each: 2 contexts x 5 peers per rank.
  ASSERT_EQ(ports.size(), size_t(n))
      << "listening sockets of " << n << " ranks";
  for (size_t i = 0; i < ports.size(); ++i) {
    EXPECT_EQ(wrong_nonce[i], hb::comm::kHelloWrongNonce) << "listener " << i;
    EXPECT_EQ(not_mesh[i], hb::comm::kHelloNotMesh) << "listener " << i;
  }
}

// Rank r of n's context of a TCP mesh on loopback, connected through kv
// under prefix (every rank calls it at once).
std::shared_ptr<hb::comm::MeshContext> loopback_mesh(hb::rdv::KV &kv,
                                                     const std::string &prefix,
                                                     int r, int n) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<hb::comm::MeshContext>(r, n);
  ctx->setTimeout(std::chrono::milliseconds(30000));
  hb::comm::connect_meshes(kv, prefix, 30000, dev, {ctx});
  return ctx;
}

// Runs fn(r, errors[r]) for ranks 0..n-1 on one thread each; an exception
// is its rank's error. Returns every rank's errors ("" if none).
std::vector<std::string> run_threads(
    int n, const std::function<void(int, std::string &)> &fn) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r, errors[r]);
      } catch (const std::exception &e) {
        errors[r] += e.what();
      }
    });
  for (auto &t : threads) t.join();
  return errors;
}

// Returns once all n ranks reached key.
void kv_barrier(hb::rdv::KV &kv, const std::string &key, int r, int n) {
  kv.set(key + "/" + std::to_string(r), "1");
  for (int q = 0; q < n; ++q) kv.get(key + "/" + std::to_string(q), 30000);
}

// Links (comm/links.h) names the rank behind a Gloo error by the peer
// address in it: every pair's own socket must be recorded, although all the
// sockets a rank accepted share its listener's address (matching by
// address gave every accepted pair the first such socket).
TEST(MeshConnect, LinksNameEveryPeerOfOneListener) {
  const int n = 5;
  hb::rdv::MemoryKV kv;
  const auto errors = run_threads(n, [&](int r, std::string &err) {
    auto ctx = loopback_mesh(kv, "links_test/", r, n);
    hb::comm::Links links;
    links.add_context(*ctx);
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      const int fd = hb::comm::pair_socket(*ctx->getPair(q));
      const std::string peer =
          gloo::transport::tcp::Address::fromPeerName(fd).str();
      const int named = links.rank_in_message("read [" + peer + "]: x");
      if (named != q)
        err += "peer " + std::to_string(q) + " (" + peer + ") named as " +
               std::to_string(named) + "; ";
      // And shown with the port the socket has (Gloo's is byte-swapped).
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &len);
      const std::string shown = links.readable("read [" + peer + "]: x");
      const std::string want =
          "read [127.0.0.1 port " +
          std::to_string(
              ntohs(reinterpret_cast<sockaddr_in &>(addr).sin_port)) +
          "]: x";
      if (shown != want)
        err += "shown as '" + shown + "', not '" + want + "'; ";
    }
    // Every rank holds its pairs until all have checked theirs.
    kv_barrier(kv, "links_test/done", r, n);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Gloo prints a port in network byte order ("[127.0.0.1]:176" for port
// 45056), so one peer's printed address can be the start of another's: a
// peer is named only where its port ends. Matching any substring named the
// wrong rank when two of a rank's peers' ports were so related, about one
// 5-rank world in 1,000: LinksNameEveryPeerOfOneListener then failed with
// "peer 2 ([127.0.0.1]:41151) named as 1".
TEST(MeshConnect, LinksMatchAPeersWholePort) {
  using hb::comm::message_names_peer;
  const std::string long_port = "[127.0.0.1]:17650",
                    short_port = "[127.0.0.1]:176";
  EXPECT_TRUE(message_names_peer("read [" + long_port + "]: x", long_port));
  EXPECT_FALSE(message_names_peer("read [" + long_port + "]: x", short_port));
  EXPECT_TRUE(message_names_peer("peer " + short_port, short_port));
  EXPECT_TRUE(message_names_peer(long_port + ", then " + short_port + ": x",
                                 short_port));
  EXPECT_FALSE(message_names_peer("read [" + long_port + "]: x", ""));
}

// hb's own messages print an address with its port in host order, in a
// form that never contains Gloo's "[ip]:port".
TEST(MeshConnect, AddressTextHasTheSocketsPort) {
  sockaddr_storage addr{};
  auto &in = reinterpret_cast<sockaddr_in &>(addr);
  in.sin_family = AF_INET;
  in.sin_port = htons(45056);
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(hb::comm::address_text(addr), "127.0.0.1 port 45056");
  EXPECT_EQ(gloo::transport::tcp::Address(addr).str(), "[127.0.0.1]:176")
      << "Gloo no longer swaps the port: comm/links.h can match plainly";
  auto &in6 = reinterpret_cast<sockaddr_in6 &>(addr);
  in6 = sockaddr_in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(8080);
  in6.sin6_addr = in6addr_loopback;
  EXPECT_EQ(hb::comm::address_text(addr), "::1 port 8080");
  EXPECT_EQ(hb::comm::address_text(sockaddr_storage{}), "an unknown address");
}

// A call that fails with operations still posted on its per-call buffers
// (comm/gloo_p2p.h) must leave Gloo's loop thread nothing to fill or
// drain once it destroys them, although the peer is alive and may still
// send: the pair of each pending operation is failed (closed) first. A
// call whose operations all finished leaves its pairs connected.
TEST(MeshConnect, FailedCallFailsThePairsOfItsPendingOperations) {
  const int n = 3;
  hb::rdv::MemoryKV kv;
  // Rank 1 writes to a closed pair: Gloo writes without MSG_NOSIGNAL
  // (GlooBackend blocks SIGPIPE around its calls). The rank threads and
  // their devices' loop threads inherit this mask.
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  const auto errors = run_threads(n, [&](int r, std::string &err) {
    auto ctx = loopback_mesh(kv, "p2p_test/", r, n);
    hb::comm::WaitBreaker breaker;
    const std::chrono::milliseconds timeout(30000);
    std::vector<char> buf(1 << 16, char(r)), in(buf.size());
    {  // a call that completes: ring exchange
      hb::comm::GlooP2P p2p(*ctx, 1, timeout, breaker);
      p2p.send((r + 1) % n, 0, buf.data(), buf.size());
      p2p.recv((r + n - 1) % n, 0, in.data(), in.size());
      p2p.finish();
    }
    for (int q = 0; q < n; ++q)
      if (q != r && hb::comm::pair_socket(*ctx->getPair(q)) < 0)
        err +=
            "pair to " + std::to_string(q) + " closed after a complete call; ";
    // Every rank checks before rank 0 fails a pair (rank 1 saw its pair to
    // rank 0 closed by the failure below, in one run of a 2-core CI).
    kv_barrier(kv, "p2p_sync/complete", r, n);
    // Rank 0's call "fails" with a receive from rank 1 pending; rank 1 then
    // sends it (into the buffer rank 0 destroyed).
    if (r == 0) {
      hb::comm::GlooP2P p2p(*ctx, 2, timeout, breaker);
      p2p.recv(1, 0, in.data(), in.size());
    }
    kv_barrier(kv, "p2p_sync/failed", r, n);
    if (r == 1) {
      try {  // rank 0's side of the pair may be closed first
        hb::comm::GlooP2P p2p(*ctx, 2, timeout, breaker);
        p2p.send(0, 0, buf.data(), buf.size());
        p2p.finish();
      } catch (const std::exception &) {
      }
    }
    if (r == 0) {
      if (hb::comm::pair_socket(*ctx->getPair(1)) >= 0)
        err += "pair to 1 still open after the failed call; ";
      if (hb::comm::pair_socket(*ctx->getPair(2)) < 0)
        err += "pair to 2 (no pending operation) closed; ";
    }
    kv_barrier(kv, "p2p_sync/done", r, n);
  });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace
