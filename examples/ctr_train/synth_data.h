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
    // Zipf(alpha) over ranks 1..vocab: inverse CDF by binary search.
    cdf_.resize(static_cast<size_t>(vocab));
    double s = 0;
    for (int64_t k = 0; k < vocab; ++k)
      cdf_[k] = (s += std::pow(k + 1.0, -alpha));
    for (double &c : cdf_) c /= s;
    // Guide table: guide_[b] = lower_bound(cdf, b / kGuide). For u in
    // [b, b + 1) / kGuide (exact: kGuide is a power of two), lower_bound(u)
    // lies in [guide_[b], guide_[b + 1]], a handful of entries to search.
    for (int64_t b = 0; b <= kGuide; ++b)
      guide_[b] = std::lower_bound(cdf_.begin(), cdf_.end(),
                                   static_cast<double>(b) / kGuide) -
                  cdf_.begin();
    // The planted weights, computed once (each costs a log, a cos and a
    // sqrt, 26 per sample otherwise); the same values, so the same samples.
    // Up to 2^17 ids per table (26 x 2^17 doubles, 27 MB: a random read of
    // it is still several times cheaper than the gauss); very large
    // vocabularies compute them per sample instead.
    if (vocab <= kWeightTableMaxVocab) {
      weight_.resize(static_cast<size_t>(kTables * vocab));
      for (int t = 0; t < kTables; ++t)
        for (int64_t id = 0; id < vocab; ++id)
          weight_[t * vocab + id] = planted_weight(t, id);
    }
    for (int j = 0; j < kDense; ++j)
      dense_weight_[j] = 0.5 * gauss(mix(seed_ ^ (0xdeadull + j)));
  }

  int64_t vocab() const { return vocab_; }

  // Planted weight of id in table t, and of dense feature j.
  double weight(int t, int64_t id) const {
    return weight_.empty() ? planted_weight(t, id) : weight_[t * vocab_ + id];
  }
  double dense_weight(int j) const { return dense_weight_[j]; }

  void sample(int split, int64_t index, Sample *out) const {
    uint64_t base = mix(seed_ ^ mix(static_cast<uint64_t>(split) << 56 ^
                                    static_cast<uint64_t>(index)));
    double logit = -1.0;
    for (int t = 0; t < kTables; ++t) {
      double u = unit(mix(base + 2 * t + 1));
      int64_t rank = zipf_rank(u);
      if (rank >= vocab_) rank = vocab_ - 1;
      // Fixed bijection on [0, vocab) (vocab a power of two, odd multiplier)
      // so hot ids spread over the owners.
      int64_t id = static_cast<int64_t>(
          (static_cast<uint64_t>(rank) * 0x9e3779b1ull + t * 7919ull) &
          static_cast<uint64_t>(vocab_ - 1));
      out->ids[t] = id;
      logit += weight(t, id);
    }
    for (int j = 0; j < kDense; ++j) {
      out->dense[j] = static_cast<float>(gauss(mix(base + 1000 + j)));
      logit += dense_weight(j) * out->dense[j];
    }
    double p = 1.0 / (1.0 + std::exp(-logit));
    out->planted_prob = static_cast<float>(p);
    out->label = unit(mix(base + 4242)) < p ? 1.0f : 0.0f;
  }

 private:
  static constexpr int64_t kWeightTableMaxVocab = int64_t{1} << 17;
  static constexpr int64_t kGuide = 4096;

  // lower_bound(cdf, u) for u in [0, 1), through the guide table.
  int64_t zipf_rank(double u) const {
    int64_t b = static_cast<int64_t>(u * kGuide);
    const double *c = cdf_.data();
    return std::lower_bound(c + guide_[b], c + guide_[b + 1], u) - c;
  }

  double planted_weight(int t, int64_t id) const {
    return 0.3 * gauss(mix(seed_ ^ mix(0x5eed0000ull + t) ^
                           mix(static_cast<uint64_t>(id))));
  }

  uint64_t seed_;
  int64_t vocab_;
  std::vector<double> cdf_;
  std::vector<int64_t> guide_ = std::vector<int64_t>(kGuide + 1);
  std::vector<double> weight_;  // [table][id], or empty
  double dense_weight_[kDense];
};

}  // namespace synth
