// Bad input: a status and a message naming what was wrong, and the state
// unchanged; degenerate input: a documented value and a flag.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "metric_helpers.h"

using namespace testing_metrics;

namespace {

void expect_error(hb_status st, hb_status want, const char *needle) {
  EXPECT_EQ(st, want) << hb_last_error();
  EXPECT_NE(std::string(hb_last_error()).find(needle), std::string::npos)
      << "'" << hb_last_error() << "' lacks '" << needle << "'";
}

}  // namespace

TEST(MetricErrors, BadSamplesNameTheIndex) {
  for (int kind = HB_METRIC_ACCURACY; kind <= HB_METRIC_AUC_EXACT; ++kind) {
    hb_metric_config c = config(kind);
    hb_metric *m = nullptr;
    ASSERT_EQ(hb_metric_create(nullptr, &c, &m), HB_OK);
    float l[4] = {0, 1, 0, 1}, p[4] = {0.1f, 0.2f, 0.3f, 0.4f},
          w[4] = {1, 1, 1, 1};
    ASSERT_EQ(hb_metric_update(m, l, p, w, 4), HB_OK);
    double before = 0, after = 0;
    ASSERT_EQ(hb_metric_result(m, &before), HB_OK);
    if (kind != HB_METRIC_MEAN) {
      l[2] = 1.5f;
      expect_error(hb_metric_update(m, l, p, w, 4), HB_ERR_INVALID_ARGUMENT,
                   "labels[2]");
      l[2] = -0.5f;
      expect_error(hb_metric_update(m, l, p, w, 4), HB_ERR_INVALID_ARGUMENT,
                   "labels[2]");
      l[2] = NAN;
      expect_error(hb_metric_update(m, l, p, w, 4), HB_ERR_INVALID_ARGUMENT,
                   "labels[2]");
      l[2] = 0;
      expect_error(hb_metric_update(m, nullptr, p, w, 4),
                   HB_ERR_INVALID_ARGUMENT, "labels");
    }
    p[3] = NAN;
    expect_error(hb_metric_update(m, l, p, w, 4), HB_ERR_INVALID_ARGUMENT,
                 "preds[3]");
    p[3] = INFINITY;
    expect_error(hb_metric_update(m, l, p, w, 4), HB_ERR_INVALID_ARGUMENT,
                 "preds[3]");
    p[3] = 0.4f;
    w[1] = -1.0f;
    expect_error(hb_metric_update(m, l, p, w, 4), HB_ERR_INVALID_ARGUMENT,
                 "weights[1]");
    w[1] = NAN;
    expect_error(hb_metric_update(m, l, p, w, 4), HB_ERR_INVALID_ARGUMENT,
                 "weights[1]");
    expect_error(hb_metric_update(m, l, nullptr, nullptr, 4),
                 HB_ERR_INVALID_ARGUMENT, "preds");
    EXPECT_EQ(hb_metric_update(m, nullptr, nullptr, nullptr, 0),
              HB_OK);  // n = 0 is fine
    ASSERT_EQ(hb_metric_result(m, &after), HB_OK);
    EXPECT_EQ(before, after) << "a rejected batch changed kind " << kind;
    hb_metric_destroy(m);
  }
}

TEST(MetricErrors, ProbabilityMetricsRejectPredsOutsideUnitInterval) {
  hb_metric_config a = config(HB_METRIC_AUC), b = config(HB_METRIC_AUC_EXACT);
  b.bins = 100;
  for (hb_metric_config c : {a, b}) {
    hb_metric *m = nullptr;
    ASSERT_EQ(hb_metric_create(nullptr, &c, &m), HB_OK);
    float l[3] = {0, 1, 0}, p[3] = {0.1f, 1.0001f, 0.3f};
    expect_error(hb_metric_update(m, l, p, nullptr, 3), HB_ERR_INVALID_ARGUMENT,
                 "preds[1]");
    p[1] = -0.0001f;
    expect_error(hb_metric_update(m, l, p, nullptr, 3), HB_ERR_INVALID_ARGUMENT,
                 "preds[1]");
    hb_metric_destroy(m);
  }
}

