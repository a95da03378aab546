// tf.compat.v1.metrics.auc, reproduced from TensorFlow's metrics_impl.py:
// the same float32 thresholds, the same comparison (pred > threshold), the
// same epsilons and summation rules. Unlike TF the confusion counts are
// exact (a histogram of uint64 counts / ExactSums instead of float32
// variables updated with a batch x thresholds matrix), and the final
// formulas run in float64.
#include <algorithm>
#include <cmath>

#include "metrics/auc_state.h"
#include "metrics/validate.h"

namespace hb {
namespace metrics {
namespace {

// TF's math_ops.div_no_nan.
inline double div_no_nan(double x, double y) { return y == 0.0 ? 0.0 : x / y; }

struct Confusion {
  std::vector<double> tp, fn, tn, fp;
};

// TF's interpolate_pr_auc (careful_interpolation for the PR curve).
double interpolate_pr_auc(const Confusion &c) {
  size_t t = c.tp.size();
  double sum = 0.0;
  for (size_t i = 0; i + 1 < t; ++i) {
    double dtp = c.tp[i] - c.tp[i + 1];
    double p0 = c.tp[i] + c.fp[i];
    double p1 = c.tp[i + 1] + c.fp[i + 1];
    double prec_slope = div_no_nan(dtp, std::max(p0 - p1, 0.0));
    double intercept = c.tp[i + 1] - prec_slope * p1;
    double safe_p_ratio =
        (p0 > 0.0 && p1 > 0.0) ? div_no_nan(p0, std::max(p1, 0.0)) : 1.0;
    sum += div_no_nan(prec_slope * (dtp + intercept * std::log(safe_p_ratio)),
                      std::max(c.tp[i + 1] + c.fn[i + 1], 0.0));
  }
  return sum;
}

// TF's compute_auc.
double compute_auc(const Confusion &c, int32_t curve, int32_t summation) {
  const double epsilon = 1.0e-6;
  if (curve == HB_CURVE_PR && summation == HB_SUMMATION_CAREFUL_INTERPOLATION)
    return interpolate_pr_auc(c);
  size_t t = c.tp.size();
  std::vector<double> x(t), y(t);
  for (size_t i = 0; i < t; ++i) {
    double rec = (c.tp[i] + epsilon) / (c.tp[i] + c.fn[i] + epsilon);
    if (curve == HB_CURVE_ROC) {
      x[i] = c.fp[i] / (c.fp[i] + c.tn[i] + epsilon);
      y[i] = rec;
    } else {
      x[i] = rec;
      y[i] = (c.tp[i] + epsilon) / (c.tp[i] + c.fp[i] + epsilon);
    }
  }
  double sum = 0.0;
  for (size_t i = 0; i + 1 < t; ++i) {
    double height;
    switch (summation) {
      case HB_SUMMATION_MINORING:
        height = std::min(y[i], y[i + 1]);
        break;
      case HB_SUMMATION_MAJORING:
        height = std::max(y[i], y[i + 1]);
        break;
      default:
        height = (y[i] + y[i + 1]) / 2.0;
        break;  // trapezoidal, careful
    }
    sum += (x[i] - x[i + 1]) * height;
  }
  return sum;
}

}  // namespace

ThresholdAucState::ThresholdAucState(const Config &cfg)
    : cfg_(cfg),
      scale_(static_cast<float>(cfg.num_thresholds - 1)),
      hist_(static_cast<size_t>(cfg.num_thresholds) + 1) {
  const double kepsilon = 1e-7;
  int32_t t = cfg.num_thresholds;
  // Python floats rounded to float32 by array_ops.constant, as in TF.
  thresholds_.push_back(static_cast<float>(0.0 - kepsilon));
  for (int32_t i = 0; i < t - 2; ++i)
    thresholds_.push_back(static_cast<float>((i + 1) * 1.0 / (t - 1)));
  thresholds_.push_back(static_cast<float>(1.0 + kepsilon));
}

size_t ThresholdAucState::bucket_of(float pred) const {
  const float *t = thresholds_.data();
  size_t n = thresholds_.size();
  // Thresholds are (nearly) i / (T - 1): guess, then step to the exact count
  // of thresholds below pred (usually zero or one step).
  size_t g = static_cast<size_t>(pred * scale_);
  if (g > n) g = n;
  while (g < n && t[g] < pred) ++g;
  while (g > 0 && t[g - 1] >= pred) --g;
  return g;
}

void ThresholdAucState::update(const Batch &b) {
  InputRules rules;
  rules.unit_preds = true;  // TF asserts predictions in [0, 1]
  validate(b, rules);
  hist_.add(b, [this](float p) { return bucket_of(p); });
}

double ThresholdAucState::result(int32_t *flags) const {
  // Bucket k holds the samples with exactly k thresholds below them, so
  // "pred > thresholds[i]" is "bucket > i".
  std::vector<double> pos_above = hist_.above(1), pos_below = hist_.below(1);
  std::vector<double> neg_above = hist_.above(0), neg_below = hist_.below(0);
  size_t t = thresholds_.size();
  double pos = pos_below[t + 1], neg = neg_below[t + 1];
  *flags = 0;
  if (pos + neg == 0.0) {
    *flags = HB_METRIC_FLAG_EMPTY;
    return 0.0;
  }
  if (pos == 0.0 || neg == 0.0) {
    *flags = HB_METRIC_FLAG_SINGLE_CLASS;
    return 0.5;
  }
  Confusion c;
  for (size_t i = 0; i < t; ++i) {
    c.tp.push_back(pos_above[i + 1]);
    c.fn.push_back(pos_below[i + 1]);
    c.fp.push_back(neg_above[i + 1]);
    c.tn.push_back(neg_below[i + 1]);
  }
  return compute_auc(c, cfg_.curve, cfg_.summation);
}

}  // namespace metrics
}  // namespace hb
