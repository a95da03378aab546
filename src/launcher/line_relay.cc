#include "launcher/line_relay.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace hb {
namespace launcher {

void write_all(int fd, const char *buf, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, buf, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    buf += w;
    n -= static_cast<size_t>(w);
  }
}

void say(const char *fmt, ...) {
  char buf[2048];
  int n = std::snprintf(buf, sizeof buf, "hbrun: ");
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  size_t len = n + (m < 0 ? 0 : std::min<size_t>(m, sizeof buf - n - 2));
  buf[len++] = '\n';
  write_all(2, buf, len);
}

LineRelay::LineRelay(int src_fd, int dst_fd, std::string prefix)
    : src_fd_(src_fd), dst_fd_(dst_fd), prefix_(std::move(prefix)) {}

LineRelay::~LineRelay() { close_source(); }

void LineRelay::close_source() {
  if (src_fd_ >= 0) ::close(src_fd_);
  src_fd_ = -1;
}

void LineRelay::write_line(const char *data, size_t n) {
  // One write per line: lines of different workers cannot interleave.
  std::string line;
  line.reserve(prefix_.size() + n + 1);
  line.append(prefix_).append(data, n).push_back('\n');
  write_all(dst_fd_, line.data(), line.size());
}

void LineRelay::emit_complete_lines() {
  size_t start = 0;
  for (;;) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    write_line(pending_.data() + start, nl - start);
    start = nl + 1;
  }
  while (pending_.size() - start >= kMaxLine) {
    write_line(pending_.data() + start, kMaxLine);
    start += kMaxLine;
  }
  pending_.erase(0, start);
}

void LineRelay::pump() {
  char buf[16384];
  while (src_fd_ >= 0) {
    ssize_t n = ::read(src_fd_, buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
      emit_complete_lines();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file (or a read error): flush what is left.
    if (!pending_.empty()) write_line(pending_.data(), pending_.size());
    pending_.clear();
    close_source();
  }
}

void LineRelay::drain_and_close() {
  // The writer is gone, so every byte it wrote is in the pipe: read until
  // EAGAIN (a child it left behind may still hold the pipe open) or EOF.
  pump();
  if (!pending_.empty()) write_line(pending_.data(), pending_.size());
  pending_.clear();
  close_source();
}

}  // namespace launcher
}  // namespace hb
