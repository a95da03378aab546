// criteo-synth for the demo: a seeded, deterministic stream of CTR samples
// (26 categorical ids drawn Zipf and scrambled by a fixed bijection, 13
// dense features) with labels from a planted logistic model, so the best
// achievable AUC is known. Sample i depends only on (seed, split, i): any
// rank split yields the same data set.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace synth {

constexpr int kTables = 26;
constexpr int kDense = 13;

inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Table t's id of Zipf rank `rank`: a fixed bijection on [0, vocab) (vocab
// a power of two, mask = vocab - 1, odd multiplier) so hot ids spread over
// the owners. Shared with the numpy demo's native helper.
inline int64_t id_of_rank(int t, int64_t rank, uint64_t mask) {
  return static_cast<int64_t>(
      (static_cast<uint64_t>(rank) * 0x9e3779b1ull + t * 7919ull) & mask);
}

// lower_bound(first, first + len, key) where the answer is known to lie in
// [first, first + len]: fixed steps for a given len, no early exit (the
// generators' searches of a guide bucket's range).
template <class T>
inline const T *bounded_lower_bound(const T *first, int64_t len, T key) {
  while (len > 1) {
    int64_t half = len / 2;
    first = first[half - 1] < key ? first + half : first;
    len -= half;
  }
  return first + (len == 1 && *first < key);
}

