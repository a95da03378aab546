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
// Up to vocab 4096 a range holds at most one entry (one compare); at
// 131072, 85 % of the hashes, the rest at most 49 entries.
inline int64_t rank_in(const uint64_t *cdf_h, int64_t lo, int64_t hi,
                       uint64_t h) {
  return synth::bounded_lower_bound(cdf_h + lo, hi - lo, h) - cdf_h;
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
// Tables (the Generator's arrays): below (buckets + 1 uint32 entries, at
// most 2^16 + 1, 256 KB, as the C++ generator's guide: the CDF entries
// under bucket k = h >> kshift start at below[k]), cdf_h (vocab entries:
// u > cdf exactly when h > cdf_h), neg_weight (TABLES * vocab: by table and
// rank, or with by_rank by rank and table, a rank's 26 weights side by
// side). by_rank also makes the batch sample by sample (the C++
// generator's order), else table by table.
// Returns 0, or -1 on arguments that cannot be a batch.
int ctr_synth_hash(uint64_t seed, int split, int64_t begin, int64_t n,
                   int64_t vocab, int kshift, const uint32_t *below,
                   const uint64_t *cdf_h, const double *neg_weight, int by_rank,
                   int64_t *ids, int64_t id_step, int64_t id_row, double *terms,
                   double *u1, double *u2, double *ul) {
  if (n < 0 || vocab <= 0 || (vocab & (vocab - 1)) || kshift < 1 || kshift > 63)
    return -1;
  const uint64_t mask = static_cast<uint64_t>(vocab - 1);
  std::vector<uint64_t> base(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    base[i] = synth::mix(seed ^ synth::mix(static_cast<uint64_t>(split) << 56 ^
                                           static_cast<uint64_t>(begin + i)));
  if (by_rank) {
    // Large tables (their CDF and weights out of cache, read at random):
    // as the C++ generator, each load started early so the 26 tables'
    // misses overlap, first the middle of each search range, then each
    // weight's line (a hot rank's 26 weights share it). Table by table,
    // with the weights by table, cost 1.3-1.5x the CPU at vocab 131072.
    for (int64_t i = 0; i < n; ++i) {
      uint64_t h[kTables];
      int64_t rank[kTables];
      for (int t = 0; t < kTables; ++t) {
        h[t] = synth::mix(base[i] + (2 * t + 1));
        uint64_t k = h[t] >> kshift;
        __builtin_prefetch(&cdf_h[(below[k] + below[k + 1]) / 2]);
      }
      for (int t = 0; t < kTables; ++t) {
        uint64_t k = h[t] >> kshift;
        rank[t] = rank_in(cdf_h, below[k], below[k + 1], h[t]);
        __builtin_prefetch(&neg_weight[rank[t] * kTables + t]);
      }
      for (int t = 0; t < kTables; ++t) {
        ids[i * id_step + t * id_row] = synth::id_of_rank(t, rank[t], mask);
        terms[t * n + i] = neg_weight[rank[t] * kTables + t];
      }
    }
  } else {
    // Small tables (in cache): table by table over the samples, as numpy's
    // passes (a few % less CPU than by sample at vocab 2048).
    for (int t = 0; t < kTables; ++t) {
      const uint64_t salt = 2 * t + 1;
      const double *weight = neg_weight + t * vocab;
      int64_t *id = ids + t * id_row;
      double *term = terms + t * n;
      for (int64_t i = 0; i < n; ++i) {
        uint64_t h = synth::mix(base[i] + salt);
        uint64_t k = h >> kshift;
        int64_t rank = rank_in(cdf_h, below[k], below[k + 1], h);
        id[i * id_step] = synth::id_of_rank(t, rank, mask);
        term[i] = weight[rank];
      }
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
