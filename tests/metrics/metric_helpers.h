// Helpers shared by the metric tests: run a metric through the public API
// or through in-process states merged from bytes (the multi-rank path
// without a network).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "hb.h"
#include "metrics/state.h"
#include "reference.h"

namespace testing_metrics {

inline hb_metric_config config(int32_t kind) {
  hb_metric_config c = HB_METRIC_CONFIG_INIT;
  c.kind = kind;
  return c;
}

// The metric over d through the public API, fed in batches of `batch`.
inline double api_result(const hb_metric_config &cfg, const ref::Data &d,
                         int32_t *flags = nullptr, size_t batch = 1000) {
  hb_metric *m = nullptr;
  EXPECT_EQ(hb_metric_create(nullptr, &cfg, &m), HB_OK) << hb_last_error();
  for (size_t at = 0; at < d.size(); at += batch) {
    size_t n = std::min(batch, d.size() - at);
    const float *w = d.weights.empty() ? nullptr : d.weights.data() + at;
    hb_status st = cfg.kind == HB_METRIC_GAUC
                       ? hb_metric_update_grouped(m, d.labels.data() + at,
                                                  d.preds.data() + at, w,
                                                  d.groups.data() + at, n)
                       : hb_metric_update(m, d.labels.data() + at,
                                          d.preds.data() + at, w, n);
    EXPECT_EQ(st, HB_OK) << hb_last_error();
  }
  double out = -1.0;
  EXPECT_EQ(hb_metric_result(m, &out), HB_OK) << hb_last_error();
  if (flags) *flags = hb_metric_flags(m);
  hb_metric_destroy(m);
  return out;
}

// Splits d into k parts (sample i goes to a random part, so parts can be
// empty), accumulates each part in its own state, serializes every state,
// merges the bytes into a fresh state in a shuffled order and returns its
// result. Equals the single-state result bit for bit when merging is exact.
inline double merged_result(const hb_metric_config &pub, const ref::Data &d,
                            int k, uint64_t seed, int32_t *flags = nullptr) {
  using namespace hb::metrics;
  Config cfg = config_from_public(&pub);
  std::mt19937_64 rng(seed);
  std::vector<ref::Data> parts(k);
  for (size_t i = 0; i < d.size(); ++i) {
    ref::Data &p = parts[rng() % k];
    p.labels.push_back(d.labels[i]);
    p.preds.push_back(d.preds[i]);
    if (!d.weights.empty()) p.weights.push_back(d.weights[i]);
    if (!d.groups.empty()) p.groups.push_back(d.groups[i]);
  }
  std::vector<Bytes> bytes;
  for (ref::Data &p : parts) {
    std::unique_ptr<State> s = make_state(cfg);
    // Uneven batches within a part, too.
    for (size_t at = 0; at < p.size();) {
      size_t n = std::min<size_t>(1 + rng() % 777, p.size() - at);
      s->update({p.labels.data() + at, p.preds.data() + at,
                 p.weights.empty() ? nullptr : p.weights.data() + at,
                 p.groups.empty() ? nullptr : p.groups.data() + at, n});
      at += n;
    }
    bytes.push_back(serialize(cfg, *s));
  }
  std::shuffle(bytes.begin(), bytes.end(), rng);
  std::unique_ptr<State> merged = make_state(cfg);
  for (auto &b : bytes)
    merge_serialized(cfg, merged.get(), b.data(), b.size(), "part");
  int32_t f = 0;
  double r = merged->result(&f);
  if (flags) *flags = f;
  return r;
}

inline bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace testing_metrics
