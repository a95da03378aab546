// Shared helpers for the embedding tests: seeded skewed batches and a
// k-rank run of Table objects over the in-process exchange.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "embedding/table.h"
#include "reference.h"
#include "thread_exchange.h"

namespace hbtest {

// The first error any rank thread reports.
struct FirstError {
  std::mutex mu;
  std::string first;
  void report(const std::string &e) {
    std::lock_guard<std::mutex> lk(mu);
    if (first.empty()) first = e;
  }
};

// Zipf(alpha) ranks over [0, n) by inverse CDF.
class Zipf {
 public:
  Zipf(int64_t n, double alpha) : cdf_(n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
      cdf_[i] = (s += 1.0 / std::pow(i + 1.0, alpha));
    for (double &c : cdf_) c /= s;
  }
  int64_t operator()(std::mt19937_64 &g) const {
    double u = std::uniform_real_distribution<double>(0, 1)(g);
    return std::min<int64_t>(
        std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin(),
        cdf_.size() - 1);
  }

 private:
  std::vector<double> cdf_;
};

struct Batch {
  std::vector<int64_t> ids;
  std::vector<float> grads;
};

// Per-rank batches of one step: skewed ids, some ranks empty, duplicate-
// heavy ones, sizes that differ per rank. Dynamic tables get scattered
// 64-bit ids (negative ones included).
inline std::vector<Batch> make_step(std::mt19937_64 &g, int world,
                                    int64_t num_rows, int64_t dim,
                                    const Zipf &zipf) {
  std::vector<Batch> out(world);
  for (int r = 0; r < world; ++r) {
    int kind = static_cast<int>(g() % 6);
    size_t n = kind == 0 ? 0 : 1 + g() % 48;
    for (size_t i = 0; i < n; ++i) {
      int64_t k = kind == 1 ? static_cast<int64_t>(g() % 3) : zipf(g);
      int64_t id = num_rows > 0
                       ? k % num_rows
                       : static_cast<int64_t>(ref_splitmix(k * 7919 + 1));
      out[r].ids.push_back(id);
    }
    for (size_t i = 0; i < n * dim; ++i)
      out[r].grads.push_back(std::uniform_real_distribution<float>(-1, 1)(g));
  }
  return out;
}

using Plan = std::vector<std::vector<Batch>>;

// `steps` steps of make_step over ids Zipf-distributed on [0, zipf_n).
inline Plan make_plan(uint64_t seed, int world, int steps,
                      const hb_embedding_config &c, int64_t zipf_n = 150) {
  std::mt19937_64 g(seed);
  Zipf zipf(zipf_n, 1.1);
  Plan p;
  for (int s = 0; s < steps; ++s)
    p.push_back(make_step(g, world, c.num_rows, c.dim, zipf));
  return p;
}

// The reference side of a plan: every rank's lookups (which create dynamic
// rows), then one apply per step.
inline void ref_replay(RefTable &ref, const Plan &p) {
  for (const auto &step : p) {
    for (const Batch &b : step)
      for (int64_t id : b.ids) ref.lookup(id);
    std::vector<std::pair<std::vector<int64_t>, std::vector<float>>> bs;
    for (const Batch &b : step) bs.emplace_back(b.ids, b.grads);
    ref.apply(bs);
  }
}

// Runs fn(rank, table) on `world` threads, each with its own table.
inline void run_tables(int world, const hb_embedding_config &cfg,
                       const std::function<void(int, hb::emb::Table &)> &fn) {
  ThreadWorld tw(world);
  hb::emb::Spec spec = hb::emb::spec_from_config(&cfg);
  ThreadWorld::run(world, [&](int r) {
    hb::emb::Table t(spec, tw.endpoint(r));
    fn(r, t);
  });
}

}  // namespace hbtest
