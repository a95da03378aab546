// Thresholded, exact, bounded-memory and grouped AUC against the
// independent references in reference.h.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "metric_helpers.h"
#include "metrics/auc_state.h"

using namespace testing_metrics;

namespace {

const char *kSummations[] = {"trapezoidal", "careful_interpolation", "minoring",
                             "majoring"};

// Data that hits TF's edge cases: predictions exactly 0, 1 and exactly on
// the float32 thresholds.
ref::Data edge_data(int num_thresholds, bool weighted, uint64_t seed) {
  ref::Data d = ref::random_data(3000, seed, weighted);
  for (size_t i = 0; i < d.size(); i += 7) {
    int k = static_cast<int>(i % num_thresholds);
    d.preds[i] =
        k == 0 ? 0.0f : static_cast<float>(k * 1.0 / (num_thresholds - 1));
    if (i % 5 == 0) d.preds[i] = 1.0f;
  }
  return d;
}

}  // namespace

TEST(ThresholdAuc, MatchesTfTranscription) {
  for (int t : {2, 3, 200, 1001})
    for (int curve : {HB_CURVE_ROC, HB_CURVE_PR})
      for (int sm = 0; sm < 4; ++sm)
        for (bool weighted : {false, true}) {
          ref::Data d = edge_data(t, weighted, 11 + t);
          hb_metric_config c = config(HB_METRIC_AUC);
          c.num_thresholds = t;
          c.curve = curve;
          c.summation = sm;
          double want =
              ref::tf_auc(d, t, curve == HB_CURVE_PR, kSummations[sm]);
          double got = api_result(c, d);
          EXPECT_NEAR(got, want, 1e-12)
              << "T=" << t << " curve=" << curve << " " << kSummations[sm]
              << " weighted=" << weighted;
        }
}

TEST(ThresholdAuc, HandComputedValue) {
  // num_thresholds = 3: thresholds -1e-7, 0.5, 1+1e-7. Positives at 0.9 and
  // 0.5 (0.5 is not > 0.5), negatives at 0.2 and 0.7.
  ref::Data d;
  d.labels = {1, 1, 0, 0};
  d.preds = {0.9f, 0.5f, 0.2f, 0.7f};
  hb_metric_config c = config(HB_METRIC_AUC);
  c.num_thresholds = 3;
  // tp = [2,1,0] fn = [0,1,2] fp = [2,1,0] tn = [0,1,2]
  const double e = 1e-6;
  double rec[3] = {(2 + e) / (2 + e), (1 + e) / (2 + e), (0 + e) / (2 + e)};
  double fpr[3] = {2 / (2 + e), 1 / (2 + e), 0 / (2 + e)};
  double want = (fpr[0] - fpr[1]) * (rec[0] + rec[1]) / 2 +
                (fpr[1] - fpr[2]) * (rec[1] + rec[2]) / 2;
  EXPECT_NEAR(api_result(c, d), want, 1e-15);
}

TEST(ThresholdAuc, BucketCountsStayExactPast2To24) {
  hb_metric_config pub = config(HB_METRIC_AUC);
  hb::metrics::Config cfg = hb::metrics::config_from_public(&pub);
  hb::metrics::ThresholdAucState s(cfg);
  std::vector<float> labels(1 << 20, 1.0f), preds(1 << 20, 0.75f);
  for (int i = 0; i < 17; ++i)
    s.update({labels.data(), preds.data(), nullptr, nullptr, labels.size()});
  s.update({labels.data(), preds.data(), nullptr, nullptr, 5});
  labels[0] = 0.0f;
  preds[0] = 0.25f;
  s.update({labels.data(), preds.data(), nullptr, nullptr, 1});
  // 17 * 2^20 + 5 positives share one bucket; TF's float32 counter would
  // have stopped at 2^24. With exact counts the ROC AUC is exactly the
  // TF formula over tp = P above 0.75's bucket.
  ref::Data d;
  d.labels = {1.0f, 0.0f};
  d.preds = {0.75f, 0.25f};
  d.weights = {17.0f * (1 << 20) + 5.0f, 1.0f};
  double want = ref::tf_auc(d, 200, false, "trapezoidal");
  int32_t flags = 0;
  EXPECT_DOUBLE_EQ(s.result(&flags), want);
}

TEST(ExactAuc, MatchesSortingReferenceAndBruteForce) {
  for (bool weighted : {false, true})
    for (int levels : {4, 100, 1 << 22}) {
      ref::Data d = ref::random_data(5000, levels, weighted, levels);
      double want = ref::exact_auc(d.labels, d.preds, d.weights);
      EXPECT_NEAR(api_result(config(HB_METRIC_AUC_EXACT), d), want, 1e-12)
          << "weighted=" << weighted << " levels=" << levels;
      ref::Data small = ref::random_data(300, levels + 1, weighted, levels);
      EXPECT_NEAR(api_result(config(HB_METRIC_AUC_EXACT), small),
                  ref::brute_auc(small.labels, small.preds, small.weights),
                  1e-12);
    }
  // Negative and large predictions are fine for the exact AUC (scores).
  ref::Data d;
  d.labels = {0, 1, 0, 1, 1};
  d.preds = {-3.0f, 1e20f, -0.0f, 0.0f, -1e20f};
  EXPECT_NEAR(api_result(config(HB_METRIC_AUC_EXACT), d),
              ref::brute_auc(d.labels, d.preds, d.weights), 1e-15);
}

