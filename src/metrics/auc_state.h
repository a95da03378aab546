// AUC states: thresholded (tf.compat.v1.metrics.auc), exact (sorted
// samples), bounded-memory exact (histogram over [0, 1]) and grouped (GAUC).
#pragma once

#include <vector>

#include "metrics/big_vector.h"
#include "metrics/histogram.h"
#include "metrics/state.h"

namespace hb {
namespace metrics {

// tf.compat.v1.metrics.auc with exact confusion counts.
class ThresholdAucState : public State {
 public:
  explicit ThresholdAucState(const Config &cfg);
  void update(const Batch &b) override;
  void reset() override { hist_.reset(); }
  void write_payload(Writer &w) const override { hist_.write(w); }
  void merge_payload(Reader &r) override { hist_.merge(r); }
  double result(int32_t *flags) const override;

  // TF's thresholds as float32: -1e-7, i / (T - 1) for i = 1..T-2, 1 + 1e-7.
  const std::vector<float> &thresholds() const { return thresholds_; }
  // Number of thresholds t with pred > t (the histogram bucket).
  size_t bucket_of(float pred) const;

 private:
  Config cfg_;
  std::vector<float> thresholds_;
  float scale_;  // T - 1, for the initial bucket guess
  Histogram hist_;
};

// Exact ROC AUC from the (prediction, label, weight) multiset: ties count
// one half. 8 bytes per sample with nonzero weight.
class ExactAucState : public State {
 public:
  void update(const Batch &b) override;
  void reset() override { keys_.clear(); }
  void write_payload(Writer &w) const override;
  void merge_payload(Reader &r) override;
  double result(int32_t *flags) const override;

 private:
  // See sample_key(). result() sorts them in place (the multiset, all that
  // matters, is unchanged); tmp_ is the sort's scratch space.
  mutable BigVector<uint64_t> keys_, tmp_;
};

// Bounded-memory AUC: a `bins`-bucket histogram over [0, 1]; pairs within
// one bucket count one half.
class BinnedAucState : public State {
 public:
  explicit BinnedAucState(int64_t bins) : hist_(static_cast<size_t>(bins)) {}
  void update(const Batch &b) override;
  void reset() override { hist_.reset(); }
  void write_payload(Writer &w) const override { hist_.write(w); }
  void merge_payload(Reader &r) override { hist_.merge(r); }
  double result(int32_t *flags) const override;
  // The bound on |result - exact AUC| for the data seen (see docs).
  double error_bound() const;

 private:
  Histogram hist_;
};

// GAUC: per-group exact AUC over groups with both classes, combined
// unweighted, by impressions (group weight) or by clicks (positive weight).
class GaucState : public State {
 public:
  explicit GaucState(int32_t weighting) : weighting_(weighting) {}
  void update(const Batch &b) override;
  void reset() override { records_.clear(); }
  void write_payload(Writer &w) const override;
  void merge_payload(Reader &r) override;
  double result(int32_t *flags) const override;

  struct Record {
    uint64_t group;  // the int64 id with its sign bit flipped (sorts as signed)
    uint64_t key;    // sample_key()
  };

 private:
  int32_t weighting_;
  mutable BigVector<Record> records_, tmp_;  // sorted in place by result()
};

}  // namespace metrics
}  // namespace hb
