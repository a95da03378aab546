// A two-class weighted histogram with exact bucket totals: unweighted
// samples are uint64 counts, weighted samples ExactSums (allocated on the
// first weighted update). Used by the thresholded AUC (one bucket per gap
// between TF's thresholds) and by the bounded-memory exact AUC (`bins`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "metrics/exact_sum.h"
#include "metrics/state.h"

namespace hb {
namespace metrics {

class Histogram {
 public:
  explicit Histogram(size_t buckets)
      : buckets_(buckets), counts_(2 * buckets, 0) {}

  size_t buckets() const { return buckets_; }

  // Adds every sample of b (validated) to bucket bucket_of(pred); the class
  // is label != 0, as TF casts labels to bool.
  template <class BucketFn>
  void add(const Batch &b, BucketFn bucket_of) {
    if (!b.weights) {
      uint64_t *c = counts_.data();
      for (size_t i = 0; i < b.n; ++i)
        ++c[2 * bucket_of(b.preds[i]) + (b.labels[i] != 0.0f)];
      return;
    }
    if (sums_.empty()) sums_.resize(2 * buckets_);
    ExactSum *s = sums_.data();
    for (size_t i = 0; i < b.n; ++i)
      s[2 * bucket_of(b.preds[i]) + (b.labels[i] != 0.0f)].add(b.weights[i]);
  }

  // Total weight of class cls in bucket, rounded once to double.
  double weight_double(int cls, size_t bucket) const {
    if (sums_.empty()) return static_cast<double>(counts_[2 * bucket + cls]);
    return weight(cls, bucket).to_double();
  }
  // Exact total weight of class cls (0 negative, 1 positive) in bucket.
  ExactSum weight(int cls, size_t bucket) const {
    ExactSum s;
    if (!sums_.empty()) s = sums_[2 * bucket + cls];
    s.add_count(counts_[2 * bucket + cls]);
    return s;
  }
  // below[i] = exact weight of class cls in buckets [0, i), rounded once to
  // double, i = 0..buckets (below[buckets] is the class total).
  std::vector<double> below(int cls) const { return cumulative(cls, false); }
  // above[i] = exact weight of class cls in buckets [i, buckets), likewise.
  std::vector<double> above(int cls) const { return cumulative(cls, true); }
  // Exact class total.
  ExactSum total(int cls) const;

  void reset();
  void write(Writer &w) const;
  // Merges a histogram written by write(); the bucket count must match.
  void merge(Reader &r);

 private:
  std::vector<double> cumulative(int cls, bool from_top) const;

  size_t buckets_;
  std::vector<uint64_t> counts_;  // [bucket][class]
  std::vector<ExactSum> sums_;    // [bucket][class], empty until weighted
};

}  // namespace metrics
}  // namespace hb
