// The rendezvous server and client in one process: every rank is a thread
// with its own client and Health.
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "rdv_test_util.h"

namespace hb {
namespace rdv {
namespace test {
namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// Runs fn(rank) on `world` threads and joins them.
void run_ranks(int world, const std::function<void(int)> &fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (auto &t : threads) t.join();
}

std::vector<std::unique_ptr<Rank>> join_all(int port, int world) {
  std::vector<std::unique_ptr<Rank>> ranks(world);
  run_ranks(world, [&](int r) { ranks[r] = join(port, r, world); });
  return ranks;
}

TEST(ClientServer, SetGetAddWaitBarrierAcrossThreads) {
  constexpr int kWorld = 4, kAdds = 50;
  auto server = Server::start(server_config(kWorld));
  auto ranks = join_all(server->port(), kWorld);
  run_ranks(kWorld, [&](int r) {
    KV &kv = *ranks[r]->client;
    kv.set("addr/" + std::to_string(r), "host-" + std::to_string(r));
    for (int i = 0; i < kAdds; ++i) kv.add("counter", r + 1);
    std::vector<std::string> keys;
    for (int p = 0; p < kWorld; ++p)
      keys.push_back("addr/" + std::to_string(p));
    kv.wait(keys, 3000);
    for (int p = 0; p < kWorld; ++p)
      EXPECT_EQ(kv.get("addr/" + std::to_string(p), 1000),
                "host-" + std::to_string(p));
    ranks[r]->client->barrier("adds-done", 3000);
    // Every add happened before the barrier completed.
    EXPECT_EQ(kv.get("counter", 1000), std::to_string(kAdds * (1 + 2 + 3 + 4)));
    EXPECT_EQ(kv.add("counter", 0), kAdds * 10);
  });
  for (auto &r : ranks) {
    r->client->close();
    EXPECT_TRUE(r->health.ok()) << r->health.message();
  }
}

TEST(ClientServer, RoundTripLatency) {
  constexpr int kOps = 1000;
  auto server = Server::start(server_config(2));
  auto ranks = join_all(server->port(), 2);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kOps; ++i) ranks[0]->client->add("n", 1);
  int64_t add_us = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  EXPECT_EQ(ranks[1]->client->get("n", 1000), std::to_string(kOps));
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kOps / 10; ++i) {
    std::thread other([&] { ranks[1]->client->barrier("lat", 2000); });
    ranks[0]->client->barrier("lat", 2000);
    other.join();
  }
  int64_t barrier_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - t0)
                           .count();
  std::printf(
      "[ measure ] add round trip %.1f us; 2-rank barrier %.1f us "
      "(incl. thread start)\n",
      static_cast<double>(add_us) / kOps,
      static_cast<double>(barrier_us) / (kOps / 10));
}

TEST(ClientServer, RepeatedBarriersKeepRanksInStep) {
  constexpr int kWorld = 3, kRounds = 20;
  auto server = Server::start(server_config(kWorld));
  auto ranks = join_all(server->port(), kWorld);
  std::atomic<int> arrived{0};
  run_ranks(kWorld, [&](int r) {
    for (int i = 0; i < kRounds; ++i) {
      arrived++;
      ranks[r]->client->barrier("step", 3000);
      // Nobody passes round i before all have arrived at it.
      EXPECT_GE(arrived.load(), (i + 1) * kWorld);
      ranks[r]->client->barrier("step-out", 3000);
    }
  });
}

TEST(ClientServer, GetBlocksUntilSet) {
  auto server = Server::start(server_config(2));
  auto ranks = join_all(server->port(), 2);
  auto t0 = std::chrono::steady_clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ranks[1]->client->set("late", "value");
  });
  EXPECT_EQ(ranks[0]->client->get("late", 3000), "value");
  EXPECT_GE(ms_since(t0), 90);
  setter.join();
}

