// Splits a ByteSource into lines, with a hard cap on a line's length (a
// longer line is reported, then skipped without buffering it), and the
// range rule of the sharding: with skip_first the bytes up to and including
// the first newline are dropped; lines that start after last_start are not
// read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "reader/byte_source.h"

namespace hb {
namespace reader {

struct Line {
  const char *data;  // without "\n" and a final "\r"
  size_t size;
  int64_t offset;  // of its first byte, in the file (plain) or stream
  int64_t end;     // offset after its newline (where the next line starts)
  int64_t index;   // 0-based, counted from the source's first line
  bool too_long;   // longer than the cap: data/size are empty
};

class LineSplitter {
 public:
  // offset: position of the source's first byte.
  LineSplitter(ByteSource *src, int64_t offset, bool skip_first,
               int64_t last_start, int64_t max_line_bytes);

  // Next line into *out; false at the end.
  bool next(Line *out);

 private:
  bool fill();  // reads more; false at the end of the source
  // Bytes of buf_[from, end) that count against the cap: a final '\r' does
  // not (it ends the line when a '\n' follows, or the source ends).
  int64_t content_bytes(size_t from, size_t end) const;

  ByteSource *src_;
  int64_t last_start_;
  int64_t max_line_;
  std::vector<char> buf_;
  size_t head_ = 0, tail_ = 0, scan_ = 0;
  int64_t head_offset_;  // file offset of buf_[head_]
  int64_t index_ = 0;
  bool skipping_first_;
  bool eof_ = false;
};

}  // namespace reader
}  // namespace hb
