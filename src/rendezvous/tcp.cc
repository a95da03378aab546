#include "rendezvous/tcp.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "abi/error.h"
#include "common/clock.h"

namespace hb {
namespace rdv {

int tcp_connect(const std::string &host, int port, int64_t timeout_ms,
                std::string *err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  int rc =
      getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    *err = format("cannot resolve %s: %s", host.c_str(), gai_strerror(rc));
    return -1;
  }
  Deadline deadline(timeout_ms);
  int fd = -1;
  for (addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                ai->ai_protocol);
    if (fd < 0) {
      *err = format("socket: %s", std::strerror(errno));
      continue;
    }
    rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int n;
      do {
        n = poll(&p, 1, static_cast<int>(deadline.remaining_ms()));
      } while (n < 0 && errno == EINTR);
      int soerr = 0;
      socklen_t len = sizeof soerr;
      if (n == 0) {
        soerr = ETIMEDOUT;
      } else if (n < 0 ||
                 getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) {
        soerr = errno;
      }
      rc = soerr == 0 ? 0 : -1;
      errno = soerr;
    }
    if (rc != 0) {
      *err = format("connect to %s:%d: %s", host.c_str(), port,
                    std::strerror(errno));
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

bool tcp_send_all(int fd, const char *data, size_t n, int64_t deadline_ms,
                  const std::function<bool()> &cancelled, std::string *err) {
  constexpr int kSliceMs = 20;
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *err = format("send failed: %s", std::strerror(errno));
      return false;
    }
    if (cancelled && cancelled()) {
      *err = "send cancelled";
      return false;
    }
    int64_t left = deadline_ms - now_ms();
    if (left <= 0) {
      *err =
          format("send timed out with %zu bytes unsent (peer not reading)", n);
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, static_cast<int>(left < kSliceMs ? left : kSliceMs));
  }
  return true;
}

}  // namespace rdv
}  // namespace hb
