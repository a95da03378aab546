// Independent reference implementations for the metric tests: plain,
// obviously-correct code (std::sort, long double, direct transcriptions of
// TensorFlow's Python), sharing nothing with src/metrics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <vector>

namespace ref {

struct Data {
  std::vector<float> labels, preds, weights;
  std::vector<int64_t> groups;
  size_t size() const { return preds.size(); }
  const float *w() const { return weights.empty() ? nullptr : weights.data(); }
};

// Random binary-label data; preds quantized to `levels` values in [0, 1]
// (small levels => many ties); weights (if weighted) random with zeros.
inline Data random_data(size_t n, uint64_t seed, bool weighted,
                        int levels = 1 << 20, int64_t num_groups = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Data d;
  for (size_t i = 0; i < n; ++i) {
    double score = u(rng);
    float label = u(rng) < 0.2 + 0.6 * score ? 1.0f : 0.0f;  // informative
    d.labels.push_back(label);
    d.preds.push_back(static_cast<float>(std::floor(score * levels) / levels));
    if (weighted) {
      double r = u(rng);
      d.weights.push_back(
          r < 0.1 ? 0.0f
                  : static_cast<float>(std::ldexp(u(rng), int(r * 10) - 5)));
    }
    if (num_groups)
      d.groups.push_back(static_cast<int64_t>(rng() % num_groups) -
                         num_groups / 2);
  }
  return d;
}

// Exact AUC by sorting on prediction and giving tied pairs one half:
// sum over positives of w * (negative weight below + half the negative
// weight at the same prediction), divided by P * N.
inline double exact_auc(const std::vector<float> &labels,
                        const std::vector<float> &preds,
                        const std::vector<float> &weights) {
  size_t n = preds.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return preds[a] < preds[b]; });
  auto w = [&](size_t i) -> long double {
    return weights.empty() ? 1.0L : weights[i];
  };
  long double neg_below = 0, area = 0, pos = 0, neg = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    long double p = 0, q = 0;
    while (j < n && preds[idx[j]] == preds[idx[i]]) {
      (labels[idx[j]] != 0 ? p : q) += w(idx[j]);
      ++j;
    }
    area += p * (neg_below + q / 2);
    neg_below += q;
    pos += p;
    neg += q;
    i = j;
  }
  return static_cast<double>(area / (pos * neg));
}

// O(n^2) pair count, for tiny inputs.
inline double brute_auc(const std::vector<float> &labels,
                        const std::vector<float> &preds,
                        const std::vector<float> &weights) {
  long double num = 0, den = 0;
  for (size_t i = 0; i < preds.size(); ++i)
    for (size_t j = 0; j < preds.size(); ++j) {
      if (labels[i] == 0 || labels[j] != 0) continue;
      long double w = (weights.empty() ? 1.0L : weights[i]) *
                      (weights.empty() ? 1.0L : weights[j]);
      den += w;
      if (preds[i] > preds[j]) num += w;
      if (preds[i] == preds[j]) num += w / 2;
    }
  return static_cast<double>(num / den);
}

// tf.compat.v1.metrics.auc transcribed from metrics_impl.py: thresholds as
// float32 constants, confusion counts per threshold from the comparison
// pred > threshold (summed in long double), then compute_auc.
inline double tf_auc(const Data &d, int num_thresholds, bool pr,
                     const char *summation) {
  std::vector<float> thresholds;
  thresholds.push_back(static_cast<float>(0.0 - 1e-7));
  for (int i = 0; i < num_thresholds - 2; ++i)
    thresholds.push_back(
        static_cast<float>((i + 1) * 1.0 / (num_thresholds - 1)));
  thresholds.push_back(static_cast<float>(1.0 + 1e-7));
  size_t t = thresholds.size();
  std::vector<double> tp(t), fn(t), tn(t), fp(t);
  for (size_t k = 0; k < t; ++k) {
    long double a = 0, b = 0, c = 0, e = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      long double w = d.weights.empty() ? 1.0L : d.weights[i];
      bool label = d.labels[i] != 0;
      bool pos = d.preds[i] > thresholds[k];
      if (label && pos) a += w;
      if (label && !pos) b += w;
      if (!label && !pos) c += w;
      if (!label && pos) e += w;
    }
    tp[k] = a, fn[k] = b, tn[k] = c, fp[k] = e;
  }
  auto div_no_nan = [](double x, double y) { return y == 0 ? 0.0 : x / y; };
  std::string sm = summation;
  if (pr && sm == "careful_interpolation") {
    double s = 0;
    for (size_t i = 0; i + 1 < t; ++i) {
      double dtp = tp[i] - tp[i + 1];
      double p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1];
      double slope = div_no_nan(dtp, std::max(p0 - p1, 0.0));
      double intercept = tp[i + 1] - slope * p1;
      double ratio =
          (p0 > 0 && p1 > 0) ? div_no_nan(p0, std::max(p1, 0.0)) : 1.0;
      s += div_no_nan(slope * (dtp + intercept * std::log(ratio)),
                      std::max(tp[i + 1] + fn[i + 1], 0.0));
    }
    return s;
  }
  const double eps = 1e-6;
  std::vector<double> x(t), y(t);
  for (size_t i = 0; i < t; ++i) {
    double rec = (tp[i] + eps) / (tp[i] + fn[i] + eps);
    if (!pr) {
      x[i] = fp[i] / (fp[i] + tn[i] + eps);
      y[i] = rec;
    } else {
      x[i] = rec;
      y[i] = (tp[i] + eps) / (tp[i] + fp[i] + eps);
    }
  }
  double s = 0;
  for (size_t i = 0; i + 1 < t; ++i) {
    double h = sm == "minoring"   ? std::min(y[i], y[i + 1])
               : sm == "majoring" ? std::max(y[i], y[i + 1])
                                  : (y[i] + y[i + 1]) / 2.0;
    s += (x[i] - x[i + 1]) * h;
  }
  return s;
}

// GAUC: exact AUC per group with both classes; weighting 0 unweighted,
// 1 impressions (group weight), 2 clicks (group positive weight).
inline double gauc(const Data &d, int weighting, bool *any_valid = nullptr) {
  std::map<int64_t, Data> by_group;
  for (size_t i = 0; i < d.size(); ++i) {
    Data &g = by_group[d.groups[i]];
    g.labels.push_back(d.labels[i]);
    g.preds.push_back(d.preds[i]);
    g.weights.push_back(d.weights.empty() ? 1.0f : d.weights[i]);
  }
  long double num = 0, den = 0;
  for (auto &kv : by_group) {
    const Data &g = kv.second;
    long double pos = 0, neg = 0;
    for (size_t i = 0; i < g.size(); ++i)
      (g.labels[i] != 0 ? pos : neg) += g.weights[i];
    if (pos == 0 || neg == 0) continue;
    long double w = weighting == 1 ? pos + neg : weighting == 2 ? pos : 1;
    num += w * exact_auc(g.labels, g.preds, g.weights);
    den += w;
  }
  if (any_valid) *any_valid = den > 0;
  return static_cast<double>(num / den);
}

}  // namespace ref
