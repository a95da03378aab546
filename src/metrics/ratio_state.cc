// Accuracy and mean: a weighted numerator over a weighted denominator, as
// tf.compat.v1.metrics.accuracy / mean define them (accuracy is the mean of
// is_correct = (pred == label)). Unweighted parts are integer counts and
// weighted parts ExactSums, so nothing is ever rounded before the final
// division and merged states give bit-identical results.
#include "metrics/ratio_state.h"

#include <algorithm>
#include <cmath>

#include "metrics/validate.h"

namespace hb {
namespace metrics {
namespace {

// Counts pred == label with a 32-bit inner counter (so the loop vectorizes).
uint64_t count_equal(const float *preds, const float *labels, size_t n) {
  uint64_t hits = 0;
  for (size_t begin = 0; begin < n; begin += (size_t(1) << 30)) {
    size_t end = std::min(n, begin + (size_t(1) << 30));
    uint32_t c = 0;
    for (size_t i = begin; i < end; ++i) c += preds[i] == labels[i];
    hits += c;
  }
  return hits;
}

uint64_t count_equal_thresholded(const float *preds, const float *labels,
                                 size_t n, float thr) {
  uint64_t hits = 0;
  for (size_t begin = 0; begin < n; begin += (size_t(1) << 30)) {
    size_t end = std::min(n, begin + (size_t(1) << 30));
    uint32_t c = 0;
    for (size_t i = begin; i < end; ++i)
      c += (preds[i] > thr ? 1.0f : 0.0f) == labels[i];
    hits += c;
  }
  return hits;
}

// The float32 threshold t such that (float)p > t  <=>  (double)p > threshold
// for every float p: the largest float <= threshold.
float float_threshold(double threshold) {
  float t = static_cast<float>(threshold);
  if (static_cast<double>(t) > threshold) t = std::nextafter(t, -1.0f);
  return t;
}

}  // namespace

RatioState::RatioState(const Config &cfg)
    : accuracy_(cfg.kind == HB_METRIC_ACCURACY),
      thresholded_(cfg.threshold >= 0.0),
      threshold_(float_threshold(cfg.threshold)) {}

void RatioState::update(const Batch &b) {
  InputRules rules;
  rules.labels = accuracy_;
  validate(b, rules);
  if (b.n == 0) return;
  if (!b.weights) {
    count_ += b.n;
    if (!accuracy_) {
      for (size_t i = 0; i < b.n; ++i) numer_.add(b.preds[i]);
    } else if (thresholded_) {
      hits_ += count_equal_thresholded(b.preds, b.labels, b.n, threshold_);
    } else {
      hits_ += count_equal(b.preds, b.labels, b.n);
    }
    return;
  }
  for (size_t i = 0; i < b.n; ++i) {
    float w = b.weights[i];
    wsum_.add(w);
    if (!accuracy_) {
      numer_.add(b.preds[i] * w);  // float32 product, as TF's values * weights
    } else {
      float p =
          thresholded_ ? (b.preds[i] > threshold_ ? 1.0f : 0.0f) : b.preds[i];
      if (p == b.labels[i]) numer_.add(w);
    }
  }
}

void RatioState::reset() {
  count_ = hits_ = 0;
  wsum_ = ExactSum();
  numer_ = ExactSum();
}

void RatioState::write_payload(Writer &w) const {
  w.u64(count_);
  w.u64(hits_);
  w.sum(wsum_);
  w.sum(numer_);
}

void RatioState::merge_payload(Reader &r) {
  uint64_t count = r.u64();
  uint64_t hits = r.u64();
  ExactSum wsum, numer;
  r.sum(&wsum);
  r.sum(&numer);
  count_ += count;
  hits_ += hits;
  wsum_.add(wsum);
  numer_.add(numer);
}

double RatioState::result(int32_t *flags) const {
  ExactSum den = wsum_;
  den.add_count(count_);
  ExactSum num = numer_;
  num.add_count(hits_);
  double d = den.to_double();
  *flags = 0;
  if (!(d > 0.0)) {  // TF: div_no_nan(total, max(count, 0))
    *flags = HB_METRIC_FLAG_EMPTY;
    return 0.0;
  }
  return num.to_double() / d;
}

}  // namespace metrics
}  // namespace hb
