#include "reader/byte_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "abi/error.h"

namespace hb {
namespace reader {
int open_or_fail(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(HB_ERR_IO, "hb_reader: cannot open '%s': %s", path.c_str(),
         std::strerror(errno));
  return fd;
}

namespace {

class PlainSource : public ByteSource {
 public:
  PlainSource(const std::string &path, int64_t offset)
      : path_(path), fd_(open_or_fail(path)), at_(offset) {}
  ~PlainSource() override { ::close(fd_); }

  size_t read(char *buf, size_t cap) override {
    for (;;) {
      ssize_t n = ::pread(fd_, buf, cap, static_cast<off_t>(at_));
      if (n >= 0) {
        at_ += n;
        return static_cast<size_t>(n);
      }
      if (errno != EINTR)
        fail(HB_ERR_IO, "hb_reader: cannot read '%s' at byte %lld: %s",
             path_.c_str(), static_cast<long long>(at_), std::strerror(errno));
    }
  }

 private:
  std::string path_;
  int fd_;
  int64_t at_;
};

class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const std::string &path) : path_(path) {
    int fd = open_or_fail(path);
    gz_ = ::gzdopen(fd, "rb");
    if (!gz_) {
      ::close(fd);
      fail(HB_ERR_OUT_OF_MEMORY, "hb_reader: cannot set up zlib for '%s'",
           path.c_str());
    }
    ::gzbuffer(gz_, 256 << 10);
  }
  ~GzipSource() override { ::gzclose(gz_); }

  size_t read(char *buf, size_t cap) override {
    unsigned want = static_cast<unsigned>(std::min<size_t>(cap, 1u << 30));
    int n = ::gzread(gz_, buf, want);
    int err = Z_OK;
    const char *msg = ::gzerror(gz_, &err);
    // Z_BUF_ERROR: the input ended inside a member (gzread already returned
    // what it could, so report it once the caller asks for more).
    if (n < 0 || (n == 0 && err != Z_OK)) {
      if (err == Z_ERRNO)
        fail(HB_ERR_IO, "hb_reader: cannot read '%s': %s", path_.c_str(),
             std::strerror(errno));
      fail(HB_ERR_CORRUPT, "hb_reader: '%s': %s gzip stream (%s)",
           path_.c_str(), err == Z_BUF_ERROR ? "truncated" : "damaged",
           msg ? msg : "");
    }
    return static_cast<size_t>(n);
  }

 private:
  std::string path_;
  gzFile gz_ = nullptr;
};

}  // namespace

std::unique_ptr<ByteSource> open_plain(const std::string &path,
                                       int64_t offset) {
  return std::make_unique<PlainSource>(path, offset);
}

std::unique_ptr<ByteSource> open_gzip(const std::string &path) {
  return std::make_unique<GzipSource>(path);
}

int64_t count_newlines(const std::string &path, int64_t offset) {
  PlainSource src(path, 0);
  std::vector<char> buf(1 << 16);
  int64_t lines = 0, left = offset;
  while (left > 0) {
    size_t n = src.read(buf.data(), std::min<size_t>(buf.size(), left));
    if (n == 0) break;
    lines += std::count(buf.data(), buf.data() + n, '\n');
    left -= static_cast<int64_t>(n);
  }
  return lines;
}

}  // namespace reader
}  // namespace hb