TEST(ClientServer, GetTimeoutNamesTheKey) {
  auto server = Server::start(server_config(1));
  auto r = join(server->port(), 0, 1);
  auto t0 = std::chrono::steady_clock::now();
  std::string m =
      error_of([&] { r->client->get("nccl/unique_id", 300); }, HB_ERR_TIMEOUT);
  int64_t took = ms_since(t0);
  EXPECT_TRUE(contains(m, "'nccl/unique_id'")) << m;
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 300 + 2 * kMarginMs);
  // A zero timeout answers at once.
  error_of([&] { r->client->get("nccl/unique_id", 0); }, HB_ERR_TIMEOUT);
  EXPECT_TRUE(r->health.ok());  // a timeout is not a failure of the world
  r->client->set("nccl/unique_id", "x");
  EXPECT_EQ(r->client->get("nccl/unique_id", 0), "x");
}

TEST(ClientServer, WaitTimeoutNamesOnlyTheMissingKeys) {
  auto server = Server::start(server_config(1));
  auto r = join(server->port(), 0, 1);
  r->client->set("a", "1");
  std::string m = error_of(
      [&] {
        r->client->wait({"a", "b", "c"}, 200);
      },
      HB_ERR_TIMEOUT);
  EXPECT_TRUE(contains(m, "'b', 'c'")) << m;
  EXPECT_FALSE(contains(m, "'a'")) << m;
  r->client->wait({}, 0);
  r->client->set("b", "");
  r->client->set("c", "");
  r->client->wait({"a", "b", "c"}, 0);
}

TEST(ClientServer, BarrierTimeoutNamesTheMissingRanksThenRetrySucceeds) {
  constexpr int kWorld = 4;
  auto server = Server::start(server_config(kWorld));
  auto ranks = join_all(server->port(), kWorld);
  std::vector<std::string> msgs(kWorld);
  auto t0 = std::chrono::steady_clock::now();
  run_ranks(kWorld, [&](int r) {
    if (r == 0 || r == 2)
      msgs[r] = error_of([&] { ranks[r]->client->barrier("init", 300); },
                         HB_ERR_TIMEOUT);
  });
  EXPECT_LT(ms_since(t0), 300 + 3 * kMarginMs);
  for (int r : {0, 2}) {
    EXPECT_TRUE(contains(msgs[r], "ranks 1, 3 did not arrive")) << msgs[r];
    EXPECT_TRUE(contains(msgs[r], "'init'")) << msgs[r];
  }
  // The timed-out ranks left the round: all four now complete generation 0.
  run_ranks(kWorld, [&](int r) { ranks[r]->client->barrier("init", 3000); });
  run_ranks(kWorld, [&](int r) { ranks[r]->client->barrier("init", 3000); });
}

TEST(ClientServer, TokenMismatchAndMissingTokenArePermissionErrors) {
  auto server = Server::start(server_config(2, "s3cret"));
  std::string m =
      error_of([&] { join(server->port(), 0, 2, "wrong"); }, HB_ERR_PERMISSION);
  EXPECT_TRUE(contains(m, "wrong token")) << m;
  m = error_of([&] { join(server->port(), 1, 2); }, HB_ERR_PERMISSION);
  EXPECT_TRUE(contains(m, "no token")) << m;
  // The refused ones did not poison anything: the right token works.
  auto a = join(server->port(), 0, 2, "s3cret");
  auto b = join(server->port(), 1, 2, "s3cret");
  a->client->set("k", "v");
  EXPECT_EQ(b->client->get("k", 1000), "v");
}

TEST(ClientServer, WrongWorldSizeOrDuplicateRankIsConfigError) {
  auto server = Server::start(server_config(2));
  std::string m = error_of([&] { join(server->port(), 0, 3); }, HB_ERR_CONFIG);
  EXPECT_TRUE(contains(m, "world size")) << m;
  auto a = join(server->port(), 1, 2);
  m = error_of([&] { join(server->port(), 1, 2); }, HB_ERR_CONFIG);
  EXPECT_TRUE(contains(m, "rank 1 is already connected")) << m;
  a->client->set("still", "fine");
  EXPECT_TRUE(a->health.ok());
  // After BYE the rank may connect again (a new context).
  a->client->close();
  auto again = join(server->port(), 1, 2);
  EXPECT_EQ(again->client->get("still", 1000), "fine");
}

