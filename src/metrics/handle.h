// The hb_metric handle (internal: checkpoints save and restore its state).
#pragma once

#include <memory>

#include "metrics/state.h"

struct hb_metric {
  hb_context *ctx = nullptr;
  hb::metrics::Config cfg;
  std::unique_ptr<hb::metrics::State> state;
  int32_t flags = 0;
  int64_t merges = 0;  // matched hb_metric_result merges (a fingerprint part)
};

namespace hb {
namespace metrics {
// hb_metric_result: every rank's state merged (collective with a context of
// more than one rank).
double result(hb_metric &m);
}  // namespace metrics
}  // namespace hb
