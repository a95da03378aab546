#include "ps/conn.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/clock.h"
#include "common/health.h"
#include "rendezvous/tcp.h"

namespace hb {
namespace ps {
namespace {

// Replies carry rows (dim floats per id asked for): they may be far larger
// than the requests that max_frame_bytes caps. The ps is trusted that far.
constexpr size_t kReplyFactor = 64;
// Poll slice: how often a wait looks at the Health and the deadlines.
constexpr int kSliceMs = 50;

}  // namespace

Conn::Conn(const ConnConfig &cfg, Health *health)
    : cfg_(cfg),
      health_(health),
      addr_(format("%s:%d", cfg.host.c_str(), cfg.port)),
      decoder_(cfg.max_frame_bytes * kReplyFactor) {
  Deadline deadline(cfg.connect_timeout_ms);
  std::string err;
  for (;;) {
    fd_ = rdv::tcp_connect(cfg.host, cfg.port,
                           std::max<int64_t>(deadline.remaining_ms(), 1), &err);
    if (fd_ >= 0) break;
    if (deadline.expired() || !health_->ok())
      fail(HB_ERR_TIMEOUT, "%s: no answer within connect_timeout_ms=%lld: %s",
           who().c_str(), static_cast<long long>(cfg.connect_timeout_ms),
           err.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  call(request(kHello, {cfg.rank, cfg.world, cfg.ps_index}), "hello");
}

Conn::~Conn() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Conn::who() const {
  return format("ps task %d (%s)", cfg_.ps_index, addr_.c_str());
}

void Conn::broken(const std::string &why) {
  broken_ = true;
  std::string msg =
      format("rank %d: %s: %s", cfg_.rank, who().c_str(), why.c_str());
  health_->fail(HB_ERR_PEER_FAILED, msg);
  fail(HB_ERR_PEER_FAILED, "%s", msg.c_str());
}

void Conn::send(const Frame &f) {
  std::string bytes = rdv::encode_frame(f, cfg_.max_frame_bytes);
  std::lock_guard<std::mutex> lock(write_mu_);
  if (broken_) fail(HB_ERR_PEER_FAILED, "%s: connection broken", who().c_str());
  std::string err;
  Health *h = health_;
  if (!rdv::tcp_send_all(
          fd_, bytes.data(), bytes.size(), now_ms() + cfg_.peer_timeout_ms,
          [h] { return !h->ok(); }, &err)) {
    if (!health_->ok()) health_->check();
    broken(err);
  }
}

void Conn::ping() {
  if (broken_) return;
  try {
    send(request(kPing));
  } catch (const Error &) {
    // broken() failed the Health: the calling thread hears of it.
  }
}

uint64_t Conn::start(Frame req) {
  req.id = next_id_++;
  health_->check();
  send(req);
  return req.id;
}

Frame Conn::finish(uint64_t id, const char *what, bool gated) {
  Deadline deadline(cfg_.timeout_ms + (gated ? cfg_.peer_timeout_ms : 0));
  int64_t last_heard = now_ms(), last_awake = last_heard;
  char buf[1 << 16];
  for (;;) {
    Frame f;
    auto next = [&] {
      try {
        return decoder_.next(&f);
      } catch (const Error &e) {
        broken(e.what());
      }
    };
    while (next()) {
      last_heard = now_ms();
      if (f.type == kPong) continue;
      if (f.type != kReply || f.id != id || f.ints.empty() || f.strs.empty())
        broken(format("unexpected message type %d (id %llu) in reply to %s",
                      f.type, static_cast<unsigned long long>(f.id), what));
      if (f.ints[0] != HB_OK)
        fail(static_cast<hb_status>(f.ints[0]), "%s: %s", who().c_str(),
             f.strs[0].c_str());
      f.ints.erase(f.ints.begin());
      f.strs.erase(f.strs.begin());
      return f;
    }
    health_->check();
    const int64_t now = now_ms();
    // This process did not run for half a peer timeout (SIGSTOPped, or
    // starved of CPU): the ps's silence meanwhile says nothing of the ps --
    // our pings did not go out, and its replies wait unread in the socket.
    if (now - last_awake > cfg_.peer_timeout_ms / 2) last_heard = now;
    last_awake = now;
    if (now - last_heard > cfg_.peer_timeout_ms)
      broken(format("silent for %lld ms (peer_timeout_ms) during %s",
                    static_cast<long long>(now - last_heard), what));
    if (deadline.expired())
      fail(HB_ERR_TIMEOUT,
           "rank %d: %s: no reply to %s within timeout_ms=%lld%s", cfg_.rank,
           who().c_str(), what, static_cast<long long>(cfg_.timeout_ms),
           gated ? " (+ peer_timeout_ms)" : "");
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, kSliceMs);
    if (n < 0 && errno != EINTR) broken(format("poll: %s", strerror(errno)));
    if (n <= 0) continue;
    ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    if (r == 0) broken(format("closed the connection during %s", what));
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      broken(format("receive failed during %s: %s", what, strerror(errno)));
    }
    try {
      decoder_.feed(buf, static_cast<size_t>(r));
    } catch (const Error &e) {
      broken(e.what());
    }
  }
}

void Conn::bye() {
  if (broken_ || fd_ < 0) return;
  ConnConfig saved = cfg_;
  cfg_.timeout_ms = std::min<int64_t>(cfg_.timeout_ms, cfg_.peer_timeout_ms);
  try {
    call(request(kBye), "bye");
  } catch (const Error &) {
    // Leaving anyway: the ps counts a vanished worker as lost.
  }
  cfg_ = saved;
}

}  // namespace ps
}  // namespace hb
