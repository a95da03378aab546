#include "embedding/init.h"

#include <cmath>

namespace hb {
namespace emb {

// Uniform in [0, 1) with 53 random bits.
static double unit(uint64_t bits) { return (bits >> 11) * 0x1p-53; }

void init_row(const Spec &spec, uint64_t name_hash, int64_t id, float *w) {
  const int64_t dim = spec.dim;
  switch (spec.initializer) {
    case HB_INIT_ZEROS:
      for (int64_t c = 0; c < dim; ++c) w[c] = 0.0f;
      return;
    case HB_INIT_CONSTANT:
      for (int64_t c = 0; c < dim; ++c) w[c] = static_cast<float>(spec.init_a);
      return;
    default:
      break;
  }
  const uint64_t row_key =
      splitmix64(splitmix64(spec.seed ^ name_hash) ^ static_cast<uint64_t>(id));
  for (int64_t c = 0; c < dim; ++c) {
    uint64_t k = splitmix64(row_key + static_cast<uint64_t>(c));
    if (spec.initializer == HB_INIT_UNIFORM) {
      double v = spec.init_a + (spec.init_b - spec.init_a) * unit(k);
      float f = static_cast<float>(v);
      // Rounding to float can land on the excluded upper bound.
      if (f >= static_cast<float>(spec.init_b) && spec.init_b > spec.init_a)
        f = std::nextafter(static_cast<float>(spec.init_b),
                           static_cast<float>(spec.init_a));
      w[c] = f;
    } else {  // HB_INIT_NORMAL, Box-Muller on two independent uniforms
      double u1 = 1.0 - unit(k);  // (0, 1]: log is finite
      double u2 = unit(splitmix64(k ^ 0xD1B54A32D192ED03ull));
      double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      w[c] = static_cast<float>(spec.init_a + spec.init_b * z);
    }
  }
}

}  // namespace emb
}  // namespace hb
