// Embedding collections: seeded jagged batches and an independent
// single-process reference of a collection step, written from
// docs/embedding-collections.md on top of RefTable (reference.h).
#pragma once

#ifndef HB_EXPERIMENTAL
#define HB_EXPERIMENTAL 1
#endif

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "reference.h"

namespace hbtest {

struct CollFeature {
  int table;
  int32_t pooling;
  bool weighted;
  int max_len;  // bag lengths in [0, max_len]; 1 with one_hot
  bool one_hot;
};

struct CollCase {
  std::vector<hb_embedding_config> tables;
  std::vector<CollFeature> features;
  std::vector<std::string> names;  // feature names
};

inline hb_embedding_config coll_table(const char *name, int64_t dim,
                                      int64_t rows, int opt, int partition,
                                      hb_dtype wire) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = name;
  c.dim = dim;
  c.num_rows = rows;
  c.partition = partition;
  c.initializer = HB_INIT_NORMAL;
  c.init_b = 0.3;
  c.seed = 7;
  c.optimizer = opt;
  c.learning_rate = 0.05;
  c.l1 = 0.01;
  c.l2 = 0.02;
  c.wire_dtype = wire;
  return c;
}

// A case of these tables and features, the features named f0, f1, ...
inline CollCase make_case(std::vector<hb_embedding_config> tables,
                          std::vector<CollFeature> features) {
  CollCase c;
  c.tables = std::move(tables);
  c.features = std::move(features);
  for (size_t f = 0; f < c.features.size(); ++f)
    c.names.push_back("f" + std::to_string(f));
  return c;
}

// Mixed dims, optimizers, static and dynamic tables, wire dtypes; every
// pooling mode, weights, one-hot and multi-hot, two tables shared by two
// features each.
inline CollCase standard_case() {
  return make_case(
      {coll_table("ta", 3, 50, HB_OPT_SGD, HB_PARTITION_MOD, HB_FLOAT32),
       coll_table("tb", 5, 0, HB_OPT_ADAGRAD, HB_PARTITION_MOD, HB_FLOAT32),
       coll_table("tc", 2, 40, HB_OPT_ADAM, HB_PARTITION_DIV, HB_BFLOAT16),
       coll_table("td", 4, 0, HB_OPT_FTRL, HB_PARTITION_MOD, HB_FLOAT16)},
      {{0, HB_POOLING_SUM, false, 1, true},
       {0, HB_POOLING_MEAN, true, 4, false},
       {1, HB_POOLING_SQRTN, false, 5, false},
       {1, HB_POOLING_NONE, false, 3, false},
       {2, HB_POOLING_SUM, true, 3, false},
       {3, HB_POOLING_MEAN, false, 4, false},
       {2, HB_POOLING_NONE, true, 2, false}});
}

inline int64_t coll_width(const CollCase &c) {
  int64_t w = 0;
  for (const CollFeature &f : c.features)
    if (f.pooling != HB_POOLING_NONE) w += c.tables[f.table].dim;
  return w;
}

// One rank's batch in the C layout, with its gradients.
struct JBatch {
  int64_t B = 0;
  bool use_lengths = false;
  std::vector<std::vector<int64_t>> ids, offsets, lengths;
  std::vector<std::vector<float>> weights;  // empty: unweighted
  std::vector<int64_t> base;                // where the feature's ids start
  std::vector<float> grad_out;
  std::vector<std::vector<float>> grad_unpooled;
  std::vector<const int64_t *> pid, poff, plen;
  std::vector<const float *> pw;

  size_t n(size_t f) const { return ids[f].size() - base[f]; }
  const int64_t *id_ptr(size_t f) const { return ids[f].data() + base[f]; }
  float weight(size_t f, size_t k) const {
    return weights[f].empty() ? 1.0f : weights[f][base[f] + k];
  }
  // The bag bounds of sample b, relative to the feature's first id.
  int64_t lo(size_t f, int64_t b) const { return offsets[f][b] - base[f]; }
  int64_t hi(size_t f, int64_t b) const { return offsets[f][b + 1] - base[f]; }

  hb_jagged_batch view() {
    const size_t F = ids.size();
    pid.resize(F), poff.resize(F), plen.resize(F), pw.resize(F);
    for (size_t f = 0; f < F; ++f) {
      pid[f] = ids[f].data();
      poff[f] = offsets[f].data();
      plen[f] = lengths[f].data();
      pw[f] = weights[f].empty() ? nullptr : weights[f].data();
    }
    hb_jagged_batch j = HB_JAGGED_BATCH_INIT;
    j.batch_size = B;
    j.ids = pid.data();
    if (use_lengths) {
      j.lengths = plen.data();
      // lengths: the ids start at ids[f][0]; drop the padding
      for (size_t f = 0; f < F; ++f) pid[f] = ids[f].data() + base[f];
      for (size_t f = 0; f < F; ++f)
        if (pw[f]) pw[f] += base[f];
    } else {
      j.offsets = poff.data();
    }
    j.weights = pw.data();
    return j;
  }
};

