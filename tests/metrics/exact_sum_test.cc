#include "metrics/exact_sum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <random>
#include <vector>

using hb::metrics::ExactSum;

TEST(ExactSum, CancelsAcrossTheWholeFloatRange) {
  ExactSum s;
  s.add(1e30f);
  s.add(1.0f);
  s.add(-1e30f);
  EXPECT_EQ(s.to_double(), 1.0);
  s.add(FLT_MAX);
  s.add(1.401298464324817e-45f);  // smallest denormal
  s.add(-FLT_MAX);
  s.add(-1.0f);
  EXPECT_EQ(s.to_double(), 1.401298464324817e-45);
  ExactSum neg;
  neg.add(-2.5f);
  neg.add(0.25f);
  EXPECT_EQ(neg.to_double(), -2.25);
}

TEST(ExactSum, OrderDoesNotMatter) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v;
  for (int i = 0; i < 20000; ++i)
    v.push_back(std::ldexp(u(rng), static_cast<int>(rng() % 80) - 40));
  ExactSum a;
  for (float x : v) a.add(x);
  std::shuffle(v.begin(), v.end(), rng);
  ExactSum b, c;
  for (size_t i = 0; i < v.size(); ++i) (i % 3 ? b : c).add(v[i]);
  b.add(c);
  EXPECT_EQ(a.to_double(), b.to_double());
  unsigned char wa[ExactSum::kWireBytes], wb[ExactSum::kWireBytes];
  a.write(wa);
  b.write(wb);
  EXPECT_EQ(0, memcmp(wa, wb, sizeof wa));
  // Close to a long double reference (whose own rounding is ~1e-19).
  long double ref = 0;
  for (float x : v) ref += x;
  EXPECT_NEAR(a.to_double(), static_cast<double>(ref), 1e-9);
}

TEST(ExactSum, CountsPastFloat32AndInt32Limits) {
  ExactSum s;
  for (int i = 0; i < (1 << 24) + 3; ++i)
    s.add(1.0f);  // float32 would stop at 2^24
  EXPECT_EQ(s.to_double(), 16777219.0);
  s.add_count(uint64_t(1) << 40);
  EXPECT_EQ(s.to_double(), 16777219.0 + 1099511627776.0);
  ExactSum t;
  t.add_count(~uint64_t(0));
  EXPECT_EQ(t.to_double(), 18446744073709551615.0);
  t.subtract(t);
  EXPECT_TRUE(t.is_zero());
}

TEST(ExactSum, WireRoundTripAndRejectsNonCanonical) {
  ExactSum s;
  s.add(3.75f);
  s.add(-1e-20f);
  unsigned char w[ExactSum::kWireBytes];
  s.write(w);
  ExactSum r;
  ASSERT_TRUE(r.read(w));
  EXPECT_EQ(r.to_double(), s.to_double());
  w[7] = 0x80;  // limb 0 negative: not canonical
  EXPECT_FALSE(r.read(w));
}
