#include "comm/tcp_pair.h"

#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/transport/tcp/buffer.h>
#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>
#include <gloo/transport/tcp/unbound_buffer.h>

namespace hb {
namespace comm {
namespace {

std::exception_ptr io_error(const std::string &msg) {
  return std::make_exception_ptr(gloo::IoException(msg));
}

class TcpPair : public gloo::transport::tcp::Pair {
 public:
  TcpPair(gloo::transport::tcp::Context *context,
          gloo::transport::tcp::Device *device, int rank,
          std::chrono::milliseconds timeout);
  ~TcpPair() override;

  // Called by the device's loop thread only; never throws.
  void handleEvents(int events) override;
  // Gloo's address exchange has no listener to dial: refused.
  void connect(const std::vector<char> &bytes) override;
  void start_dial(const sockaddr_storage &peer, const std::string &hello);
  bool hand_accepted(int fd);
  void fail_accept(const std::string &why);
  void break_pair(const std::string &why);
  // Until connected (accepted or dialled), failed, or the pair's timeout.
  void wait_connected();
  int socket() {
    std::lock_guard<std::mutex> lock(m_);
    return state_ == CONNECTED ? fd_ : -1;
  }
  // Receive buffers that hand out what arrived before the pair failed.
  std::unique_ptr<gloo::transport::Buffer> createRecvBuffer(
      int slot, void *ptr, size_t size) override;
  // Send buffers that leave nothing of theirs queued when they go.
  std::unique_ptr<gloo::transport::Buffer> createSendBuffer(
      int slot, void *ptr, size_t size) override;
  // A buffer of this pair is going: fails the pair if a transfer of it is
  // still in flight, and drops the pair's raw pointers to it.
  void forget(gloo::transport::tcp::Buffer *buf);
  // The same for an unbound buffer that goes (it leaves the queues first:
  // the loop thread fails a queued send's buffer under this pair's lock).
  void forget_unbound(const gloo::transport::tcp::UnboundBuffer *buf);

  // For RecvBuffer (Gloo's friendship with its Buffer is not inherited).
  bool sync_mode() const { return isSync(); }
  std::chrono::milliseconds wait_timeout() const { return getTimeout(); }
  std::exception_ptr timed_out() {
    return signalExceptionExternal(
        GLOO_ERROR_MSG("Read timeout ", peer_.str()));
  }

 private:
  // The dial's steps: connected (send the hello), then the answer.
  void finish_connect(int events);
  // The peer's address for hb's messages (address_text).
  std::string peer_text() const;

  std::string hello_;
  bool hello_sent_ = false;
  // Makes fd (connected, non-blocking) the pair's socket, or fails the
  // pair; owns fd either way. fd may already be fd_ (the connecting side).
  void adopt(int fd);
  // Fails the pair (closing its socket) unless it already failed.
  void fail(std::exception_ptr ex);
  // Gives the pair's error to the unbound buffers of its queued sends.
  void fail_queued_unbound();
};

// Gloo's Buffer::waitRecv checks for a failed pair before it looks at the
// completed receives, so a message that arrived in full just before its
// sender closed the connection (it finished the call and destroyed its
// context: a goodbye, not a loss) is reported as a failure. This one takes
// a completed receive first and fails only a receive still missing.
class RecvBuffer : public gloo::transport::tcp::Buffer {
 public:
  RecvBuffer(TcpPair *pair, int slot, void *ptr, size_t size)
      : Buffer(pair, slot, ptr, size), tcp_(pair) {}
  ~RecvBuffer() override { tcp_->forget(this); }
  void waitRecv() override;

 private:
  TcpPair *tcp_;
};

// Gloo's pair keeps a raw pointer to a buffer in each queued send (tx_)
// and in a message it is reading (rx_), and Gloo's ~Buffer only removes
// it from the registered receive buffers. A failed call does not wait for
// its sends, so one could stay queued after its buffer went (async writev
// queues on EAGAIN, and on EPIPE/ECONNRESET without failing the pair);
// the loop thread then wrote the pair's exception into the freed buffer
// when the connection broke (LeakSanitizer found the exception referenced
// only from freed memory: libgloo is not instrumented), or sent from it.
class SendBuffer : public gloo::transport::tcp::Buffer {
 public:
  SendBuffer(TcpPair *pair, int slot, void *ptr, size_t size)
      : Buffer(pair, slot, ptr, size), tcp_(pair) {}
  ~SendBuffer() override { tcp_->forget(this); }

