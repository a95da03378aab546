#include "launcher/line_relay.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

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

namespace {
// hbrun's main thread relays and the rendezvous thread reports lost ranks:
// one block at a time, so neither cuts into the other's lines.
std::mutex g_write_mu;

void write_block(int fd, const char *buf, size_t n) {
  std::lock_guard<std::mutex> lock(g_write_mu);
  write_all(fd, buf, n);
}
}  // namespace

void say(const char *fmt, ...) {
  char buf[2048];
  int n = std::snprintf(buf, sizeof buf, "hbrun: ");
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  size_t len = n + (m < 0 ? 0 : std::min<size_t>(m, sizeof buf - n - 2));
  buf[len++] = '\n';
  write_block(2, buf, len);
}

LineRelay::LineRelay(int src_fd, int dst_fd, std::string prefix)
    : src_fd_(src_fd), dst_fd_(dst_fd), prefix_(std::move(prefix)) {}

LineRelay::~LineRelay() { close_source(); }

void LineRelay::close_source() {
  if (src_fd_ >= 0) ::close(src_fd_);
  src_fd_ = -1;
}

void LineRelay::append_line(const char *data, size_t n) {
  out_.append(prefix_).append(data, n).push_back('\n');
}

void LineRelay::flush_out() {
  // Only whole lines, in one block: lines of different workers cannot
  // interleave.
  if (!out_.empty()) write_block(dst_fd_, out_.data(), out_.size());
  out_.clear();
}

void LineRelay::emit_complete_lines() {
  size_t start = 0;
  for (;;) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    append_line(pending_.data() + start, nl - start);
    start = nl + 1;
  }
  while (pending_.size() - start >= kMaxLine) {
    append_line(pending_.data() + start, kMaxLine);
    start += kMaxLine;
  }
  pending_.erase(0, start);
  flush_out();
}

void LineRelay::pump() { pump_reads(kMaxReadsPerPump); }

void LineRelay::pump_reads(int max_reads) {
  char buf[65536];
  for (int reads = 0; src_fd_ >= 0 && reads < max_reads; ++reads) {
    ssize_t n = ::read(src_fd_, buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
      emit_complete_lines();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file (or a read error): flush what is left.
    if (!pending_.empty()) append_line(pending_.data(), pending_.size());
    flush_out();
    pending_.clear();
    close_source();
  }
}

void LineRelay::drain_and_close() {
  // The writer is gone, so every byte it wrote is in the pipe: read until
  // EAGAIN or EOF. The bound is for a child it left behind that holds the
  // pipe open and keeps writing.
  pump_reads(kMaxDrainReads);
  if (!pending_.empty()) append_line(pending_.data(), pending_.size());
  flush_out();
  pending_.clear();
  close_source();
}

}  // namespace launcher
}  // namespace hb