TEST(MetricErrors, BadConfigAndCalls) {
  hb_metric *m = nullptr;
  hb_metric_config c = config(99);
  expect_error(hb_metric_create(nullptr, &c, &m), HB_ERR_INVALID_ARGUMENT,
               "kind");
  EXPECT_EQ(m, nullptr);
  c = config(HB_METRIC_AUC);
  c.num_thresholds = 1;
  expect_error(hb_metric_create(nullptr, &c, &m), HB_ERR_INVALID_ARGUMENT,
               "num_thresholds");
  c = config(HB_METRIC_AUC);
  c.summation = 7;
  expect_error(hb_metric_create(nullptr, &c, &m), HB_ERR_INVALID_ARGUMENT,
               "summation");
  c = config(HB_METRIC_AUC);
  c.curve = 2;
  expect_error(hb_metric_create(nullptr, &c, &m), HB_ERR_INVALID_ARGUMENT,
               "curve");
  c = config(HB_METRIC_AUC_EXACT);
  c.bins = -1;
  expect_error(hb_metric_create(nullptr, &c, &m), HB_ERR_INVALID_ARGUMENT,
               "bins");
  c = config(HB_METRIC_GAUC);
  c.gauc_weighting = 3;
  expect_error(hb_metric_create(nullptr, &c, &m), HB_ERR_INVALID_ARGUMENT,
               "gauc_weighting");
  c = config(HB_METRIC_ACCURACY);
  c.struct_size = 4;
  expect_error(hb_metric_create(nullptr, &c, &m), HB_ERR_INVALID_ARGUMENT,
               "struct_size");
  expect_error(hb_metric_create(nullptr, nullptr, nullptr),
               HB_ERR_INVALID_ARGUMENT, "out");

  // NULL config: the defaults (thresholded ROC AUC, 200 thresholds).
  ASSERT_EQ(hb_metric_create(nullptr, nullptr, &m), HB_OK);
  float l[2] = {0, 1}, p[2] = {0.2f, 0.8f};
  int64_t g[2] = {1, 1};
  expect_error(hb_metric_update_grouped(m, l, p, nullptr, g, 2),
               HB_ERR_INVALID_ARGUMENT, "GAUC");
  hb_metric_destroy(m);
  c = config(HB_METRIC_GAUC);
  ASSERT_EQ(hb_metric_create(nullptr, &c, &m), HB_OK);
  expect_error(hb_metric_update(m, l, p, nullptr, 2), HB_ERR_INVALID_ARGUMENT,
               "group");
  expect_error(hb_metric_update_grouped(m, l, p, nullptr, nullptr, 2),
               HB_ERR_INVALID_ARGUMENT, "groups");
  expect_error(hb_metric_result(m, nullptr), HB_ERR_INVALID_ARGUMENT, "out");
  hb_metric_destroy(m);
  double out;
  expect_error(hb_metric_update(nullptr, l, p, nullptr, 2),
               HB_ERR_INVALID_ARGUMENT, "metric");
  expect_error(hb_metric_result(nullptr, &out), HB_ERR_INVALID_ARGUMENT,
               "metric");
  EXPECT_EQ(hb_metric_flags(nullptr), 0);
  hb_metric_destroy(nullptr);
}

TEST(MetricDegenerate, SingleClassAndEmpty) {
  hb_metric_config binned = config(HB_METRIC_AUC_EXACT);
  binned.bins = 64;
  for (hb_metric_config c :
       {config(HB_METRIC_AUC), config(HB_METRIC_AUC_EXACT), binned}) {
    int32_t flags = 0;
    ref::Data d;
    EXPECT_EQ(api_result(c, d, &flags), 0.0);
    EXPECT_TRUE(flags & HB_METRIC_FLAG_EMPTY);
    d.labels = {1, 1, 1};
    d.preds = {0.1f, 0.5f, 0.9f};
    EXPECT_EQ(api_result(c, d, &flags), 0.5);
    EXPECT_TRUE(flags & HB_METRIC_FLAG_SINGLE_CLASS);
    d.labels = {0, 0, 0};
    EXPECT_EQ(api_result(c, d, &flags), 0.5);
    EXPECT_TRUE(flags & HB_METRIC_FLAG_SINGLE_CLASS);
    // Zero weights mask samples: a masked class does not count.
    d.labels = {0, 1, 0};
    d.weights = {1, 0, 1};
    EXPECT_EQ(api_result(c, d, &flags), 0.5);
    EXPECT_TRUE(flags & HB_METRIC_FLAG_SINGLE_CLASS);
    EXPECT_FALSE(std::isnan(api_result(c, d)));
  }
}
