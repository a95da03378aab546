// Argument checks: a status and a message naming what was wrong.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "abi/error.h"
#include "comm/reduce_kernels.h"
#include "comm/validate.h"

namespace {

using namespace hb::comm;

template <class F>
std::string invalid(F &&fn) {
  EXPECT_EQ(HB_ERR_INVALID_ARGUMENT, hb::guard(fn));
  return hb_last_error();
}

TEST(Validate, Buffers) {
  float x;
  EXPECT_EQ(HB_OK,
            hb::guard([&] { check_buffer("f", "send", &x, 1, HB_FLOAT32); }));
  EXPECT_EQ(HB_OK, hb::guard([&] {
              check_buffer("f", "send", nullptr, 0, HB_FLOAT32);
            }));
  EXPECT_NE(invalid([&] {
              check_buffer("hb_allreduce", "send", nullptr, 3, HB_FLOAT32);
            }).find("hb_allreduce: send is NULL but count is 3"),
            std::string::npos);
  EXPECT_NE(invalid([&] {
              check_buffer("f", "recv", &x, 1, 42);
            }).find("unknown dtype 42"),
            std::string::npos);
  EXPECT_NE(invalid([&] {
              check_buffer("f", "recv", &x, SIZE_MAX / 2, HB_FLOAT64);
            }).find("overflow"),
            std::string::npos);
  EXPECT_NE(invalid([&] {
              check_buffer("f", "recv", &x, SIZE_MAX / 16, HB_FLOAT32, 4);
            }).find("overflow"),
            std::string::npos);
}

TEST(Validate, OpAndRoot) {
  EXPECT_NE(
      invalid([] { check_op("hb_allreduce", 9); }).find("unknown reduce op 9"),
      std::string::npos);
  EXPECT_NE(invalid([] { check_root("hb_broadcast", 4, 4); }).find("root 4"),
            std::string::npos);
  EXPECT_NE(invalid([] { check_root("hb_broadcast", -1, 4); }).find("root -1"),
            std::string::npos);
  EXPECT_EQ(HB_OK, hb::guard([] { check_root("hb_broadcast", 3, 4); }));
}

TEST(Validate, CountsAndOffsets) {
  int64_t span = 0;
  const int64_t counts[] = {2, 0, 5};
  auto off = check_vector("f", "c", counts, "o", nullptr, 3, 4, &span);
  EXPECT_EQ(off, (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(span, 7);
  const int64_t offs[] = {10, 0, 1};
  off = check_vector("f", "c", counts, "o", offs, 3, 4, &span);
  EXPECT_EQ(span, 12);
  const int64_t neg[] = {2, -1, 5};
  EXPECT_NE(invalid([&] {
              check_vector("hb_alltoallv", "send_counts", neg, "o", nullptr, 3,
                           4, &span);
            }).find("send_counts[1] = -1 is negative"),
            std::string::npos);
  const int64_t negoff[] = {0, -4, 0};
  EXPECT_NE(invalid([&] {
              check_vector("f", "c", counts, "recv_offsets", negoff, 3, 4,
                           &span);
            }).find("recv_offsets[1] = -4"),
            std::string::npos);
  const int64_t huge[] = {INT64_MAX / 2, INT64_MAX / 2, 0};
  EXPECT_NE(invalid([&] {
              check_vector("f", "c", huge, "o", nullptr, 3, 4, &span);
            }).find("overflow"),
            std::string::npos);
  EXPECT_NE(invalid([&] {
              check_vector("f", "recv_counts", nullptr, "o", nullptr, 3, 4,
                           &span);
            }).find("recv_counts is NULL"),
            std::string::npos);
}

TEST(Validate, Many) {
  float a[4];
  void *bufs[] = {a, nullptr};
  size_t counts[] = {4, 0};
  EXPECT_EQ(HB_OK, hb::guard([&] { check_many(bufs, counts, 2, HB_FLOAT32); }));
  size_t bad[] = {4, 2};
  EXPECT_NE(invalid([&] {
              check_many(bufs, bad, 2, HB_FLOAT32);
            }).find("bufs[1] is NULL"),
            std::string::npos);
  EXPECT_NE(invalid([&] {
              check_many(nullptr, counts, 2, HB_FLOAT32);
            }).find("bufs is NULL"),
            std::string::npos);
  size_t over[] = {SIZE_MAX / 8, SIZE_MAX / 8};
  void *two[] = {a, a};
  EXPECT_NE(
      invalid([&] { check_many(two, over, 2, HB_FLOAT32); }).find("overflow"),
      std::string::npos);
}

}  // namespace

namespace {

// min / max must not depend on operand order: which rank owns a chunk
// decides it, and fused and unfused calls own chunks differently.
TEST(Kernels, MinMaxAreSymmetricForZerosAndNaN) {
  const float nan = std::nanf(""), pz = 0.0f, nz = -0.0f;
  const float pairs[][2] = {
      {pz, nz}, {nz, pz}, {nan, 1.f}, {1.f, nan}, {2.f, 1.f}};
  for (auto &p : pairs) {
    float a[2] = {p[0], p[1]}, b[2] = {p[1], p[0]};
    float a2[2] = {p[0], p[1]}, b2[2] = {p[1], p[0]};
    hb::comm::Kernels<float>::min(a, b, 2);
    hb::comm::Kernels<float>::max(a2, b2, 2);
    EXPECT_EQ(0, std::memcmp(&a[0], &a[1], 4)) << p[0] << " " << p[1];
    EXPECT_EQ(0, std::memcmp(&a2[0], &a2[1], 4)) << p[0] << " " << p[1];
  }
  float z[2] = {pz, nz}, w[2] = {nz, pz};
  hb::comm::Kernels<float>::min(z, w, 2);
  EXPECT_TRUE(std::signbit(z[0]) && std::signbit(z[1]));
}

}  // namespace
