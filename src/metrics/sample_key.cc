#include "metrics/sample_key.h"

namespace hb {
namespace metrics {

void append_sample_keys(const Batch &b, BigVector<uint64_t> *out) {
  size_t at = out->size();
  out->resize(at + b.n);
  uint64_t *k = out->data() + at;
  size_t m = 0;
  if (!b.weights) {
    for (size_t i = 0; i < b.n; ++i)
      k[i] = sample_key(b.preds[i], b.labels[i] != 0.0f, 1.0f);
    m = b.n;
  } else {
    for (size_t i = 0; i < b.n; ++i) {
      k[m] = sample_key(b.preds[i], b.labels[i] != 0.0f, b.weights[i]);
      m += b.weights[i] != 0.0f;
    }
  }
  out->resize(at + m);
}

double AucSweep::finish(int32_t *flags) const {
  *flags = 0;
  if (pos + neg == 0.0) {
    *flags = HB_METRIC_FLAG_EMPTY;
    return 0.0;
  }
  if (!both_classes()) {
    *flags = HB_METRIC_FLAG_SINGLE_CLASS;
    return 0.5;
  }
  return auc();
}

}  // namespace metrics
}  // namespace hb
