#include "rendezvous/frame.h"

#include <cstring>

#include "abi/error.h"

namespace hb {
namespace rdv {
namespace {

void put_u32(std::string *out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 4);
}

void put_u64(std::string *out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}

uint64_t get_le(const char *p, int nbytes) {
  uint64_t v = 0;
  for (int i = 0; i < nbytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Reads the body of one frame; every error names the stream offset.
class BodyReader {
 public:
  BodyReader(const char *p, size_t n, uint64_t base)
      : p_(p), n_(n), base_(base) {}

  uint64_t read(int nbytes, const char *what) {
    need(static_cast<size_t>(nbytes), what);
    uint64_t v = get_le(p_ + off_, nbytes);
    off_ += static_cast<size_t>(nbytes);
    return v;
  }
  // A u32 element count, bounded by the bytes left (each element takes at
  // least `unit` bytes) before anything is allocated for it.
  uint64_t read_count(size_t unit, const char *what) {
    uint64_t n = read(4, what);
    if (n > left() / unit)
      fail(HB_ERR_CORRUPT,
           "malformed rendezvous frame at stream byte offset %llu: %llu %s do "
           "not fit in the %zu bytes left",
           static_cast<unsigned long long>(here() - 4),
           static_cast<unsigned long long>(n), what, left());
    return n;
  }
  std::string read_bytes(size_t len, const char *what) {
    need(len, what);
    std::string s(p_ + off_, len);
    off_ += len;
    return s;
  }
  void need(size_t len, const char *what) {
    if (len > n_ - off_)
      fail(HB_ERR_CORRUPT,
           "malformed rendezvous frame at stream byte offset %llu: %s needs "
           "%zu bytes, only %zu left in the frame body",
           static_cast<unsigned long long>(here()), what, len, n_ - off_);
  }
  size_t left() const { return n_ - off_; }
  uint64_t here() const { return base_ + off_; }

 private:
  const char *p_;
  size_t n_;
  uint64_t base_;
  size_t off_ = 0;
};

Frame decode_body(const char *p, size_t n, uint64_t base) {
  BodyReader r(p, n, base);
  Frame f;
  f.type = static_cast<uint8_t>(r.read(1, "type"));
  f.id = r.read(8, "request id");
  uint64_t n_ints = r.read_count(8, "ints");
  f.ints.reserve(n_ints);
  for (uint64_t i = 0; i < n_ints; ++i)
    f.ints.push_back(static_cast<int64_t>(r.read(8, "int")));
  uint64_t n_strs = r.read_count(4, "strings");
  f.strs.reserve(n_strs);
  for (uint64_t i = 0; i < n_strs; ++i) {
    size_t len = static_cast<size_t>(r.read(4, "string length"));
    f.strs.push_back(r.read_bytes(len, "string"));
  }
  if (r.left() != 0)
    fail(HB_ERR_CORRUPT,
         "malformed rendezvous frame at stream byte offset %llu: %zu trailing "
         "bytes after the last field",
         static_cast<unsigned long long>(r.here()), r.left());
  return f;
}

// Validates a header; returns the body length.
size_t check_header(const char *p, uint64_t offset, size_t max_frame_bytes) {
  if (std::memcmp(p, kFrameMagic, 4) != 0)
    fail(HB_ERR_CORRUPT,
         "malformed rendezvous frame at stream byte offset %llu: bad magic "
         "%02x %02x %02x %02x (not an hb rendezvous peer?)",
         static_cast<unsigned long long>(offset), p[0] & 0xff, p[1] & 0xff,
         p[2] & 0xff, p[3] & 0xff);
  uint64_t body = get_le(p + 4, 4);
  if (body + kFrameHeaderBytes > max_frame_bytes)
    fail(HB_ERR_CORRUPT,
         "oversized rendezvous frame at stream byte offset %llu: %llu bytes, "
         "max_frame_bytes is %zu",
         static_cast<unsigned long long>(offset),
         static_cast<unsigned long long>(body + kFrameHeaderBytes),
         max_frame_bytes);
  return static_cast<size_t>(body);
}

}  // namespace

size_t encoded_size(const Frame &frame) {
  size_t n = kFrameHeaderBytes + 1 + 8 + 4 + 8 * frame.ints.size() + 4;
  for (const auto &s : frame.strs) n += 4 + s.size();
  return n;
}

void encode_frame(const Frame &frame, size_t max_frame_bytes,
                  std::string *out) {
  size_t total = encoded_size(frame);
  if (total > max_frame_bytes || total - kFrameHeaderBytes > UINT32_MAX)
    fail(HB_ERR_INVALID_ARGUMENT,
         "rendezvous message of %zu bytes exceeds max_frame_bytes (%zu)", total,
         max_frame_bytes);
  out->reserve(out->size() + total);
  out->append(kFrameMagic, 4);
  put_u32(out, static_cast<uint32_t>(total - kFrameHeaderBytes));
  out->push_back(static_cast<char>(frame.type));
  put_u64(out, frame.id);
  put_u32(out, static_cast<uint32_t>(frame.ints.size()));
  for (int64_t v : frame.ints) put_u64(out, static_cast<uint64_t>(v));
  put_u32(out, static_cast<uint32_t>(frame.strs.size()));
  for (const auto &s : frame.strs) {
    put_u32(out, static_cast<uint32_t>(s.size()));
    out->append(s);
  }
}

std::string encode_frame(const Frame &frame, size_t max_frame_bytes) {
  std::string out;
  encode_frame(frame, max_frame_bytes, &out);
  return out;
}

void FrameDecoder::feed(const char *data, size_t n) {
  // Drop consumed bytes before growing, so the buffer stays near one frame.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, n);
}

bool FrameDecoder::next(Frame *out) {
  size_t avail = buf_.size() - pos_;
  if (avail < kFrameHeaderBytes) {
    // Reject a wrong magic early, even from a partial header.
    size_t k = avail < 4 ? avail : 4;
    if (std::memcmp(buf_.data() + pos_, kFrameMagic, k) != 0) {
      char head[4] = {0, 0, 0, 0};
      std::memcpy(head, buf_.data() + pos_, k);
      std::memcpy(head + k, kFrameMagic + k, 4 - k);
      check_header(head, consumed_, max_);  // throws
    }
    return false;
  }
  size_t body = check_header(buf_.data() + pos_, consumed_, max_);
  if (avail < kFrameHeaderBytes + body) {
    // The size is known (and within the cap): grow the buffer once.
    buf_.reserve(pos_ + kFrameHeaderBytes + body);
    return false;
  }
  *out = decode_body(buf_.data() + pos_ + kFrameHeaderBytes, body,
                     consumed_ + kFrameHeaderBytes);
  pos_ += kFrameHeaderBytes + body;
  consumed_ += kFrameHeaderBytes + body;
  return true;
}

Frame decode_frame(const char *data, size_t n, size_t max_frame_bytes) {
  if (n < kFrameHeaderBytes)
    fail(HB_ERR_CORRUPT,
         "truncated rendezvous frame: %zu bytes, the header alone is %zu", n,
         kFrameHeaderBytes);
  size_t body = check_header(data, 0, max_frame_bytes);
  if (n != kFrameHeaderBytes + body)
    fail(HB_ERR_CORRUPT,
         "%s rendezvous frame: the header says %zu bytes, got %zu",
         n < kFrameHeaderBytes + body ? "truncated" : "overlong",
         kFrameHeaderBytes + body, n);
  return decode_body(data + kFrameHeaderBytes, body, kFrameHeaderBytes);
}

}  // namespace rdv
}  // namespace hb
