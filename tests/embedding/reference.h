// An independent single-process model of a sharded table, written from the
// documented semantics (docs/embedding-format.md): the initializer formula,
// the optimizer formulas and the summation order. Distributed results must
// be bit-equal to it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "abi/dtype.h"
#include "hb.h"

namespace hbtest {

inline uint64_t ref_splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline float ref_wire(float v, hb_dtype d) {
  if (d == HB_FLOAT16) return hb::half_to_float(hb::float_to_half(v));
  if (d == HB_BFLOAT16) return hb::bf16_to_float(hb::float_to_bf16(v));
  return v;
}

struct RefTable {
  hb_embedding_config c;
  std::string name;
  struct Row {
    std::vector<float> w, s1, s2;
    int64_t t = 0;
  };
  std::map<int64_t, Row> rows;

  explicit RefTable(const hb_embedding_config &cfg) : c(cfg), name(cfg.name) {}

  float init_value(int64_t id, int64_t col) const {
    if (c.initializer == HB_INIT_ZEROS) return 0.0f;
    if (c.initializer == HB_INIT_CONSTANT) return (float)c.init_a;
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
    uint64_t key = ref_splitmix(ref_splitmix(c.seed ^ h) ^ (uint64_t)id);
    uint64_t k = ref_splitmix(key + (uint64_t)col);
    double u = (k >> 11) * 0x1p-53;
    if (c.initializer == HB_INIT_UNIFORM) {
      float f = (float)(c.init_a + (c.init_b - c.init_a) * u);
      if (f >= (float)c.init_b && c.init_b > c.init_a)
        f = std::nextafter((float)c.init_b, (float)c.init_a);
      return f;
    }
    double u1 = 1.0 - u;
    double u2 = (ref_splitmix(k ^ 0xD1B54A32D192ED03ull) >> 11) * 0x1p-53;
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    return (float)(c.init_a + c.init_b * z);
  }

  Row &row(int64_t id) {
    auto it = rows.find(id);
    if (it != rows.end()) return it->second;
    Row r;
    for (int64_t k = 0; k < c.dim; ++k) r.w.push_back(init_value(id, k));
    float s1 = 0;
    if (c.optimizer == HB_OPT_ADAGRAD || c.optimizer == HB_OPT_FTRL)
      s1 = (float)c.initial_accumulator;
    r.s1.assign(c.dim, s1);
    r.s2.assign(c.dim, 0.0f);
    return rows.emplace(id, r).first->second;
  }

  // What a lookup returns for id (through the wire dtype).
  std::vector<float> lookup(int64_t id) {
    std::vector<float> out = row(id).w;
    for (float &v : out) v = ref_wire(v, c.wire_dtype);
    return out;
  }

  void step(Row &r, const std::vector<float> &g) {
    const float lr = (float)c.learning_rate, eps = (float)c.epsilon;
    for (int64_t k = 0; k < c.dim; ++k) {
      float &w = r.w[k];
      switch (c.optimizer) {
        case HB_OPT_SGD:
          w = w - lr * g[k];
          break;
        case HB_OPT_ADAGRAD:
          r.s1[k] = r.s1[k] + g[k] * g[k];
          w = w - lr * g[k] / (std::sqrt(r.s1[k]) + eps);
          break;
        case HB_OPT_ADAM: {
          if (k == 0) ++r.t;
          float lr_t = (float)(c.learning_rate *
                               std::sqrt(1.0 - std::pow(c.beta2, (double)r.t)) /
                               (1.0 - std::pow(c.beta1, (double)r.t)));
          r.s1[k] = (float)c.beta1 * r.s1[k] + (float)(1.0 - c.beta1) * g[k];
          r.s2[k] =
              (float)c.beta2 * r.s2[k] + (float)(1.0 - c.beta2) * (g[k] * g[k]);
          w = w - lr_t * r.s1[k] / (std::sqrt(r.s2[k]) + eps);
          break;
        }
        case HB_OPT_FTRL: {
          float n0 = r.s1[k], n1 = n0 + g[k] * g[k];
          float p = (float)(-c.lr_power);
          float a1 = c.lr_power == -0.5 ? std::sqrt(n1) : std::pow(n1, p);
          float a0 = c.lr_power == -0.5 ? std::sqrt(n0) : std::pow(n0, p);
          float z = r.s2[k] + g[k] - (a1 - a0) / lr * w;
          r.s2[k] = z;
          r.s1[k] = n1;
          float quad = a1 / lr + (float)(2.0 * c.l2);
          float l1 = (float)c.l1;
          w = std::fabs(z) > l1 ? (std::copysign(l1, z) - z) / quad : 0.0f;
          break;
        }
      }
    }
  }

  // One apply_gradients call: batch[r] = (ids, grads) of rank r.
  void apply(
      const std::vector<std::pair<std::vector<int64_t>, std::vector<float>>>
          &batch) {
    for (auto &kv : sums(batch)) step(row(kv.first), kv.second);
  }

  // The summed gradient of every id of one call, in the documented order.
  std::map<int64_t, std::vector<float>> sums(
      const std::vector<std::pair<std::vector<int64_t>, std::vector<float>>>
          &batch) const {
    const int64_t d = c.dim;
    std::map<int64_t, std::vector<float>> total;
    for (const auto &b : batch) {
      std::map<int64_t, std::vector<float>> partial;
      for (size_t i = 0; i < b.first.size(); ++i) {
        const float *g = b.second.data() + i * d;
        auto it = partial.find(b.first[i]);
        if (it == partial.end())
          partial.emplace(b.first[i], std::vector<float>(g, g + d));
        else
          for (int64_t k = 0; k < d; ++k) it->second[k] += g[k];
      }
      for (auto &kv : partial) {
        for (float &v : kv.second) v = ref_wire(v, c.wire_dtype);
        auto it = total.find(kv.first);
        if (it == total.end())
          total.emplace(kv.first, kv.second);
        else
          for (int64_t k = 0; k < d; ++k) it->second[k] += kv.second[k];
      }
    }
    return total;
  }
};

}  // namespace hbtest
