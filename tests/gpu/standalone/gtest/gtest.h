// A minimal stand-in for GoogleTest, used only by run_gpu_tests.sh when the
// GPU machine has no GoogleTest installed: the subset of TEST / TEST_F /
// EXPECT_* / ASSERT_* / GTEST_SKIP the GPU tests use, same semantics
// (ASSERT returns from the function, SKIP in SetUp skips the body).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace testing {

class Test {
 public:
  virtual ~Test() = default;
  virtual void SetUp() {}
  virtual void TearDown() {}
  virtual void TestBody() = 0;
};

namespace mini {

struct State {
  bool failed = false, skipped = false;
};
inline State &state() {
  static State s;
  return s;
}

struct Registered {
  std::string name;
  std::function<Test *()> make;
};
inline std::vector<Registered> &registry() {
  static std::vector<Registered> r;
  return r;
}
inline bool add(const char *suite, const char *name,
                std::function<Test *()> make) {
  registry().push_back({std::string(suite) + "." + name, std::move(make)});
  return true;
}

class Message {
 public:
  template <class T>
  Message &operator<<(const T &v) {
    os_ << v;
    return *this;
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

// `Reporter(...) = Message() << ...` reports when assigned (so ASSERT can
// `return` it from a void function).
struct Reporter {
  const char *file;
  int line;
  const char *expr;
  bool skip;
  void operator=(const Message &m) const {
    if (skip) {
      state().skipped = true;
      std::printf("[  SKIPPED ] %s\n", m.str().c_str());
      return;
    }
    state().failed = true;
    std::printf("%s:%d: Failure: %s %s\n", file, line, expr, m.str().c_str());
  }
};

inline bool near(double a, double b, double tol) {
  return std::fabs(a - b) <= tol;
}

}  // namespace mini
}  // namespace testing

#define HB_MINI_CHECK(cond, text, on_fail)                               \
  if (cond) {                                                            \
  } else                                                                 \
    on_fail ::testing::mini::Reporter{__FILE__, __LINE__, text, false} = \
        ::testing::mini::Message()

#define EXPECT_TRUE(c) HB_MINI_CHECK((c), #c, )
#define EXPECT_FALSE(c) HB_MINI_CHECK(!(c), "!(" #c ")", )
#define EXPECT_EQ(a, b) HB_MINI_CHECK((a) == (b), #a " == " #b, )
#define EXPECT_NE(a, b) HB_MINI_CHECK((a) != (b), #a " != " #b, )
#define EXPECT_GE(a, b) HB_MINI_CHECK((a) >= (b), #a " >= " #b, )
#define EXPECT_GT(a, b) HB_MINI_CHECK((a) > (b), #a " > " #b, )
#define EXPECT_STREQ(a, b) \
  HB_MINI_CHECK(std::strcmp((a), (b)) == 0, #a " == " #b, )
#define EXPECT_NEAR(a, b, t) \
  HB_MINI_CHECK(::testing::mini::near((a), (b), (t)), #a " ~ " #b, )
#define EXPECT_FLOAT_EQ(a, b)                                         \
  HB_MINI_CHECK(::testing::mini::near((a), (b), 1e-6 * std::fabs(b)), \
                #a " == " #b, )
#define EXPECT_DOUBLE_EQ(a, b) HB_MINI_CHECK((a) == (b), #a " == " #b, )
#define ASSERT_TRUE(c) HB_MINI_CHECK((c), #c, return )
#define ASSERT_EQ(a, b) HB_MINI_CHECK((a) == (b), #a " == " #b, return )
#define ASSERT_NE(a, b) HB_MINI_CHECK((a) != (b), #a " != " #b, return )
#define ASSERT_GE(a, b) HB_MINI_CHECK((a) >= (b), #a " >= " #b, return )
#define ASSERT_NEAR(a, b, t) \
  HB_MINI_CHECK(::testing::mini::near((a), (b), (t)), #a " ~ " #b, return )
#define GTEST_SKIP()                                               \
  return ::testing::mini::Reporter{__FILE__, __LINE__, "", true} = \
             ::testing::mini::Message()

#define HB_MINI_TEST(suite, name, base)                                   \
  class suite##_##name##_Test : public base {                             \
   public:                                                                \
    void TestBody() override;                                             \
  };                                                                      \
  static const bool suite##_##name##_registered =                         \
      ::testing::mini::add(#suite, #name, [] {                            \
        return static_cast<::testing::Test *>(new suite##_##name##_Test); \
      });                                                                 \
  void suite##_##name##_Test::TestBody()

#define TEST(suite, name) HB_MINI_TEST(suite, name, ::testing::Test)
#define TEST_F(fixture, name) HB_MINI_TEST(fixture, name, fixture)

// Runs every registered test; returns the number of failed tests.
inline int hb_mini_run_all() {
  int failed = 0, skipped = 0;
  for (auto &t : ::testing::mini::registry()) {
    ::testing::mini::state() = {};
    std::printf("[ RUN      ] %s\n", t.name.c_str());
    std::unique_ptr<::testing::Test> test(t.make());
    test->SetUp();
    if (!::testing::mini::state().skipped && !::testing::mini::state().failed)
      test->TestBody();
    test->TearDown();
    const auto &s = ::testing::mini::state();
    failed += s.failed;
    skipped += s.skipped && !s.failed;
    std::printf("[ %s ] %s\n",
                s.failed    ? "  FAILED"
                : s.skipped ? " SKIPPED"
                            : "      OK",
                t.name.c_str());
  }
  std::printf("%zu tests: %d failed, %d skipped\n",
              ::testing::mini::registry().size(), failed, skipped);
  return failed;
}