TEST(ClientServer, AddValidatesTheStoredValue) {
  auto server = Server::start(server_config(1));
  auto r = join(server->port(), 0, 1);
  r->client->set("text", "abc");
  std::string m =
      error_of([&] { r->client->add("text", 1); }, HB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(m, "'text'")) << m;
  r->client->set("big", std::to_string(INT64_MAX));
  error_of([&] { r->client->add("big", 1); }, HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r->client->add("fresh", -3), -3);
  EXPECT_TRUE(r->health.ok());
}

TEST(ClientServer, LargeValuesAndOversizedRequests) {
  auto server = Server::start(server_config(1));
  auto r = join(server->port(), 0, 1);
  std::string big(1000 * 1000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131);
  r->client->set("big", big);
  EXPECT_EQ(r->client->get("big", 1000), big);
  std::string m =
      error_of([&] { r->client->set("huge", std::string(2 << 20, 'x')); },
               HB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(m, "max_frame_bytes")) << m;
  EXPECT_EQ(r->client->get("big", 1000).size(), big.size());  // still connected
}

TEST(ClientServer, GarbageConnectionsAreClosedAndOthersKeepBeingServed) {
  auto server = Server::start(server_config(2));
  auto a = join(server->port(), 0, 2);
  {
    RawConn http(server->port());
    http.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    Frame last;
    ASSERT_TRUE(http.read_frame(&last, 2000));  // the server's last word
    EXPECT_EQ(last.id, 0u);
    EXPECT_EQ(last.ints[0], HB_ERR_CORRUPT);
    EXPECT_TRUE(contains(last.strs[0], "magic")) << last.strs[0];
    EXPECT_TRUE(http.closed_by_peer(2000));
  }
  {
    RawConn oversized(server->port());
    oversized.send_bytes(std::string("HBRV") + std::string(4, '\x7f'));
    Frame last;
    ASSERT_TRUE(oversized.read_frame(&last, 2000));
    EXPECT_TRUE(contains(last.strs[0], "oversized")) << last.strs[0];
    EXPECT_TRUE(oversized.closed_by_peer(2000));
  }
  {
    RawConn truncated(server->port());  // half a frame, then gone
    Frame f;
    f.type = kSet;
    f.strs = {"k", "v"};
    std::string bytes = encode_frame(f, SIZE_MAX);
    truncated.send_bytes(bytes.substr(0, bytes.size() / 2));
  }
  {
    RawConn before_hello(server->port());  // a request before HELLO
    Frame f;
    f.type = kSet;
    f.id = 3;
    f.strs = {"k", "v"};
    before_hello.send(f);
    EXPECT_TRUE(before_hello.closed_by_peer(2000));
  }
  {
    RawConn bad_shape(server->port());
    Frame f;
    f.type = kHello;
    f.id = 1;
    f.strs = {"token"};  // the ints are missing
    bad_shape.send(f);
    Frame last;
    ASSERT_TRUE(bad_shape.read_frame(&last, 2000));
    EXPECT_TRUE(contains(last.strs[0], "HELLO needs 2 ints")) << last.strs[0];
  }
  auto b = join(server->port(), 1, 2);
  a->client->set("after", "garbage");
  EXPECT_EQ(b->client->get("after", 1000), "garbage");
  EXPECT_TRUE(a->health.ok()) << a->health.message();
}

TEST(ClientServer, MalformedFrameFromARankLosesThatRankOnly) {
  auto server = Server::start(server_config(3));
  auto a = join(server->port(), 0, 3);
  auto c = join(server->port(), 2, 3);
  RawConn raw(server->port());
  raw.hello(1, 3);
  raw.send_bytes("HBRVgarbage!");
  EXPECT_TRUE(raw.closed_by_peer(2000));
  std::string m =
      error_of([&] { a->client->get("never", 2000); }, HB_ERR_PEER_FAILED);
  EXPECT_TRUE(contains(m, "rank 1 lost: oversized rendezvous frame")) << m;
  EXPECT_TRUE(wait_failed(c->health, 2000));
  EXPECT_EQ(c->health.status(), HB_ERR_PEER_FAILED);
}

