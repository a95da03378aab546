// The integer half of synth_data.py's Generator.sample_into in one call, a
// helper of the Python demo (not hb API): loaded with ctypes, which
// releases the GIL for the call, so the prefetch thread makes a batch's
// hashes in one GIL-free pass instead of ~45 numpy calls over (40, n)
// arrays (2.4 M of the numpy generator's 3.7 M instructions per 512
// samples). It computes only what is exact in any order: the splitmix
// hashes, the Zipf ranks from the Python generator's own bucket tables,
// the ids, the gather of its planted weights and the uniforms (a shift, an
// exact conversion and one IEEE product each). log, cos and exp stay numpy
// calls in synth_data.py, so a batch has the numpy generator's bits on any
// CPU (numpy's SIMD log / cos may round otherwise than libm's).
#include <cstdint>
#include <vector>

#include "synth_data.h"

namespace {

constexpr int kTables = synth::kTables;
constexpr int kDense = synth::kDense;

// np.searchsorted(cdf_h, h, side="left") (the number of entries below h)
// where it lies in [lo, hi]: the bucket of h holds entries lo to hi - 1.
// Most buckets hold at most one: one compare, no branch.
inline int64_t rank_in(const uint64_t *cdf_h, int64_t lo, int64_t hi,
                       uint64_t h) {
  int64_t len = hi - lo;
  if (len <= 1) return lo + (len == 1 && cdf_h[lo] < h);
  while (len > 0) {
    int64_t half = len / 2;
    if (cdf_h[lo + half] < h) {
      lo += half + 1;
      len -= half + 1;
    } else {
      len = half;
    }
  }
  return lo;
}

}  // namespace

extern "C" {

// Samples [begin, begin + n) of split, as synth_data.Generator.sample_into
// computes them before its first ufunc:
// - ids[i * id_step + t * id_row]: the id of table t (any strides: the
//   caller's (n, TABLES) view of a (TABLES, N) batch array);
// - terms[t * n + i]: -(planted weight) of table t's id, the logit's rows;
// - u1[j * n + i] = max(unit(h), 1e-300), u2[j * n + i] = 2 pi * unit(mix(h))
//   for dense feature j's hash h (Box-Muller's operands before log / cos);
// - ul[i]: the label's uniform.
// Tables (the Generator's arrays): below (buckets + 1 entries: the CDF
// entries under bucket k = h >> kshift start at below[k], uint32: a
// quarter of the numpy path's two int64 / uint64 tables, which matters in
// a cache shared with the training step), cdf_h (vocab entries: u > cdf
// exactly when h > cdf_h), neg_weight (TABLES * vocab, by table and rank).
// Returns 0, or -1 on arguments that cannot be a batch.
int ctr_synth_hash(uint64_t seed, int split, int64_t begin, int64_t n,
                   int64_t vocab, int kshift, const uint32_t *below,
                   const uint64_t *cdf_h, const double *neg_weight,
                   int64_t *ids, int64_t id_step, int64_t id_row, double *terms,
                   double *u1, double *u2, double *ul) {
  if (n < 0 || vocab <= 0 || (vocab & (vocab - 1)) || kshift < 1 || kshift > 63)
    return -1;
  const uint64_t mask = static_cast<uint64_t>(vocab - 1);
  // Table by table over the samples, as numpy's passes: the loads of one
  // loop are independent, so their cache misses overlap (a sample's 26
  // tables in turn ran 1.2x slower than numpy at vocab 131072, whose
  // bucket tables and weights do not fit in cache).
  std::vector<uint64_t> base(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    base[i] = synth::mix(seed ^ synth::mix(static_cast<uint64_t>(split) << 56 ^
                                           static_cast<uint64_t>(begin + i)));
  for (int t = 0; t < kTables; ++t) {
    const uint64_t salt = 2 * t + 1, add = t * 7919ull;
    const int64_t table_base = t * vocab;  // weights by (table, rank)
    int64_t *id = ids + t * id_row;
    double *term = terms + t * n;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t h = synth::mix(base[i] + salt);
      uint64_t k = h >> kshift;
      int64_t rank = rank_in(cdf_h, below[k], below[k + 1], h) + table_base;
      id[i * id_step] = static_cast<int64_t>(
          (static_cast<uint64_t>(rank) * 0x9e3779b1ull + add) & mask);
      term[i] = neg_weight[rank];
    }
  }
  for (int j = 0; j < kDense; ++j) {
    double *a1 = u1 + j * n, *a2 = u2 + j * n;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t h = synth::mix(base[i] + 1000 + j);
      double a = synth::unit(h);
      a1[i] = a > 1e-300 ? a : 1e-300;
      a2[i] = synth::unit(synth::mix(h)) * 6.283185307179586;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    ul[i] = synth::unit(synth::mix(base[i] + 4242));
  return 0;
}

}  // extern "C"
