// ConfigFields (src/common/mismatch.h): the named fields ranks exchange when
// their configuration fingerprints differ, and the message naming each
// field that differs with every rank's value.
#include "common/mismatch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "abi/error.h"

namespace {

using hb::ConfigFields;

ConfigFields table(int64_t dim, double lr, const char *pooling) {
  ConfigFields f;
  f.add("name", "'t'");
  f.add("dim", dim);
  f.add_real("learning_rate", lr);
  f.add("features[0].pooling", pooling, "feature 0 ('c') pooling");
  f.add_hash("layout", static_cast<uint64_t>(dim) * 7);
  return f;
}

TEST(ConfigFields, RoundTripAndFingerprint) {
  ConfigFields a = table(8, 0.1, "SUM");
  ConfigFields b = ConfigFields::decode(a.encode(), "rank 1");
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(b.fields().size(), 5u);
  EXPECT_EQ(b.fields()[2].value, "0.1");  // shortest exact text
  EXPECT_TRUE(b.fields()[4].hash);
  EXPECT_EQ(b.fields()[3].label, "feature 0 ('c') pooling");
  EXPECT_NE(a.fingerprint(), table(8, 0.1, "MEAN").fingerprint());
  // Values one ulp apart have different texts, hence different prints.
  EXPECT_NE(a.fingerprint(),
            table(8, std::nextafter(0.1, 1.0), "SUM").fingerprint());
}

TEST(ConfigFields, MalformedBytesAreCorrupt) {
  std::string e = table(8, 0.1, "SUM").encode();
  for (size_t cut : {size_t{0}, size_t{3}, e.size() / 2, e.size() - 1}) {
    try {
      ConfigFields::decode(e.substr(0, cut), "rank 2");
      ADD_FAILURE() << "decoded " << cut << " bytes";
    } catch (const hb::Error &err) {
      EXPECT_EQ(err.status(), HB_ERR_CORRUPT);
      EXPECT_NE(std::string(err.what()).find("rank 2"), std::string::npos);
    }
  }
  EXPECT_THROW(ConfigFields::decode(e + "x", "rank 2"), hb::Error);
}

TEST(ConfigFields, DifferencesNameFieldsAndEveryRanksValue) {
  // World 3: rank 1 differs in two fields.
  std::vector<ConfigFields> r = {table(8, 0.1, "SUM"), table(6, 0.1, "SQRTN"),
                                 table(8, 0.1, "SUM")};
  EXPECT_EQ(hb::describe_differences(r),
            "dim: 8 (ranks 0,2) vs 6 (rank 1); feature 0 ('c') pooling: SUM "
            "(ranks 0,2) vs SQRTN (rank 1)");
  // The hash differs too, but named fields say what it hides.
  EXPECT_EQ(hb::describe_differences(r).find("layout"), std::string::npos);
  // Three values, runs of ranks compressed.
  std::vector<ConfigFields> w;
  for (int p = 0; p < 6; ++p)
    w.push_back(table(8, p < 4 ? 0.5 : p == 4 ? 0.25 : 1.0, "SUM"));
  EXPECT_EQ(hb::describe_differences(w),
            "learning_rate: 0.5 (ranks 0-3) vs 0.25 (rank 4) vs 1 (rank 5)");
  EXPECT_EQ(hb::describe_differences({w[0], w[1]}), "");
}

TEST(ConfigFields, HashOnlyWhenNothingNamedDiffers) {
  ConfigFields a, b;
  a.add("dim", int64_t{4});
  b.add("dim", int64_t{4});
  a.add_hash("sharing", 0xab);
  b.add_hash("sharing", 0xcd);
  EXPECT_EQ(hb::describe_differences({a, b}),
            "sharing: 00000000000000ab (rank 0) vs 00000000000000cd (rank 1)");
}

TEST(ConfigFields, MissingFieldsAndLimit) {
  ConfigFields a, b;
  for (int i = 0; i < 12; ++i) {
    a.add("f" + std::to_string(i), int64_t{i});
    b.add("f" + std::to_string(i), int64_t{i + 1});
  }
  b.add("extra", "x");
  std::string d = hb::describe_differences({a, b}, 3);
  EXPECT_EQ(d,
            "f0: 0 (rank 0) vs 1 (rank 1); f1: 1 (rank 0) vs 2 (rank 1); f2: "
            "2 (rank 0) vs 3 (rank 1); and 10 more fields");
  EXPECT_NE(hb::describe_differences({a, b}, 20)
                .find("extra: (none) (rank 0) vs x (rank 1)"),
            std::string::npos);
}

TEST(ConfigFields, CheckSameFieldsGathersOnlyWhenPrintsDiffer) {
  std::vector<ConfigFields> r = {table(8, 0.1, "SUM"), table(8, 0.1, "SUM"),
                                 table(8, 0.2, "SUM")};
  int gathers = 0;
  auto gather = [&](const std::string &) {
    ++gathers;
    std::vector<std::string> all;
    for (const ConfigFields &f : r) all.push_back(f.encode());
    return all;
  };
  std::vector<uint64_t> same(3, r[0].fingerprint());
  hb::check_same_fields(r[0], same, gather, HB_ERR_MISMATCH, "op", "configs");
  EXPECT_EQ(gathers, 0);  // the common path exchanges nothing more
  std::vector<uint64_t> prints;
  for (const ConfigFields &f : r) prints.push_back(f.fingerprint());
  try {
    hb::check_same_fields(r[0], prints, gather, HB_ERR_MISMATCH, "op",
                          "configs");
    ADD_FAILURE() << "no error";
  } catch (const hb::Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_MISMATCH);
    EXPECT_EQ(std::string(e.what()),
              "op: ranks passed different configs (rank 2 differs from rank "
              "0): learning_rate: 0.1 (ranks 0,1) vs 0.2 (rank 2)");
  }
  EXPECT_EQ(gathers, 1);
}

}  // namespace
