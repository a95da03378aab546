// hb's Gloo TCP pair (comm/tcp_pair.h) when the peer resets the connection
// at once: Gloo's own pair enforced getpeername in its event-loop thread
// and aborted the process there. Each round, a raw client connects to a
// listening pair and resets (SO_LINGER 0) before the loop thread accepts,
// mostly; the pair must fail (its connect throws) or, if it accepted first,
// connect and fail later. Either way the process lives.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

#include "comm/tcp_pair.h"

namespace {

TEST(TcpPair, PeerResetWhileConnectingFailsThePairNotTheProcess) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  // Above 127.0.0.1, so the pair is the listening side (Gloo orders by
  // address); nothing listens there: only the raw client below connects.
  sockaddr_storage above{};
  auto &in = reinterpret_cast<sockaddr_in &>(above);
  in.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.2", &in.sin_addr);
  const std::vector<char> peer = gloo::transport::tcp::Address(above).bytes();
  int failed = 0;
  const int rounds = 200;
  for (int i = 0; i < rounds; ++i) {
    auto ctx = hb::comm::make_tcp_context(dev, 0, 2);
    ctx->setTimeout(std::chrono::milliseconds(5000));
    auto &pair = ctx->createPair(1);
    sockaddr_storage ss =
        static_cast<const gloo::transport::tcp::Address &>(pair->address())
            .getSockaddr();
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(
        connect(fd, reinterpret_cast<sockaddr *>(&ss), sizeof(sockaddr_in)), 0)
        << std::strerror(errno);
    linger reset{1, 0};
    ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
    close(fd);
    try {
      pair->connect(peer);
    } catch (const gloo::IoException &) {
      ++failed;
    }
  }
  std::printf("[ note ] %d of %d pairs failed while connecting\n", failed,
              rounds);
}

}  // namespace
