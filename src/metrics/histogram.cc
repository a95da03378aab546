#include "metrics/histogram.h"

namespace hb {
namespace metrics {

std::vector<double> Histogram::cumulative(int cls, bool from_top) const {
  std::vector<double> out(buckets_ + 1, 0.0);
  if (sums_.empty()) {  // unweighted: exact uint64 running counts
    uint64_t run = 0;
    for (size_t k = 0; k < buckets_; ++k) {
      size_t b = from_top ? buckets_ - 1 - k : k;
      run += counts_[2 * b + cls];
      out[from_top ? b : b + 1] = static_cast<double>(run);
    }
    return out;
  }
  ExactSum run;
  for (size_t k = 0; k < buckets_; ++k) {
    size_t b = from_top ? buckets_ - 1 - k : k;
    run.add_count(counts_[2 * b + cls]);
    if (!sums_.empty()) run.add(sums_[2 * b + cls]);
    out[from_top ? b : b + 1] = run.to_double();
  }
  return out;
}

ExactSum Histogram::total(int cls) const {
  ExactSum run;
  for (size_t b = 0; b < buckets_; ++b) {
    run.add_count(counts_[2 * b + cls]);
    if (!sums_.empty()) run.add(sums_[2 * b + cls]);
  }
  return run;
}

void Histogram::reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  sums_.clear();
}

void Histogram::write(Writer &w) const {
  w.u64(buckets_);
  w.bytes(counts_.data(), counts_.size() * sizeof(uint64_t));
  w.u32(sums_.empty() ? 0 : 1);
  for (const ExactSum &s : sums_) w.sum(s);
}

void Histogram::merge(Reader &r) {
  uint64_t buckets = r.u64();
  if (buckets != buckets_)
    fail(HB_ERR_CORRUPT, "%s: histogram has %llu buckets, expected %zu",
         r.what().c_str(), static_cast<unsigned long long>(buckets), buckets_);
  std::vector<uint64_t> counts(2 * buckets_);
  r.bytes(counts.data(), counts.size() * sizeof(uint64_t));
  uint32_t weighted = r.u32();
  if (weighted > 1)
    fail(HB_ERR_CORRUPT, "%s: bad weighted flag %u at byte offset %zu",
         r.what().c_str(), weighted, r.offset() - 4);
  std::vector<ExactSum> sums(weighted ? 2 * buckets_ : 0);
  for (ExactSum &s : sums) r.sum(&s);
  // Only now (everything parsed) change the state.
  for (size_t i = 0; i < counts.size(); ++i) counts_[i] += counts[i];
  if (weighted) {
    if (sums_.empty()) sums_.resize(2 * buckets_);
    for (size_t i = 0; i < sums.size(); ++i) sums_[i].add(sums[i]);
  }
}

}  // namespace metrics
}  // namespace hb