TEST(ClientServer, CloseWithoutByeFailsPendingGets) {
  auto server = Server::start(server_config(3));
  std::atomic<int> lost_rank{-1};
  server->on_peer_lost(
      [&](int rank, const std::string &) { lost_rank = rank; });
  auto a = join(server->port(), 0, 3);
  auto c = join(server->port(), 2, 3);
  RawConn raw(server->port());
  raw.hello(1, 3);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    raw.close();  // no BYE
  });
  auto t0 = std::chrono::steady_clock::now();
  std::string m =
      error_of([&] { a->client->get("never", 5000); }, HB_ERR_PEER_FAILED);
  int64_t took = ms_since(t0) - 100;
  closer.join();
  EXPECT_TRUE(contains(m, "rank 1 lost: connection closed")) << m;
  EXPECT_LT(took, kPeerTimeoutMs + kMarginMs);
  // on_peer_lost runs on the server thread right after the broadcast.
  for (int64_t end = now_ms() + 1000; lost_rank.load() < 0 && now_ms() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(lost_rank.load(), 1);
  std::printf(
      "[ measure ] closed connection detected by a pending get in %lld ms\n",
      static_cast<long long>(took));
  // Every later call fails too, and the broken world refuses newcomers.
  error_of([&] { c->client->set("x", "y"); }, HB_ERR_PEER_FAILED);
  m = error_of([&] { join(server->port(), 1, 3); }, HB_ERR_PEER_FAILED);
  EXPECT_TRUE(contains(m, "rank 1 lost")) << m;
}

TEST(ClientServer, HeartbeatSilenceIsDetectedWithinPeerTimeout) {
  auto server = Server::start(server_config(2));
  auto a = join(server->port(), 0, 2);
  RawConn silent(server->port());
  silent.hello(1, 2);  // and never another byte
  auto t0 = std::chrono::steady_clock::now();
  std::string m =
      error_of([&] { a->client->get("never", 5000); }, HB_ERR_PEER_FAILED);
  int64_t took = ms_since(t0);
  EXPECT_TRUE(contains(m, "rank 1 lost: no heartbeat")) << m;
  EXPECT_GE(took, kPeerTimeoutMs - 50);
  EXPECT_LT(took, kPeerTimeoutMs + kMarginMs);
  std::printf(
      "[ measure ] silent rank detected in %lld ms (peer_timeout_ms %lld)\n",
      static_cast<long long>(took), static_cast<long long>(kPeerTimeoutMs));
  EXPECT_TRUE(silent.closed_by_peer(1000));
}

TEST(ClientServer, AbortIsBroadcastWithTheReason) {
  constexpr int kWorld = 3;
  auto server = Server::start(server_config(kWorld));
  auto ranks = join_all(server->port(), kWorld);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ranks[1]->client->abort("bad batch 17");
  });
  std::string m = error_of([&] { ranks[0]->client->barrier("never", 5000); },
                           HB_ERR_ABORTED);
  aborter.join();
  EXPECT_TRUE(contains(m, "aborted by rank 1: bad batch 17")) << m;
  EXPECT_TRUE(wait_failed(ranks[2]->health, 2000));
  for (auto &r : ranks) EXPECT_EQ(r->health.status(), HB_ERR_ABORTED);
  EXPECT_TRUE(contains(ranks[2]->health.message(), "bad batch 17"));
  error_of([&] { ranks[2]->client->get("x", 100); }, HB_ERR_ABORTED);
  // Leaving after an abort is clean: nobody is reported lost.
  for (auto &r : ranks) r->client->close();
}

TEST(ClientServer, AnyHealthFailureWakesPendingCalls) {
  auto server = Server::start(server_config(2));
  auto a = join(server->port(), 0, 2);
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a->health.fail(HB_ERR_DEVICE, "NCCL said no");
  });
  auto t0 = std::chrono::steady_clock::now();
  std::string m =
      error_of([&] { a->client->wait({"never"}, 5000); }, HB_ERR_DEVICE);
  EXPECT_LT(ms_since(t0), 5 * kMarginMs);
  EXPECT_EQ(m, "NCCL said no");
  other.join();
}

TEST(ClientServer, ServerGoingAwayFailsClientsNamingIt) {
  auto server = Server::start(server_config(2));
  int port = server->port();
  auto a = join(port, 0, 2);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.reset();  // linger 0: stops while rank 0 is connected
  });
  auto t0 = std::chrono::steady_clock::now();
  std::string m =
      error_of([&] { a->client->get("never", 5000); }, HB_ERR_PEER_FAILED);
  stopper.join();
  EXPECT_LT(ms_since(t0), 5 * kMarginMs);
  EXPECT_TRUE(
      contains(m, "rendezvous server at 127.0.0.1:" + std::to_string(port)))
      << m;
}

