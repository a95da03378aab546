// The frame codec: round trips, and strict refusal of malformed, oversized
// and truncated frames with the byte offset named.
#include <gtest/gtest.h>

#include <string>

#include "abi/error.h"
#include "rendezvous/frame.h"
#include "rendezvous/protocol.h"

namespace hb {
namespace rdv {
namespace {

Frame sample() {
  Frame f;
  f.type = kWait;
  f.id = 0x0102030405060708ull;
  f.ints = {0, -1, INT64_MIN, INT64_MAX, 42};
  f.strs = {"", std::string("a\0b", 3), std::string(1000, 'x')};
  return f;
}

void expect_same(const Frame &a, const Frame &b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.ints, b.ints);
  EXPECT_EQ(a.strs, b.strs);
}

// The message of the HB_ERR_CORRUPT that fn throws.
template <class F>
std::string corrupt(F fn) {
  try {
    fn();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_CORRUPT) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

void put_u32(std::string *s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    (*s)[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

TEST(Frame, RoundTripWhole) {
  Frame f = sample();
  std::string bytes = encode_frame(f, 1 << 20);
  EXPECT_EQ(bytes.size(), encoded_size(f));
  expect_same(decode_frame(bytes.data(), bytes.size(), 1 << 20), f);
}

TEST(Frame, RoundTripEmpty) {
  Frame f;
  f.type = kBye;
  std::string bytes = encode_frame(f, 64);
  expect_same(decode_frame(bytes.data(), bytes.size(), 64), f);
}

TEST(Frame, DecoderByteByByteAndBackToBack) {
  Frame a = sample(), b;
  b.type = kHeartbeat;
  b.id = 7;
  std::string bytes = encode_frame(a, 1 << 20) + encode_frame(b, 1 << 20) +
                      encode_frame(a, 1 << 20);
  FrameDecoder dec(1 << 20);
  std::vector<Frame> got;
  Frame f;
  for (char c : bytes) {
    dec.feed(&c, 1);
    while (dec.next(&f)) got.push_back(f);
  }
  ASSERT_EQ(got.size(), 3u);
  expect_same(got[0], a);
  expect_same(got[1], b);
  expect_same(got[2], a);
  EXPECT_EQ(dec.offset(), bytes.size());
  EXPECT_EQ(dec.buffered(), 0u);
}

TEST(Frame, EncodeOverCapIsInvalidArgument) {
  Frame f;
  f.type = kSet;
  f.strs = {"key", std::string(2000, 'v')};
  try {
    encode_frame(f, 1024);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("1024"), std::string::npos)
        << e.what();
  }
}

TEST(Frame, BadMagicNamesOffset) {
  std::string first = encode_frame(sample(), 1 << 20);
  std::string bytes = first + "GET / HTTP/1.1\r\n\r\n";
  FrameDecoder dec(1 << 20);
  dec.feed(bytes.data(), bytes.size());
  Frame f;
  ASSERT_TRUE(dec.next(&f));
  std::string m = corrupt([&] { dec.next(&f); });
  EXPECT_NE(m.find("offset " + std::to_string(first.size())), std::string::npos)
      << m;
  EXPECT_NE(m.find("magic"), std::string::npos) << m;
}

TEST(Frame, BadMagicCaughtFromPartialHeader) {
  FrameDecoder dec(1 << 20);
  dec.feed("HBX", 3);
  Frame f;
  std::string m = corrupt([&] { dec.next(&f); });
  EXPECT_NE(m.find("magic"), std::string::npos) << m;
}

TEST(Frame, OversizedRefusedFromHeaderAlone) {
  Frame f = sample();
  std::string bytes = encode_frame(f, 1 << 20);
  FrameDecoder dec(512);
  dec.feed(bytes.data(), kFrameHeaderBytes);  // body never sent
  Frame out;
  std::string m = corrupt([&] { dec.next(&out); });
  EXPECT_NE(m.find("oversized"), std::string::npos) << m;
  EXPECT_NE(m.find("512"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 0"), std::string::npos) << m;
}

TEST(Frame, HugeLengthFieldIsOversized) {
  std::string bytes = std::string("HBRV") + std::string(4, '\xff');
  FrameDecoder dec(64u << 20);
  dec.feed(bytes.data(), bytes.size());
  Frame out;
  EXPECT_NE(corrupt([&] { dec.next(&out); }).find("oversized"),
            std::string::npos);
}

TEST(Frame, TruncatedWholeFrame) {
  std::string bytes = encode_frame(sample(), 1 << 20);
  std::string m =
      corrupt([&] { decode_frame(bytes.data(), bytes.size() - 1, 1 << 20); });
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  m = corrupt([&] { decode_frame(bytes.data(), 5, 1 << 20); });
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  std::string longer = bytes + "x";
  m = corrupt([&] { decode_frame(longer.data(), longer.size(), 1 << 20); });
  EXPECT_NE(m.find("overlong"), std::string::npos) << m;
}

TEST(Frame, TruncatedStreamWaitsForMore) {
  std::string bytes = encode_frame(sample(), 1 << 20);
  FrameDecoder dec(1 << 20);
  dec.feed(bytes.data(), bytes.size() - 1);
  Frame out;
  EXPECT_FALSE(dec.next(&out));
  dec.feed(bytes.data() + bytes.size() - 1, 1);
  EXPECT_TRUE(dec.next(&out));
}

// Body layout: type @8, id @9, n_ints @17, ints @21.
TEST(Frame, IntCountBeyondBody) {
  std::string bytes = encode_frame(sample(), 1 << 20);
  put_u32(&bytes, 17, 1000000);
  std::string m =
      corrupt([&] { decode_frame(bytes.data(), bytes.size(), 1 << 20); });
  EXPECT_NE(m.find("offset 17"), std::string::npos) << m;
  EXPECT_NE(m.find("ints"), std::string::npos) << m;
}

TEST(Frame, StringLengthBeyondBody) {
  Frame f;
  f.type = kSet;
  f.strs = {"key", "value"};
  std::string bytes = encode_frame(f, 1 << 20);
  // n_ints = 0, n_strs @21, first length @25.
  put_u32(&bytes, 25, 0x7fffffff);
  std::string m =
      corrupt([&] { decode_frame(bytes.data(), bytes.size(), 1 << 20); });
  EXPECT_NE(m.find("offset 29"), std::string::npos) << m;
  EXPECT_NE(m.find("string"), std::string::npos) << m;
}

TEST(Frame, TrailingBytesInBody) {
  Frame f;
  f.type = kBye;
  std::string bytes = encode_frame(f, 1 << 20) + "zz";
  put_u32(&bytes, 4, static_cast<uint32_t>(bytes.size() - kFrameHeaderBytes));
  std::string m =
      corrupt([&] { decode_frame(bytes.data(), bytes.size(), 1 << 20); });
  EXPECT_NE(m.find("trailing"), std::string::npos) << m;
  EXPECT_NE(m.find("offset " + std::to_string(bytes.size() - 2)),
            std::string::npos)
      << m;
}

TEST(Frame, EveryTruncationOfTheBodyIsRefused) {
  // Shrinking the declared length cuts a field: never a crash, always CORRUPT.
  std::string full = encode_frame(sample(), 1 << 20);
  for (size_t body = 0; body + kFrameHeaderBytes < full.size(); body += 7) {
    std::string cut = full.substr(0, kFrameHeaderBytes + body);
    put_u32(&cut, 4, static_cast<uint32_t>(body));
    corrupt([&] { decode_frame(cut.data(), cut.size(), 1 << 20); });
  }
}

TEST(Protocol, ShapeChecks) {
  Frame f;
  f.type = kGet;
  f.strs = {"k"};
  std::string m = corrupt([&] { check_frame_shape(f, 99); });
  EXPECT_NE(m.find("GET"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 99"), std::string::npos) << m;
  f.ints = {100};
  check_frame_shape(f, 0);
  f.type = 200;
  EXPECT_NE(corrupt([&] {
              check_frame_shape(f, 0);
            }).find("unknown message type 200"),
            std::string::npos);
  Frame w;
  w.type = kWait;
  w.ints = {5};
  check_frame_shape(w, 0);  // zero keys is fine
  w.strs = {"a", "b", "c"};
  check_frame_shape(w, 0);
}

}  // namespace
}  // namespace rdv
}  // namespace hb
