// Exact distributed selection: the k-th smallest of the values all ranks
// hold together, by rounds of histograms (a radix select): one round agrees
// on the global minimum, maximum and count, then each round splits the
// remaining range into at most 2^kBucketBits buckets, sums every rank's
// bucket counts (an all-to-all of the histogram) and keeps the bucket that
// holds the k-th value. Every rank takes the same branches (they depend only
// on summed counts), so all ranks return the same value. Rounds: 1 +
// ceil(bits of (max - min) / kBucketBits), and the candidates shrink with
// every round.
#pragma once

#include <cstdint>
#include <vector>

#include "common/agreement.h"

namespace hb {
namespace lifecycle {

constexpr int kBucketBits = 11;

// Either `all`: exactly k values (all ranks) are <= value; or not: below
// (< k) values are < value and more than k - below equal it (ties).
struct Selected {
  uint64_t value = 0;
  bool all = false;
  int64_t below = 0;
  int rounds = 0;  // all-to-all rounds used
};

// vals: this rank's values (reordered and shrunk: scratch). 1 <= k <= the
// global count (checked: HB_ERR_INTERNAL otherwise). Stops as soon as a
// bucket ends exactly at the k-th value.
Selected select_kth(Exchange &x, std::vector<uint64_t> &vals, int64_t k);

// The global sum of `local` (one all-to-all round).
int64_t global_sum(Exchange &x, int64_t local);

}  // namespace lifecycle
}  // namespace hb