 private:
  TcpPair *tcp_;
};

void RecvBuffer::waitRecv() {
  if (tcp_->sync_mode()) return Buffer::waitRecv();  // hb never uses it
  std::unique_lock<std::mutex> lock(m_);
  if (recvCompletions_ == 0) {
    const auto timeout = tcp_->wait_timeout();
    auto arrived_or_failed = [&] { return recvCompletions_ > 0 || ex_; };
    if (timeout == gloo::kNoTimeout) {
      recvCv_.wait(lock, arrived_or_failed);
    } else if (!recvCv_.wait_for(lock, timeout, arrived_or_failed)) {
      lock.unlock();  // as Gloo's: the pair takes its own lock
      std::rethrow_exception(tcp_->timed_out());
    }
    if (recvCompletions_ == 0) std::rethrow_exception(ex_);
  }
  recvCompletions_--;
}

// Gloo's unbound buffer, with its abortWait* done in hb's code
// (abort_wait).
class AbortableBuffer : public gloo::transport::tcp::UnboundBuffer {
 public:
  using gloo::transport::tcp::UnboundBuffer::UnboundBuffer;
  // Gloo's pairs reach a queued op's buffer through a NonOwningPtr, which
  // keeps its control block, not the buffer: one destroyed after a failed
  // call could be failed by the loop thread as it went (TSan: its mutex
  // unlocked after destruction). It leaves the pairs it was posted on
  // first (hb posts one op per buffer: one pair, not the world's).
  ~AbortableBuffer() override;
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    posted_on(dst);
    UnboundBuffer::send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    posted_on(src);
    UnboundBuffer::recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset,
            size_t nbytes) override {
    for (int r : srcs) posted_on(r);
    UnboundBuffer::recv(std::move(srcs), slot, offset, nbytes);
  }
  void abort_wait(bool send) {
    std::lock_guard<std::mutex> lock(m_);
    (send ? abortWaitSend_ : abortWaitRecv_) = true;
    (send ? sendCv_ : recvCv_).notify_one();
  }
  // Gloo's signalException, with the buffer's lock taken here: Gloo's is
  // protected (its pair is a friend; hb's pair is not), and it unlocks in
  // a tail call that TSan charges to this caller, after a lock inside
  // libgloo it never saw (as abort_wait; TSan reported "unlock of an
  // unlocked mutex" here in about 1 run in 30 of
  // MeshConnect.FailedCallFailsThePairsOfItsPendingOperations).
  void fail(std::exception_ptr ex) {
    std::lock_guard<std::mutex> lock(m_);
    ex_ = std::move(ex);
    recvCv_.notify_all();
    sendCv_.notify_all();
  }

