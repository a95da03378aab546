#include "metrics/validate.h"

#include <cfloat>

#include "abi/error.h"

namespace hb {
namespace metrics {
namespace {

inline bool label_ok(float l) { return l >= 0.0f && l <= 1.0f; }
inline bool pred_ok(float p, bool unit) {
  return unit ? (p >= 0.0f && p <= 1.0f) : (p >= -FLT_MAX && p <= FLT_MAX);
}
inline bool weight_ok(float w) { return w >= 0.0f && w <= FLT_MAX; }

// Branch-free scan (vectorizes): true when every element passes.
bool all_ok(const Batch &b, const InputRules &r) {
  unsigned bad = 0;
  if (r.labels)
    for (size_t i = 0; i < b.n; ++i) bad |= !label_ok(b.labels[i]);
  if (r.unit_preds) {
    for (size_t i = 0; i < b.n; ++i)
      bad |= !(b.preds[i] >= 0.0f && b.preds[i] <= 1.0f);
  } else {
    for (size_t i = 0; i < b.n; ++i)
      bad |= !(b.preds[i] >= -FLT_MAX && b.preds[i] <= FLT_MAX);
  }
  if (b.weights)
    for (size_t i = 0; i < b.n; ++i) bad |= !weight_ok(b.weights[i]);
  return bad == 0;
}

}  // namespace

void validate(const Batch &b, const InputRules &r) {
  if (b.n == 0) return;
  HB_CHECK_ARG(b.preds, "preds is NULL with n = %zu", b.n);
  HB_CHECK_ARG(!r.labels || b.labels, "labels is NULL with n = %zu", b.n);
  HB_CHECK_ARG(!r.groups || b.groups, "groups is NULL with n = %zu", b.n);
  if (all_ok(b, r)) return;
  for (size_t i = 0; i < b.n; ++i) {
    if (r.labels && !label_ok(b.labels[i]))
      fail(HB_ERR_INVALID_ARGUMENT, "labels[%zu] = %g is outside [0, 1]", i,
           static_cast<double>(b.labels[i]));
    if (!pred_ok(b.preds[i], r.unit_preds))
      fail(HB_ERR_INVALID_ARGUMENT, "preds[%zu] = %g is %s", i,
           static_cast<double>(b.preds[i]),
           r.unit_preds ? "outside [0, 1] (this metric needs probabilities)"
                        : "not finite");
    if (b.weights && !weight_ok(b.weights[i]))
      fail(HB_ERR_INVALID_ARGUMENT,
           "weights[%zu] = %g is negative or not finite", i,
           static_cast<double>(b.weights[i]));
  }
  fail(HB_ERR_INTERNAL, "metric input check failed but no bad index was found");
}

}  // namespace metrics
}  // namespace hb
