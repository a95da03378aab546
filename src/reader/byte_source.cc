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

// Inflates by hand rather than through gzread: gzread drops everything it
// decoded in a call that then meets damaged data, and the lines before the
// damage must reach the caller before the error does.
class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const std::string &path)
      : path_(path), fd_(open_or_fail(path)), in_(256 << 10) {
    std::memset(&zs_, 0, sizeof zs_);
    if (::inflateInit2(&zs_, 15 + 16) != Z_OK) {  // 16: gzip wrapper only
      ::close(fd_);
      fail(HB_ERR_OUT_OF_MEMORY, "hb_reader: cannot set up zlib for '%s'",
           path.c_str());
    }
  }
  ~GzipSource() override {
    ::inflateEnd(&zs_);
    ::close(fd_);
  }

  size_t read(char *buf, size_t cap) override {
    if (error_ != HB_OK) fail(error_, "%s", message_.c_str());
    const unsigned want =
        static_cast<unsigned>(std::min<size_t>(cap, 1u << 30));
    zs_.next_out = reinterpret_cast<Bytef *>(buf);
    zs_.avail_out = want;
    while (zs_.avail_out > 0 && error_ == HB_OK) {
      if (zs_.avail_in == 0 && !refill()) {
        if (error_ == HB_OK && in_member_)
          defer(HB_ERR_CORRUPT, "truncated", "unexpected end of file");
        break;  // else: the end, between members
      }
      in_member_ = true;  // bytes after a member start the next one
      int ret = ::inflate(&zs_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        ::inflateReset(&zs_);
        in_member_ = false;
      } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
        defer(HB_ERR_CORRUPT, "damaged", zs_.msg ? zs_.msg : "invalid data");
      }  // Z_BUF_ERROR: no input left; the loop refills
    }
    size_t n = want - zs_.avail_out;
    // What was decoded before an error goes out first; the error next call.
    if (n == 0 && error_ != HB_OK) fail(error_, "%s", message_.c_str());
    return n;
  }

 private:
  // More input; false at the end of the file. A read error is deferred.
  bool refill() {
    for (;;) {
      ssize_t n = ::read(fd_, in_.data(), in_.size());
      if (n >= 0) {
        zs_.next_in = in_.data();
        zs_.avail_in = static_cast<unsigned>(n);
        return n > 0;
      }
      if (errno != EINTR) {
        error_ = HB_ERR_IO;
        message_ = format("hb_reader: cannot read '%s': %s", path_.c_str(),
                          std::strerror(errno));
        return false;
      }
    }
  }

  void defer(hb_status st, const char *how, const char *detail) {
    error_ = st;
    message_ = format("hb_reader: '%s': %s gzip stream (%s)", path_.c_str(),
                      how, detail);
  }

  std::string path_;
  int fd_;
  std::vector<Bytef> in_;
  z_stream zs_;
  bool in_member_ = true;  // inside a member: the input must not end here
  hb_status error_ = HB_OK;
  std::string message_;
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