TEST(ExactAuc, MatchesSklearn) {
  const char *script = HB_METRICS_TEST_DIR "/sklearn_auc.py";
  std::vector<ref::Data> sets;
  std::string cmd = "/usr/bin/python3 " + std::string(script);
  for (bool weighted : {false, true})
    for (int64_t groups : {int64_t(0), int64_t(40)}) {
      sets.push_back(
          ref::random_data(4000, 99 + weighted, weighted, 50, groups));
      const ref::Data &d = sets.back();
      std::string path = testing::TempDir() + "hb_sklearn_auc_" +
                         std::to_string(sets.size()) + ".bin";
      FILE *f = fopen(path.c_str(), "wb");
      ASSERT_TRUE(f);
      for (size_t i = 0; i < d.size(); ++i) {
        float row[3] = {d.labels[i], d.preds[i],
                        weighted ? d.weights[i] : 1.0f};
        double g = groups ? static_cast<double>(d.groups[i]) : 0.0;
        fwrite(row, sizeof row, 1, f);
        fwrite(&g, sizeof g, 1, f);
      }
      fclose(f);
      cmd += " " + path;
    }
  FILE *p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::vector<std::array<double, 4>> want(sets.size());
  int got_lines = 0;
  for (auto &w : want)
    got_lines += fscanf(p, "%lf %lf %lf %lf", &w[0], &w[1], &w[2], &w[3]) == 4;
  int status = pclose(p);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
    GTEST_SKIP() << "python3-sklearn is not installed";
  ASSERT_EQ(status, 0);
  ASSERT_EQ(got_lines, static_cast<int>(sets.size()));
  for (size_t s = 0; s < sets.size(); ++s) {
    EXPECT_NEAR(api_result(config(HB_METRIC_AUC_EXACT), sets[s]), want[s][0],
                1e-12)
        << "set " << s;
    if (sets[s].groups.empty()) continue;
    for (int wt = 0; wt < 3; ++wt) {
      hb_metric_config c = config(HB_METRIC_GAUC);
      c.gauc_weighting = wt;
      EXPECT_NEAR(api_result(c, sets[s]), want[s][wt + 1], 1e-12)
          << "set " << s << " weighting " << wt;
    }
  }
}

TEST(BinnedAuc, WithinItsDocumentedBound) {
  for (int64_t bins : {1, 10, 1000, 100000})
    for (bool weighted : {false, true}) {
      ref::Data d = ref::random_data(20000, bins, weighted);
      hb_metric_config c = config(HB_METRIC_AUC_EXACT);
      c.bins = bins;
      int32_t flags = 0;
      double got = api_result(c, d, &flags);
      EXPECT_EQ(flags, HB_METRIC_FLAG_APPROXIMATE);
      // The bound, computed here from scratch: sum_b P_b N_b / (2 P N).
      std::vector<long double> pb(bins), nb(bins);
      long double pos = 0, neg = 0;
      for (size_t i = 0; i < d.size(); ++i) {
        int64_t b = std::min<int64_t>(
            static_cast<int64_t>(static_cast<double>(d.preds[i]) * bins),
            bins - 1);
        long double w = weighted ? d.weights[i] : 1.0L;
        (d.labels[i] != 0 ? pb[b] : nb[b]) += w;
        (d.labels[i] != 0 ? pos : neg) += w;
      }
      long double ties = 0;
      for (int64_t b = 0; b < bins; ++b) ties += pb[b] * nb[b];
      double bound = static_cast<double>(ties / (2 * pos * neg));
      double exact = ref::exact_auc(d.labels, d.preds, d.weights);
      EXPECT_LE(std::fabs(got - exact), bound + 1e-12) << "bins=" << bins;
      if (bins == 1) EXPECT_DOUBLE_EQ(got, 0.5);
    }
}

TEST(Gauc, MatchesReferenceForEachWeighting) {
  for (bool weighted : {false, true})
    for (int wt = 0; wt < 3; ++wt) {
      ref::Data d = ref::random_data(6000, 5 + wt, weighted, 30, 300);
      hb_metric_config c = config(HB_METRIC_GAUC);
      c.gauc_weighting = wt;
      int32_t flags = -1;
      EXPECT_NEAR(api_result(c, d, &flags), ref::gauc(d, wt), 1e-12)
          << "weighted=" << weighted << " weighting=" << wt;
      EXPECT_EQ(flags, 0);
    }
}

TEST(Gauc, GroupsWithOneClassAreSkipped) {
  ref::Data d;
  d.labels = {1, 0, 1, 1, 0, 0, 1};
  d.preds = {0.9f, 0.1f, 0.2f, 0.3f, 0.5f, 0.6f, 0.4f};
  d.groups = {7, 7, 8, 8, 9, 9, -7};  // group 7 AUC 1; 8, 9, -7 single-class
  EXPECT_DOUBLE_EQ(api_result(config(HB_METRIC_GAUC), d), 1.0);
  d.groups = {1, 2, 3, 3, 4, 4, 5};
  d.labels = {1, 0, 1, 1, 0, 0, 1};
  int32_t flags = 0;
  EXPECT_DOUBLE_EQ(api_result(config(HB_METRIC_GAUC), d, &flags), 0.5);
  EXPECT_EQ(flags, HB_METRIC_FLAG_SINGLE_CLASS);
}
