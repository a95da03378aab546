// Accuracy and mean, as tf.compat.v1.metrics.accuracy / mean define them.
#include <gtest/gtest.h>

#include "metric_helpers.h"

using namespace testing_metrics;

TEST(Accuracy, CountsPredictionsEqualToLabels) {
  ref::Data d;
  d.labels = {1, 0, 1, 0, 1};
  d.preds = {1, 0, 0.9f, 1, 1};  // 3 equal
  EXPECT_DOUBLE_EQ(api_result(config(HB_METRIC_ACCURACY), d), 3.0 / 5.0);
  d.weights = {1, 2, 3, 4, 0.5f};  // correct: 1 + 2 + 0.5 of 10.5
  EXPECT_DOUBLE_EQ(api_result(config(HB_METRIC_ACCURACY), d), 3.5 / 10.5);
}

TEST(Accuracy, ThresholdsProbabilitiesFirst) {
  ref::Data d;
  d.labels = {1, 0, 1, 0, 1, 0};
  d.preds = {0.9f, 0.1f, 0.5f, 0.5f, 0.51f, 0.7f};
  hb_metric_config c = config(HB_METRIC_ACCURACY);
  c.threshold =
      0.5;  // pred > 0.5 -> 1: {1,0,0,0,1,1} vs labels: 4 of 6 correct
  EXPECT_DOUBLE_EQ(api_result(c, d), 4.0 / 6.0);
  c.threshold = 0.0;  // everything but exact zeros -> 1
  EXPECT_DOUBLE_EQ(api_result(c, d), 3.0 / 6.0);
}

TEST(Mean, WeightedMeanOfPredictions) {
  ref::Data d = ref::random_data(10000, 3, true);
  long double num = 0, den = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    num += static_cast<float>(d.preds[i] *
                              d.weights[i]);  // TF multiplies in float32
    den += d.weights[i];
  }
  EXPECT_NEAR(api_result(config(HB_METRIC_MEAN), d),
              static_cast<double>(num / den), 1e-15);
  d.weights.clear();
  long double s = 0;
  for (float p : d.preds) s += p;
  EXPECT_NEAR(api_result(config(HB_METRIC_MEAN), d),
              static_cast<double>(s / d.size()), 1e-15);
}

TEST(Mean, LabelsMayBeNull) {
  hb_metric_config c = config(HB_METRIC_MEAN);
  hb_metric *m = nullptr;
  ASSERT_EQ(hb_metric_create(nullptr, &c, &m), HB_OK);
  float p[3] = {1, 2, 6};
  ASSERT_EQ(hb_metric_update(m, nullptr, p, nullptr, 3), HB_OK)
      << hb_last_error();
  double out = 0;
  ASSERT_EQ(hb_metric_result(m, &out), HB_OK);
  EXPECT_DOUBLE_EQ(out, 3.0);
  ASSERT_EQ(hb_metric_reset(m), HB_OK);
  ASSERT_EQ(hb_metric_result(m, &out), HB_OK);
  EXPECT_EQ(out, 0.0);
  EXPECT_EQ(hb_metric_flags(m), HB_METRIC_FLAG_EMPTY);
  hb_metric_destroy(m);
}
