// The rendezvous server: libuv plumbing (listener, connections, timers) in
// one loop thread around the Store state machine. Everything below runs on
// the loop thread except start(), the destructor, port() and on_peer_lost().
#include "rendezvous/server.h"

#include <pthread.h>
#include <signal.h>

#include <netdb.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "abi/error.h"
#include "common/clock.h"
#include "common/fd_limit.h"
#include "common/log.h"
#include "rendezvous/protocol.h"
#include "rendezvous/store.h"

namespace hb {
namespace rdv {
namespace {

// The largest frame an unauthenticated connection may send: a HELLO with a
// token of up to a few KiB.
const size_t kHandshakeMaxBytes = 8 << 10;

class ServerImpl;

struct Conn {
  uv_tcp_t tcp;  // tcp.data points back to this Conn
  ServerImpl *srv = nullptr;
  uint64_t serial = 0;
  FrameDecoder decoder;
  std::string peer;  // "ip:port" of the client
  int rank = -1;     // set by HELLO
  bool bye = false;
  bool in_context = false;  // passed a barrier (a probe never does)
  bool closing = false;
  int64_t last_seen_ms = 0;
  int64_t accepted_ms = 0;

  explicit Conn(size_t max_frame_bytes) : decoder(max_frame_bytes) {}
  std::string who() const {
    return rank >= 0 ? format("rank %d (%s)", rank, peer.c_str())
                     : format("unregistered client %s", peer.c_str());
  }
};

struct WriteReq {
  uv_write_t req;
  std::string data;
};

std::string sockaddr_name(const sockaddr_storage &ss) {
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto *a = reinterpret_cast<const sockaddr_in *>(&ss);
    uv_ip4_name(a, ip, sizeof ip);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto *a = reinterpret_cast<const sockaddr_in6 *>(&ss);
    uv_ip6_name(a, ip, sizeof ip);
    port = ntohs(a->sin6_port);
  }
  return format("%s:%d", ip, port);
}

// Constant-time comparison, so the token cannot be guessed byte by byte.
bool same_token(const std::string &a, const std::string &b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

class ServerImpl final : public Server {
 public:
  explicit ServerImpl(const ServerConfig &cfg)
      : cfg_(cfg), store_(cfg.world_size) {}
  ~ServerImpl() override;

  void open();
  int port() const override { return port_; }
  void on_peer_lost(std::function<void(int, const std::string &)> cb) override {
    std::lock_guard<std::mutex> lock(cb_mu_);
    on_lost_ = std::move(cb);
  }
  void on_departure(std::function<void(int, Departure)> cb) override {
    std::lock_guard<std::mutex> lock(cb_mu_);
    on_departure_ = std::move(cb);
  }
  void on_join(std::function<void(int)> cb) override {
    std::lock_guard<std::mutex> lock(cb_mu_);
    on_join_ = std::move(cb);
  }

 private:
  static void on_connection(uv_stream_t *listener, int status);
  static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
  static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
  static void on_async(uv_async_t *a);
  static void on_sweep(uv_timer_t *t);
  static void on_heartbeat(uv_timer_t *t);
  static void on_deadline(uv_timer_t *t);
  static void on_closed(uv_handle_t *h);

  void handle(Conn *c, const Frame &f);
  void hello(Conn *c, const Frame &f);
  void abort_from(Conn *c, const std::string &reason);
  void departed(int rank, Departure how);
  void send(Conn *c, const Frame &f);
  void send_all(std::vector<Outgoing> *out);
  void broadcast(const Frame &f, const Conn *except);
  // The connection is gone (EOF, error, silence); a registered rank that
  // did not say BYE is lost.
  void conn_lost(Conn *c, const std::string &why, bool flush = false);
  // Refuses a connection: one error reply (id 0 or the request's), then
  // close once it is flushed.
  void refuse(Conn *c, uint64_t id, hb_status st, const std::string &msg);
  void close_conn(Conn *c, bool flush);
  void arm_deadline();
  void stop_loop();

  ServerConfig cfg_;
  Store store_;
  uv_loop_t loop_;
  uv_tcp_t listener_;
  uv_async_t wake_;
  uv_timer_t sweep_;
  uv_timer_t heartbeat_;
  uv_timer_t deadline_;
  bool loop_ready_ = false;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> live_ranks_{0};

  std::mutex cb_mu_;
  std::function<void(int, const std::string &)> on_lost_;
  std::function<void(int, Departure)> on_departure_;
  std::function<void(int)> on_join_;

  uint64_t next_serial_ = 1;
  std::map<uint64_t, Conn *> conns_;  // every open connection
  std::map<int, Conn *> ranks_;       // registered ranks that did not leave
  std::string broken_;                // first loss or abort: refuses HELLOs
  hb_status broken_status_ = HB_OK;
  int64_t armed_deadline_ = INT64_MAX;
  char read_buf_[64 * 1024];
};

void ServerImpl::open() {
  HB_CHECK_ARG(cfg_.world_size >= 1, "rendezvous server: world_size %d < 1",
               cfg_.world_size);
  HB_CHECK_ARG(cfg_.port >= 0 && cfg_.port <= 65535,
               "rendezvous server: port %d out of range", cfg_.port);
  check_link_config("rendezvous server", cfg_.heartbeat_interval_ms,
                    cfg_.peer_timeout_ms, cfg_.max_frame_bytes);
  std::string where = format("%s:%d", cfg_.host.c_str(), cfg_.port);
  // One connection per rank: a world past ~1000 ranks needs more than the
  // usual soft limit of 1024 descriptors.
  raise_fd_limit(size_t(cfg_.world_size) + 64);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo *res = nullptr;
  int rc = getaddrinfo(cfg_.host.empty() ? nullptr : cfg_.host.c_str(),
                       std::to_string(cfg_.port).c_str(), &hints, &res);
  if (rc != 0)
    fail(HB_ERR_IO, "rendezvous server cannot resolve %s: %s", where.c_str(),
         gai_strerror(rc));
  sockaddr_storage addr{};
  std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);

  if (uv_loop_init(&loop_) != 0)
    fail(HB_ERR_INTERNAL, "rendezvous server: uv_loop_init failed");
  loop_.data = this;
  loop_ready_ = true;
  uv_tcp_init(&loop_, &listener_);
  uv_async_init(&loop_, &wake_, on_async);
  uv_timer_init(&loop_, &sweep_);
  uv_timer_init(&loop_, &heartbeat_);
  uv_timer_init(&loop_, &deadline_);
  listener_.data = wake_.data = sweep_.data = heartbeat_.data = deadline_.data =
      nullptr;

  rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr *>(&addr), 0);
  if (rc == 0)
    rc = uv_listen(reinterpret_cast<uv_stream_t *>(&listener_), 1024,
                   on_connection);
  if (rc != 0)
    fail(HB_ERR_IO, "rendezvous server cannot listen on %s: %s", where.c_str(),
         uv_strerror(rc));
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr *>(&bound), &len);
  port_ = bound.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port)
              : ntohs(reinterpret_cast<sockaddr_in *>(&bound)->sin_port);

  // Liveness sweep: a silent rank is caught within peer_timeout plus one
  // sweep period.
  int64_t period = cfg_.peer_timeout_ms / 20;
  period = period < 5 ? 5 : period > 250 ? 250 : period;
  uv_timer_start(&sweep_, on_sweep, static_cast<uint64_t>(period),
                 static_cast<uint64_t>(period));
  // The server's own heartbeats, on its clock: a client busy sending a
  // large frame still hears from the server.
  uint64_t beat = static_cast<uint64_t>(cfg_.heartbeat_interval_ms);
  uv_timer_start(&heartbeat_, on_heartbeat, beat, beat);
  thread_ = std::thread([this] {
    // libuv writes with write(2), not send(MSG_NOSIGNAL): a client that went
    // away would raise SIGPIPE and kill the host process. Blocked on this
    // thread (a synchronous SIGPIPE is delivered to the writing thread), the
    // write fails with EPIPE instead, which closes that connection only.
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &s, nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
  });
  HB_LOG_INFO("rendezvous server listening on %s:%d (world size %d)",
              cfg_.host.c_str(), port_, cfg_.world_size);
}

