// Rendezvous wire frames. A frame is
//
//   "HBRV" magic (4 bytes) | u32 body length | body
//   body = u8 type | u64 request id | u32 n_ints | n_ints x i64
//          | u32 n_strs | n_strs x (u32 length | bytes)
//
// all little-endian. The whole frame (header included) is capped at
// max_frame_bytes; the cap is checked as soon as the header arrives, so an
// oversized frame is refused before its body is buffered. Decoding is
// strict: every length must fit, and the body must be consumed exactly.
// Errors are HB_ERR_CORRUPT naming the stream byte offset of the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace rdv {

constexpr size_t kFrameHeaderBytes = 8;
constexpr char kFrameMagic[4] = {'H', 'B', 'R', 'V'};

struct Frame {
  uint8_t type = 0;
  uint64_t id = 0;  // request id; replies carry the id of their request
  std::vector<int64_t> ints;
  std::vector<std::string> strs;
};

// Size of the encoded frame in bytes (header included).
size_t encoded_size(const Frame &frame);

// Appends the encoded frame to out. A frame larger than max_frame_bytes is
// HB_ERR_INVALID_ARGUMENT naming both sizes.
void encode_frame(const Frame &frame, size_t max_frame_bytes, std::string *out);
std::string encode_frame(const Frame &frame, size_t max_frame_bytes);

// Incremental decoder for one byte stream (one connection).
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes) : max_(max_frame_bytes) {}
  // Changes the cap for the frames not yet decoded (the server raises it
  // once a connection has authenticated).
  void set_max(size_t max_frame_bytes) { max_ = max_frame_bytes; }

  void feed(const char *data, size_t n);
  // Pops the next complete frame into *out; false if more bytes are needed.
  // Throws HB_ERR_CORRUPT on a malformed or oversized frame; the stream is
  // unusable afterwards.
  bool next(Frame *out);
  // Bytes received but not yet returned as frames.
  size_t buffered() const { return buf_.size() - pos_; }
  // Stream offset of the first byte not yet returned as a frame.
  uint64_t offset() const { return consumed_; }

 private:
  size_t max_;
  std::string buf_;
  size_t pos_ = 0;         // start of the next frame in buf_
  uint64_t consumed_ = 0;  // stream offset of buf_[pos_]
};

// Decodes exactly one frame occupying all of [data, data + n).
Frame decode_frame(const char *data, size_t n, size_t max_frame_bytes);

}  // namespace rdv
}  // namespace hb
