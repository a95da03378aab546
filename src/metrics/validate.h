// Input checks shared by every metric kind. They run over the whole batch
// before any state changes; the fast path is a branch-free, vectorizable
// scan, and only a failing batch is rescanned to name the first bad index.
#pragma once

#include "metrics/state.h"

namespace hb {
namespace metrics {

struct InputRules {
  bool labels = true;       // labels required, each in [0, 1]
  bool unit_preds = false;  // predictions must lie in [0, 1] (else: finite)
  bool groups = false;      // group ids required
};

// Throws HB_ERR_INVALID_ARGUMENT naming the first bad index and value.
void validate(const Batch &b, const InputRules &rules);

}  // namespace metrics
}  // namespace hb
