// The rendezvous client: a non-blocking socket written by the calling
// threads (under a mutex) and read by one background thread, which also
// sends heartbeats and watches the server's.
#include "rendezvous/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "abi/error.h"
#include "common/clock.h"
#include "common/health.h"
#include "common/log.h"
#include "rendezvous/protocol.h"
#include "rendezvous/tcp.h"

namespace hb {
namespace rdv {
namespace {

// Replies may exceed a request's size by their own few fields.
constexpr size_t kReplySlack = 256;

// State shared with the Health callback, which may still run on another
// thread after the client is gone (Health calls callbacks outside its lock).
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  bool health_failed = false;
  bool registered = false;        // HELLO accepted
  bool closing = false;           // close() began: a dropped link is expected
  bool closed = false;            // close() ran
  hb_status conn_status = HB_OK;  // connection failure before registration
  std::string conn_error;
  std::map<uint64_t, std::unique_ptr<Frame>> replies;  // id -> reply
  std::vector<int> left;  // ranks that said BYE (kPeerLeft), in order
};

class ClientImpl final : public Client {
 public:
  ClientImpl(const ClientConfig &cfg, Health *health);
  ~ClientImpl() override;
  void handshake();

  void set(const std::string &key, const std::string &value) override;
  std::string get(const std::string &key, int64_t timeout_ms) override;
  int64_t add(const std::string &key, int64_t delta) override;
  void wait(const std::vector<std::string> &keys, int64_t timeout_ms) override;
  void barrier(const std::string &name, int64_t timeout_ms) override;
  void abort(const std::string &reason) override;
  void close() override;
  std::vector<int> ranks_left() const override {
    std::lock_guard<std::mutex> lock(sh_->mu);
    return sh_->left;
  }

 private:
  enum class Mode { kNormal, kHandshake, kBye };
  // Sends a request and waits for its reply until local_timeout_ms. Throws
  // the reply's error, the Health's error, or HB_ERR_TIMEOUT naming `what`.
  Frame call(Frame req, int64_t local_timeout_ms, const std::string &what,
             Mode mode = Mode::kNormal);
  // Throws HB_ERR_PEER_FAILED if the connection broke mid-frame.
  void send_frame(const Frame &f, int64_t deadline_ms);
  void io_loop();
  void send_heartbeat(int64_t now);
  void read_ready();
  void on_frame(const Frame &f);
  // The connection is unusable: before registration the handshake fails,
  // afterwards the Health does (unless this client is closing).
  void connection_failed(hb_status st, const std::string &msg);
  void stop_io();
  std::string server() const {
    return format("%s:%d", cfg_.host.c_str(), cfg_.port);
  }

