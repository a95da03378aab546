// The row initializers' arithmetic, the only definition: the host shards
// (src/embedding/init.cc) and the plugin's emb_init_rows kernel
// (cuda/id_map_kernels.cu) both call these functions, so a row a dynamic
// GPU table creates on the device equals the row a host table creates.
// A row's value is a pure function of (seed, hash of the table name, id,
// column) through a counter-based generator (splitmix64).
//
// zeros, constant and uniform are bit-equal on host and device (integer
// mixing, one double multiply-add compiled without FMA contraction: the
// kernels use -fmad=false, x86-64 host code has no FMA by default). normal
// uses log, sqrt and cos in double: CUDA's log and cos may differ from
// glibc's in the last bit of the double, which changes the rounded float
// in rare cases (about 1 in 1e8 values), by 1 ulp.
#pragma once

#include <math.h>
#include <stdint.h>

#include "hb.h"

#if defined(__CUDACC__)
#define HB_INIT_HD __host__ __device__
#else
#define HB_INIT_HD
#endif

namespace hb {
namespace initmath {

HB_INIT_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 53 random bits.
HB_INIT_HD inline double unit(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

// What a row's initial weights depend on besides its id. table_key is
// splitmix64(seed ^ hash of the table name).
struct Params {
  int32_t kind;  // hb_initializer_code
  double a, b;   // init_a, init_b
  uint64_t table_key;
};

HB_INIT_HD inline Params make_params(int32_t kind, double a, double b,
                                     uint64_t seed, uint64_t name_hash) {
  Params p;
  p.kind = kind;
  p.a = a;
  p.b = b;
  p.table_key = splitmix64(seed ^ name_hash);
  return p;
}

HB_INIT_HD inline uint64_t row_key(const Params &p, int64_t id) {
  return splitmix64(p.table_key ^ static_cast<uint64_t>(id));
}

// Weight c of the row whose row_key() is key.
HB_INIT_HD inline float weight(const Params &p, uint64_t key, int64_t c) {
  if (p.kind == HB_INIT_ZEROS) return 0.0f;
  if (p.kind == HB_INIT_CONSTANT) return static_cast<float>(p.a);
  const uint64_t k = splitmix64(key + static_cast<uint64_t>(c));
  if (p.kind == HB_INIT_UNIFORM) {
    double v = p.a + (p.b - p.a) * unit(k);
    float f = static_cast<float>(v);
    // Rounding to float can land on the excluded upper bound.
    if (f >= static_cast<float>(p.b) && p.b > p.a)
      f = ::nextafterf(static_cast<float>(p.b), static_cast<float>(p.a));
    return f;
  }
  // HB_INIT_NORMAL, Box-Muller on two independent uniforms.
  double u1 = 1.0 - unit(k);  // (0, 1]: log is finite
  double u2 = unit(splitmix64(k ^ 0xD1B54A32D192ED03ull));
  double z = ::sqrt(-2.0 * ::log(u1)) * ::cos(2.0 * M_PI * u2);
  return static_cast<float>(p.a + p.b * z);
}

}  // namespace initmath
}  // namespace hb
