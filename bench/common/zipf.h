// Shared by the benchmarks: a seeded Zipf sampler.
#pragma once

#include <cmath>
#include <cstdint>

namespace hbbench {

// Zipf over [1, n] by rejection-inversion (Hoermann & Derflinger), O(1)
// memory, so the generator adds nothing to the peak memory measured.
class Zipf {
 public:
  Zipf(int64_t n, double s) : n_(n), s_(s) {
    hx1_ = H(1.5) - 1.0;
    hn_ = H(n + 0.5);
    cut_ = 2.0 - Hinv(H(2.5) - h(2.0));
  }
  int64_t operator()(uint64_t &state) const {
    for (;;) {
      double u = hn_ + unit(state) * (hx1_ - hn_);
      double x = Hinv(u);
      int64_t k = static_cast<int64_t>(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      if (k - x <= cut_ || u >= H(k + 0.5) - h(static_cast<double>(k)))
        return k;
    }
  }

 private:
  static double unit(uint64_t &st) {
    st += 0x9E3779B97F4A7C15ull;
    uint64_t z = st;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * 0x1p-53;
  }
  static double helper1(double x) {
    return std::fabs(x) > 1e-8 ? std::log1p(x) / x
                               : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) {
    return std::fabs(x) > 1e-8
               ? std::expm1(x) / x
               : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
  }
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  double H(double x) const {
    double lx = std::log(x);
    return helper2((1.0 - s_) * lx) * lx;
  }
  double Hinv(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;
    return std::exp(helper1(t) * x);
  }
  int64_t n_;
  double s_, hx1_, hn_, cut_;
};

}  // namespace hbbench
