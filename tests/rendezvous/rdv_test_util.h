// Helpers for the rendezvous tests: a server with small timeouts, clients
// with their own Health, raw sockets that speak (or break) the protocol.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "abi/error.h"
#include "common/clock.h"
#include "common/health.h"
#include "rendezvous/client.h"
#include "rendezvous/frame.h"
#include "rendezvous/protocol.h"
#include "rendezvous/server.h"
#include "rendezvous/tcp.h"

namespace hb {
namespace rdv {
namespace test {

// Sanitized builds run several times slower, on a shared machine: their
// liveness timeouts (and the margins the tests allow) stretch by kSlow.
#if defined(__SANITIZE_THREAD__)
constexpr int64_t kSlow = 4;
#elif defined(__SANITIZE_ADDRESS__)
constexpr int64_t kSlow = 2;
#else
constexpr int64_t kSlow = 1;
#endif
constexpr int64_t kPeerTimeoutMs = 400 * kSlow;
constexpr int64_t kHeartbeatMs = 50 * kSlow;
// Slack allowed on top of a deadline before a test calls it late.
constexpr int64_t kMarginMs = 200 * kSlow;

inline ServerConfig server_config(int world_size,
                                  const std::string &token = "") {
  ServerConfig c;
  c.host = "127.0.0.1";
  c.world_size = world_size;
  c.token = token;
  c.heartbeat_interval_ms = kHeartbeatMs;
  c.peer_timeout_ms = kPeerTimeoutMs;
  c.max_frame_bytes = 1 << 20;
  c.linger_ms = 0;
  return c;
}

inline ClientConfig client_config(int port, int rank, int world_size,
                                  const std::string &token = "") {
  ClientConfig c;
  c.port = port;
  c.rank = rank;
  c.world_size = world_size;
  c.token = token;
  c.connect_timeout_ms = 3000;
  c.heartbeat_interval_ms = kHeartbeatMs;
  c.peer_timeout_ms = kPeerTimeoutMs;
  c.max_frame_bytes = 1 << 20;
  c.request_timeout_ms = 5000;
  return c;
}

// A rank: its Health and its client.
struct Rank {
  Health health;
  std::unique_ptr<Client> client;
};

inline std::unique_ptr<Rank> join(int port, int rank, int world_size,
                                  const std::string &token = "") {
  auto r = std::make_unique<Rank>();
  r->client =
      Client::connect(client_config(port, rank, world_size, token), &r->health);
  return r;
}

// Runs fn, expects it to throw hb::Error with `status`; returns the message.
inline std::string error_of(const std::function<void()> &fn, hb_status status) {
  try {
    fn();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error with status " << status;
  return "";
}

// Polls until the Health has failed; false if it is still ok after ms.
inline bool wait_failed(const Health &h, int64_t ms) {
  for (int64_t end = now_ms() + ms; h.ok() && now_ms() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return !h.ok();
}

inline int64_t ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

// A raw connection to the server for speaking the protocol by hand.
class RawConn {
 public:
  explicit RawConn(int port) {
    std::string err;
    fd_ = tcp_connect("127.0.0.1", port, 2000, &err);
    EXPECT_GE(fd_, 0) << err;
  }
  ~RawConn() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send_bytes(const std::string &bytes) {
    std::string err;
    ASSERT_TRUE(tcp_send_all(fd_, bytes.data(), bytes.size(), now_ms() + 2000,
                             {}, &err))
        << err;
  }
  void send(const Frame &f) { send_bytes(encode_frame(f, SIZE_MAX)); }
  void hello(int rank, int world_size, const std::string &token = "") {
    Frame f;
    f.type = kHello;
    f.id = 1;
    f.ints = {rank, world_size};
    f.strs = {token};
    send(f);
    Frame r;
    ASSERT_TRUE(read_frame(&r, 2000));
    ASSERT_EQ(r.type, kReply);
    ASSERT_EQ(r.ints[0], HB_OK) << r.strs[0];
  }
  // Reads one frame; false on EOF or timeout.
  bool read_frame(Frame *out, int64_t timeout_ms) {
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
      if (dec_.next(out)) return true;
      if (!wait_readable(end)) return false;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return false;
      dec_.feed(buf, static_cast<size_t>(n));
    }
  }
  // True once the server has closed the connection (EOF or reset).
  bool closed_by_peer(int64_t timeout_ms) {
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
      if (!wait_readable(end)) return false;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
  }

 private:
  bool wait_readable(int64_t end) {
    int64_t left = end - now_ms();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(left)) > 0;
  }
  int fd_ = -1;
  FrameDecoder dec_{SIZE_MAX};
};

}  // namespace test
}  // namespace rdv
}  // namespace hb
