// The 64-bit sample key of the exact AUC paths and the sweep that turns
// sorted keys into an AUC.
//   bits 63..32: the prediction's float bits mapped to an unsigned number
//                with the same order (-0.0 is folded into +0.0);
//   bit  31:     the class (label != 0);
//   bits 30..0:  the weight's float bits (weights are >= 0).
// Sorting keys as integers sorts samples by prediction, and gives every
// multiset of samples one canonical order.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "metrics/big_vector.h"
#include "metrics/state.h"

namespace hb {
namespace metrics {

inline uint32_t ordered_bits(float x) {
  x += 0.0f;  // -0.0 -> +0.0
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u >> 31) ? ~u : (u | 0x80000000u);
}

inline uint64_t sample_key(float pred, bool positive, float weight) {
  uint32_t w;
  std::memcpy(&w, &weight, sizeof w);
  return (static_cast<uint64_t>(ordered_bits(pred)) << 32) |
         (static_cast<uint64_t>(positive) << 31) | (w & 0x7fffffffu);
}

inline uint32_t key_pred(uint64_t key) {
  return static_cast<uint32_t>(key >> 32);
}
inline bool key_positive(uint64_t key) { return (key >> 31) & 1u; }
inline float key_weight(uint64_t key) {
  uint32_t w = static_cast<uint32_t>(key & 0x7fffffffu);
  float f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}

// Appends the keys of b's samples with nonzero weight (zero weights mask a
// sample, as in TF, and would not change any AUC).
void append_sample_keys(const Batch &b, BigVector<uint64_t> *out);

// Accumulates keys in ascending order (one AUC; GAUC runs one sweep per
// group). Call flush() after the last key.
struct AucSweep {
  double pos = 0.0, neg = 0.0;  // class totals
  double area = 0.0;            // sum of P_v * (N_below + N_v / 2)

  void add(uint64_t key) {
    uint32_t v = key_pred(key);
    if (v != value_) flush();
    value_ = v;
    (key_positive(key) ? pv_ : nv_) += key_weight(key);
  }
  // Closes the run of equal predictions.
  void flush() {
    area += pv_ * (neg + 0.5 * nv_);
    pos += pv_;
    neg += nv_;
    pv_ = nv_ = 0.0;
  }
  void run(const uint64_t *keys, size_t n) {
    for (size_t i = 0; i < n; ++i) add(keys[i]);
    flush();
  }
  // True when both classes have weight.
  bool both_classes() const { return pos > 0.0 && neg > 0.0; }
  double auc() const { return area / (pos * neg); }
  // The AUC with EMPTY / SINGLE_CLASS handling (0 / 0.5 and a flag).
  double finish(int32_t *flags) const;

 private:
  uint32_t value_ = 0;
  double pv_ = 0.0, nv_ = 0.0;  // weights at the current prediction
};

}  // namespace metrics
}  // namespace hb