// A random batch of B samples: skewed ids with duplicates, empty bags,
// offsets that start past a few padding ids (a flat KJT's view) or lengths.
inline JBatch make_jbatch(std::mt19937_64 &g, const CollCase &c, int64_t B,
                          int64_t id_range = 12) {
  JBatch b;
  b.B = B;
  b.use_lengths = g() % 2;
  const size_t F = c.features.size();
  b.ids.resize(F), b.offsets.resize(F), b.lengths.resize(F),
      b.weights.resize(F), b.base.resize(F), b.grad_unpooled.resize(F);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t f = 0; f < F; ++f) {
    const CollFeature &cf = c.features[f];
    const hb_embedding_config &tc = c.tables[cf.table];
    size_t pad = g() % 3;
    for (size_t i = 0; i < pad; ++i) b.ids[f].push_back(-999);  // never read
    b.base[f] = static_cast<int64_t>(pad);
    b.offsets[f].push_back(static_cast<int64_t>(pad));
    for (int64_t s = 0; s < B; ++s) {
      int len = cf.one_hot ? 1 : static_cast<int>(g() % (cf.max_len + 1));
      for (int k = 0; k < len; ++k) {
        // Skewed: small ids far more often (duplicates within and across
        // bags and ranks).
        int64_t r = static_cast<int64_t>(g() % id_range);
        r = r * r / id_range;
        int64_t id = tc.num_rows > 0 ? (r * 7 + f) % tc.num_rows
                                     : static_cast<int64_t>(ref_splitmix(r));
        b.ids[f].push_back(id);
      }
      b.lengths[f].push_back(len);
      b.offsets[f].push_back(static_cast<int64_t>(b.ids[f].size()));
    }
    if (cf.weighted)
      for (size_t i = 0; i < b.ids[f].size(); ++i)
        b.weights[f].push_back(i < pad ? 1e30f : 0.25f + (g() % 8) * 0.25f);
    if (cf.pooling == HB_POOLING_NONE)
      for (size_t i = 0; i < b.n(f) * tc.dim; ++i)
        b.grad_unpooled[f].push_back(u(g));
  }
  b.grad_out.resize(B * coll_width(c));
  for (float &v : b.grad_out) v = u(g);
  return b;
}

// One step's batches of every rank: some ranks empty, sizes differ.
inline std::vector<JBatch> make_step(std::mt19937_64 &g, const CollCase &c,
                                     int world) {
  std::vector<JBatch> step;
  for (int r = 0; r < world; ++r) {
    int64_t B = g() % 5 == 0 ? 0 : 1 + static_cast<int64_t>(g() % 7);
    step.push_back(make_jbatch(g, c, B));
  }
  return step;
}

// Other ids of the same shape: each id + 1 (modulo a static table's rows).
inline void shift_ids(JBatch &b, const CollCase &c) {
  for (size_t f = 0; f < c.features.size(); ++f)
    for (size_t k = b.base[f]; k < b.ids[f].size(); ++k) {
      const hb_embedding_config &tc = c.tables[c.features[f].table];
      b.ids[f][k] =
          tc.num_rows > 0 ? (b.ids[f][k] + 1) % tc.num_rows : b.ids[f][k] + 1;
    }
}

struct CollRef {
  CollCase c;
  std::vector<RefTable> tables;

  explicit CollRef(const CollCase &cc) : c(cc) {
    for (const auto &t : c.tables) tables.emplace_back(t);
  }

