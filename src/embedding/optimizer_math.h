// One optimizer step on one element, the only definition of the embedding
// optimizers' arithmetic: the CPU tables (src/embedding/optimizer.cc) and
// the CUDA kernels (cuda/embedding_kernels.cu) both call these functions,
// so a GPU table trains bit for bit as a host table does. Compile the
// kernels with -fmad=false and the host code with -ffp-contract=off (no
// contraction into FMA): sqrt and division are correctly rounded on both
// sides. Two residual host/device differences: Adam's bias-corrected rate
// uses pow() in double (libm and CUDA may differ in the last bit of a
// double, which changes the float result with probability ~1e-8), and FTRL
// with lr_power != -0.5 uses powf (last float bit may differ).
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hb.h"

#if defined(__CUDACC__)
#define HB_HD __host__ __device__
#else
#define HB_HD
#endif

namespace hb {
namespace optmath {

// Hyperparameters as the embedding Optimizer derives them from the
// double-precision config.
struct Hyper {
  float lr, eps, init_acc, b1, one_minus_b1, b2, one_minus_b2, l1, two_l2,
      power;
  bool sqrt_power;                // lr_power == -0.5: sqrt instead of powf
  double lr_d, beta1_d, beta2_d;  // Adam's bias correction runs in double
};

HB_HD inline Hyper make_hyper(double learning_rate, double epsilon,
                              double initial_accumulator, double beta1,
                              double beta2, double l1, double l2,
                              double lr_power) {
  Hyper h;
  h.lr = static_cast<float>(learning_rate);
  h.eps = static_cast<float>(epsilon);
  h.init_acc = static_cast<float>(initial_accumulator);
  h.b1 = static_cast<float>(beta1);
  h.one_minus_b1 = static_cast<float>(1.0 - beta1);
  h.b2 = static_cast<float>(beta2);
  h.one_minus_b2 = static_cast<float>(1.0 - beta2);
  h.l1 = static_cast<float>(l1);
  h.two_l2 = static_cast<float>(2.0 * l2);
  h.power = static_cast<float>(-lr_power);
  h.sqrt_power = lr_power == -0.5;
  h.lr_d = learning_rate;
  h.beta1_d = beta1;
  h.beta2_d = beta2;
  return h;
}

HB_HD inline void sgd(float &w, float g, const Hyper &h) { w = w - h.lr * g; }

// acc += g^2; w -= lr * g / (sqrt(acc) + eps).
HB_HD inline void adagrad(float &w, float &a, float g, const Hyper &h) {
  float acc = a + g * g;
  a = acc;
  w = w - h.lr * g / (sqrtf(acc) + h.eps);
}

// Bias-corrected rate of lazy Adam at the row's step t (1-based).
HB_HD inline float adam_lr(const Hyper &h, int64_t t) {
  const double td = static_cast<double>(t);
  return static_cast<float>(h.lr_d * sqrt(1.0 - pow(h.beta2_d, td)) /
                            (1.0 - pow(h.beta1_d, td)));
}

HB_HD inline void adam(float &w, float &m, float &v, float g, float lr_t,
                       const Hyper &h) {
  float mc = h.b1 * m + h.one_minus_b1 * g;
  float vc = h.b2 * v + h.one_minus_b2 * (g * g);
  m = mc;
  v = vc;
  w = w - lr_t * mc / (sqrtf(vc) + h.eps);
}

// FTRL-Proximal (TF ApplyFtrl) with slots n (accumulator) and z (linear).
HB_HD inline void ftrl(float &w, float &n, float &z, float g, const Hyper &h) {
  float n_old = n;
  float n_new = n_old + g * g;
  float p_new = h.sqrt_power ? sqrtf(n_new) : powf(n_new, h.power);
  float p_old = h.sqrt_power ? sqrtf(n_old) : powf(n_old, h.power);
  float sigma = (p_new - p_old) / h.lr;
  float zc = z + g - sigma * w;
  float quad = p_new / h.lr + h.two_l2;
  z = zc;
  n = n_new;
  w = fabsf(zc) > h.l1 ? (copysignf(h.l1, zc) - zc) / quad : 0.0f;
}

// Row records as the embedding shard lays them out: dim weights, then the
// optimizer's slots (dim each: Adagrad acc; Adam m, v; FTRL n, z) and, for
// Adam, the row's int64 step count in the next two 32-bit words.
HB_HD inline int64_t record_steps(const float *record, int64_t dim) {
  int64_t t;
  memcpy(&t, record + 3 * dim, 8);
  return t;
}
HB_HD inline void set_record_steps(float *record, int64_t dim, int64_t t) {
  memcpy(record + 3 * dim, &t, 8);
}

// A new record's optimizer slots (after its dim weights): accumulators at
// init_acc, everything else zero, Adam's step count 0.
HB_HD inline void init_slots(int32_t kind, float *record, int64_t dim,
                             float init_acc) {
  float *s = record + dim;
  switch (kind) {
    case HB_OPT_ADAGRAD:
      for (int64_t c = 0; c < dim; ++c) s[c] = init_acc;
      break;
    case HB_OPT_ADAM:
      for (int64_t c = 0; c < 2 * dim; ++c) s[c] = 0.0f;
      set_record_steps(record, dim, 0);
      break;
    case HB_OPT_FTRL:
      for (int64_t c = 0; c < dim; ++c) s[c] = init_acc;
      for (int64_t c = 0; c < dim; ++c) s[dim + c] = 0.0f;
      break;
    default:
      break;
  }
}

// One step of element c of a record with gradient g (lr_t: Adam only).
HB_HD inline void step_element(int32_t kind, float *record, int64_t dim,
                               int64_t c, float g, float lr_t, const Hyper &h) {
  switch (kind) {
    case HB_OPT_SGD:
      sgd(record[c], g, h);
      break;
    case HB_OPT_ADAGRAD:
      adagrad(record[c], record[dim + c], g, h);
      break;
    case HB_OPT_ADAM:
      adam(record[c], record[dim + c], record[2 * dim + c], g, lr_t, h);
      break;
    case HB_OPT_FTRL:
      ftrl(record[c], record[dim + c], record[2 * dim + c], g, h);
      break;
  }
}

// Words per record: as Optimizer::record_words.
HB_HD inline int64_t record_words(int32_t kind, int64_t dim) {
  int slots = kind == HB_OPT_ADAGRAD                       ? 1
              : kind == HB_OPT_ADAM || kind == HB_OPT_FTRL ? 2
                                                           : 0;
  return dim * (1 + slots) + (kind == HB_OPT_ADAM ? 2 : 0);
}

}  // namespace optmath
}  // namespace hb