 private:
  // Posting and destruction happen on the buffer's owning thread.
  void posted_on(int rank) {
    if (peers_.empty() || peers_.back() != rank) peers_.push_back(rank);
  }
  std::vector<int> peers_;  // the ranks whose pairs may queue this buffer
};

// A tcp::Context whose pairs are TcpPairs and whose unbound buffers are
// hb's (create it instead of device->createContext(rank, size)).
class TcpContext : public gloo::transport::tcp::Context {
 public:
  using gloo::transport::tcp::Context::Context;
  std::unique_ptr<gloo::transport::Pair> &createPair(int rank) override;
  std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer(
      void *ptr, size_t size) override {
    return std::make_unique<AbortableBuffer>(shared_from_this(), ptr, size);
  }
  // The pairs to ranks forget buf (pairs are made before any transfer, by
  // mesh_connect, so pairs_ does not change under this).
  void forget_unbound(const gloo::transport::tcp::UnboundBuffer *buf,
                      const std::vector<int> &ranks) {
    for (int r : ranks)
      if (r >= 0 && size_t(r) < pairs_.size())
        if (auto *tcp = dynamic_cast<TcpPair *>(pairs_[r].get()))
          tcp->forget_unbound(buf);
  }
};

AbortableBuffer::~AbortableBuffer() {
  if (auto *ctx = dynamic_cast<TcpContext *>(context_.get()))
    ctx->forget_unbound(this, peers_);
}

}  // namespace

TcpPair::TcpPair(gloo::transport::tcp::Context *context,
                 gloo::transport::tcp::Device *device, int rank,
                 std::chrono::milliseconds timeout)
    : Pair(context, device, rank, timeout) {
  // Gloo's constructor listened on a port of its own, which is never
  // published: nobody connects to it, so no event can be pending for it
  // and closing it drops it from the loop's epoll set without
  // unregisterDescriptor's wait for the loop's next tick (10 ms when idle,
  // once per pair).
  std::lock_guard<std::mutex> lock(m_);
  ::close(fd_);
  fd_ = -1;
  state_ = INITIALIZING;  // until dialled or handed an accepted socket
}

TcpPair::~TcpPair() {
  // Closed here, while this is still a TcpPair: closing unregisters the
  // socket and waits for the loop's tick, so the loop cannot call
  // handleEvents while the base destructor replaces the vtable.
  std::lock_guard<std::mutex> lock(m_);
  if (state_ != CLOSED) Pair::changeState(CLOSED);
}

void TcpPair::handleEvents(int events) {
  // As Gloo's: a thread holding the lock may be waiting for this tick.
  std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
  if (!lock) return;
  try {
    if (ex_ != nullptr) return;
    switch (state_) {
      case CONNECTED:
        handleReadWrite(events);
        fail_queued_unbound();  // if Gloo's read or write failed the pair
        break;
      case CONNECTING:
        finish_connect(events);
        break;
      default:
        break;
    }
  } catch (const std::exception &e) {
    HB_LOG_DEBUG("gloo pair to rank %d: %s", rank_, e.what());
    fail(std::current_exception());  // never let it reach std::terminate
  } catch (...) {
    fail(std::current_exception());
  }
}

void TcpPair::connect(const std::vector<char> &) {
  GLOO_THROW_INVALID_OPERATION_EXCEPTION(
      "hb's TCP pairs connect through the mesh listener "
      "(comm/mesh_listener.h), not Gloo's address exchange");
}

void TcpPair::start_dial(const sockaddr_storage &peer,
                         const std::string &hello) {
  std::unique_lock<std::mutex> lock(m_);
  throwIfException();
  if (state_ != INITIALIZING)
    GLOO_THROW_INVALID_OPERATION_EXCEPTION("pair dialled twice, or closed");
  peer_ = gloo::transport::tcp::Address(peer);
  hello_ = hello;
  const socklen_t len =
      peer.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  fd_ = ::socket(peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ == -1)
    signalAndThrowException(GLOO_ERROR_MSG("socket: ", std::strerror(errno)));
  if (::connect(fd_, reinterpret_cast<const sockaddr *>(&peer), len) == -1 &&
      errno != EINPROGRESS) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    signalAndThrowException(
        GLOO_ERROR_MSG("connect ", peer_text(), ": ", std::strerror(err)));
  }
  changeState(CONNECTING);
  device_->registerDescriptor(fd_, EPOLLIN | EPOLLOUT, this);
}

bool TcpPair::hand_accepted(int fd) {
  // The listener's loop thread. Blocking on m_ is safe here, unlike in
  // handleEvents: no thread waits for the loop while it holds the lock of
  // a pair still waiting for its accept (such a pair has no socket).
  std::lock_guard<std::mutex> lock(m_);
  if (state_ != INITIALIZING || ex_ != nullptr) {
    ::close(fd);
    return false;
  }
  adopt(fd);
  return state_ == CONNECTED;
}

void TcpPair::fail_accept(const std::string &why) {
  std::lock_guard<std::mutex> lock(m_);
  if (state_ == INITIALIZING) fail(io_error(why));
}

void TcpPair::break_pair(const std::string &why) {
  std::lock_guard<std::mutex> lock(m_);
  fail(io_error(why));
}

