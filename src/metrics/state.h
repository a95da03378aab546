// Metric states: one class per kind, each able to update from a host batch,
// serialize itself to bytes and merge another state's bytes. hb_metric_result
// with a context exchanges these bytes between ranks; the unit tests merge
// in-process states the same way, without a network.
//
// The update functions take validated host pointers. A device path (CUDA
// histogram / sort kernels) would produce the same state pieces (histogram
// counts, sorted keys) and merge them through the same serialized form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/mismatch.h"
#include "hb.h"
#include "metrics/wire.h"

namespace hb {
namespace metrics {

// hb_metric_config after defaults and validation.
struct Config {
  int32_t kind = HB_METRIC_AUC;
  int32_t num_thresholds = 200;
  int32_t curve = HB_CURVE_ROC;
  int32_t summation = HB_SUMMATION_TRAPEZOIDAL;
  int32_t gauc_weighting = HB_GAUC_UNWEIGHTED;
  double threshold = -1.0;
  int64_t bins = 0;
};

// Reads min(struct_size, sizeof) bytes of cfg (NULL: defaults) and checks
// every field, naming the bad one.
Config config_from_public(const hb_metric_config *cfg);

// Every field of cfg, named, as ranks merging a metric must agree on it
// (kind and enums by their hb.h names).
ConfigFields config_fields(const Config &cfg);

struct Batch {
  const float *labels;  // NULL only for HB_METRIC_MEAN
  const float *preds;
  const float *weights;   // NULL: every weight is 1
  const int64_t *groups;  // GAUC only
  size_t n;
};

class State {
 public:
  virtual ~State() = default;
  // Validates the whole batch first (nothing changes on bad input), then
  // accumulates it.
  virtual void update(const Batch &b) = 0;
  virtual void reset() = 0;
  virtual void write_payload(Writer &w) const = 0;
  virtual void merge_payload(Reader &r) = 0;
  // The metric over everything accumulated; *flags gets hb_metric_flag_code
  // bits.
  virtual double result(int32_t *flags) const = 0;
};

std::unique_ptr<State> make_state(const Config &cfg);

// Self-describing bytes: a header with the config (so that ranks with
// different configs are caught) followed by the kind's payload.
Bytes serialize(const Config &cfg, const State &s);
// Merges bytes produced by serialize() into s; `source` names where they
// came from ("rank 2") in error messages. A config mismatch is
// HB_ERR_INVALID_ARGUMENT, malformed bytes HB_ERR_CORRUPT (s may then hold
// part of the payload: merge into a scratch state when that matters).
void merge_serialized(const Config &cfg, State *s, const unsigned char *data,
                      size_t size, const char *source);

}  // namespace metrics
}  // namespace hb
