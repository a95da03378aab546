#include "common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "abi/error.h"

namespace hb {

static const uint64_t kP1 = 0x9E3779B185EBCA87ull;
static const uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

void Checksum::word(uint64_t w) { h_ = rotl(h_ ^ (w * kP2), 31) * kP1; }

void Checksum::update(const void *data, size_t n) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  len_ += n;
  while (n && ntail_) {  // finish a partial word
    tail_[ntail_++] = *p++;
    --n;
    if (ntail_ == 8) {
      uint64_t w;
      std::memcpy(&w, tail_, 8);
      word(w);
      ntail_ = 0;
    }
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    word(w);
  }
  while (n--) tail_[ntail_++] = *p++;
}

uint64_t Checksum::value() const {
  uint64_t h = h_;
  if (ntail_) {
    unsigned char t[8] = {0};
    std::memcpy(t, tail_, ntail_);
    uint64_t w;
    std::memcpy(&w, t, 8);
    h = rotl(h ^ (w * kP2), 31) * kP1;
  }
  h ^= len_;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  return h;
}

uint64_t checksum64(const void *data, size_t n) {
  Checksum c;
  c.update(data, n);
  return c.value();
}

std::string read_whole_file(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(HB_ERR_IO, "cannot open '%s': %s", path.c_str(), std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      fail(HB_ERR_IO, "cannot read '%s': %s", path.c_str(), std::strerror(e));
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

bool file_exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string dir_of(const std::string &path) {
  size_t s = path.rfind('/');
  if (s == std::string::npos) return ".";
  if (s == 0) return "/";
  return path.substr(0, s);
}

void fsync_dir(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    fail(HB_ERR_IO, "cannot open directory '%s': %s", dir.c_str(),
         std::strerror(errno));
  int r = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (r != 0)
    fail(HB_ERR_IO, "fsync of directory '%s': %s", dir.c_str(),
         std::strerror(e));
}

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail(HB_ERR_IO, "cannot create '%s': %s", tmp_.c_str(),
         std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void *data, size_t n) {
  sum_.update(data, n);
  bytes_ += n;
  buf_.append(static_cast<const char *>(data), n);
  if (buf_.size() >= (1 << 20)) flush();
}

void AtomicFile::flush() {
  const char *p = buf_.data();
  size_t left = buf_.size();
  while (left) {
    ssize_t w = ::write(fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      fail(HB_ERR_IO, "cannot write '%s': %s", tmp_.c_str(),
           std::strerror(errno));
    p += w;
    left -= static_cast<size_t>(w);
  }
  buf_.clear();
}

void AtomicFile::commit() {
  flush();
  if (::fsync(fd_) != 0)
    fail(HB_ERR_IO, "fsync '%s': %s", tmp_.c_str(), std::strerror(errno));
  int r = ::close(fd_);
  fd_ = -1;
  if (r != 0)
    fail(HB_ERR_IO, "close '%s': %s", tmp_.c_str(), std::strerror(errno));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail(HB_ERR_IO, "rename '%s' -> '%s': %s", tmp_.c_str(), path_.c_str(),
         std::strerror(errno));
  committed_ = true;
  fsync_dir(dir_of(path_));
}

}  // namespace hb
