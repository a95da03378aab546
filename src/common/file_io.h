// Files for checkpoints and exports: a 64-bit checksum, whole-file reads,
// and an atomic writer (temporary name, fsync, rename, fsync of the
// directory) so a crash never leaves a half-written file under the final
// name.
#pragma once

#include <cstdint>
#include <string>

namespace hb {

// Streaming 64-bit checksum (documented in docs/embedding-format.md).
class Checksum {
 public:
  void update(const void *data, size_t n);
  uint64_t value() const;

 private:
  uint64_t h_ = 0x243F6A8885A308D3ull;
  uint64_t len_ = 0;
  unsigned char tail_[8];
  size_t ntail_ = 0;
  void word(uint64_t w);
};
uint64_t checksum64(const void *data, size_t n);

// Whole file; throws HB_ERR_IO naming the path and the reason.
std::string read_whole_file(const std::string &path);
bool file_exists(const std::string &path);
void fsync_dir(const std::string &dir);

class AtomicFile {
 public:
  // Opens `path + ".tmp"`; throws HB_ERR_IO.
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // removes the temporary file unless committed
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  void write(const void *data, size_t n);  // buffered, checksummed
  uint64_t bytes() const { return bytes_; }
  uint64_t checksum() const { return sum_.value(); }
  // Flush, fsync, close, rename to the final name, fsync the directory.
  void commit();

 private:
  void flush();
  std::string path_, tmp_;
  int fd_ = -1;
  std::string buf_;
  uint64_t bytes_ = 0;
  Checksum sum_;
  bool committed_ = false;
};

std::string dir_of(const std::string &path);

}  // namespace hb
