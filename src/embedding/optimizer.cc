#include "embedding/optimizer.h"

#include <cmath>
#include <cstring>

namespace hb {
namespace emb {

static int slots_of(int32_t opt) {
  switch (opt) {
    case HB_OPT_ADAGRAD:
      return 1;  // accumulator
    case HB_OPT_ADAM:
      return 2;  // m, v
    case HB_OPT_FTRL:
      return 2;  // accumulator n, linear z
    default:
      return 0;
  }
}

Optimizer::Optimizer(const Spec &spec)
    : spec_(spec),
      dim_(spec.dim),
      slots_(slots_of(spec.optimizer)),
      words_(spec.dim * (1 + slots_) + (spec.optimizer == HB_OPT_ADAM ? 2 : 0)),
      lr_(static_cast<float>(spec.learning_rate)),
      eps_(static_cast<float>(spec.epsilon)),
      init_acc_(static_cast<float>(spec.initial_accumulator)),
      b1_(static_cast<float>(spec.beta1)),
      one_minus_b1_(static_cast<float>(1.0 - spec.beta1)),
      b2_(static_cast<float>(spec.beta2)),
      one_minus_b2_(static_cast<float>(1.0 - spec.beta2)),
      l1_(static_cast<float>(spec.l1)),
      two_l2_(static_cast<float>(2.0 * spec.l2)),
      power_(static_cast<float>(-spec.lr_power)) {}

int64_t Optimizer::adam_steps(const float *record, int64_t dim) {
  int64_t t;
  std::memcpy(&t, record + 3 * dim, 8);
  return t;
}

void Optimizer::init_slots(float *r) const {
  float *s = r + dim_;
  switch (spec_.optimizer) {
    case HB_OPT_ADAGRAD:
      for (int64_t c = 0; c < dim_; ++c) s[c] = init_acc_;
      break;
    case HB_OPT_ADAM: {
      for (int64_t c = 0; c < 2 * dim_; ++c) s[c] = 0.0f;
      int64_t t = 0;
      std::memcpy(r + 3 * dim_, &t, 8);
      break;
    }
    case HB_OPT_FTRL:
      for (int64_t c = 0; c < dim_; ++c) s[c] = init_acc_;
      for (int64_t c = 0; c < dim_; ++c) s[dim_ + c] = 0.0f;
      break;
    default:
      break;
  }
}

void Optimizer::step(float *__restrict r, const float *__restrict g) const {
  float *__restrict w = r;
  const int64_t d = dim_;
  switch (spec_.optimizer) {
    case HB_OPT_SGD:
      for (int64_t c = 0; c < d; ++c) w[c] = w[c] - lr_ * g[c];
      return;
    case HB_OPT_ADAGRAD: {
      float *__restrict a = r + d;
      for (int64_t c = 0; c < d; ++c) {
        float acc = a[c] + g[c] * g[c];
        a[c] = acc;
        w[c] = w[c] - lr_ * g[c] / (std::sqrt(acc) + eps_);
      }
      return;
    }
    case HB_OPT_ADAM: {
      float *__restrict m = r + d;
      float *__restrict v = r + 2 * d;
      int64_t t;
      std::memcpy(&t, r + 3 * d, 8);
      ++t;
      std::memcpy(r + 3 * d, &t, 8);
      const double td = static_cast<double>(t);
      const float lr_t = static_cast<float>(
          spec_.learning_rate * std::sqrt(1.0 - std::pow(spec_.beta2, td)) /
          (1.0 - std::pow(spec_.beta1, td)));
      for (int64_t c = 0; c < d; ++c) {
        float mc = b1_ * m[c] + one_minus_b1_ * g[c];
        float vc = b2_ * v[c] + one_minus_b2_ * (g[c] * g[c]);
        m[c] = mc;
        v[c] = vc;
        w[c] = w[c] - lr_t * mc / (std::sqrt(vc) + eps_);
      }
      return;
    }
    case HB_OPT_FTRL: {
      float *__restrict n = r + d;
      float *__restrict z = r + 2 * d;
      const bool sqrt_power = spec_.lr_power == -0.5;
      for (int64_t c = 0; c < d; ++c) {
        float n_old = n[c];
        float n_new = n_old + g[c] * g[c];
        float p_new = sqrt_power ? std::sqrt(n_new) : std::pow(n_new, power_);
        float p_old = sqrt_power ? std::sqrt(n_old) : std::pow(n_old, power_);
        float sigma = (p_new - p_old) / lr_;
        float zc = z[c] + g[c] - sigma * w[c];
        float quad = p_new / lr_ + two_l2_;
        z[c] = zc;
        n[c] = n_new;
        w[c] =
            std::fabs(zc) > l1_ ? (std::copysign(l1_, zc) - zc) / quad : 0.0f;
      }
      return;
    }
  }
}

}  // namespace emb
}  // namespace hb
