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

}  // namespace emb
}  // namespace hb
