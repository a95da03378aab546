#include "comm/fusion.h"

namespace hb {
namespace comm {

std::vector<std::vector<Tensor>> plan_buckets(void *const *bufs,
                                              const size_t *counts, size_t n,
                                              size_t elem_size,
                                              int64_t nbuckets,
                                              int64_t bucket_bytes) {
  std::vector<std::vector<Tensor>> out;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += counts[i] * elem_size;
  if (total == 0) return out;
  if (nbuckets > 0) {
    // A tensor goes to the bucket its middle byte falls in, when the total
    // is cut into nbuckets equal spans.
    const double nb = static_cast<double>(nbuckets),
                 whole = static_cast<double>(total);
    size_t done = 0;
    int64_t current = -1;
    for (size_t i = 0; i < n; ++i) {
      if (!counts[i]) continue;
      size_t b = counts[i] * elem_size;
      auto idx = static_cast<int64_t>((static_cast<double>(done) + b / 2.0) *
                                      nb / whole);
      if (out.empty() || idx > current) {
        out.emplace_back();
        current = idx;
      }
      out.back().push_back(Tensor{bufs[i], counts[i]});
      done += b;
    }
    return out;
  }
  size_t cap = bucket_bytes > 0 ? static_cast<size_t>(bucket_bytes) : 1;
  size_t in_bucket = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!counts[i]) continue;
    size_t b = counts[i] * elem_size;
    if (out.empty() || (in_bucket + b > cap && in_bucket > 0)) {
      out.emplace_back();
      in_bucket = 0;
    }
    out.back().push_back(Tensor{bufs[i], counts[i]});
    in_bucket += b;
  }
  return out;
}

}  // namespace comm
}  // namespace hb