void TcpPair::wait_connected() {
  std::unique_lock<std::mutex> lock(m_);
  // Gloo's waitUntilConnected, instantiated here: its condition wait then
  // runs in hb's code, where TSan sees the mutex released while it waits
  // (inside the uninstrumented libgloo it reported the loop thread's
  // try_lock in handleEvents as a double lock).
  waitUntil(
      [&] {
        throwIfException();
        return state_ >= CONNECTED;
      },
      lock, true);
}

void TcpPair::finish_connect(int events) {
  if (!hello_sent_) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) == -1) err = errno;
    if (err != 0)
      return fail(io_error(
          GLOO_ERROR_MSG("connect ", peer_text(), ": ", std::strerror(err))));
    if (!(events & EPOLLOUT)) return;  // still connecting
    // A fresh socket's send buffer takes the whole hello at once.
    const ssize_t n =
        ::send(fd_, hello_.data(), hello_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != ssize_t(hello_.size()))
      return fail(io_error(GLOO_ERROR_MSG(
          "sending the mesh hello to rank ", rank_, " at ", peer_text(), ": ",
          n < 0 ? std::strerror(errno) : "short write")));
    hello_sent_ = true;
    device_->registerDescriptor(fd_, EPOLLIN, this);  // now the answer
    return;
  }
  uint8_t reply = 0;
  const ssize_t n = ::recv(fd_, &reply, 1, MSG_DONTWAIT);
  if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (n != 1)
    return fail(io_error(GLOO_ERROR_MSG(
        "rank ", rank_, " at ", peer_text(),
        " closed the connection before answering the mesh hello",
        n < 0 ? std::string(": ") + std::strerror(errno) : std::string())));
  if (reply != kHelloAccepted)
    return fail(io_error(GLOO_ERROR_MSG(
        "rank ", rank_, " at ", peer_text(),
        " refused this rank's mesh hello: ", hello_reply_text(reply))));
  adopt(fd_);
}

void TcpPair::adopt(int fd) {
  const bool accepted = fd != fd_;  // not yet the pair's (nor registered)
  auto drop = [&](const char *what) {
    const int err = errno;
    if (accepted) ::close(fd);
    HB_LOG_DEBUG("gloo pair to rank %d: %s %s while connecting: %s", rank_,
                 what, peer_text().c_str(), std::strerror(err));
    fail(io_error(GLOO_ERROR_MSG(what, " ", peer_text(),
                                 " while connecting: ", std::strerror(err))));
  };
  // Gloo enforces these two, in this thread: a peer gone between its
  // connect and here makes getpeername fail with ENOTCONN.
  sockaddr_storage self{}, peer{};
  socklen_t n = sizeof self;
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&self), &n) == -1)
    return drop("getsockname");
  n = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &n) == -1)
    return drop("lost peer");
  const int flags = fcntl(fd, F_GETFL);
  if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1)
    return drop("fcntl");
  int on = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == -1)
    return drop("setsockopt TCP_NODELAY");
  timeval tv = {};
  tv.tv_sec = timeout_.count() / 1000;
  tv.tv_usec = (timeout_.count() % 1000) * 1000;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == -1 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == -1)
    return drop("setsockopt timeout");
  try {
    device_->registerDescriptor(fd, EPOLLIN, this);
  } catch (...) {
    if (accepted) ::close(fd);
    return fail(std::current_exception());
  }
  fd_ = fd;
  self_ = gloo::transport::tcp::Address(self);
  peer_ = gloo::transport::tcp::Address(peer);
  changeState(CONNECTED);
}

std::unique_ptr<gloo::transport::Buffer> TcpPair::createRecvBuffer(
    int slot, void *ptr, size_t size) {
  auto *buffer = new RecvBuffer(this, slot, ptr, size);
  registerBuffer(buffer);
  return std::unique_ptr<gloo::transport::Buffer>(buffer);
}

std::unique_ptr<gloo::transport::Buffer> TcpPair::createSendBuffer(
    int slot, void *ptr, size_t size) {
  return std::make_unique<SendBuffer>(this, slot, ptr, size);
}