  ClientConfig cfg_;
  std::unique_ptr<Health> own_health_;
  Health *health_;
  std::shared_ptr<Shared> sh_ = std::make_shared<Shared>();
  int sub_id_ = -1;
  int fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread io_;
  std::atomic<bool> stop_io_{false};
  std::atomic<bool> broken_{false};  // connection unusable
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int64_t> last_recv_ms_{0};
  std::mutex write_mu_;
  FrameDecoder decoder_;
};

ClientImpl::ClientImpl(const ClientConfig &cfg, Health *health)
    : cfg_(cfg), health_(health), decoder_(cfg.max_frame_bytes + kReplySlack) {
  if (!health_) {
    own_health_.reset(new Health());
    health_ = own_health_.get();
  }
}

ClientImpl::~ClientImpl() {
  try {
    close();
  } catch (...) {
  }
  stop_io();
  if (sub_id_ >= 0) health_->unsubscribe(sub_id_);
  if (fd_ >= 0) ::close(fd_);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void ClientImpl::stop_io() {
  if (!io_.joinable()) return;
  stop_io_ = true;
  char b = 1;
  ssize_t ignored = ::write(wake_[1], &b, 1);
  (void)ignored;
  io_.join();
}

void ClientImpl::handshake() {
  HB_CHECK_ARG(
      cfg_.world_size >= 1 && cfg_.rank >= 0 && cfg_.rank < cfg_.world_size,
      "rendezvous client: rank %d not in a world of size %d", cfg_.rank,
      cfg_.world_size);
  HB_CHECK_ARG(cfg_.port > 0 && cfg_.port <= 65535,
               "rendezvous client: port %d out of range", cfg_.port);
  HB_CHECK_ARG(cfg_.request_timeout_ms > 0,
               "rendezvous client: request_timeout_ms %lld must be positive",
               static_cast<long long>(cfg_.request_timeout_ms));
  check_link_config("rendezvous client", cfg_.heartbeat_interval_ms,
                    cfg_.peer_timeout_ms, cfg_.max_frame_bytes);
  auto sh = sh_;
  sub_id_ = health_->subscribe([sh](hb_status, const std::string &) {
    {
      std::lock_guard<std::mutex> lock(sh->mu);
      sh->health_failed = true;
    }
    sh->cv.notify_all();
  });
  health_->check();

  // The server may not be up yet: retry until connect_timeout_ms.
  Deadline deadline(cfg_.connect_timeout_ms);
  std::string err;
  int64_t backoff = 10;
  int attempts = 0;
  for (;;) {
    health_->check();
    ++attempts;
    int64_t slice =
        deadline.remaining_ms() < 1000 ? deadline.remaining_ms() : 1000;
    fd_ = tcp_connect(cfg_.host, cfg_.port, slice, &err);
    if (fd_ >= 0) break;
    if (deadline.expired())
      fail(HB_ERR_TIMEOUT,
           "rank %d could not reach the rendezvous server at %s within %lld ms "
           "(%d attempts; last error: %s)",
           cfg_.rank, server().c_str(),
           static_cast<long long>(cfg_.connect_timeout_ms), attempts,
           err.c_str());
    HB_LOG_DEBUG("rendezvous: %s; retrying", err.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(
        backoff < deadline.remaining_ms() ? backoff : deadline.remaining_ms()));
    backoff = backoff * 2 > 250 ? 250 : backoff * 2;
  }

  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    fail(HB_ERR_IO, "rendezvous client: pipe: %s", std::strerror(errno));
  last_recv_ms_ = now_ms();
  io_ = std::thread([this] { io_loop(); });

  Frame hello;
  hello.type = kHello;
  hello.ints = {cfg_.rank, cfg_.world_size};
  hello.strs = {cfg_.token};
  int64_t left = deadline.remaining_ms();
  call(std::move(hello), left < 1000 ? 1000 : left, "HELLO", Mode::kHandshake);
  HB_LOG_DEBUG("rendezvous: rank %d registered with %s", cfg_.rank,
               server().c_str());
}

Frame ClientImpl::call(Frame req, int64_t local_timeout_ms,
                       const std::string &what, Mode mode) {
  if (mode == Mode::kNormal) health_->check();
  uint64_t id = next_id_++;
  req.id = id;
  int64_t deadline = now_ms() + local_timeout_ms;
  {
    std::lock_guard<std::mutex> lock(sh_->mu);
    if (sh_->closed)
      fail(HB_ERR_INVALID_ARGUMENT, "rendezvous %s after the client was closed",
           what.c_str());
    sh_->replies[id] = nullptr;
  }
  struct Forget {  // drops the reply slot however the call ends
    Shared *sh;
    uint64_t id;
    ~Forget() {
      std::lock_guard<std::mutex> lock(sh->mu);
      sh->replies.erase(id);
    }
  } forget{sh_.get(), id};
  send_frame(req, deadline);

  std::unique_lock<std::mutex> lock(sh_->mu);
  auto ready = [&] {
    return (mode == Mode::kNormal && sh_->health_failed) || sh_->replies[id] ||
           sh_->conn_status != HB_OK || (mode != Mode::kBye && sh_->closed);
  };
  sh_->cv.wait_until(
      lock, Clock::now() + std::chrono::milliseconds(local_timeout_ms), ready);
  if (mode == Mode::kNormal && sh_->health_failed) {
    lock.unlock();
    health_->check();
  }
  if (std::unique_ptr<Frame> &reply = sh_->replies[id]) {
    Frame f = std::move(*reply);
    auto status = static_cast<hb_status>(f.ints[0]);
    if (status != HB_OK) throw Error(status, f.strs[0]);
    if (mode == Mode::kHandshake) sh_->registered = true;
    return f;
  }
  // The connection broke (once registered, the Health gets the same error).
  if (sh_->conn_status != HB_OK) throw Error(sh_->conn_status, sh_->conn_error);
  if (sh_->closed && mode != Mode::kBye)
    fail(HB_ERR_INVALID_ARGUMENT,
         "rendezvous %s interrupted: the client was closed", what.c_str());
  fail(HB_ERR_TIMEOUT,
       "rendezvous %s: no answer from the server at %s within %lld ms",
       what.c_str(), server().c_str(),
       static_cast<long long>(local_timeout_ms));
}

void ClientImpl::send_frame(const Frame &f, int64_t deadline_ms) {
  std::string bytes = encode_frame(f, cfg_.max_frame_bytes);
  std::string err;
  bool ok = false;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (!broken_)
      ok = tcp_send_all(
          fd_, bytes.data(), bytes.size(), deadline_ms,
          [this] { return broken_.load(); }, &err);
  }
  if (ok) return;
  // A frame cut short leaves the stream unusable: the connection is done.
  connection_failed(HB_ERR_PEER_FAILED,
                    format("rendezvous server at %s lost: %s", server().c_str(),
                           err.c_str()));
  health_->check();  // the Health's error first, as everywhere
  std::lock_guard<std::mutex> lock(sh_->mu);
  throw Error(sh_->conn_status, sh_->conn_error);
}

void ClientImpl::io_loop() {
  int64_t next_heartbeat = now_ms() + cfg_.heartbeat_interval_ms;
  bool registered = false;
  while (!stop_io_ && !broken_) {
    // Wake for the next heartbeat, or when the server's silence would pass
    // peer_timeout_ms.
    int64_t wake = next_heartbeat;
    if (registered && last_recv_ms_ + cfg_.peer_timeout_ms + 1 < wake)
      wake = last_recv_ms_ + cfg_.peer_timeout_ms + 1;
    int64_t wait = wake - now_ms();
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(wait < 0 ? 0 : wait));
    if (n < 0 && errno != EINTR) {
      connection_failed(
          HB_ERR_PEER_FAILED,
          format("rendezvous client: poll: %s", std::strerror(errno)));
      break;
    }
    if (stop_io_) break;
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) read_ready();
    int64_t now = now_ms();
    {
      std::lock_guard<std::mutex> lock(sh_->mu);
      registered = sh_->registered;
    }
    if (registered && !broken_ && now - last_recv_ms_ > cfg_.peer_timeout_ms)
      connection_failed(
          HB_ERR_PEER_FAILED,
          format("rendezvous server at %s lost: no heartbeat for %lld ms "
                 "(peer_timeout_ms %lld)",
                 server().c_str(), static_cast<long long>(now - last_recv_ms_),
                 static_cast<long long>(cfg_.peer_timeout_ms)));
    if (now < next_heartbeat || broken_) continue;
    next_heartbeat = now + cfg_.heartbeat_interval_ms;
    // Heartbeats start after the HELLO: the server wants HELLO first.
    if (registered) send_heartbeat(now);
  }
}

