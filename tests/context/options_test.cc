#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "abi/error.h"
#include "common/log.h"
#include "context/options.h"
#include "env_guard.h"
#include "hb.h"

namespace {

using hb::Options;

// Runs fn, expecting an hb::Error with status and a message containing text.
template <class F>
void expect_error(F &&fn, hb_status status, const std::string &text) {
  hb_status got = hb::guard(fn);
  EXPECT_EQ(got, status) << hb_last_error();
  EXPECT_NE(std::string(hb_last_error()).find(text), std::string::npos)
      << "message: " << hb_last_error() << "\nexpected to contain: " << text;
}

TEST(Options, EveryDefaultIsValidForItsType) {
  hb_test::EnvGuard env;
  Options o = Options::from_environment();
  for (const hb::OptionSpec &spec : hb::option_table()) {
    EXPECT_EQ(o.get(spec.name), spec.default_value) << spec.name;
    EXPECT_EQ(hb::guard([&] { o.set(spec.name, spec.default_value); }), HB_OK)
        << spec.name << ": " << hb_last_error();
    EXPECT_EQ(o.get(spec.name), spec.default_value) << spec.name;
    EXPECT_EQ(hb::find_option(spec.name), &spec);
  }
}

TEST(Options, IntegersAreCheckedAndBounded) {
  hb_test::EnvGuard env;
  Options o = Options::from_environment();
  o.set("timeout_ms", " 1234 ");
  EXPECT_EQ(o.get_int("timeout_ms"), 1234);
  EXPECT_EQ(o.get("timeout_ms"), "1234");
  o.set("timeout_ms", "+7");
  EXPECT_EQ(o.get("timeout_ms"), "7");
  expect_error([&] { o.set("timeout_ms", "abc"); }, HB_ERR_CONFIG,
               "option timeout_ms='abc': not an integer");
  expect_error([&] { o.set("timeout_ms", "12ms"); }, HB_ERR_CONFIG,
               "not an integer");
  expect_error([&] { o.set("timeout_ms", "1e3"); }, HB_ERR_CONFIG,
               "not an integer");
  expect_error([&] { o.set("timeout_ms", ""); }, HB_ERR_CONFIG,
               "not an integer");
  expect_error([&] { o.set("timeout_ms", "0"); }, HB_ERR_CONFIG,
               "option timeout_ms='0': out of range [1, 86400000]");
  expect_error([&] { o.set("timeout_ms", "-5"); }, HB_ERR_CONFIG,
               "out of range");
  expect_error([&] { o.set("timeout_ms", "99999999999999999999999"); },
               HB_ERR_CONFIG, "out of range");
  EXPECT_EQ(o.get_int("timeout_ms"), 7)
      << "a rejected value changed the option";
}

TEST(Options, BooleansDoublesAndStrings) {
  for (const char *t : {"1", "true", "TRUE", "yes", "On", " on "})
    EXPECT_TRUE(hb::parse_bool(t, "x")) << t;
  for (const char *f : {"0", "false", "No", "off"})
    EXPECT_FALSE(hb::parse_bool(f, "x")) << f;
  expect_error([] { hb::parse_bool("maybe", "HB_FLAG"); }, HB_ERR_CONFIG,
               "HB_FLAG='maybe': not a boolean");
  expect_error([] { hb::parse_bool("", "HB_FLAG"); }, HB_ERR_CONFIG,
               "not a boolean");

  EXPECT_DOUBLE_EQ(hb::parse_double("0.25", "x"), 0.25);
  EXPECT_DOUBLE_EQ(hb::parse_double("-1e-3", "x"), -1e-3);
  for (const char *bad : {"", "abc", "nan", "inf", "0x10", "1.5.2", "1e"})
    expect_error([&] { hb::parse_double(bad, "HB_LR"); }, HB_ERR_CONFIG,
                 "HB_LR='" + std::string(bad) + "'");
  expect_error([] { hb::parse_double("1e999", "x"); }, HB_ERR_CONFIG,
               "out of the range of a double");

  hb_test::EnvGuard env;
  Options o = Options::from_environment();
  o.set("rendezvous_token", " keep blanks ");
  EXPECT_EQ(o.get_string("rendezvous_token"), " keep blanks ");
  expect_error([&] { o.set("rendezvous_token", std::string(5000, 'x')); },
               HB_ERR_CONFIG, "longer than 4096 bytes");
}

TEST(Options, EnumsAcceptListedValuesOnly) {
  hb_test::EnvGuard env;
  Options o = Options::from_environment();
  o.set("cpu_allreduce", "Ring_Chunked");
  EXPECT_EQ(o.get_string("cpu_allreduce"), "ring_chunked");
  expect_error([&] { o.set("cpu_allreduce", "tree"); }, HB_ERR_CONFIG,
               "option cpu_allreduce='tree': not one of "
               "auto|rank_order|ring|ring_chunked|halving_doubling|bcube");
  expect_error([&] { o.set("cpu_allreduce", "ring|bcube"); }, HB_ERR_CONFIG,
               "not one of");
  expect_error([&] { o.set("cpu_allreduce", "rin"); }, HB_ERR_CONFIG,
               "not one of");
}

TEST(Options, UnknownNamesAndWrongTypedReads) {
  hb_test::EnvGuard env;
  Options o = Options::from_environment();
  expect_error([&] { o.set("timeout", "5"); }, HB_ERR_CONFIG,
               "unknown option 'timeout'");
  expect_error([&] { o.get("nope"); }, HB_ERR_CONFIG, "unknown option 'nope'");
  expect_error([&] { o.get_int("log_level"); }, HB_ERR_INTERNAL,
               "option log_level is of type enum, read as int");
}

TEST(Options, EnvironmentOverrides) {
  hb_test::EnvGuard env;
  env.set("HB_TIMEOUT_MS", "4321");
  env.set("HB_CPU_ALLREDUCE", "bcube");
  env.set("HB_RENDEZVOUS", "10.0.0.1:29500");
  Options o = Options::from_environment();
  EXPECT_EQ(o.get_int("timeout_ms"), 4321);
  EXPECT_EQ(o.get("cpu_allreduce"), "bcube");
  EXPECT_EQ(o.get("rendezvous"), "10.0.0.1:29500");

  env.set("HB_TIMEOUT_MS", "");  // empty counts as unset
  EXPECT_EQ(Options::from_environment().get("timeout_ms"), "300000");

  env.set("HB_TIMEOUT_MS", "abc");
  expect_error([] { Options::from_environment(); }, HB_ERR_CONFIG,
               "HB_TIMEOUT_MS='abc': not an integer");
  env.set("HB_TIMEOUT_MS", "0");
  expect_error([] { Options::from_environment(); }, HB_ERR_CONFIG,
               "HB_TIMEOUT_MS='0': out of range");
  env.unset("HB_TIMEOUT_MS");
  env.set("HB_LOG_LEVEL", "loud");
  expect_error([] { Options::from_environment(); }, HB_ERR_CONFIG,
               "HB_LOG_LEVEL='loud': not one of error|warn|info|debug");
  // Long hostile values are cut in the message.
  env.set("HB_LOG_LEVEL", std::string(10000, 'z'));
  expect_error([] { Options::from_environment(); }, HB_ERR_CONFIG,
               "(10000 bytes)");
  EXPECT_LT(std::strlen(hb_last_error()), 300u);
}

TEST(Options, ApplyListIsAllOrNothing) {
  hb_test::EnvGuard env;
  Options o = Options::from_environment();
  o.apply_list(" timeout_ms = 100 ,, grad_nbuckets=4,");
  EXPECT_EQ(o.get_int("timeout_ms"), 100);
  EXPECT_EQ(o.get_int("grad_nbuckets"), 4);
  o.apply_list("");
  expect_error([&] { o.apply_list("timeout_ms=5,grad_nbuckets"); },
               HB_ERR_CONFIG,
               "options list entry 2 'grad_nbuckets': expected name=value");
  expect_error([&] { o.apply_list("timeout_ms=5,bogus=1"); }, HB_ERR_CONFIG,
               "unknown option 'bogus'");
  expect_error([&] { o.apply_list("timeout_ms=5,grad_nbuckets=x"); },
               HB_ERR_CONFIG, "option grad_nbuckets='x': not an integer");
  EXPECT_EQ(o.get_int("timeout_ms"), 100) << "a failed list changed an option";
}

TEST(Options, CopiesAreIndependent) {
  hb_test::EnvGuard env;
  Options a = Options::from_environment();
  Options b = a;
  b.set("timeout_ms", "9");
  EXPECT_EQ(a.get("timeout_ms"), "300000");
  a = b;
  EXPECT_EQ(a.get("timeout_ms"), "9");
}

TEST(Options, LogLevelDrivesTheLogger) {
  hb_test::EnvGuard env;
  hb::LogLevel before = hb::log_level();
  Options o = Options::from_environment();
  o.set("log_level", "DEBUG");
  EXPECT_EQ(hb::log_level(), hb::LogLevel::kDebug);
  o.set("log_level", "error");
  EXPECT_EQ(hb::log_level(), hb::LogLevel::kError);
  env.set("HB_LOG_LEVEL", "info");
  Options::from_environment();
  EXPECT_EQ(hb::log_level(), hb::LogLevel::kInfo);
  hb::set_log_level(before);
}

TEST(Options, EnvNames) {
  EXPECT_EQ(hb::env_name("timeout_ms"), "HB_TIMEOUT_MS");
  EXPECT_EQ(hb::env_name("grad_nbuckets"), "HB_GRAD_NBUCKETS");
}

TEST(Options, DescribeListsTheTable) {
  const auto &table = hb::option_table();
  for (size_t i = 0; i < table.size(); ++i) {
    const char *name, *type, *def, *doc;
    ASSERT_EQ(hb_option_describe(i, &name, &type, &def, &doc), HB_OK);
    EXPECT_STREQ(name, table[i].name);
    EXPECT_STREQ(def, table[i].default_value);
    EXPECT_GT(std::strlen(doc), 10u) << name;
    std::string t = type;
    EXPECT_TRUE(t == "int" || t == "double" || t == "bool" || t == "string" ||
                t.rfind("enum(", 0) == 0)
        << t;
  }
  const char *type = nullptr;
  size_t log_level = hb::find_option("log_level") - table.data();
  ASSERT_EQ(hb_option_describe(log_level, nullptr, &type, nullptr, nullptr),
            HB_OK);
  EXPECT_STREQ(type, "enum(error|warn|info|debug)");
  ASSERT_EQ(hb_option_describe(0, nullptr, &type, nullptr, nullptr), HB_OK);
  EXPECT_STREQ(type, "int");
  EXPECT_EQ(hb_option_describe(table.size(), &type, &type, &type, &type),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("past the last option"),
            std::string::npos);
}

TEST(Options, GetOptionWithoutContextReadsTheEnvironment) {
  hb_test::EnvGuard env;
  env.set("HB_TIMEOUT_MS", "777");
  char buf[32];
  size_t needed = 0;
  ASSERT_EQ(
      hb_context_get_option(nullptr, "timeout_ms", buf, sizeof buf, &needed),
      HB_OK);
  EXPECT_STREQ(buf, "777");
  EXPECT_EQ(needed, 4u);
  // Sizing call, then a too-small buffer that stays untouched.
  EXPECT_EQ(hb_context_get_option(nullptr, "timeout_ms", nullptr, 0, &needed),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(needed, 4u);
  std::memset(buf, 'x', sizeof buf);
  EXPECT_EQ(hb_context_get_option(nullptr, "timeout_ms", buf, 3, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(buf[0], 'x');
  EXPECT_EQ(hb_context_get_option(nullptr, "no_such", buf, sizeof buf, nullptr),
            HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("no_such"), std::string::npos);
  EXPECT_EQ(hb_context_get_option(nullptr, nullptr, buf, sizeof buf, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_context_set_option(nullptr, "timeout_ms", "5"),
            HB_ERR_INVALID_ARGUMENT);
}

}  // namespace
