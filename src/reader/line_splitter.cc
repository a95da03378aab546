#include "reader/line_splitter.h"

#include <algorithm>

namespace hb {
namespace reader {

LineSplitter::LineSplitter(ByteSource *src, int64_t offset, bool skip_first,
                           int64_t last_start, int64_t max_line_bytes)
    : src_(src),
      last_start_(last_start),
      max_line_(max_line_bytes),
      // Sized for the range (a small chunk reads a little past its end, not
      // 256 KiB); it grows for longer lines, up to about twice the cap.
      buf_(static_cast<size_t>(std::clamp<int64_t>(
          std::min(last_start - offset, int64_t{1} << 30) + 1024, 4096,
          256 << 10))),
      head_offset_(offset),
      skipping_first_(skip_first) {}

int64_t LineSplitter::content_bytes(size_t from, size_t end) const {
  size_t n = end - from;
  if (n > 0 && buf_[end - 1] == '\r') --n;
  return static_cast<int64_t>(n);
}

bool LineSplitter::fill() {
  if (eof_) return false;
  if (head_ > 0) {  // keep the partial line at the front
    std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
    scan_ -= head_;
    tail_ -= head_;
    head_ = 0;
  }
  if (tail_ == buf_.size()) buf_.resize(buf_.size() * 2);  // bounded by the cap
  size_t n = src_->read(buf_.data() + tail_, buf_.size() - tail_);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  tail_ += n;
  return true;
}

bool LineSplitter::next(Line *out) {
  bool too_long = false;
  int64_t start = head_offset_;
  for (;;) {
    if (!skipping_first_ && !too_long && start > last_start_) return false;
    char *nl = static_cast<char *>(
        std::memchr(buf_.data() + scan_, '\n', tail_ - scan_));
    size_t end = nl ? static_cast<size_t>(nl - buf_.data()) : tail_;
    // A final '\r' may be the start of "\r\n", which does not count.
    if (!nl && !too_long && !skipping_first_ &&
        content_bytes(head_, end) > max_line_) {
      too_long = true;  // drop what we have; keep scanning for its end
    }
    if ((too_long || skipping_first_) && !nl) {
      head_offset_ += static_cast<int64_t>(tail_ - head_);
      head_ = scan_ = tail_;
      if (!fill()) {
        if (skipping_first_) return false;
        break;  // a too-long last line without a newline
      }
      continue;
    }
    if (nl) {
      size_t len = end - head_;
      const char *data = buf_.data() + head_;
      head_offset_ += static_cast<int64_t>(len + 1);
      head_ = scan_ = end + 1;
      if (skipping_first_) {
        skipping_first_ = false;
        start = head_offset_;
        continue;
      }
      if (len > 0 && data[len - 1] == '\r') --len;
      if (!too_long && static_cast<int64_t>(len) > max_line_) too_long = true;
      *out = Line{too_long ? "" : data, too_long ? 0 : len, start,
                  head_offset_,         index_++,           too_long};
      return true;
    }
    scan_ = tail_;
    if (!fill()) break;
  }
  // End of the source: the last line had no newline.
  size_t len = tail_ - head_;
  if (len == 0 && !too_long) return false;
  const char *data = buf_.data() + head_;
  head_offset_ += static_cast<int64_t>(len);
  head_ = scan_ = tail_;
  if (len > 0 && data[len - 1] == '\r') --len;
  *out = Line{too_long ? "" : data, too_long ? 0 : len, start,
              head_offset_,         index_++,           too_long};
  return true;
}

}  // namespace reader
}  // namespace hb
