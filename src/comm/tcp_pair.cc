#include "comm/tcp_pair.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <gloo/common/error.h>
#include <gloo/transport/tcp/buffer.h>
#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>

namespace hb {
namespace comm {
namespace {

std::exception_ptr io_error(const std::string &msg) {
  return std::make_exception_ptr(gloo::IoException(msg));
}

class TcpPair : public gloo::transport::tcp::Pair {
 public:
  using gloo::transport::tcp::Pair::Pair;
  ~TcpPair() override;

  // Called by the device's loop thread only; never throws.
  void handleEvents(int events) override;
  // Gloo's connect, in two halves (start_connect, wait_connected).
  void connect(const std::vector<char> &bytes) override;
  // The peer's address; the side that dials (Gloo's rule: the greater
  // address) starts its non-blocking connect. Waits for nothing.
  void start_connect(const std::vector<char> &bytes);
  // Until connected (accepted or dialled), failed, or the pair's timeout.
  void wait_connected();
  // Receive buffers that hand out what arrived before the pair failed.
  std::unique_ptr<gloo::transport::Buffer> createRecvBuffer(
      int slot, void *ptr, size_t size) override;

  // For RecvBuffer (Gloo's friendship with its Buffer is not inherited).
  bool sync_mode() const { return isSync(); }
  std::chrono::milliseconds wait_timeout() const { return getTimeout(); }
  std::exception_ptr timed_out() {
    return signalExceptionExternal(
        GLOO_ERROR_MSG("Read timeout ", peer_.str()));
  }

 private:
  void finish_accept();
  void finish_connect();
  // Makes fd (connected, non-blocking) the pair's socket, or fails the
  // pair; owns fd either way. fd may already be fd_ (the connecting side).
  void adopt(int fd);
  // Fails the pair (closing its socket) unless it already failed.
  void fail(std::exception_ptr ex);
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
  void waitRecv() override;

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

// A tcp::Context whose pairs are TcpPairs (create it instead of
// device->createContext(rank, size)).
class TcpContext : public gloo::transport::tcp::Context {
 public:
  using gloo::transport::tcp::Context::Context;
  std::unique_ptr<gloo::transport::Pair> &createPair(int rank) override;
};

}  // namespace

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
        break;
      case LISTENING:
        finish_accept();
        break;
      case CONNECTING:
        finish_connect();
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

void TcpPair::connect(const std::vector<char> &bytes) {
  start_connect(bytes);
  wait_connected();
}

void TcpPair::start_connect(const std::vector<char> &bytes) {
  // As Gloo's Pair::connect (tcp/pair.cc) up to its wait.
  std::unique_lock<std::mutex> lock(m_);
  throwIfException();
  if (state_ == CLOSED) throw gloo::IoException("pair closed before connect");
  peer_ = gloo::transport::tcp::Address(bytes);
  const sockaddr_storage &self = self_.getSockaddr();
  const sockaddr_storage &peer = peer_.getSockaddr();
  if (self.ss_family != peer.ss_family)
    GLOO_THROW_INVALID_OPERATION_EXCEPTION("address family mismatch");
  int rv;
  socklen_t len;
  if (self.ss_family == AF_INET) {
    auto *a = reinterpret_cast<const sockaddr_in *>(&self);
    auto *b = reinterpret_cast<const sockaddr_in *>(&peer);
    len = sizeof(sockaddr_in);
    rv = std::memcmp(&a->sin_addr, &b->sin_addr, sizeof a->sin_addr);
    if (rv == 0) rv = int(a->sin_port) - int(b->sin_port);
  } else if (self.ss_family == AF_INET6) {
    auto *a = reinterpret_cast<const sockaddr_in6 *>(&self);
    auto *b = reinterpret_cast<const sockaddr_in6 *>(&peer);
    len = sizeof(sockaddr_in6);
    rv = std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr);
    if (rv == 0) rv = int(a->sin6_port) - int(b->sin6_port);
  } else {
    GLOO_THROW_INVALID_OPERATION_EXCEPTION("unknown sa_family");
  }
  if (rv == 0) GLOO_THROW_INVALID_OPERATION_EXCEPTION("cannot connect to self");
  is_client_ = rv > 0;
  if (!is_client_ || state_ != LISTENING) return;  // accepts (or accepted)
  device_->unregisterDescriptor(fd_, this);
  ::close(fd_);
  fd_ = ::socket(peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ == -1)
    signalAndThrowException(GLOO_ERROR_MSG("socket: ", std::strerror(errno)));
  int on = 1;
  if (setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == -1 ||
      (::connect(fd_, reinterpret_cast<const sockaddr *>(&peer), len) == -1 &&
       errno != EINPROGRESS)) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    signalAndThrowException(GLOO_ERROR_MSG("connect: ", std::strerror(err)));
  }
  changeState(CONNECTING);
  device_->registerDescriptor(fd_, EPOLLIN | EPOLLOUT, this);
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

void TcpPair::finish_accept() {
  // Non-blocking, so a connection reset before accept cannot block the loop.
  const int flags = fcntl(fd_, F_GETFL);
  if (flags != -1) fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  const int err = errno;
  if (fd == -1 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR))
    return;  // nothing left to accept: wait for the next event
  device_->unregisterDescriptor(fd_, this);
  ::close(fd_);
  fd_ = -1;
  if (fd == -1)
    return fail(io_error(
        GLOO_ERROR_MSG("accept from ", peer_.str(), ": ", std::strerror(err))));
  adopt(fd);
}

void TcpPair::finish_connect() {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) == -1) err = errno;
  if (err != 0)
    return fail(io_error(
        GLOO_ERROR_MSG("connect ", peer_.str(), ": ", std::strerror(err))));
  adopt(fd_);
}

void TcpPair::adopt(int fd) {
  const bool accepted = fd != fd_;  // not yet the pair's (nor registered)
  auto drop = [&](const char *what) {
    const int err = errno;
    if (accepted) ::close(fd);
    HB_LOG_DEBUG("gloo pair to rank %d: %s %s while connecting: %s", rank_,
                 what, peer_.str().c_str(), std::strerror(err));
    fail(io_error(GLOO_ERROR_MSG(what, " ", peer_.str(),
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

void TcpPair::fail(std::exception_ptr ex) {
  if (ex_ != nullptr) return;
  try {
    signalException(ex);  // closes the pair and wakes its waiters
  } catch (...) {
  }
}

std::unique_ptr<gloo::transport::Pair> &TcpContext::createPair(int rank) {
  pairs_[rank] = std::unique_ptr<gloo::transport::Pair>(
      new TcpPair(this, device_.get(), rank, getTimeout()));
  return pairs_[rank];
}

void start_connect(gloo::transport::Pair &pair, const std::vector<char> &peer) {
  if (auto *tcp = dynamic_cast<TcpPair *>(&pair))
    return tcp->start_connect(peer);
  pair.connect(peer);
}

void wait_connected(gloo::transport::Pair &pair) {
  if (auto *tcp = dynamic_cast<TcpPair *>(&pair)) tcp->wait_connected();
}

std::shared_ptr<gloo::transport::Context> make_tcp_context(
    const std::shared_ptr<gloo::transport::Device> &dev, int rank, int size) {
  auto tcp = std::dynamic_pointer_cast<gloo::transport::tcp::Device>(dev);
  if (!tcp) return dev->createContext(rank, size);
  return std::make_shared<TcpContext>(tcp, rank, size);
}

}  // namespace comm
}  // namespace hb
