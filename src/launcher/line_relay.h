// Copies a worker's output stream to hbrun's, a whole line at a time with
// the worker's prefix, so lines of different workers never interleave.
#pragma once

#include <cstddef>
#include <string>

namespace hb {
namespace launcher {

// Writes all of buf to fd (retrying short writes and EINTR). Errors such as
// a closed stdout are ignored: the workers must not be stalled by them.
void write_all(int fd, const char *buf, size_t n);

// One line on hbrun's stderr, written with a single write():
// "hbrun: <message>".
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

class LineRelay {
 public:
  // Lines longer than this are cut into pieces, each with the prefix.
  static constexpr size_t kMaxLine = 64 * 1024;

  // prefix is written before every line, e.g. "[3] ".
  LineRelay(int src_fd, int dst_fd, std::string prefix);
  ~LineRelay();
  LineRelay(const LineRelay &) = delete;
  LineRelay &operator=(const LineRelay &) = delete;

  int fd() const { return src_fd_; }
  bool open() const { return src_fd_ >= 0; }

  // Reads what is available without blocking and writes every complete
  // line. At end of file it flushes the partial line and closes the source.
  void pump();
  // Reads until nothing is left (the writer has exited), flushes the last
  // partial line (with a newline added) and closes the source.
  void drain_and_close();

 private:
  // A pipe holds at most a few MiB: these reads empty it; per pump() a
  // bound keeps one chatty worker from starving the others.
  static constexpr int kMaxReadsPerPump = 16;
  static constexpr int kMaxDrainReads = 1024;

  void pump_reads(int max_reads);
  void append_line(const char *data, size_t n);  // to out_
  void flush_out();
  void emit_complete_lines();
  void close_source();

  int src_fd_;
  int dst_fd_;
  std::string prefix_;
  std::string pending_;  // bytes after the last newline
  std::string out_;      // prefixed lines not yet written
};

}  // namespace launcher
}  // namespace hb
