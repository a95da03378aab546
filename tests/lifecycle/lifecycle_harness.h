// Runs a table with a lifecycle on k thread ranks next to the model
// (ref_lifecycle.h) and compares everything observable, bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "embedding/checkpoint.h"
#include "embedding/harness.h"
#include "ref_lifecycle.h"

namespace hbtest {

// A small dynamic table: dim 4, uniform [-0.5, 0.5), the given optimizer.
inline hb_embedding_config life_config(const char *name, int opt) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = name;
  c.dim = 4;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -0.5;
  c.init_b = 0.5;
  c.seed = 11;
  c.optimizer = opt;
  c.learning_rate = 0.05;
  return c;
}

struct Seen {  // what the model did (so a test can assert it was exercised)
  uint64_t admitted = 0, dropped = 0, ev_ttl = 0, ev_l2 = 0, ev_cap = 0;
};

struct LifeCase {
  hb_embedding_config base;
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  int steps = 30;
  int64_t zipf_n = 150;
  uint64_t seed = 1;
  Seen seen;  // summed over the worlds run
  explicit LifeCase(const hb_embedding_config &c) : base(c) {}
};

// The evicted ids every rank's callback reported, with the step.
struct Evictions {
  std::mutex mu;
  std::set<std::pair<uint64_t, int64_t>> got;
};
struct RankHook {
  Evictions *all = nullptr;
  hb::emb::Table *table = nullptr;
};
inline void on_evict(const int64_t *ids, size_t n, void *ud) {
  RankHook *h = static_cast<RankHook *>(ud);
  uint64_t step = h->table->row_meta()->step();
  std::lock_guard<std::mutex> lk(h->all->mu);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(i == 0 || ids[i - 1] < ids[i]) << "callback ids not ascending";
    h->all->got.emplace(step, ids[i]);
  }
}

// The model, fed a plan step by step: what every rank's lookups must
// return before each step, and the (step, id) of every eviction.
struct Expected {
  std::vector<std::vector<std::vector<float>>> lookups;  // [step][rank]
  std::set<std::pair<uint64_t, int64_t>> evictions;
};
inline void model_steps(RefLife &ref, const Plan &p, Expected *e) {
  for (const auto &step : p) {
    std::vector<std::vector<float>> per_rank;
    StepBatch bs;
    for (const Batch &b : step) {
      std::vector<float> out;
      for (int64_t id : b.ids) {
        std::vector<float> r = ref.lookup(id);
        out.insert(out.end(), r.begin(), r.end());
      }
      per_rank.push_back(out);
      bs.emplace_back(b.ids, b.grads);
    }
    e->lookups.push_back(per_rank);
    size_t before = ref.evicted.size();
    ref.apply(bs);
    for (size_t i = before; i < ref.evicted.size(); ++i)
      e->evictions.emplace(ref.step, ref.evicted[i]);
  }
}

// Everything a rank's table holds, merged over ranks.
struct Dump {
  std::mutex mu;
  struct Row {
    std::vector<float> rec;
    uint64_t last;
    uint32_t updates;
  };
  std::map<int64_t, Row> rows;
  std::map<int64_t, std::pair<uint32_t, uint64_t>> counters;
  std::set<uint64_t> steps;
  Seen stats;
  void add(hb::emb::Table &t) {
    std::lock_guard<std::mutex> lk(mu);
    const hb::lifecycle::RowMeta &m = *t.row_meta();
    const int64_t words = t.shard().record_words();
    t.shard().for_each_indexed([&](int64_t idx, int64_t id, const float *r) {
      EXPECT_EQ(rows.count(id), 0u) << "id " << id << " on two ranks";
      rows[id] = Row{std::vector<float>(r, r + words), m.last_step(idx),
                     m.updates(idx)};
    });
    t.life()->admission().for_each_counter(
        [&](const hb::lifecycle::Admission::Counter &c) {
          counters[c.id] = {c.count, c.last_seen};
        });
    steps.insert(m.step());
    const hb::lifecycle::Stats &s = t.life()->stats();
    stats.admitted += s.admitted;
    stats.dropped += s.dropped;
    stats.ev_ttl += s.evicted_ttl;
    stats.ev_l2 += s.evicted_l2;
    stats.ev_cap += s.evicted_capacity;
  }
};

inline bool same_bits(const float *a, const float *b, size_t n) {
  return std::memcmp(a, b, n * 4) == 0;
}