int free_port() { return hb::free_port("127.0.0.1", 0); }

// A "server" that accepts one client, answers its HELLO, then goes silent
// (as a SIGSTOPped hbrun would).
class SilentServer {
 public:
  SilentServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listen_fd_, 4), 0);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr *>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      conn_fd_ = accept(listen_fd_, nullptr, nullptr);
      FrameDecoder dec(1 << 20);
      Frame hello;
      char buf[4096];
      while (!dec.next(&hello)) {
        ssize_t n = recv(conn_fd_, buf, sizeof buf, 0);
        if (n <= 0) return;
        dec.feed(buf, static_cast<size_t>(n));
      }
      std::string reply =
          encode_frame(make_reply(hello.id, HB_OK, "", 1), SIZE_MAX);
      ssize_t ignored = ::send(conn_fd_, reply.data(), reply.size(), 0);
      (void)ignored;
    });
  }
  ~SilentServer() {
    thread_.join();
    if (conn_fd_ >= 0) ::close(conn_fd_);
    ::close(listen_fd_);
  }
  int port() const { return port_; }

 private:
  int listen_fd_ = -1, conn_fd_ = -1, port_ = 0;
  std::thread thread_;
};

TEST(ClientServer, SilentServerIsDeclaredLostByTheClient) {
  SilentServer silent;
  auto r = join(silent.port(), 0, 1);
  auto t0 = std::chrono::steady_clock::now();
  std::string m =
      error_of([&] { r->client->get("never", 60000); }, HB_ERR_PEER_FAILED);
  int64_t took = ms_since(t0);
  EXPECT_TRUE(contains(
      m, "rendezvous server at 127.0.0.1:" + std::to_string(silent.port()) +
             " lost: no heartbeat"))
      << m;
  EXPECT_LT(took, kPeerTimeoutMs + kMarginMs);
  std::printf(
      "[ measure ] silent server detected in %lld ms (peer_timeout_ms %lld)\n",
      static_cast<long long>(took), static_cast<long long>(kPeerTimeoutMs));
}

