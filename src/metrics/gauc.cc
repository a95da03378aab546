// GAUC: the exact AUC of every group (e.g. user) that has both classes,
// combined unweighted (plain mean), by impressions (the group's total
// weight, its sample count when unweighted) or by clicks (the group's
// positive weight). Records (group, sample key) are merged by
// concatenation, so groups may span batches and ranks; the result sorts by
// (group, key) and sweeps each group, in an order fixed by the multiset.
#include "metrics/auc_state.h"
#include "metrics/radix_sort.h"
#include "metrics/sample_key.h"
#include "metrics/validate.h"

namespace hb {
namespace metrics {

void GaucState::update(const Batch &b) {
  InputRules rules;
  rules.groups = true;
  validate(b, rules);
  size_t at = records_.size();
  records_.resize(at + b.n);
  Record *out = records_.data() + at;
  size_t m = 0;
  for (size_t i = 0; i < b.n; ++i) {
    float w = b.weights ? b.weights[i] : 1.0f;
    out[m] = {static_cast<uint64_t>(b.groups[i]) ^ (uint64_t(1) << 63),
              sample_key(b.preds[i], b.labels[i] != 0.0f, w)};
    m += w != 0.0f;  // zero weights mask the sample
  }
  records_.resize(at + m);
}

void GaucState::write_payload(Writer &w) const { w.array(records_); }

void GaucState::merge_payload(Reader &r) { r.append_array(&records_); }

double GaucState::result(int32_t *flags) const {
  BigVector<Record> &sorted = records_;
  radix_sort(sorted, tmp_, 16, [](const Record &x, int k) {
    uint64_t word = k < 8 ? x.key : x.group;
    return static_cast<unsigned>((word >> (8 * (k & 7))) & 0xff);
  });
  double num = 0.0, den = 0.0;
  size_t i = 0, n = sorted.size();
  while (i < n) {
    uint64_t g = sorted[i].group;
    AucSweep s;
    for (; i < n && sorted[i].group == g; ++i) s.add(sorted[i].key);
    s.flush();
    if (!s.both_classes()) continue;
    double weight = weighting_ == HB_GAUC_IMPRESSIONS ? s.pos + s.neg
                    : weighting_ == HB_GAUC_CLICKS    ? s.pos
                                                      : 1.0;
    num += weight * s.auc();
    den += weight;
  }
  *flags = 0;
  if (n == 0) {
    *flags = HB_METRIC_FLAG_EMPTY;
    return 0.0;
  }
  if (den == 0.0) {
    *flags = HB_METRIC_FLAG_SINGLE_CLASS;  // no group has both classes
    return 0.5;
  }
  return num / den;
}

}  // namespace metrics
}  // namespace hb
