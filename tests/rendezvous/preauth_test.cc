// Before a connection has authenticated (HELLO accepted) the store takes
// only a small frame and only for peer_timeout_ms: clients that announce
// large frames or drip bytes cannot make it hold memory or connections.
// A write to a client that went away must not kill the process (SIGPIPE).
#include <signal.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rdv_test_util.h"

namespace hb {
namespace rdv {
namespace test {
namespace {

TEST(PreAuth, LargeFrameBeforeHelloIsRefusedAtOnce) {
  auto server = Server::start(server_config(2));
  RawConn big(server->port());
  // A header announcing 64 KiB (within max_frame_bytes, 1 MiB here), then
  // part of the body: refused at the header, before the body is held.
  std::string header = std::string("HBRV") + std::string("\x00\x00\x01\x00", 4);
  big.send_bytes(header + std::string(1000, 'x'));
  Frame last;
  ASSERT_TRUE(big.read_frame(&last, 2000));
  EXPECT_EQ(last.ints[0], HB_ERR_CORRUPT);
  EXPECT_NE(last.strs[0].find("oversized"), std::string::npos) << last.strs[0];
  EXPECT_TRUE(big.closed_by_peer(2000));
  // An authenticated rank may still send frames up to max_frame_bytes.
  auto a = join(server->port(), 0, 2);
  a->client->set("big", std::string(200 << 10, 'v'));
  EXPECT_EQ(a->client->get("big", 1000).size(), size_t(200 << 10));
}

TEST(PreAuth, DrippingClientIsClosedAfterTheHandshakeDeadline) {
  auto server = Server::start(server_config(2));
  RawConn drip(server->port());
  auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  // A valid header announcing a small body, then the body one byte every
  // 50 ms: never a whole HELLO, though bytes keep arriving.
  drip.send_bytes(std::string("HBRV") + std::string("\x40\x00\x00\x00", 4));
  for (int i = 0; i < 60 && !closed; ++i) {
    drip.send_bytes("x");
    closed = drip.closed_by_peer(50);
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(ms_since(t0), kPeerTimeoutMs + kMarginMs + 200);
}

// The reliability campaign's case: the store's process is stopped until its
// clients are gone, then continued: its heartbeats and loss broadcasts hit
// closed sockets (EPIPE). The process must survive it (not die of SIGPIPE).
TEST(NoSigpipe, StoreWritingToVanishedClientsSurvives) {
  const int kRanks = 16;
  int port = 0;
  {
    auto probe = Server::start(server_config(kRanks));
    port = probe->port();
  }
  pid_t child = fork();
  if (child == 0) {
    signal(SIGPIPE, SIG_DFL);
    ServerConfig cfg = server_config(kRanks);
    cfg.port = port;
    auto server = Server::start(cfg);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    _exit(0);
  }
  ASSERT_GT(child, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    std::vector<std::unique_ptr<RawConn>> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back(new RawConn(port));
      ranks.back()->hello(r, kRanks);
    }
    kill(child, SIGSTOP);
  }  // every client gone while the store is stopped: each loss it then
     // declares is broadcast to sockets already closed
  std::this_thread::sleep_for(
      std::chrono::milliseconds(kPeerTimeoutMs + kMarginMs));
  kill(child, SIGCONT);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "store process status " << status
      << (WIFSIGNALED(status) ? " (killed by a signal)" : "");
}

}  // namespace
}  // namespace test
}  // namespace rdv
}  // namespace hb