void TcpPair::forget(gloo::transport::tcp::Buffer *buf) {
  // Under the pair's lock, which the loop holds whenever it touches tx_
  // or rx_. A transfer in flight means its call failed (hb waits for every
  // send of a call that completes; Gloo's ring_chunked and bcube leave
  // their last one-byte notification unwaited, which is written at once
  // unless the socket is full): the pair's stream is out of step with its
  // peer's, so the pair fails (as GlooP2P's pending operations fail
  // theirs), while buf can still take the error; a failed pair is never
  // read or written again.
  std::lock_guard<std::mutex> lock(m_);
  bool in_flight = rx_.buf == buf;
  for (const auto &op : tx_) in_flight |= op.buf == buf;
  if (!in_flight) return;
  fail(io_error(GLOO_ERROR_MSG("a buffer to or from rank ", rank_,
                               " went with a transfer in flight")));
  tx_.erase(std::remove_if(tx_.begin(), tx_.end(),
                           [&](const auto &op) { return op.buf == buf; }),
            tx_.end());
  if (rx_.buf == buf) rx_ = gloo::transport::tcp::Op();
}

void TcpPair::forget_unbound(const gloo::transport::tcp::UnboundBuffer *buf) {
  std::lock_guard<std::mutex> lock(m_);
  auto is_buf = [&](const gloo::transport::tcp::Op &op) {
    gloo::NonOwningPtr<gloo::transport::tcp::UnboundBuffer> b(op.ubuf);
    return b && b.operator->() == buf;
  };
  bool in_flight = is_buf(rx_);
  for (const auto &op : tx_) in_flight |= is_buf(op);
  if (!in_flight) return;
  // Off the queues before the pair fails: fail_queued_unbound must not
  // reach buf, which is going. As forget(): the stream is out of step.
  tx_.erase(std::remove_if(tx_.begin(), tx_.end(), is_buf), tx_.end());
  if (is_buf(rx_)) rx_ = gloo::transport::tcp::Op();
  fail(io_error(GLOO_ERROR_MSG("an unbound buffer to or from rank ", rank_,
                               " went with a transfer in flight")));
}

void TcpPair::fail(std::exception_ptr ex) {
  if (ex_ != nullptr) return;
  try {
    signalException(ex);  // closes the pair and wakes its waiters
  } catch (...) {
  }
  fail_queued_unbound();
}

void TcpPair::fail_queued_unbound() {
  // Gloo's Pair::signalException tells the pinned buffers of queued sends
  // (op.buf) but not the unbound ones (op.ubuf). An unbound send lands in
  // tx_ when its peer is ready and the write cannot finish: EAGAIN, or
  // EPIPE/ECONNRESET, which async writes queue without failing the pair,
  // so a send posted just after the peer closed its side waited for its
  // whole timeout (MeshConnect.FailedCallFailsThePairsOfItsPendingOperations
  // hung 30 s in about 1 run of 10). A failed pair never writes tx_ again.
  if (ex_ == nullptr) return;
  for (auto &op : tx_) {
    gloo::NonOwningPtr<gloo::transport::tcp::UnboundBuffer> buf(op.ubuf);
    if (!buf) continue;
    if (auto *own = dynamic_cast<AbortableBuffer *>(buf.operator->()))
      own->fail(ex_);
  }
}

std::unique_ptr<gloo::transport::Pair> &TcpContext::createPair(int rank) {
  pairs_[rank] = std::unique_ptr<gloo::transport::Pair>(
      new TcpPair(this, device_.get(), rank, getTimeout()));
  return pairs_[rank];
}

namespace {

TcpPair &tcp_pair(gloo::transport::Pair &pair) {
  auto *tcp = dynamic_cast<TcpPair *>(&pair);
  if (!tcp)
    GLOO_THROW_INVALID_OPERATION_EXCEPTION("not a pair of make_tcp_context");
  return *tcp;
}

}  // namespace

void start_dial(gloo::transport::Pair &pair, const sockaddr_storage &peer,
                const std::string &hello) {
  tcp_pair(pair).start_dial(peer, hello);
}

