// The kernels' per-element use of src/embedding/optimizer_math.h
// (step_element, as cuda/embedding_kernels.cu runs it) against the CPU
// embedding optimizer's per-row loops (src/embedding/optimizer.cc), bit for
// bit, on the same row records: what makes a GPU table train exactly like a
// CPU one.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "embedding/optimizer.h"
#include "embedding/spec.h"
#include "embedding/optimizer_math.h"

namespace {

struct Case {
  int32_t kind;
  double lr, eps, init, b1, b2, l1, l2, lr_power;
};

TEST(OptimizerEquivalence, KernelMathMatchesCpuOptimizerBitForBit) {
  const Case cases[] = {
      {HB_OPT_SGD, 0.01, 1e-8, 0.1, 0.9, 0.999, 0, 0, -0.5},
      {HB_OPT_SGD, 0.3, 1e-8, 0.1, 0.9, 0.999, 0, 0, -0.5},
      {HB_OPT_ADAGRAD, 0.05, 1e-7, 0.1, 0.9, 0.999, 0, 0, -0.5},
      {HB_OPT_ADAGRAD, 0.1, 0.0, 0.3, 0.9, 0.999, 0, 0, -0.5},
      {HB_OPT_ADAM, 0.001, 1e-8, 0.1, 0.9, 0.999, 0, 0, -0.5},
      {HB_OPT_ADAM, 0.02, 1e-6, 0.1, 0.8, 0.95, 0, 0, -0.5},
      {HB_OPT_FTRL, 0.05, 1e-8, 0.1, 0.9, 0.999, 0.001, 0.01, -0.5},
      {HB_OPT_FTRL, 0.1, 1e-8, 0.2, 0.9, 0.999, 0.0, 0.0, -0.5},
      {HB_OPT_FTRL, 0.05, 1e-8, 0.1, 0.9, 0.999, 0.01, 0.1, -0.3},
  };
  const int64_t dim = 13;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (const Case &k : cases) {
    hb::emb::Spec spec;
    spec.name = "t";
    spec.dim = dim;
    spec.num_rows = 1;
    spec.optimizer = k.kind;
    spec.learning_rate = k.lr;
    spec.epsilon = k.eps;
    spec.initial_accumulator = k.init;
    spec.beta1 = k.b1;
    spec.beta2 = k.b2;
    spec.l1 = k.l1;
    spec.l2 = k.l2;
    spec.lr_power = k.lr_power;
    hb::emb::Optimizer cpu(spec);
    hb::optmath::Hyper h = hb::optmath::make_hyper(
        k.lr, k.eps, k.init, k.b1, k.b2, k.l1, k.l2, k.lr_power);
    ASSERT_EQ(cpu.record_words(), hb::optmath::record_words(k.kind, dim));
    std::vector<float> a(cpu.record_words()), b;
    for (int64_t c = 0; c < dim; ++c) a[c] = dist(rng);
    cpu.init_slots(a.data());
    b = a;
    for (int step = 0; step < 50; ++step) {
      std::vector<float> g(dim);
      for (auto &x : g) x = step % 7 == 3 ? 0.0f : dist(rng);
      cpu.step(a.data(), g.data());
      int64_t t = 0;
      float lr_t = 0.0f;
      if (k.kind == HB_OPT_ADAM) {
        t = hb::optmath::record_steps(b.data(), dim) + 1;
        lr_t = hb::optmath::adam_lr(h, t);
      }
      for (int64_t c = 0; c < dim; ++c)
        hb::optmath::step_element(k.kind, b.data(), dim, c, g[c], lr_t, h);
      if (k.kind == HB_OPT_ADAM)
        hb::optmath::set_record_steps(b.data(), dim, t);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "optimizer " << k.kind << " lr " << k.lr << " lr_power "
          << k.lr_power << " differs after step " << step;
    }
  }
}

}  // namespace
