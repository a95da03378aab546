// Per-row optimizer steps. A row record is `dim` weights followed by the
// optimizer's slots (each `dim` wide) and, for Adam, a 64-bit step count in
// two 32-bit words; a step reads only its own record and summed gradient,
// so the result does not depend on how the table is sharded.
//
// All arithmetic is float32 with hyperparameters rounded to float once
// (Adam's bias-corrected rate is computed in double per row, then rounded);
// the exact formulas are in docs/embedding-format.md ("Optimizers"). The
// arithmetic itself is embedding/optimizer_math.h, shared with the CUDA
// kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "embedding/dim_dispatch.h"
#include "embedding/optimizer_math.h"
#include "embedding/spec.h"

namespace hb {
namespace emb {

class Optimizer {
 public:
  explicit Optimizer(const Spec &spec);

  int num_slots() const { return slots_; }
  // 32-bit words per row record.
  int64_t record_words() const { return words_; }
  // Sets the slots (and step count) of a freshly created record.
  void init_slots(float *record) const;
  // One step of row `record` with summed gradient g (dim floats).
  void step(float *record, const float *g) const {
    auto one = [record](size_t) { return record; };
    step_rows_dim<0>(1, one, g);
  }
  // Steps n rows: record(k) is row k's record, g + k * dim its summed
  // gradient; record(k) is called once per row, in increasing k (a caller
  // may prefetch ahead from it). The same element operations as step(), with
  // the kind and the hyperparameters read once and, for the common dims, the
  // row width a compile-time constant (no per-row call, loop set-up or
  // remainder).
  template <class Record>
  void step_rows(size_t n, Record &&record, const float *g) const {
    with_dim(dim_, [&](auto kdim) {
      step_rows_dim<decltype(kdim)::value>(n, record, g);
    });
  }

  static int64_t adam_steps(const float *record, int64_t dim);

 private:
  // One loop per optimizer over optmath's element steps, so each loop
  // vectorises (the hyperparameters are a local copy: nothing aliases
  // them). kDim > 0: the row width, else dim_.
  template <int kDim, class Record>
  void step_rows_dim(size_t n, Record &record, const float *g) const;

  int32_t kind_;
  int64_t dim_;
  int slots_;
  int64_t words_;
  optmath::Hyper h_;
};

// One row per optimizer, over optmath's element steps. The __restrict
// parameters tell GCC the row, its slots and the gradient do not overlap;
// `unroll 1` keeps a constant-width loop a loop until the vectoriser sees
// it (fully unrolled first, it stayed scalar: sqrtss / divss per float).
namespace optrow {
template <int kDim>
inline void sgd(int64_t d, float *__restrict w, const float *__restrict g,
                const optmath::Hyper &h) {
#pragma GCC unroll 1
  for (int64_t c = 0; c < (kDim > 0 ? kDim : d); ++c)
    optmath::sgd(w[c], g[c], h);
}
template <int kDim>
inline void adagrad(int64_t d, float *__restrict w, float *__restrict a,
                    const float *__restrict g, const optmath::Hyper &h) {
#pragma GCC unroll 1
  for (int64_t c = 0; c < (kDim > 0 ? kDim : d); ++c)
    optmath::adagrad(w[c], a[c], g[c], h);
}
template <int kDim>
inline void adam(int64_t d, float *__restrict w, float *__restrict m,
                 float *__restrict v, const float *__restrict g, float lr_t,
                 const optmath::Hyper &h) {
#pragma GCC unroll 1
  for (int64_t c = 0; c < (kDim > 0 ? kDim : d); ++c)
    optmath::adam(w[c], m[c], v[c], g[c], lr_t, h);
}
template <int kDim>
inline void ftrl(int64_t d, float *__restrict w, float *__restrict n,
                 float *__restrict z, const float *__restrict g,
                 const optmath::Hyper &h) {
#pragma GCC unroll 1
  for (int64_t c = 0; c < (kDim > 0 ? kDim : d); ++c)
    optmath::ftrl(w[c], n[c], z[c], g[c], h);
}
}  // namespace optrow

template <int kDim, class Record>
void Optimizer::step_rows_dim(size_t n, Record &record, const float *g) const {
  const optmath::Hyper h = h_;
  const int64_t d = kDim > 0 ? kDim : dim_;
  switch (kind_) {
    case HB_OPT_SGD:
      for (size_t k = 0; k < n; ++k)
        optrow::sgd<kDim>(d, record(k), g + k * d, h);
      return;
    case HB_OPT_ADAGRAD:
      for (size_t k = 0; k < n; ++k) {
        float *w = record(k);
        optrow::adagrad<kDim>(d, w, w + d, g + k * d, h);
      }
      return;
    case HB_OPT_ADAM:
      for (size_t k = 0; k < n; ++k) {
        float *w = record(k);
        const int64_t t = optmath::record_steps(w, d) + 1;
        optmath::set_record_steps(w, d, t);
        optrow::adam<kDim>(d, w, w + d, w + 2 * d, g + k * d,
                           optmath::adam_lr(h, t), h);
      }
      return;
    case HB_OPT_FTRL:
      for (size_t k = 0; k < n; ++k) {
        float *w = record(k);
        optrow::ftrl<kDim>(d, w, w + d, w + 2 * d, g + k * d, h);
      }
      return;
  }
}

}  // namespace emb
}  // namespace hb
