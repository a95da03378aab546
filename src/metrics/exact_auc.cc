// Exact ROC AUC. Each sample with a nonzero weight becomes one 64-bit key
// (prediction, class, weight); merging concatenates keys, and the result
// sorts the keys and sweeps them once. The sweep sees the samples in an
// order determined by the multiset alone, so the result is bit-identical
// however the samples were split across batches and ranks.
//
// AUC = sum over prediction values v of P_v * (N_below(v) + N_v / 2) / (P N)
// where P_v, N_v are the positive / negative weights at v (ties count one
// half), P and N the class totals.
#include "metrics/auc_state.h"
#include "metrics/radix_sort.h"
#include "metrics/sample_key.h"
#include "metrics/validate.h"

namespace hb {
namespace metrics {

void ExactAucState::update(const Batch &b) {
  validate(b, InputRules());
  append_sample_keys(b, &keys_);
}

void ExactAucState::write_payload(Writer &w) const { w.array(keys_); }

void ExactAucState::merge_payload(Reader &r) { r.append_array(&keys_); }

double ExactAucState::result(int32_t *flags) const {
  radix_sort(keys_, tmp_);
  AucSweep sweep;
  sweep.run(keys_.data(), keys_.size());
  return sweep.finish(flags);
}

}  // namespace metrics
}  // namespace hb
