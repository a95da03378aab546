// hb's Gloo TCP pair and mesh listener (comm/tcp_pair.h, mesh_listener.h)
// when the other side resets the connection at once. Gloo's own pair
// enforced getpeername in its event-loop thread and aborted the process
// there. Each round, a raw client connects to a listener and resets
// (SO_LINGER 0), mostly before the loop thread accepts or reads: the
// listener must drop it and keep waiting; and a pair dials a listener
// that resets it: the pair must fail (its wait throws). Either way the
// process lives.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>

#include "comm/mesh_listener.h"
#include "comm/tcp_pair.h"

namespace {

sockaddr_storage loopback(uint16_t port) {
  sockaddr_storage ss{};
  auto &in = reinterpret_cast<sockaddr_in &>(ss);
  in.sin_family = AF_INET;
  in.sin_port = port;
  inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
  return ss;
}

std::shared_ptr<gloo::transport::tcp::Device> loopback_device() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return std::dynamic_pointer_cast<gloo::transport::tcp::Device>(
      gloo::transport::tcp::CreateDevice(attr));
}

// A context of rank `rank` in a world of 2 (5 s waits), pairs of hb's.
std::shared_ptr<gloo::transport::Context> two_ranks(
    const std::shared_ptr<gloo::transport::tcp::Device> &dev, int rank) {
  auto ctx = hb::comm::make_tcp_context(dev, rank, 2);
  ctx->setTimeout(std::chrono::milliseconds(5000));
  return ctx;
}

// Rank 0 of two: its pair to rank 1 waits behind its listener (nonce 42).
struct Listening {
  explicit Listening(const std::shared_ptr<gloo::transport::tcp::Device> &dev)
      : ctx(two_ranks(dev, 0)),
        pair(ctx->createPair(1).get()),
        listener(dev, loopback(0), 0, 2, 42, {{nullptr, pair}}) {}
  std::shared_ptr<gloo::transport::Context> ctx;
  gloo::transport::Pair *pair;
  hb::comm::MeshListener listener;  // closed first: it holds pair
};

void connect_and_reset(uint16_t port) {
  sockaddr_storage ss = loopback(port);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&ss), sizeof(sockaddr_in)),
            0)
      << std::strerror(errno);
  linger reset{1, 0};
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
  close(fd);
}

TEST(TcpPair, PeerResetWhileConnectingFailsThePairNotTheProcess) {
  auto dev = loopback_device();
  {
    // Strangers reset before their hello; the pair keeps waiting.
    Listening rank0(dev);
    for (int i = 0; i < 200; ++i) connect_and_reset(rank0.listener.port());
  }
  // Dials to a plain socket that accepts and resets at once.
  const int srv = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(srv, 0);
  sockaddr_storage any = loopback(0);
  socklen_t n = sizeof any;
  ASSERT_EQ(bind(srv, reinterpret_cast<sockaddr *>(&any), sizeof(sockaddr_in)),
            0);
  ASSERT_EQ(listen(srv, 64), 0);
  ASSERT_EQ(getsockname(srv, reinterpret_cast<sockaddr *>(&any), &n), 0);
  int failed = 0;
  const int rounds = 100;
  for (int i = 0; i < rounds; ++i) {
    auto dctx = two_ranks(dev, 1);
    auto &pair = dctx->createPair(0);
    hb::comm::MeshHello h;
    hb::comm::start_dial(*pair, any, hb::comm::encode_hello(h));
    const int fd = accept(srv, nullptr, nullptr);
    ASSERT_GE(fd, 0);
    linger reset{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close(fd);
    try {
      hb::comm::wait_connected(*pair);
    } catch (const gloo::IoException &) {
      ++failed;
    }
  }
  close(srv);
  // No answer to the hello: every dial fails.
  EXPECT_EQ(failed, rounds);
}

// A dial whose hello the listener refuses fails with the listener's
// reason (here: a stale nonce), and a right hello connects.
TEST(TcpPair, RefusedHelloFailsTheDialWithItsReason) {
  auto dev = loopback_device();
  Listening rank0(dev);
  auto dial = [&](uint64_t nonce) -> std::string {
    auto dctx = two_ranks(dev, 1);
    auto &pair = dctx->createPair(0);
    hb::comm::MeshHello h;
    h.world = 2;
    h.rank = 1;
    h.nonce = nonce;
    hb::comm::start_dial(*pair, loopback(rank0.listener.port()),
                         hb::comm::encode_hello(h));
    try {
      hb::comm::wait_connected(*pair);
      hb::comm::wait_connected(*rank0.pair);
      return "connected";
    } catch (const gloo::IoException &e) {
      return e.what();
    }
  };
  const std::string stale = dial(41);
  EXPECT_NE(stale.find("refused this rank's mesh hello: wrong nonce"),
            std::string::npos)
      << stale;
  EXPECT_EQ(dial(42), "connected");
}

// A Gloo send buffer destroyed while its send is still queued on its pair
// (a failed call does not wait for its sends). Gloo's pair keeps a raw
// pointer to the buffer in its transmit queue: when the connection broke
// later, its loop thread wrote the pair's exception into the freed buffer
// (and a live peer's next EPOLLOUT would send from it). libgloo is not
// instrumented, so ASan saw no use after free, only LeakSanitizer the
// exception left referenced from freed memory (comm_connect_kill_test, 1
// run in 10). The pair must fail when such a buffer goes, and nothing of
// the buffer stay queued: under ASan this test leaked that exception
// before, and without ASan the pair stayed connected.
TEST(TcpPair, SendBufferDestroyedWithItsSendQueuedFailsThePair) {
  // Before the fix the loop went on writing to the broken connection:
  // EPIPE, not a SIGPIPE that ends the test binary.
  struct IgnoreSigpipe {
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    ~IgnoreSigpipe() { signal(SIGPIPE, old); }
  } ignore_sigpipe;
  auto dev = loopback_device();
  Listening rank0(dev);
  auto ctx1 = two_ranks(dev, 1);
  auto &pair1 = ctx1->createPair(0);
  hb::comm::MeshHello h;
  h.world = 2;
  h.rank = 1;
  h.nonce = 42;
  hb::comm::start_dial(*pair1, loopback(rank0.listener.port()),
                       hb::comm::encode_hello(h));
  hb::comm::wait_connected(*pair1);
  hb::comm::wait_connected(*rank0.pair);
  // Rank 0 registers no buffer for the slot, so its loop leaves the bytes
  // in the socket: a send larger than both sockets' buffers stays queued.
  std::vector<char> data(32 << 20, 'x');  // outlives the pair's use of it
  auto send = pair1->createSendBuffer(7, data.data(), data.size());
  send->send();
  send.reset();
  EXPECT_LT(hb::comm::pair_socket(*pair1), 0)
      << "the pair still connected after its queued send's buffer went";
  // The connection breaks (hb's Links shut sockets down on a peer's loss):
  // before, this rank's loop then signalled the freed buffer.
  ASSERT_EQ(shutdown(hb::comm::pair_socket(*rank0.pair), SHUT_RDWR), 0);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (hb::comm::pair_socket(*pair1) >= 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_LT(hb::comm::pair_socket(*pair1), 0);
}

}  // namespace