// The merged dump against the model's final state.
inline void compare_final(const RefLife &ref, const Dump &d, bool stats) {
  const int64_t dim = ref.t.c.dim;
  ASSERT_EQ(d.steps.size(), 1u) << "ranks disagree on the update step";
  EXPECT_EQ(*d.steps.begin(), ref.step);
  ASSERT_EQ(d.rows.size(), ref.t.rows.size()) << "live rows";
  for (const auto &kv : ref.t.rows) {
    auto it = d.rows.find(kv.first);
    ASSERT_TRUE(it != d.rows.end()) << "row " << kv.first << " missing";
    const std::vector<float> &rec = it->second.rec;
    ASSERT_TRUE(same_bits(rec.data(), kv.second.w.data(), dim))
        << "weights of " << kv.first;
    int slots = ref.t.c.optimizer == HB_OPT_SGD       ? 0
                : ref.t.c.optimizer == HB_OPT_ADAGRAD ? 1
                                                      : 2;
    if (slots >= 1)
      ASSERT_TRUE(same_bits(rec.data() + dim, kv.second.s1.data(), dim))
          << "slot 1 of " << kv.first;
    if (slots >= 2)
      ASSERT_TRUE(same_bits(rec.data() + 2 * dim, kv.second.s2.data(), dim))
          << "slot 2 of " << kv.first;
    const RefLife::State &s = ref.st.at(kv.first);
    EXPECT_EQ(it->second.last, s.last) << "last update of " << kv.first;
    EXPECT_EQ(it->second.updates, s.updates) << "updates of " << kv.first;
  }
  std::map<int64_t, std::pair<uint32_t, uint64_t>> want;
  for (const auto &kv : ref.counts)
    want[kv.first] = {kv.second.count, kv.second.last_seen};
  EXPECT_EQ(d.counters, want) << "pending admission counters";
  if (stats) {
    EXPECT_EQ(d.stats.admitted, ref.admitted);
    EXPECT_EQ(d.stats.dropped, ref.dropped);
    EXPECT_EQ(d.stats.ev_ttl, ref.ev_ttl);
    EXPECT_EQ(d.stats.ev_l2, ref.ev_l2);
    EXPECT_EQ(d.stats.ev_cap, ref.ev_cap);
  }
}

// Runs fn(rank, table) on `world` thread ranks, each table with the
// lifecycle's callback reporting into `ev`.
inline void run_life_tables(
    int world, const hb_embedding_config &base,
    const hb_embedding_lifecycle &life, Evictions *ev,
    const std::function<void(int, hb::emb::Table &)> &fn) {
  ThreadWorld tw(world);
  std::vector<RankHook> hooks(world);
  std::vector<hb_embedding_lifecycle> lives(world, life);
  std::vector<hb_embedding_config> cfgs(world, base);
  for (int r = 0; r < world; ++r) {
    hooks[r].all = ev;
    lives[r].on_evict = on_evict;
    lives[r].user_data = &hooks[r];
    cfgs[r].lifecycle = &lives[r];
  }
  FirstError err;
  ThreadWorld::run(world, [&](int r) {
    try {
      hb::emb::Table t(hb::emb::spec_from_config(&cfgs[r]), tw.endpoint(r));
      hooks[r].table = &t;
      fn(r, t);
    } catch (const std::exception &e) {
      err.report("rank " + std::to_string(r) + ": " + e.what());
    }
  });
  ASSERT_EQ(err.first, "");
}

// Steps of plan p on rank r, each lookup compared to the model's;
// `first` is the index of p's first step in `e`.
inline void rank_steps(hb::emb::Table &t, int r, const Plan &p,
                       const Expected &e, size_t first, FirstError *err) {
  const int64_t dim = t.spec().dim;
  for (size_t s = 0; s < p.size(); ++s) {
    const Batch &b = p[s][r];
    std::vector<float> out(b.ids.size() * dim);
    t.lookup(b.ids.data(), b.ids.size(), out.data());
    const std::vector<float> &want = e.lookups[first + s][r];
    if (!same_bits(out.data(), want.data(), out.size()))
      err->report("rank " + std::to_string(r) + ": lookup of step " +
                  std::to_string(first + s) + " differs");
    t.apply_gradients(b.ids.data(), b.ids.size(), b.grads.data());
  }
}

inline void run_and_compare(LifeCase &lc, int world) {
  hb_embedding_config cfg = lc.base;
  cfg.lifecycle = &lc.life;
  Plan p = make_plan(lc.seed * 100 + world, world, lc.steps, cfg, lc.zipf_n);
  RefLife ref(cfg, lc.life, world);
  Expected e;
  model_steps(ref, p, &e);
  Evictions ev;
  Dump d;
  FirstError err;
  run_life_tables(world, lc.base, lc.life, &ev, [&](int r, hb::emb::Table &t) {
    rank_steps(t, r, p, e, 0, &err);
    d.add(t);
  });
  ASSERT_EQ(err.first, "");
  compare_final(ref, d, true);
  EXPECT_EQ(ev.got, e.evictions) << "evicted (step, id)";
  lc.seen.admitted += ref.admitted;
  lc.seen.dropped += ref.dropped;
  lc.seen.ev_ttl += ref.ev_ttl;
  lc.seen.ev_l2 += ref.ev_l2;
  lc.seen.ev_cap += ref.ev_cap;
}

}  // namespace hbtest
