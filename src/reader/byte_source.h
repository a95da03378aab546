// The bytes of one file: a plain file from an offset (pread), or a whole
// gzip file decompressed (zlib, concatenated members allowed). Read errors
// are HB_ERR_IO naming the file; a damaged or truncated gzip stream is
// HB_ERR_CORRUPT, raised by the read after the one that returned the last
// bytes decoded before the damage (so their lines are not lost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace hb {
namespace reader {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to cap bytes into buf; 0 at the end.
  virtual size_t read(char *buf, size_t cap) = 0;
};

// open(2) for reading, or HB_ERR_IO naming the file.
int open_or_fail(const std::string &path);

std::unique_ptr<ByteSource> open_plain(const std::string &path, int64_t offset);
std::unique_ptr<ByteSource> open_gzip(const std::string &path);

// Newlines in the first `offset` bytes of a plain file: the line number of
// a line starting at offset, minus one (error messages only).
int64_t count_newlines(const std::string &path, int64_t offset);

}  // namespace reader
}  // namespace hb
