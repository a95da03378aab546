#include "embedding/lifecycle/select.h"

#include <algorithm>

#include "abi/error.h"

namespace hb {
namespace lifecycle {

namespace {

// Every rank's n words summed, element-wise, in place.
void all_sum(Exchange &x, std::vector<int64_t> &v) {
  const int world = x.world();
  const size_t n = v.size();
  std::vector<int64_t> send(n * world), recv(n * world);
  for (int p = 0; p < world; ++p) std::copy(v.begin(), v.end(), &send[p * n]);
  x.alltoall(send.data(), recv.data(), n);
  std::fill(v.begin(), v.end(), 0);
  for (int p = 0; p < world; ++p)
    for (size_t i = 0; i < n; ++i) v[i] += recv[p * n + i];
}

int bit_width(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }

}  // namespace

int64_t global_sum(Exchange &x, int64_t local) {
  std::vector<int64_t> v{local};
  all_sum(x, v);
  return v[0];
}

Selected select_kth(Exchange &x, std::vector<uint64_t> &vals, int64_t k) {
  const int world = x.world();
  Selected out;
  // Round 1: global min, max (as the min of the complement) and count.
  uint64_t mn = UINT64_MAX, mx = 0;
  for (uint64_t v : vals) mn = std::min(mn, v), mx = std::max(mx, v);
  std::vector<int64_t> send(3 * world), recv(3 * world);
  for (int p = 0; p < world; ++p) {
    send[3 * p] = static_cast<int64_t>(mn);
    send[3 * p + 1] = static_cast<int64_t>(mx);
    send[3 * p + 2] = static_cast<int64_t>(vals.size());
  }
  x.alltoall(send.data(), recv.data(), 3);
  ++out.rounds;
  uint64_t lo = UINT64_MAX, hi = 0;
  int64_t in_range = 0;
  for (int p = 0; p < world; ++p) {
    if (recv[3 * p + 2] == 0) continue;
    lo = std::min(lo, static_cast<uint64_t>(recv[3 * p]));
    hi = std::max(hi, static_cast<uint64_t>(recv[3 * p + 1]));
    in_range += recv[3 * p + 2];
  }
  if (k < 1 || k > in_range)
    fail(HB_ERR_INTERNAL, "lifecycle selection: k = %lld of %lld values",
         (long long)k, (long long)in_range);
  std::vector<int64_t> hist;
  while (lo < hi) {
    const int shift = std::max(0, bit_width(hi - lo) - kBucketBits);
    const size_t nb = static_cast<size_t>(((hi - lo) >> shift) + 1);
    hist.assign(nb, 0);
    for (uint64_t v : vals) ++hist[(v - lo) >> shift];
    all_sum(x, hist);
    ++out.rounds;
    size_t b = 0;
    int64_t cum = 0;
    while (cum + hist[b] < k) cum += hist[b++];
    out.below += cum;
    k -= cum;
    in_range = hist[b];
    const uint64_t nlo = lo + (static_cast<uint64_t>(b) << shift);
    const uint64_t width = (uint64_t{1} << shift) - 1;
    if (hi - nlo > width) hi = nlo + width;
    lo = nlo;
    if (in_range == k) break;  // the whole bucket: everything <= hi
    // Keep only this rank's values in the chosen bucket.
    vals.erase(std::remove_if(vals.begin(), vals.end(),
                              [&](uint64_t v) { return v < lo || v > hi; }),
               vals.end());
  }
  if (in_range == k) {
    out.value = hi;
    out.all = true;
    out.below = 0;  // not needed: exactly k values are <= hi
  } else {
    out.value = lo;
  }
  return out;
}

}  // namespace lifecycle
}  // namespace hb
