// One optimizer step on one element, shared by the CPU embedding code and
// the CUDA kernels so both compute the same float operations in the same
// order. Compile the kernels with -fmad=false (no contraction into FMA):
// then SGD, Adagrad, Adam and FTRL with lr_power = -0.5 give bit-identical
// results on CPU and GPU (sqrt and division are correctly rounded on both;
// powers of beta are products in double, not pow()). FTRL with another
// lr_power uses powf, whose last bit may differ between libm and CUDA.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define HB_HD __host__ __device__
#else
#define HB_HD
#endif

namespace hb {
namespace optmath {

struct Hyper {
  float lr = 0.01f;
  float initial_accumulator = 0.1f;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
  float l1 = 0.0f, l2 = 0.0f, lr_power = -0.5f;
};

// base^exp by squaring in double: the same products on host and device.
HB_HD inline double powi(double base, int64_t exp) {
  double r = 1.0;
  while (exp > 0) {
    if (exp & 1) r *= base;
    base *= base;
    exp >>= 1;
  }
  return r;
}

HB_HD inline void sgd(float &w, float g, const Hyper &h) { w = w - h.lr * g; }

// Keras Adagrad: acc += g^2; w -= lr * g / (sqrt(acc) + epsilon).
HB_HD inline void adagrad(float &w, float &acc, float g, const Hyper &h) {
  acc = acc + g * g;
  w = w - h.lr * g / (sqrtf(acc) + h.epsilon);
}

// Bias-corrected step size of lazy Adam at step t (1-based, per row).
HB_HD inline float adam_lr(const Hyper &h, int64_t t) {
  double b1t = powi(static_cast<double>(h.beta1), t);
  double b2t = powi(static_cast<double>(h.beta2), t);
  return static_cast<float>(static_cast<double>(h.lr) * sqrt(1.0 - b2t) /
                            (1.0 - b1t));
}

// Lazy Adam (TF LazyAdamOptimizer) with lr_t = adam_lr(h, t).
HB_HD inline void adam(float &w, float &m, float &v, float g, float lr_t,
                       const Hyper &h) {
  m = h.beta1 * m + (1.0f - h.beta1) * g;
  v = h.beta2 * v + (1.0f - h.beta2) * (g * g);
  w = w - lr_t * m / (sqrtf(v) + h.epsilon);
}

HB_HD inline float ftrl_pow(float x, float lr_power) {
  return lr_power == -0.5f ? sqrtf(x) : powf(x, -lr_power);
}

// FTRL-Proximal as TF's ApplyFtrl: z (linear) and n (accumulator) slots.
HB_HD inline void ftrl(float &w, float &z, float &n, float g, const Hyper &h) {
  float n_new = n + g * g;
  float sigma = (ftrl_pow(n_new, h.lr_power) - ftrl_pow(n, h.lr_power)) / h.lr;
  z = z + g - sigma * w;
  n = n_new;
  float quadratic = ftrl_pow(n, h.lr_power) / h.lr + 2.0f * h.l2;
  w = fabsf(z) > h.l1 ? (copysignf(h.l1, z) - z) / quadratic : 0.0f;
}

}  // namespace optmath
}  // namespace hb