bool hand_accepted(gloo::transport::Pair &pair, int fd) {
  return tcp_pair(pair).hand_accepted(fd);
}

void fail_accept(gloo::transport::Pair &pair, const std::string &why) {
  tcp_pair(pair).fail_accept(why);
}

void break_pair(gloo::transport::Pair &pair, const std::string &why) {
  tcp_pair(pair).break_pair(why);
}

void abort_wait(gloo::transport::UnboundBuffer &buf, bool send) {
  // Called from health callbacks, which must not throw: another context's
  // buffer is aborted by Gloo itself.
  if (auto *own = dynamic_cast<AbortableBuffer *>(&buf))
    return own->abort_wait(send);
  if (send)
    buf.abortWaitSend();
  else
    buf.abortWaitRecv();
}

void wait_connected(gloo::transport::Pair &pair) {
  tcp_pair(pair).wait_connected();
}

int pair_socket(gloo::transport::Pair &pair) { return tcp_pair(pair).socket(); }

std::shared_ptr<gloo::transport::Context> make_tcp_context(
    const std::shared_ptr<gloo::transport::Device> &dev, int rank, int size) {
  auto tcp = std::dynamic_pointer_cast<gloo::transport::tcp::Device>(dev);
  if (!tcp)
    GLOO_THROW_INVALID_OPERATION_EXCEPTION("the Gloo mesh needs a TCP device");
  return std::make_shared<TcpContext>(tcp, rank, size);
}

// Wire: magic, then world, rank, context (big-endian 32 bits) and nonce
// (big-endian 64 bits).
namespace {
constexpr uint32_t kHelloMagic = 0x68624d31;  // "hbM1"
void put32(std::string &s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(char((v >> (8 * i)) & 0xff));
}
uint64_t get(const char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | uint8_t(p[i]);
  return v;
}
}  // namespace

std::string encode_hello(const MeshHello &h) {
  std::string s;
  put32(s, kHelloMagic);
  put32(s, h.world);
  put32(s, h.rank);
  put32(s, h.context);
  put32(s, uint32_t(h.nonce >> 32));
  put32(s, uint32_t(h.nonce));
  return s;
}

bool decode_hello(const char *p, MeshHello &h) {
  if (get(p, 4) != kHelloMagic) return false;
  h.world = uint32_t(get(p + 4, 4));
  h.rank = uint32_t(get(p + 8, 4));
  h.context = uint32_t(get(p + 12, 4));
  h.nonce = get(p + 16, 8);
  return true;
}

std::string address_text(const sockaddr_storage &addr) {
  char ip[INET6_ADDRSTRLEN] = "";
  int port = -1;
  if (addr.ss_family == AF_INET) {
    auto &in = reinterpret_cast<const sockaddr_in &>(addr);
    inet_ntop(AF_INET, &in.sin_addr, ip, sizeof ip);
    port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto &in6 = reinterpret_cast<const sockaddr_in6 &>(addr);
    inet_ntop(AF_INET6, &in6.sin6_addr, ip, sizeof ip);
    port = ntohs(in6.sin6_port);
  }
  if (port < 0) return "an unknown address";
  return std::string(ip) + " port " + std::to_string(port);
}

std::string TcpPair::peer_text() const {
  // Gloo's Address keeps its sockaddr to itself, but bytes() copies it.
  const std::vector<char> bytes = peer_.bytes();
  sockaddr_storage addr{};
  std::memcpy(&addr, bytes.data(), std::min(bytes.size(), sizeof addr));
  return address_text(addr);
}

const char *hello_reply_text(uint8_t reply) {
  switch (reply) {
    case kHelloAccepted:
      return "accepted";
    case kHelloNotMesh:
      return "not an hb mesh hello";
    case kHelloWrongNonce:
      return "wrong nonce (a stranger, or a rank of an earlier world)";
    case kHelloBadRank:
      return "world size, rank or context outside this world's";
    case kHelloUnexpected:
      return "no pair waits for that rank's dial (it is dialled, or already "
             "connected)";
    default:
      return "unknown answer (another hb version?)";
  }
}

}  // namespace comm
}  // namespace hb