inline double unit(uint64_t h) {
  return (h >> 11) * (1.0 / 9007199254740992.0);
}
inline double gauss(uint64_t h) {  // Box-Muller from two hashes
  double u1 = std::max(unit(h), 1e-300), u2 = unit(mix(h));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

struct Sample {
  int64_t ids[kTables];
  float dense[kDense];
  float label;
  float planted_prob;  // the planted model's P(click)
};

class Generator {
 public:
  Generator(uint64_t seed, int64_t vocab, double alpha)
      : seed_(seed), vocab_(vocab) {
    // planted_weight's per-table part of the hash (xor is associative:
    // the same key as hashing seed, table and id in one expression).
    for (int t = 0; t < kTables; ++t)
      table_salt_[t] = seed_ ^ mix(0x5eed0000ull + t);
    // Zipf(alpha) over ranks 1..vocab: inverse CDF by binary search.
    cdf_.resize(static_cast<size_t>(vocab));
    double s = 0;
    for (int64_t k = 0; k < vocab; ++k)
      cdf_[k] = (s += std::pow(k + 1.0, -alpha));
    for (double &c : cdf_) c /= s;
    // Guide table: guide_[b] = lower_bound(cdf, b / buckets). For u in
    // [b, b + 1) / buckets (exact: buckets is a power of two), lower_bound(u)
    // lies in [guide_[b], guide_[b + 1]]. 16 buckets per rank up to 2^16
    // (256 KB): up to vocab 4096 no bucket holds more than one CDF entry
    // (one compare, no search); at 131072, 85 % of the uniforms (the rest
    // search at most 49 entries).
    buckets_ = std::min<int64_t>(16 * vocab, int64_t{1} << 16);
    guide_.resize(static_cast<size_t>(buckets_ + 1));
    for (int64_t b = 0; b <= buckets_; ++b)
      guide_[b] = static_cast<uint32_t>(
          std::lower_bound(cdf_.begin(), cdf_.end(),
                           static_cast<double>(b) / buckets_) -
          cdf_.begin());
    // The planted weights, computed once (each costs a log, a cos and a
    // sqrt, 26 per sample otherwise); the same values, so the same samples.
    // Stored by Zipf rank, not by id, and the 26 tables' weights of a rank
    // side by side: the hot ranks' weights share cache lines (by id, the
    // bijection scatters them over the whole table; table after table, the
    // hot heads of the 26 tables, 1 MB apart at vocab 131072, would fall
    // into the same cache sets). At vocab 131072 most reads then hit the
    // first few hundred KB of the 27 MB. Up to 2^17 ids per table; very
    // large vocabularies compute them per sample instead.
    if (vocab <= kWeightTableMaxVocab) {
      weight_of_rank_.resize(static_cast<size_t>(kTables * vocab));
      for (int64_t rank = 0; rank < vocab; ++rank)
        for (int t = 0; t < kTables; ++t)
          weight_of_rank_[rank * kTables + t] =
              planted_weight(t, id_of(t, rank));
    }
    for (int j = 0; j < kDense; ++j)
      dense_weight_[j] = 0.5 * gauss(mix(seed_ ^ (0xdeadull + j)));
  }

  int64_t vocab() const { return vocab_; }

  // Planted weight of dense feature j.
  double dense_weight(int j) const { return dense_weight_[j]; }

  void sample(int split, int64_t index, Sample *out) const {
    uint64_t base = mix(seed_ ^ mix(static_cast<uint64_t>(split) << 56 ^
                                    static_cast<uint64_t>(index)));
    // Loads started early, so the 26 tables' cache misses overlap instead
    // of following one another (at vocab 131072 the CDF's tail and the
    // weights' are read at random): the middle of each table's search
    // range, then the ranks and each weight's load, then the dense features
    // (13 log / cos pairs: time for those loads to land), then the logit
    // summed in the same order as ever (the same bits).
    int64_t rank[kTables];
    double u[kTables];
    for (int t = 0; t < kTables; ++t) {
      u[t] = unit(mix(base + 2 * t + 1));
      int64_t bk = static_cast<int64_t>(u[t] * buckets_);
      __builtin_prefetch(&cdf_[(guide_[bk] + guide_[bk + 1]) / 2]);
    }
    for (int t = 0; t < kTables; ++t) {
      rank[t] = zipf_rank(u[t]);
      if (rank[t] >= vocab_) rank[t] = vocab_ - 1;
      out->ids[t] = id_of(t, rank[t]);
      if (!weight_of_rank_.empty())
        __builtin_prefetch(&weight_of_rank_[rank[t] * kTables + t]);
    }
    for (int j = 0; j < kDense; ++j)
      out->dense[j] = static_cast<float>(gauss(mix(base + 1000 + j)));
    double logit = -1.0;
    for (int t = 0; t < kTables; ++t)
      logit += weight_of_rank_.empty() ? planted_weight(t, out->ids[t])
                                       : weight_of_rank_[rank[t] * kTables + t];
    for (int j = 0; j < kDense; ++j) logit += dense_weight(j) * out->dense[j];
    double p = 1.0 / (1.0 + std::exp(-logit));
    out->planted_prob = static_cast<float>(p);
    out->label = unit(mix(base + 4242)) < p ? 1.0f : 0.0f;
  }

 private:
  static constexpr int64_t kWeightTableMaxVocab = int64_t{1} << 17;

  int64_t id_of(int t, int64_t rank) const {
    return id_of_rank(t, rank, static_cast<uint64_t>(vocab_ - 1));
  }

  // lower_bound(cdf, u) for u in [0, 1), through the guide table: a
  // search of [guide_[b], guide_[b + 1]] without early exit (fixed steps
  // for a given range; a mask instead of the ?: measured the same).
  int64_t zipf_rank(double u) const {
    int64_t b = static_cast<int64_t>(u * buckets_);
    const double *c = cdf_.data();
    return bounded_lower_bound(c + guide_[b],
                               static_cast<int64_t>(guide_[b + 1]) - guide_[b],
                               u) -
           c;
  }

  double planted_weight(int t, int64_t id) const {
    return 0.3 * gauss(mix(table_salt_[t] ^ mix(static_cast<uint64_t>(id))));
  }

  uint64_t seed_;
  int64_t vocab_;
  std::vector<double> cdf_;
  int64_t buckets_;
  std::vector<uint32_t> guide_;         // buckets_ + 1 entries
  std::vector<double> weight_of_rank_;  // [rank][table], or empty
  double dense_weight_[kDense];
  uint64_t table_salt_[kTables];
};

}  // namespace synth
