// Merging serialized states: for every kind, splitting the samples k ways
// (some parts empty), accumulating each part separately and merging the
// bytes gives the single-process result bit for bit.
#include <gtest/gtest.h>

#include "metric_helpers.h"

using namespace testing_metrics;

namespace {

struct Case {
  const char *name;
  hb_metric_config cfg;
  bool groups;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"accuracy", config(HB_METRIC_ACCURACY), false});
  hb_metric_config acc_t = config(HB_METRIC_ACCURACY);
  acc_t.threshold = 0.5;
  v.push_back({"accuracy_threshold", acc_t, false});
  v.push_back({"mean", config(HB_METRIC_MEAN), false});
  for (int curve : {HB_CURVE_ROC, HB_CURVE_PR})
    for (int sm = 0; sm < 4; ++sm) {
      hb_metric_config c = config(HB_METRIC_AUC);
      c.curve = curve;
      c.summation = sm;
      v.push_back({"auc", c, false});
    }
  v.push_back({"auc_exact", config(HB_METRIC_AUC_EXACT), false});
  hb_metric_config binned = config(HB_METRIC_AUC_EXACT);
  binned.bins = 4096;
  v.push_back({"auc_binned", binned, false});
  for (int wt = 0; wt < 3; ++wt) {
    hb_metric_config c = config(HB_METRIC_GAUC);
    c.gauc_weighting = wt;
    v.push_back({"gauc", c, true});
  }
  return v;
}

}  // namespace

TEST(Merge, BitIdenticalWhateverTheSplit) {
  for (const Case &c : cases())
    for (bool weighted : {false, true}) {
      ref::Data d =
          ref::random_data(7000, 42, weighted, 1000, c.groups ? 200 : 0);
      // Accuracy needs some predictions equal to labels.
      if (c.cfg.kind == HB_METRIC_ACCURACY)
        for (size_t i = 0; i < d.size(); i += 3) d.preds[i] = d.labels[i];
      int32_t f1 = 0;
      double single = merged_result(c.cfg, d, 1, 1, &f1);
      EXPECT_NEAR(single, api_result(c.cfg, d), 0.0) << c.name;
      for (int k = 2; k <= 4; ++k)
        for (uint64_t seed : {1, 2, 3}) {
          int32_t fk = 0;
          double split = merged_result(c.cfg, d, k, seed * 10 + k, &fk);
          EXPECT_TRUE(same_bits(single, split))
              << c.name << " weighted=" << weighted << " k=" << k << ": "
              << single << " vs " << split;
          EXPECT_EQ(f1, fk);
        }
    }
}

TEST(Merge, EmptyRanksAndAllEmpty) {
  ref::Data none;
  for (const Case &c : cases()) {
    int32_t flags = 0;
    EXPECT_EQ(merged_result(c.cfg, none, 4, 5, &flags), 0.0) << c.name;
    EXPECT_TRUE(flags & HB_METRIC_FLAG_EMPTY) << c.name;
  }
}

TEST(Merge, ConfigMismatchAndCorruptBytes) {
  using namespace hb::metrics;
  hb_metric_config a = config(HB_METRIC_AUC), b = config(HB_METRIC_AUC);
  b.num_thresholds = 100;
  Config ca = config_from_public(&a), cb = config_from_public(&b);
  auto sa = make_state(ca), sb = make_state(cb);
  float l[2] = {0, 1}, p[2] = {0.2f, 0.8f};
  sb->update({l, p, nullptr, nullptr, 2});
  Bytes bytes = serialize(cb, *sb);
  try {
    merge_serialized(ca, sa.get(), bytes.data(), bytes.size(), "rank 3");
    FAIL() << "mismatch accepted";
  } catch (const hb::Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("num_thresholds"), std::string::npos)
        << e.what();
  }
  bytes = serialize(ca, *sa);
  for (size_t cut :
       {size_t(0), size_t(3), bytes.size() / 2, bytes.size() - 1}) {
    auto fresh = make_state(ca);
    try {
      merge_serialized(ca, fresh.get(), bytes.data(), cut, "rank 1");
      FAIL() << "truncated state accepted at " << cut;
    } catch (const hb::Error &e) {
      EXPECT_EQ(e.status(), HB_ERR_CORRUPT) << e.what();
    }
  }
  // An exact-AUC payload claiming more keys than the bytes hold.
  hb_metric_config x = config(HB_METRIC_AUC_EXACT);
  Config cx = config_from_public(&x);
  auto sx = make_state(cx);
  sx->update({l, p, nullptr, nullptr, 2});
  bytes = serialize(cx, *sx);
  bytes[bytes.size() - 16 - 8] = 0xff;  // the key count's low byte
  auto fresh = make_state(cx);
  EXPECT_THROW(
      merge_serialized(cx, fresh.get(), bytes.data(), bytes.size(), "rank 2"),
      hb::Error);
}
