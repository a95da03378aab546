// Accuracy and mean states (see ratio_state.cc).
#pragma once

#include "metrics/exact_sum.h"
#include "metrics/state.h"

namespace hb {
namespace metrics {

class RatioState : public State {
 public:
  explicit RatioState(const Config &cfg);
  void update(const Batch &b) override;
  void reset() override;
  void write_payload(Writer &w) const override;
  void merge_payload(Reader &r) override;
  double result(int32_t *flags) const override;

 private:
  bool accuracy_;     // else mean
  bool thresholded_;  // accuracy: pred > threshold -> 1, else 0
  float threshold_;
  uint64_t count_ = 0;  // unweighted samples (weight 1 each)
  uint64_t hits_ = 0;   // unweighted correct predictions
  ExactSum wsum_;       // weights of weighted samples
  ExactSum numer_;      // mean: preds (* weights); accuracy: weights of hits
};

}  // namespace metrics
}  // namespace hb
