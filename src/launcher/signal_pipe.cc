#include "launcher/signal_pipe.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "abi/error.h"

namespace hb {
namespace launcher {
namespace {

int g_write_fd = -1;

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  // Non-blocking: if the pipe is full, enough wake-ups are queued already.
  ssize_t ignored = ::write(g_write_fd, &b, 1);
  (void)ignored;
  errno = saved;
}

}  // namespace

int install_signal_pipe() {
  static int read_fd = -1;
  if (read_fd >= 0) return read_fd;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    fail(HB_ERR_IO, "pipe2 for signals: %s", std::strerror(errno));
  g_write_fd = fds[1];
  read_fd = fds[0];
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP})
    ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return read_fd;
}

}  // namespace launcher
}  // namespace hb
