// Bounded-memory AUC: a histogram of `bins` equal buckets over [0, 1]
// (bucket = floor(pred * bins), 1.0 in the last one) with exact per-class
// weights. Pairs in different buckets are ordered exactly; a positive and a
// negative in the same bucket count one half whatever their order, so
//   |result - exact AUC| <= sum_b P_b * N_b / (2 P N) <= max_b N_b / (2 N)
// (documented in docs/metrics.md and hb.h). Memory: 16 bytes per bin, plus
// 192 bytes per bin once weights are given.
#include <algorithm>

#include "metrics/auc_state.h"
#include "metrics/validate.h"

namespace hb {
namespace metrics {

void BinnedAucState::update(const Batch &b) {
  InputRules rules;
  rules.unit_preds = true;
  validate(b, rules);
  const size_t bins = hist_.buckets();
  const double scale = static_cast<double>(bins);
  hist_.add(b, [bins, scale](float p) {
    return std::min(static_cast<size_t>(static_cast<double>(p) * scale),
                    bins - 1);
  });
}

double BinnedAucState::result(int32_t *flags) const {
  std::vector<double> neg_below = hist_.below(0);
  std::vector<double> pos_below = hist_.below(1);
  size_t bins = hist_.buckets();
  double pos = pos_below[bins], neg = neg_below[bins];
  *flags = HB_METRIC_FLAG_APPROXIMATE;
  if (pos + neg == 0.0) {
    *flags |= HB_METRIC_FLAG_EMPTY;
    return 0.0;
  }
  if (pos == 0.0 || neg == 0.0) {
    *flags |= HB_METRIC_FLAG_SINGLE_CLASS;
    return 0.5;
  }
  double area = 0.0;
  for (size_t b = 0; b < bins; ++b) {
    double pb = hist_.weight_double(1, b);
    double nb = hist_.weight_double(0, b);
    area += pb * (neg_below[b] + 0.5 * nb);
  }
  return area / (pos * neg);
}

double BinnedAucState::error_bound() const {
  size_t bins = hist_.buckets();
  double pos = 0.0, neg = 0.0, ties = 0.0;
  for (size_t b = 0; b < bins; ++b) {
    double pb = hist_.weight_double(1, b);
    double nb = hist_.weight_double(0, b);
    pos += pb;
    neg += nb;
    ties += pb * nb;
  }
  return (pos > 0.0 && neg > 0.0) ? ties / (2.0 * pos * neg) : 0.0;
}

}  // namespace metrics
}  // namespace hb