ServerImpl::~ServerImpl() {
  if (thread_.joinable()) {
    Deadline linger(cfg_.linger_ms);
    while (live_ranks_.load() > 0 && !linger.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (live_ranks_.load() > 0)
      HB_LOG_WARN(
          "rendezvous server on port %d stops with %d rank(s) still "
          "connected",
          port_, live_ranks_.load());
    stopping_ = true;
    uv_async_send(&wake_);
    thread_.join();
  } else if (loop_ready_) {
    stop_loop();  // open() failed: close the handles it made
    uv_run(&loop_, UV_RUN_DEFAULT);
  }
  if (loop_ready_) uv_loop_close(&loop_);
}

void ServerImpl::stop_loop() {
  stopping_ = true;
  uv_walk(
      &loop_,
      [](uv_handle_t *h, void *) {
        if (!uv_is_closing(h)) uv_close(h, on_closed);
      },
      nullptr);
  conns_.clear();
  ranks_.clear();
}

void ServerImpl::on_closed(uv_handle_t *h) {
  // Only connection handles carry data; the others are members.
  delete static_cast<Conn *>(h->data);
}

void ServerImpl::on_async(uv_async_t *a) {
  auto *self = static_cast<ServerImpl *>(a->loop->data);
  if (self->stopping_) self->stop_loop();
}

void ServerImpl::on_connection(uv_stream_t *listener, int status) {
  auto *self = static_cast<ServerImpl *>(listener->loop->data);
  if (status < 0) {
    HB_LOG_WARN("rendezvous server: accept failed: %s", uv_strerror(status));
    return;
  }
  // Until its HELLO is accepted a connection may send only a small frame
  // (the handshake), and only for a short while: an unauthenticated client
  // cannot make the store hold more than a read buffer for it.
  auto *c = new Conn(std::min(self->cfg_.max_frame_bytes, kHandshakeMaxBytes));
  c->srv = self;
  uv_tcp_init(&self->loop_, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(listener, reinterpret_cast<uv_stream_t *>(&c->tcp)) != 0) {
    uv_close(reinterpret_cast<uv_handle_t *>(&c->tcp), on_closed);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  sockaddr_storage peer{};
  int len = sizeof peer;
  uv_tcp_getpeername(&c->tcp, reinterpret_cast<sockaddr *>(&peer), &len);
  c->peer = sockaddr_name(peer);
  c->serial = self->next_serial_++;
  c->last_seen_ms = c->accepted_ms = now_ms();
  self->conns_[c->serial] = c;
  uv_read_start(reinterpret_cast<uv_stream_t *>(&c->tcp), on_alloc, on_read);
}

void ServerImpl::on_alloc(uv_handle_t *h, size_t, uv_buf_t *buf) {
  auto *self = static_cast<ServerImpl *>(h->loop->data);
  *buf = uv_buf_init(self->read_buf_, sizeof self->read_buf_);
}

void ServerImpl::on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  auto *c = static_cast<Conn *>(s->data);
  ServerImpl *self = c->srv;
  if (nread == 0 || c->closing) return;
  if (nread < 0) {
    // A process that dies with unread bytes resets instead of closing.
    self->conn_lost(c, nread == UV_EOF ? "connection closed"
                       : nread == UV_ECONNRESET
                           ? "connection closed (reset by peer)"
                           : format("connection error: %s",
                                    uv_strerror(static_cast<int>(nread))));
    return;
  }
  c->last_seen_ms = now_ms();
  c->decoder.feed(buf->base, static_cast<size_t>(nread));
  Frame f;
  // A heartbeat leaves the store's deadlines as they were; finding the next
  // one scans every parked request, which, for each of N ranks' heartbeats,
  // cost the idle server O(N^2) per interval (docs/scaling.md).
  bool store_touched = false;
  try {
    for (;;) {
      uint64_t offset = c->decoder.offset();
      if (c->closing || !c->decoder.next(&f)) break;
      check_frame_shape(f, offset);
      store_touched |= f.type != kHeartbeat;
      self->handle(c, f);
    }
  } catch (const Error &e) {
    store_touched = true;
    HB_LOG_WARN("rendezvous server: closing the connection of %s: %s",
                c->who().c_str(), e.what());
    self->refuse(c, 0, e.status(), e.what());
  } catch (const std::exception &e) {  // never let one escape into libuv
    store_touched = true;
    HB_LOG_ERROR("rendezvous server: closing the connection of %s: %s",
                 c->who().c_str(), e.what());
    self->refuse(c, 0, HB_ERR_INTERNAL, e.what());
  }
  if (store_touched) self->arm_deadline();
}

void ServerImpl::handle(Conn *c, const Frame &f) {
  if (c->rank < 0 && f.type != kHello)
    fail(HB_ERR_CORRUPT, "rendezvous protocol: expected HELLO first, got %s",
         msg_type_name(f.type));
  std::vector<Outgoing> out;
  int64_t now = now_ms();
  switch (f.type) {
    case kHello:
      if (c->rank >= 0)
        fail(HB_ERR_CORRUPT, "rendezvous protocol: second HELLO from rank %d",
             c->rank);
      hello(c, f);
      return;
    case kSet:
      out.push_back({c->serial, make_reply(f.id, HB_OK, "")});
      store_.set(f.strs[0], f.strs[1], &out);
      break;
    case kGet:
      store_.get(c->serial, f.id, f.strs[0], f.ints[0], now, &out);
      break;
    case kAdd:
      store_.add(c->serial, f.id, f.strs[0], f.ints[0], &out);
      break;
    case kWait:
      store_.wait(c->serial, f.id, f.strs, f.ints[0], now, &out);
      break;
    case kBarrier:
      c->in_context = true;
      store_.barrier(c->serial, f.id, c->rank, f.strs[0], f.ints[0], now, &out);
      break;
    case kHeartbeat:  // reading it refreshed last_seen_ms
      return;
    case kAbort:
      abort_from(c, f.strs[0]);
      return;
    case kBye:
      HB_LOG_INFO("rendezvous server: rank %d left", c->rank);
      c->bye = true;
      if (ranks_.count(c->rank) && ranks_[c->rank] == c) {
        ranks_.erase(c->rank);
        live_ranks_ = static_cast<int>(ranks_.size());
      }
      store_.drop(c->serial);
      send(c, make_reply(f.id, HB_OK, ""));
      close_conn(c, true);
      departed(c->rank, Departure::kLeft);
      if (c->in_context) {
        Frame left;
        left.type = kPeerLeft;
        left.ints = {c->rank};
        broadcast(left, nullptr);
      }
      return;
    default:
      fail(HB_ERR_CORRUPT, "rendezvous protocol: a client may not send %s",
           msg_type_name(f.type));
  }
  send_all(&out);
}

namespace {

// Runs one of the server's hooks (a copy, taken under mu: it may be
// replaced meanwhile); a hook that throws is logged, not fatal.
template <typename F, typename... A>
void call_hook(std::mutex &mu, const F &hook, const char *name, A... args) {
  F cb;
  {
    std::lock_guard<std::mutex> lock(mu);
    cb = hook;
  }
  if (!cb) return;
  try {
    cb(args...);
  } catch (const std::exception &e) {
    HB_LOG_ERROR("rendezvous server: %s callback threw: %s", name, e.what());
  }
}

}  // namespace

void ServerImpl::hello(Conn *c, const Frame &f) {
  int64_t rank = f.ints[0], world = f.ints[1];
  const std::string &token = f.strs[0];
  if (!cfg_.token.empty() && !same_token(token, cfg_.token)) {
    std::string msg = format(
        "rendezvous server %s:%d refused rank %lld from %s: %s",
        cfg_.host.c_str(), port_, static_cast<long long>(rank), c->peer.c_str(),
        token.empty() ? "no token presented (HB_RENDEZVOUS_TOKEN is required)"
                      : "wrong token (HB_RENDEZVOUS_TOKEN differs)");
    HB_LOG_WARN("%s", msg.c_str());
    refuse(c, f.id, HB_ERR_PERMISSION, msg);
    return;
  }
  if (world != cfg_.world_size || rank < 0 || rank >= world) {
    refuse(c, f.id, HB_ERR_CONFIG,
           format("rank %lld of world size %lld from %s does not fit the "
                  "rendezvous server's world size %d",
                  static_cast<long long>(rank), static_cast<long long>(world),
                  c->peer.c_str(), cfg_.world_size));
    return;
  }
  if (!broken_.empty()) {
    refuse(c, f.id, broken_status_,
           format("rank %lld cannot join: the world is already broken (%s)",
                  static_cast<long long>(rank), broken_.c_str()));
    return;
  }
  auto it = ranks_.find(static_cast<int>(rank));
  if (it != ranks_.end()) {
    refuse(c, f.id, HB_ERR_CONFIG,
           format("rank %lld is already connected from %s; refused a second "
                  "connection from %s (two processes claim the same rank?)",
                  static_cast<long long>(rank), it->second->peer.c_str(),
                  c->peer.c_str()));
    return;
  }
  c->rank = static_cast<int>(rank);
  c->decoder.set_max(cfg_.max_frame_bytes);
  ranks_[c->rank] = c;
  live_ranks_ = static_cast<int>(ranks_.size());
  HB_LOG_INFO("rendezvous server: rank %d joined from %s", c->rank,
              c->peer.c_str());
  call_hook(cb_mu_, on_join_, "on_join", c->rank);
  send(c, make_reply(f.id, HB_OK, "", cfg_.world_size));
}

void ServerImpl::abort_from(Conn *c, const std::string &reason) {
  HB_LOG_WARN("rendezvous server: rank %d aborted: %s", c->rank,
              reason.c_str());
  if (broken_.empty()) {
    broken_ = format("aborted by rank %d: %s", c->rank, reason.c_str());
    broken_status_ = HB_ERR_ABORTED;
  }
  departed(c->rank, Departure::kAborted);
  Frame f;
  f.type = kAborted;
  f.ints = {c->rank};
  f.strs = {reason};
  broadcast(f, c);
}

void ServerImpl::send(Conn *c, const Frame &f) {
  if (c->closing) return;
  auto *w = new WriteReq;
  // Replies carry values that fit a request frame; the client allows for
  // the reply's few bytes of extra overhead, so no cap here.
  encode_frame(f, SIZE_MAX, &w->data);
  w->req.data = w;
  uv_buf_t buf =
      uv_buf_init(&w->data[0], static_cast<unsigned>(w->data.size()));
  int rc = uv_write(
      &w->req, reinterpret_cast<uv_stream_t *>(&c->tcp), &buf, 1,
      [](uv_write_t *req, int) { delete static_cast<WriteReq *>(req->data); });
  if (rc != 0) {
    delete w;
    conn_lost(c, format("write failed: %s", uv_strerror(rc)));
    return;
  }
  // A client that stops reading must not make the server buffer forever.
  size_t queued = c->tcp.write_queue_size;
  if (queued > 2 * cfg_.max_frame_bytes + (1u << 20))
    conn_lost(c, format("not reading its replies (%zu bytes queued)", queued));
}

void ServerImpl::send_all(std::vector<Outgoing> *out) {
  // Each frame is freed once encoded: the replies to every rank parked on
  // one key (a gather's result, read by all N ranks at once) each carry a
  // copy of the value, and their encodings live until the writes complete,
  // so keeping both doubled the peak (136 MiB for a 70 KB key at 1024
  // ranks; docs/scaling.md).
  for (auto &o : *out) {
    auto it = conns_.find(o.conn);
    if (it != conns_.end()) send(it->second, o.frame);
    o.frame = Frame();
  }
  out->clear();
}

void ServerImpl::broadcast(const Frame &f, const Conn *except) {
  // Copy: send() may close connections and edit ranks_.
  std::vector<Conn *> targets;
  for (auto &kv : ranks_)
    if (kv.second != except) targets.push_back(kv.second);
  for (Conn *c : targets) send(c, f);
}

void ServerImpl::conn_lost(Conn *c, const std::string &why, bool flush) {
  if (c->closing) return;
  auto it = ranks_.find(c->rank);
  bool lost = !c->bye && !stopping_ && it != ranks_.end() && it->second == c;
  close_conn(c, flush);
  if (!lost) return;
  int rank = c->rank;
  HB_LOG_WARN("rendezvous server: rank %d (%s) lost: %s", rank, c->peer.c_str(),
              why.c_str());
  departed(rank, Departure::kLost);
  if (broken_.empty()) {
    broken_ = format("rank %d lost: %s", rank, why.c_str());
    broken_status_ = HB_ERR_PEER_FAILED;
  }
  Frame f;
  f.type = kPeerLost;
  f.ints = {rank};
  f.strs = {why};
  broadcast(f, nullptr);
  std::function<void(int, const std::string &)> cb;
  {
    std::lock_guard<std::mutex> lock(cb_mu_);
    cb = on_lost_;
  }
  if (cb) {
    try {
      cb(rank, why);
    } catch (const std::exception &e) {
      HB_LOG_ERROR("rendezvous server: on_peer_lost callback threw: %s",
                   e.what());
    }
  }
}

void ServerImpl::departed(int rank, Departure how) {
  call_hook(cb_mu_, on_departure_, "on_departure", rank, how);
}

void ServerImpl::refuse(Conn *c, uint64_t id, hb_status st,
                        const std::string &msg) {
  send(c, make_reply(id, st, msg));
  conn_lost(c, msg, true);
}

void ServerImpl::close_conn(Conn *c, bool flush) {
  if (c->closing) return;
  c->closing = true;
  auto it = ranks_.find(c->rank);
  if (it != ranks_.end() && it->second == c) ranks_.erase(it);
  live_ranks_ = static_cast<int>(ranks_.size());
  conns_.erase(c->serial);
  store_.drop(c->serial);
  auto *h = reinterpret_cast<uv_handle_t *>(&c->tcp);
  auto *stream = reinterpret_cast<uv_stream_t *>(&c->tcp);
  uv_read_stop(stream);
  auto *req = flush ? new uv_shutdown_t : nullptr;
  // Shut down after the queued writes (a refusal's reply) are flushed.
  if (!req || uv_shutdown(req, stream, [](uv_shutdown_t *r, int) {
                auto *hh = reinterpret_cast<uv_handle_t *>(r->handle);
                if (!uv_is_closing(hh)) uv_close(hh, on_closed);
                delete r;
              }) != 0) {
    delete req;
    uv_close(h, on_closed);
  }
}

void ServerImpl::on_sweep(uv_timer_t *t) {
  auto *self = static_cast<ServerImpl *>(t->loop->data);
  int64_t now = now_ms();
  std::vector<Conn *> silent, unauthenticated;
  for (auto &kv : self->conns_) {
    Conn *c = kv.second;
    if (c->closing) continue;
    if (c->rank < 0 && now - c->accepted_ms > self->cfg_.peer_timeout_ms)
      unauthenticated.push_back(c);
    else if (now - c->last_seen_ms > self->cfg_.peer_timeout_ms)
      silent.push_back(c);
  }
  for (Conn *c : unauthenticated) {
    HB_LOG_WARN("rendezvous server: closing %s: no HELLO within %lld ms",
                c->who().c_str(),
                static_cast<long long>(self->cfg_.peer_timeout_ms));
    self->refuse(c, 0, HB_ERR_TIMEOUT,
                 format("no HELLO within %lld ms of connecting",
                        static_cast<long long>(self->cfg_.peer_timeout_ms)));
  }
  for (Conn *c : silent)
    self->conn_lost(c,
                    format("no heartbeat for %lld ms (peer_timeout_ms %lld)",
                           static_cast<long long>(now - c->last_seen_ms),
                           static_cast<long long>(self->cfg_.peer_timeout_ms)));
}

void ServerImpl::on_heartbeat(uv_timer_t *t) {
  auto *self = static_cast<ServerImpl *>(t->loop->data);
  Frame f;
  f.type = kHeartbeat;
  self->broadcast(f, nullptr);
}

void ServerImpl::on_deadline(uv_timer_t *t) {
  auto *self = static_cast<ServerImpl *>(t->loop->data);
  self->armed_deadline_ = INT64_MAX;
  std::vector<Outgoing> out;
  self->store_.expire(now_ms(), &out);
  self->send_all(&out);
  self->arm_deadline();
}

void ServerImpl::arm_deadline() {
  if (stopping_) return;
  int64_t next = store_.next_deadline();
  if (next == armed_deadline_) return;
  armed_deadline_ = next;
  if (next == INT64_MAX) {
    uv_timer_stop(&deadline_);
    return;
  }
  int64_t wait = next - now_ms();
  uv_timer_start(&deadline_, on_deadline,
                 static_cast<uint64_t>(wait > 0 ? wait : 0), 0);
}

}  // namespace

std::unique_ptr<Server> Server::start(const ServerConfig &cfg) {
  auto server = std::make_unique<ServerImpl>(cfg);
  server->open();
  return server;
}

}  // namespace rdv
}  // namespace hb
