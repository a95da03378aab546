#include "embedding/optimizer.h"

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
    : kind_(spec.optimizer),
      dim_(spec.dim),
      slots_(slots_of(spec.optimizer)),
      words_(optmath::record_words(spec.optimizer, spec.dim)),
      h_(optmath::make_hyper(spec.learning_rate, spec.epsilon,
                             spec.initial_accumulator, spec.beta1, spec.beta2,
                             spec.l1, spec.l2, spec.lr_power)) {}

int64_t Optimizer::adam_steps(const float *record, int64_t dim) {
  return optmath::record_steps(record, dim);
}

void Optimizer::init_slots(float *r) const {
  optmath::init_slots(kind_, r, dim_, h_.init_acc);
}

// One loop per optimizer over optmath's element steps, so each loop
// vectorises (the hyperparameters are a local copy: nothing aliases them).
void Optimizer::step(float *__restrict r, const float *__restrict g) const {
  const optmath::Hyper h = h_;
  float *__restrict w = r;
  const int64_t d = dim_;
  switch (kind_) {
    case HB_OPT_SGD:
      for (int64_t c = 0; c < d; ++c) optmath::sgd(w[c], g[c], h);
      return;
    case HB_OPT_ADAGRAD: {
      float *__restrict a = r + d;
      for (int64_t c = 0; c < d; ++c) optmath::adagrad(w[c], a[c], g[c], h);
      return;
    }
    case HB_OPT_ADAM: {
      float *__restrict m = r + d;
      float *__restrict v = r + 2 * d;
      const int64_t t = optmath::record_steps(r, d) + 1;
      optmath::set_record_steps(r, d, t);
      const float lr_t = optmath::adam_lr(h, t);
      for (int64_t c = 0; c < d; ++c)
        optmath::adam(w[c], m[c], v[c], g[c], lr_t, h);
      return;
    }
    case HB_OPT_FTRL: {
      float *__restrict n = r + d;
      float *__restrict z = r + 2 * d;
      for (int64_t c = 0; c < d; ++c) optmath::ftrl(w[c], n[c], z[c], g[c], h);
      return;
    }
  }
}

}  // namespace emb
}  // namespace hb