void ClientImpl::send_heartbeat(int64_t now) {
  // A caller busy writing a frame keeps the server's clock fresh anyway.
  std::unique_lock<std::mutex> lock(write_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  Frame hb;
  hb.type = kHeartbeat;
  std::string bytes = encode_frame(hb, cfg_.max_frame_bytes);
  std::string err;
  if (tcp_send_all(
          fd_, bytes.data(), bytes.size(), now + cfg_.peer_timeout_ms,
          [this] { return stop_io_.load(); }, &err))
    return;
  lock.unlock();
  if (!stop_io_)
    connection_failed(HB_ERR_PEER_FAILED,
                      format("rendezvous server at %s lost: heartbeat %s",
                             server().c_str(), err.c_str()));
}

void ClientImpl::read_ready() {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      last_recv_ms_ = now_ms();
      decoder_.feed(buf, static_cast<size_t>(n));
      try {
        Frame f;
        for (;;) {
          uint64_t offset = decoder_.offset();
          if (broken_ || !decoder_.next(&f)) break;
          check_frame_shape(f, offset);
          on_frame(f);
        }
      } catch (const Error &e) {
        HB_LOG_WARN("rendezvous: bad frame from the server at %s: %s",
                    server().c_str(), e.what());
        connection_failed(HB_ERR_CORRUPT, format("rendezvous server at %s: %s",
                                                 server().c_str(), e.what()));
        return;
      }
      if (broken_) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    connection_failed(
        HB_ERR_PEER_FAILED,
        format("rendezvous server at %s lost: %s", server().c_str(),
               n == 0 ? "connection closed" : std::strerror(errno)));
    return;
  }
}

