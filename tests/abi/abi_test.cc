#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "abi/dtype.h"
#include "abi/error.h"
#include "hb.h"

TEST(Abi, StatusNames) {
  EXPECT_STREQ(hb_status_name(HB_OK), "HB_OK");
  EXPECT_STREQ(hb_status_name(HB_ERR_PEER_FAILED), "HB_ERR_PEER_FAILED");
  EXPECT_STREQ(hb_status_name(HB_ERR_INTERNAL), "HB_ERR_INTERNAL");
  EXPECT_STREQ(hb_status_name(999), "HB_ERR_UNKNOWN");
}

TEST(Abi, Version) {
  EXPECT_EQ(hb_version_number(), static_cast<unsigned>(HB_VERSION_NUMBER));
  std::string info = hb_build_info();
  EXPECT_NE(info.find("hb 0.1.0"), std::string::npos) << info;
  EXPECT_NE(info.find("cuda_plugin="), std::string::npos) << info;
}

TEST(Abi, GuardTurnsExceptionsIntoStatus) {
  EXPECT_EQ(hb::guard([] { hb::fail(HB_ERR_TIMEOUT, "key %s", "k1"); }), HB_ERR_TIMEOUT);
  EXPECT_STREQ(hb_last_error(), "key k1");
  EXPECT_EQ(hb::guard([] { throw std::bad_alloc(); }), HB_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(hb::guard([] { throw 42; }), HB_ERR_INTERNAL);
  EXPECT_EQ(hb::guard([] {}), HB_OK);
}

TEST(Abi, LastErrorIsThreadLocal) {
  hb::guard([] { hb::fail(HB_ERR_IO, "main thread"); });
  std::thread([] {
    EXPECT_STREQ(hb_last_error(), "");
    hb::guard([] { hb::fail(HB_ERR_IO, "other thread"); });
    EXPECT_STREQ(hb_last_error(), "other thread");
  }).join();
  EXPECT_STREQ(hb_last_error(), "main thread");
}

TEST(Abi, DtypeSizes) {
  EXPECT_EQ(hb_dtype_size(HB_FLOAT32), 4u);
  EXPECT_EQ(hb_dtype_size(HB_FLOAT16), 2u);
  EXPECT_EQ(hb_dtype_size(HB_BFLOAT16), 2u);
  EXPECT_EQ(hb_dtype_size(HB_INT64), 8u);
  EXPECT_EQ(hb_dtype_size(HB_UINT8), 1u);
  EXPECT_EQ(hb_dtype_size(77), 0u);
}

// Every float16 bit pattern round-trips through float exactly, and float ->
// half rounds to nearest even (checked against the neighbours).
TEST(Abi, HalfConversions) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = hb::half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(hb::float_to_half(f), h) << std::hex << h;
  }
  EXPECT_EQ(hb::float_to_half(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(hb::float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(hb::float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(hb::float_to_half(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(hb::float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie -> 0
  EXPECT_EQ(hb::float_to_half(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Abi, Bfloat16Conversions) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = hb::bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(hb::float_to_bf16(f), h) << std::hex << h;
  }
  EXPECT_EQ(hb::float_to_bf16(1.0f + 1.0f / 256), 0x3f80);  // tie -> even
}