  // The documented forward: rows through the wire dtype, weighted, summed
  // in bag order (the first term assigned), then / n or / sqrtf(n).
  void lookup(const JBatch &b, std::vector<float> *out,
              std::vector<std::vector<float>> *unpooled) {
    const int64_t W = coll_width(c);
    out->assign(b.B * W, 0.0f);
    unpooled->assign(c.features.size(), {});
    int64_t col = 0;
    for (size_t f = 0; f < c.features.size(); ++f) {
      const CollFeature &cf = c.features[f];
      RefTable &t = tables[cf.table];
      const int64_t d = t.c.dim;
      if (cf.pooling == HB_POOLING_NONE) {
        for (size_t k = 0; k < b.n(f); ++k) {
          std::vector<float> r = t.lookup(b.id_ptr(f)[k]);
          for (int64_t j = 0; j < d; ++j)
            (*unpooled)[f].push_back(cf.weighted ? b.weight(f, k) * r[j]
                                                 : r[j]);
        }
        continue;
      }
      for (int64_t s = 0; s < b.B; ++s) {
        float *o = out->data() + s * W + col;
        int64_t lo = b.lo(f, s), hi = b.hi(f, s);
        for (int64_t k = lo; k < hi; ++k) {
          std::vector<float> r = t.lookup(b.id_ptr(f)[k]);
          for (int64_t j = 0; j < d; ++j) {
            float v = cf.weighted ? b.weight(f, k) * r[j] : r[j];
            o[j] = k == lo ? v : o[j] + v;
          }
        }
        if (hi > lo && cf.pooling != HB_POOLING_SUM) {
          float n = static_cast<float>(hi - lo);
          float dv = cf.pooling == HB_POOLING_MEAN ? n : std::sqrt(n);
          for (int64_t j = 0; j < d; ++j) o[j] = o[j] / dv;
        }
      }
      col += d;
    }
  }

  // The per-id gradients of table t for one rank: ids of its features in
  // feature order, each id's share of its bag's gradient.
  void expand(const JBatch &b, int t, std::vector<int64_t> *ids,
              std::vector<float> *grads) const {
    const int64_t W = coll_width(c);
    const int64_t d = c.tables[t].dim;
    ids->clear(), grads->clear();
    int64_t col = 0;
    for (size_t f = 0; f < c.features.size(); ++f) {
      const CollFeature &cf = c.features[f];
      int64_t fcol = col;
      if (cf.pooling != HB_POOLING_NONE) col += c.tables[cf.table].dim;
      if (cf.table != t) continue;
      for (size_t k = 0; k < b.n(f); ++k) ids->push_back(b.id_ptr(f)[k]);
      if (cf.pooling == HB_POOLING_NONE) {
        for (size_t k = 0; k < b.n(f); ++k)
          for (int64_t j = 0; j < d; ++j) {
            float g = b.grad_unpooled[f][k * d + j];
            grads->push_back(cf.weighted ? g * b.weight(f, k) : g);
          }
        continue;
      }
      for (int64_t s = 0; s < b.B; ++s) {
        int64_t lo = b.lo(f, s), hi = b.hi(f, s);
        float n = static_cast<float>(hi - lo);
        for (int64_t k = lo; k < hi; ++k) {
          float sc = cf.weighted ? b.weight(f, k) : 1.0f;
          if (cf.pooling == HB_POOLING_MEAN) sc = sc / n;
          if (cf.pooling == HB_POOLING_SQRTN) sc = sc / std::sqrt(n);
          for (int64_t j = 0; j < d; ++j) {
            float g = b.grad_out[s * W + fcol + j];
            grads->push_back(
                cf.pooling == HB_POOLING_SUM && !cf.weighted ? g : g * sc);
          }
        }
      }
    }
  }

  // One collective update: every rank's batch.
  void apply(const std::vector<JBatch> &all) {
    for (size_t t = 0; t < tables.size(); ++t) {
      std::vector<std::pair<std::vector<int64_t>, std::vector<float>>> bs(
          all.size());
      for (size_t r = 0; r < all.size(); ++r)
        expand(all[r], static_cast<int>(t), &bs[r].first, &bs[r].second);
      tables[t].apply(bs);
    }
  }
};

// Compares a row record (weights and slots) with the reference's row.
inline std::string compare_record(const RefTable &ref, int64_t id,
                                  const float *rec) {
  auto it = ref.rows.find(id);
  if (it == ref.rows.end())
    return "table " + ref.name + ": row " + std::to_string(id) +
           " is not in the reference";
  const RefTable::Row &want = it->second;
  const int64_t d = ref.c.dim;
  const int opt = ref.c.optimizer;
  for (int64_t k = 0; k < d; ++k) {
    bool ok = !std::memcmp(&rec[k], &want.w[k], 4);
    if (opt != HB_OPT_SGD) ok = ok && !std::memcmp(&rec[d + k], &want.s1[k], 4);
    if (opt == HB_OPT_ADAM || opt == HB_OPT_FTRL)
      ok = ok && !std::memcmp(&rec[2 * d + k], &want.s2[k], 4);
    if (!ok)
      return "table " + ref.name + ": row " + std::to_string(id) + " col " +
             std::to_string(k) + ": w " + std::to_string(rec[k]) + " vs " +
             std::to_string(want.w[k]);
  }
  return "";
}

}  // namespace hbtest