void ClientImpl::on_frame(const Frame &f) {
  switch (f.type) {
    case kHeartbeat:
      return;
    case kReply:
      if (f.id == 0) {  // the server's last word before closing
        connection_failed(
            static_cast<hb_status>(f.ints[0]),
            format("rendezvous server at %s closed the connection: %s",
                   server().c_str(), f.strs[0].c_str()));
        return;
      }
      {
        std::lock_guard<std::mutex> lock(sh_->mu);
        auto it = sh_->replies.find(f.id);
        if (it == sh_->replies.end()) return;  // its caller gave up
        it->second.reset(new Frame(f));
      }
      sh_->cv.notify_all();
      return;
    case kPeerLost:
      HB_LOG_WARN("rendezvous: rank %lld lost: %s",
                  static_cast<long long>(f.ints[0]), f.strs[0].c_str());
      health_->fail(
          HB_ERR_PEER_FAILED,
          format("rank %lld lost: %s", static_cast<long long>(f.ints[0]),
                 f.strs[0].c_str()));
      return;
    case kPeerLeft:
      HB_LOG_INFO("rendezvous: rank %lld left",
                  static_cast<long long>(f.ints[0]));
      {
        std::lock_guard<std::mutex> lock(sh_->mu);
        sh_->left.push_back(static_cast<int>(f.ints[0]));
      }
      return;
    case kAborted:
      health_->fail(HB_ERR_ABORTED, format("aborted by rank %lld: %s",
                                           static_cast<long long>(f.ints[0]),
                                           f.strs[0].c_str()));
      return;
    default:
      fail(HB_ERR_CORRUPT, "rendezvous protocol: the server may not send %s",
           msg_type_name(f.type));
  }
}

void ClientImpl::connection_failed(hb_status st, const std::string &msg) {
  if (broken_.exchange(true)) return;
  bool registered, closed;
  {
    std::lock_guard<std::mutex> lock(sh_->mu);
    registered = sh_->registered;
    closed = sh_->closing;
    sh_->conn_status = st;
    sh_->conn_error = msg;
  }
  // Fail the Health before waking the callers, so that what they throw and
  // what the Health says agree.
  if (registered && !closed) {
    HB_LOG_WARN("%s", msg.c_str());
    health_->fail(st, msg);
  }
  sh_->cv.notify_all();
}

void ClientImpl::set(const std::string &key, const std::string &value) {
  Frame f;
  f.type = kSet;
  f.strs = {key, value};
  call(std::move(f), cfg_.request_timeout_ms,
       format("set of key '%s'", key.c_str()));
}

std::string ClientImpl::get(const std::string &key, int64_t timeout_ms) {
  Frame f;
  f.type = kGet;
  f.ints = {timeout_ms};
  f.strs = {key};
  // The server answers a timeout itself; the local bound only matters if
  // it cannot, and liveness catches that within peer_timeout_ms.
  Frame r = call(std::move(f), timeout_ms + cfg_.peer_timeout_ms + 1000,
                 format("get of key '%s'", key.c_str()));
  return std::move(r.strs[0]);
}

int64_t ClientImpl::add(const std::string &key, int64_t delta) {
  Frame f;
  f.type = kAdd;
  f.ints = {delta};
  f.strs = {key};
  return call(std::move(f), cfg_.request_timeout_ms,
              format("add on key '%s'", key.c_str()))
      .ints[1];
}

void ClientImpl::wait(const std::vector<std::string> &keys,
                      int64_t timeout_ms) {
  Frame f;
  f.type = kWait;
  f.ints = {timeout_ms};
  f.strs = keys;
  call(std::move(f), timeout_ms + cfg_.peer_timeout_ms + 1000,
       format("wait for %zu keys", keys.size()));
}

void ClientImpl::barrier(const std::string &name, int64_t timeout_ms) {
  Frame f;
  f.type = kBarrier;
  f.ints = {timeout_ms};
  f.strs = {name};
  call(std::move(f), timeout_ms + cfg_.peer_timeout_ms + 1000,
       format("barrier '%s'", name.c_str()));
}

void ClientImpl::abort(const std::string &reason) {
  health_->fail(HB_ERR_ABORTED,
                format("aborted by rank %d: %s", cfg_.rank, reason.c_str()));
  if (broken_) return;
  Frame f;
  f.type = kAbort;
  f.strs = {reason};
  try {
    send_frame(f, now_ms() + cfg_.peer_timeout_ms);
  } catch (const Error &e) {
    HB_LOG_WARN("rendezvous: could not tell the others about the abort: %s",
                e.what());
  }
}

void ClientImpl::close() {
  bool registered;
  {
    std::lock_guard<std::mutex> lock(sh_->mu);
    if (sh_->closing) return;
    sh_->closing = true;
    registered = sh_->registered;
  }
  if (registered && !broken_) {
    Frame bye;
    bye.type = kBye;
    try {
      call(std::move(bye), cfg_.peer_timeout_ms, "BYE", Mode::kBye);
    } catch (const Error &e) {
      HB_LOG_DEBUG("rendezvous: BYE not acknowledged: %s", e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(sh_->mu);
    sh_->closed = true;
  }
  sh_->cv.notify_all();
  stop_io();
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace

std::unique_ptr<Client> Client::connect(const ClientConfig &cfg,
                                        Health *health) {
  auto client = std::make_unique<ClientImpl>(cfg, health);
  client->handshake();
  return client;
}

}  // namespace rdv
}  // namespace hb