TEST(ClientServer, ClientsMayStartBeforeTheServer) {
  int port = free_port();
  std::unique_ptr<Rank> early;
  std::thread joiner([&] { early = join(port, 1, 2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto cfg = server_config(2);
  cfg.port = port;
  auto server = Server::start(cfg);
  joiner.join();
  ASSERT_TRUE(early);
  auto late = join(port, 0, 2);
  early->client->set("k", "v");
  EXPECT_EQ(late->client->get("k", 1000), "v");
}

TEST(ClientServer, ConnectTimesOutWhenNobodyListens) {
  auto cfg = client_config(free_port(), 0, 1);
  cfg.connect_timeout_ms = 300;
  Health h;
  auto t0 = std::chrono::steady_clock::now();
  std::string m = error_of([&] { Client::connect(cfg, &h); }, HB_ERR_TIMEOUT);
  EXPECT_GE(ms_since(t0), 290);
  EXPECT_LT(ms_since(t0), 300 + 3 * kMarginMs);
  EXPECT_TRUE(contains(m, "could not reach the rendezvous server")) << m;
  EXPECT_TRUE(h.ok());  // a failed connect does not fail the Health
}

TEST(ClientServer, HeartbeatSlowerThanPeerTimeoutIsConfigError) {
  auto scfg = server_config(1);
  scfg.heartbeat_interval_ms = scfg.peer_timeout_ms;
  std::string m = error_of([&] { Server::start(scfg); }, HB_ERR_CONFIG);
  EXPECT_TRUE(contains(m, "heartbeat_interval_ms")) << m;
  auto server = Server::start(server_config(1));
  auto ccfg = client_config(server->port(), 0, 1);
  ccfg.heartbeat_interval_ms = 10 * ccfg.peer_timeout_ms;
  Health h;
  error_of([&] { Client::connect(ccfg, &h); }, HB_ERR_CONFIG);
}

TEST(ClientServer, BindConflictIsIoError) {
  auto first = Server::start(server_config(1));
  auto cfg = server_config(1);
  cfg.port = first->port();
  std::string m = error_of([&] { Server::start(cfg); }, HB_ERR_IO);
  EXPECT_TRUE(contains(m, std::to_string(first->port()))) << m;
}

TEST(ClientServer, ByeIsNotALossAndCallsAfterCloseAreRefused) {
  auto server = Server::start(server_config(2));
  std::atomic<int> lost{0};
  server->on_peer_lost([&](int, const std::string &) { lost++; });
  auto ranks = join_all(server->port(), 2);
  ranks[1]->client->close();
  ranks[1]->client->close();  // idempotent
  ranks[1].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * kPeerTimeoutMs));
  EXPECT_TRUE(ranks[0]->health.ok()) << ranks[0]->health.message();
  EXPECT_EQ(lost.load(), 0);
  ranks[0]->client->close();
  error_of([&] { ranks[0]->client->set("k", "v"); }, HB_ERR_INVALID_ARGUMENT);
}

// hbrun orders failures by the departures: a BYE, a loss and an ABORT are
// reported in the order the server saw them.
TEST(ClientServer, ReportsEveryDepartureInOrder) {
  // Before the server: its callback runs until the server is gone (the
  // ranks' BYEs at the end of the test are departures too).
  std::mutex mu;
  std::vector<std::pair<int, Server::Departure>> seen;
  auto server = Server::start(server_config(4));
  server->on_departure([&](int rank, Server::Departure how) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(rank, how);
  });
  auto a = join(server->port(), 0, 4);
  auto b = join(server->port(), 2, 4);
  auto c = join(server->port(), 3, 4);
  RawConn raw(server->port());
  raw.hello(1, 4);
  auto wait_for = [&](size_t n) {
    for (int64_t end = now_ms() + 2000; now_ms() < end;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (seen.size() >= n) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  };
  b->client->close();  // BYE
  ASSERT_TRUE(wait_for(1));
  raw.close();  // no BYE: lost
  ASSERT_TRUE(wait_for(2));
  c->client->abort("test");
  ASSERT_TRUE(wait_for(3));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(2, Server::Departure::kLeft));
  EXPECT_EQ(seen[1], std::make_pair(1, Server::Departure::kLost));
  EXPECT_EQ(seen[2], std::make_pair(3, Server::Departure::kAborted));
}

// hbrun restarts a ps job as a whole once a rank that joined the store's
// world dies: on_join reports each accepted HELLO before its reply, and
// never a refused one.
TEST(ClientServer, ReportsEveryAcceptedJoin) {
  std::mutex mu;
  std::vector<int> joined;
  auto server = Server::start(server_config(3));
  server->on_join([&](int rank) {
    std::lock_guard<std::mutex> lock(mu);
    joined.push_back(rank);
  });
  auto a = join(server->port(), 2, 3);
  auto b = join(server->port(), 0, 3);
  {
    // Before the reply: connect() has returned, so both are in.
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(joined, (std::vector<int>{2, 0}));
  }
  // Refused: another world size; then the world is broken.
  error_of([&] { join(server->port(), 1, 4); }, HB_ERR_CONFIG);
  a->client->abort("test");
  ASSERT_TRUE(wait_failed(b->health, 2000));
  error_of([&] { join(server->port(), 1, 3); }, HB_ERR_ABORTED);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(joined, (std::vector<int>{2, 0}));
}

TEST(ClientServer, ServerLingersUntilRanksSayBye) {
  auto cfg = server_config(2);
  cfg.linger_ms = 3000;
  auto server = Server::start(cfg);
  auto ranks = join_all(server->port(), 2);
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ranks[1]->client->close();
  });
  ranks[0]->client->close();
  auto t0 = std::chrono::steady_clock::now();
  server.reset();  // waits for rank 1's BYE
  int64_t took = ms_since(t0);
  leaver.join();
  EXPECT_GE(took, 100);
  EXPECT_LT(took, 10 * kMarginMs);
  EXPECT_TRUE(ranks[1]->health.ok()) << ranks[1]->health.message();
}

}  // namespace
}  // namespace test
}  // namespace rdv
}  // namespace hb
