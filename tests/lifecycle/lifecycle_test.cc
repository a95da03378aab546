// Admission and eviction against the independent model (ref_lifecycle.h),
// bit-equal at worlds 1-4 (ranks as threads over the in-process exchange):
// every lookup of every step, the final rows (weights and optimizer
// slots), each row's last update step and update count, the pending
// admission counters, the evicted ids (with the step of their boundary)
// and the counters of the statistics.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "abi/error.h"
#include "embedding/collection.h"
#include "embedding/init_math.h"
#include "embedding/lifecycle/admission.h"
#include "embedding/lifecycle/policy.h"
#include "embedding/lifecycle/select.h"
#include "harness.h"
#include "lifecycle_harness.h"

namespace {

using hbtest::LifeCase;
using hbtest::run_and_compare;

hb_embedding_config base_config(const char *name, int opt) {
  return hbtest::life_config(name, opt);
}

void check_worlds(LifeCase &lc) {
  for (int world = 1; world <= 4; ++world) {
    SCOPED_TRACE("world " + std::to_string(world));
    run_and_compare(lc, world);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Admission, ExactCounterAtEveryWorld) {
  LifeCase lc(base_config("adm", HB_OPT_ADAGRAD));
  lc.life.admission = HB_ADMIT_COUNT;
  lc.life.min_count = 3;
  lc.life.default_value = 0.25f;
  lc.steps = 40;
  check_worlds(lc);
  EXPECT_GT(lc.seen.admitted, 0u);
  EXPECT_GT(lc.seen.dropped, 0u);
}

TEST(Admission, CountersExpireWithTtl) {
  LifeCase lc(base_config("adm_ttl", HB_OPT_SGD));
  lc.life.admission = HB_ADMIT_COUNT;
  lc.life.min_count = 2;
  lc.life.ttl_steps = 6;
  lc.life.evict_interval = 2;
  lc.zipf_n = 400;
  lc.steps = 50;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_ttl, 0u);
}

TEST(Admission, BloomFilterModelAtEveryWorld) {
  // A small filter: collisions admit some ids early, differently per
  // world size (the model knows each world's cells).
  LifeCase lc(base_config("bloom", HB_OPT_ADAGRAD));
  lc.life.admission = HB_ADMIT_BLOOM;
  lc.life.min_count = 3;
  lc.life.bloom_bytes = 256;
  lc.life.bloom_fpr = 0.1;
  lc.life.max_rows = 30;
  lc.zipf_n = 300;
  lc.steps = 40;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_cap, 0u);
}

// docs/table-lifecycle.md: bloom_bytes one-byte counters hold about
// bloom_bytes / 9.6 distinct ids at bloom_fpr = 1 % (k = 7); an unseen id
// then passes as seen about 1 % of the time, and far less at
// the bloom_bytes / 21 the docs used to give.
hb::lifecycle::Policy bloom_policy(int64_t bytes) {
  hb_embedding_lifecycle l = HB_EMBEDDING_LIFECYCLE_INIT;
  l.admission = HB_ADMIT_BLOOM;
  l.min_count = 2;  // a filter only counts with min_count > 1
  l.bloom_bytes = bytes;
  l.bloom_fpr = 0.01;
  return hb::lifecycle::policy_from_config(&l, "bloom");
}

double bloom_false_positives(int64_t bytes, int64_t distinct) {
  const hb::lifecycle::Policy p = bloom_policy(bytes);
  EXPECT_EQ(p.bloom_hashes, 7);
  hb::lifecycle::Admission a(p, 1);
  EXPECT_EQ(a.cells().size(), size_t(bytes));  // one byte per counter
  // Twice each: a cell then holds >= 2 exactly when some id touched it, so
  // an unseen id passes exactly when all its cells were touched (presence).
  for (uint64_t step = 1; step <= 2; ++step)
    for (int64_t id = 0; id < distinct; ++id) a.count(id, step);
  int fp = 0;
  const int probes = 100000;
  for (int64_t id = distinct; id < distinct + probes; ++id)
    fp += a.admitted(id);
  return double(fp) / probes;
}

TEST(Admission, BloomCapacityIsBytesOver9_6AtOnePercent) {
  const int64_t m = int64_t(1) << 20;
  const double at_capacity = bloom_false_positives(m, 109397);  // m / 9.585
  EXPECT_GT(at_capacity, 0.008);
  EXPECT_LT(at_capacity, 0.013);
  EXPECT_LT(bloom_false_positives(m, m / 21), 0.001);
}

// The cell index (h1 + i * h2) mod m wraps at 64 bits before the mod (the
// docs say so): with m not a power of two that picks other cells than
// exact arithmetic would.
TEST(Admission, BloomCellIndexWrapsAt64Bits) {
  const hb::lifecycle::Policy p = bloom_policy(1000);
  bool exact_differs = false;
  for (int64_t id = 0; id < 20; ++id) {
    hb::lifecycle::Admission a(p, 1);
    a.count(id, 1);
    const uint64_t m = 1000;
    const uint64_t h1 = hb::initmath::splitmix64(uint64_t(id) ^ 0xB10011ull);
    const uint64_t h2 = hb::initmath::splitmix64(h1 ^ 0x5EED5EEDull) | 1;
    std::vector<uint8_t> want(m, 0);
    for (uint64_t i = 0; i < uint64_t(p.bloom_hashes); ++i) {
      ++want[(h1 + i * h2) % m];  // uint64_t: wraps modulo 2^64
      const unsigned __int128 exact = (static_cast<unsigned __int128>(h1) +
                                       static_cast<unsigned __int128>(i) * h2) %
                                      m;
      exact_differs |= uint64_t(exact) != (h1 + i * h2) % m;
    }
    EXPECT_EQ(a.cells(), want) << "id " << id;
  }
  EXPECT_TRUE(exact_differs) << "the test would not tell a wrap from none";
}

TEST(Eviction, TtlSteps) {
  LifeCase lc(base_config("ttl", HB_OPT_ADAM));
  lc.life.ttl_steps = 4;
  lc.life.evict_interval = 3;
  lc.zipf_n = 300;
  lc.steps = 40;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_ttl, 0u);
}

TEST(Eviction, CapacityLruEveryStep) {
  LifeCase lc(base_config("lru", HB_OPT_ADAGRAD));
  lc.life.max_rows = 25;
  lc.life.score = HB_SCORE_LRU;
  lc.zipf_n = 300;
  lc.steps = 40;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_cap, 0u);
}

TEST(Eviction, CapacityLfuWithTiesByIdEveryFewSteps) {
  // Most rows have one or two updates: the id decides among them.
  LifeCase lc(base_config("lfu", HB_OPT_SGD));
  lc.life.max_rows = 20;
  lc.life.score = HB_SCORE_LFU;
  lc.life.evict_interval = 3;
  lc.zipf_n = 500;
  lc.steps = 45;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_cap, 0u);
}

TEST(Eviction, CapacityWithLargeIdRangeTies) {
  // max_rows 1: nearly every row goes at every boundary, and LRU ties span
  // the whole int64 id range (negative ids included): every selection
  // round of the id phase runs.
  LifeCase lc(base_config("tiny", HB_OPT_SGD));
  lc.life.max_rows = 1;
  lc.steps = 25;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_cap, 0u);
}

TEST(Eviction, L2NormBelowThreshold) {
  hb_embedding_config c = base_config("l2", HB_OPT_SGD);
  c.init_a = -0.2;
  c.init_b = 0.2;
  LifeCase lc(c);
  lc.life.min_l2_norm = 0.2;
  lc.life.evict_interval = 2;
  lc.steps = 40;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_l2, 0u);
}

TEST(Eviction, EverythingAtOnce) {
  LifeCase lc(base_config("all", HB_OPT_FTRL));
  lc.base.initial_accumulator = 0.1;
  lc.life.admission = HB_ADMIT_COUNT;
  lc.life.min_count = 2;
  lc.life.ttl_steps = 10;
  lc.life.max_rows = 30;
  lc.life.score = HB_SCORE_LFU;
  lc.life.min_l2_norm = 0.05;
  lc.life.evict_interval = 2;
  lc.zipf_n = 400;
  lc.steps = 60;
  check_worlds(lc);
  EXPECT_GT(lc.seen.ev_cap + lc.seen.ev_ttl, 0u);
}

TEST(Eviction, HalfPrecisionWire) {
  hb_embedding_config c = base_config("wire16", HB_OPT_ADAGRAD);
  c.wire_dtype = HB_BFLOAT16;
  LifeCase lc(c);
  lc.life.admission = HB_ADMIT_COUNT;
  lc.life.min_count = 2;
  lc.life.max_rows = 25;
  lc.steps = 30;
  check_worlds(lc);
}

TEST(Lifecycle, ConfigErrors) {
  hb_embedding_config c = base_config("bad", HB_OPT_SGD);
  hb_embedding_lifecycle l = HB_EMBEDDING_LIFECYCLE_INIT;
  c.lifecycle = &l;
  auto status_of = [&]() -> hb_status {
    try {
      hb::emb::spec_from_config(&c);
      return HB_OK;
    } catch (const hb::Error &e) {
      return e.status();
    }
  };
  EXPECT_EQ(status_of(), HB_OK);
  c.num_rows = 100;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
  c.num_rows = 0;
  c.device = 0;
  EXPECT_EQ(status_of(), HB_ERR_UNSUPPORTED);
  c.device = -1;
  l.min_count = 0;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
  l.min_count = 300;
  l.admission = HB_ADMIT_BLOOM;
  l.bloom_bytes = 1024;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
  l.min_count = 3;
  EXPECT_EQ(status_of(), HB_OK);
  l.bloom_fpr = 1.5;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
  l.bloom_fpr = 0.01;
  l.evict_interval = 0;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
  l.evict_interval = 1;
  l.score = 7;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
  l.score = HB_SCORE_LFU;
  l.max_rows = -1;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
  l.max_rows = 0;
  l.struct_size = 4;
  EXPECT_EQ(status_of(), HB_ERR_INVALID_ARGUMENT);
}

TEST(Lifecycle, RanksWithDifferentPoliciesFailCreate) {
  hb_embedding_config c = base_config("differ", HB_OPT_SGD);
  hb_embedding_lifecycle l0 = HB_EMBEDDING_LIFECYCLE_INIT,
                         l1 = HB_EMBEDDING_LIFECYCLE_INIT;
  l0.max_rows = 1000;
  l1.max_rows = 2000;
  l1.ttl_steps = 5;
  hbtest::ThreadWorld tw(2);
  std::vector<hb_status> got(2, HB_OK);
  std::vector<std::string> what(2);
  hbtest::ThreadWorld::run(2, [&](int r) {
    hb_embedding_config mine = c;
    mine.lifecycle = r == 0 ? &l0 : &l1;
    try {
      hb::emb::Table t(hb::emb::spec_from_config(&mine), tw.endpoint(r));
    } catch (const hb::Error &e) {
      got[r] = e.status();
      what[r] = e.what();
    }
  });
  // Every rank names each field that differs with each rank's value (hb.h),
  // not a fingerprint of the policy.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r], HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(
        what[r].find("lifecycle.max_rows: 1000 (rank 0) vs 2000 (rank 1)"),
        std::string::npos)
        << what[r];
    EXPECT_NE(what[r].find("lifecycle.ttl_steps: 0 (rank 0) vs 5 (rank 1)"),
              std::string::npos)
        << what[r];
  }
}

}  // namespace

namespace {

TEST(Select, KthSmallestOfAllRanksMatchesSort) {
  // Values with many duplicates, spread or clustered, split unevenly
  // (some ranks empty): the selected value and its tie count agree with a
  // sort of everything, on every rank.
  for (int world = 1; world <= 4; ++world) {
    for (int trial = 0; trial < 30; ++trial) {
      std::mt19937_64 g(world * 1000 + trial);
      std::vector<std::vector<uint64_t>> vals(world);
      std::vector<uint64_t> all;
      const int kind = trial % 3;
      const size_t n = 1 + g() % 3000;
      for (size_t i = 0; i < n; ++i) {
        uint64_t v = kind == 0   ? g() % 7
                     : kind == 1 ? g()
                                 : (uint64_t{1} << 40) + g() % 100000;
        int r = static_cast<int>(g() % world);
        if (world > 1 && r == 1 && trial % 2) r = 0;  // rank 1 empty
        vals[r].push_back(v);
        all.push_back(v);
      }
      std::sort(all.begin(), all.end());
      const int64_t k = 1 + static_cast<int64_t>(g() % all.size());
      const uint64_t kth = all[k - 1];
      const int64_t below =
          std::lower_bound(all.begin(), all.end(), kth) - all.begin();
      const int64_t through =
          std::upper_bound(all.begin(), all.end(), kth) - all.begin();
      hbtest::ThreadWorld tw(world);
      std::vector<hb::lifecycle::Selected> got(world);
      hbtest::ThreadWorld::run(world, [&](int r) {
        auto x = tw.endpoint(r);
        got[r] = hb::lifecycle::select_kth(*x, vals[r], k);
      });
      for (int r = 0; r < world; ++r) {
        SCOPED_TRACE("world " + std::to_string(world) + " trial " +
                     std::to_string(trial) + " rank " + std::to_string(r));
        const hb::lifecycle::Selected &s = got[r];
        EXPECT_EQ(s.rounds, got[0].rounds);
        if (s.all) {
          // Exactly k values are <= s.value.
          int64_t le =
              std::upper_bound(all.begin(), all.end(), s.value) - all.begin();
          EXPECT_EQ(le, k);
        } else {
          EXPECT_EQ(s.value, kth);
          EXPECT_EQ(s.below, below);
          EXPECT_GT(through, k);  // a real tie
        }
      }
    }
  }
}

}  // namespace

namespace {

TEST(Lifecycle, CollectionsGetThePolicies) {
  // A collection's steps run the table's owner halves: one pooling-NONE
  // feature with one id per sample is the single-table call, and must
  // match the same model, lookups and evictions included.
  hb_embedding_config c = base_config("coll", HB_OPT_ADAGRAD);
  LifeCase lc(c);
  lc.life.admission = HB_ADMIT_COUNT;
  lc.life.min_count = 2;
  lc.life.max_rows = 25;
  lc.life.ttl_steps = 12;
  lc.life.evict_interval = 2;
  lc.zipf_n = 300;
  const int world = 3;
  hb_embedding_config cfg = c;
  cfg.lifecycle = &lc.life;
  hbtest::Plan p = hbtest::make_plan(77, world, 40, cfg, lc.zipf_n);
  hbtest::RefLife ref(cfg, lc.life, world);
  hbtest::Expected e;
  hbtest::model_steps(ref, p, &e);
  hbtest::Evictions ev;
  hbtest::Dump d;
  hbtest::FirstError err;
  hbtest::ThreadWorld tw(world);
  hbtest::run_life_tables(
      world, c, lc.life, &ev, [&](int r, hb::emb::Table &t) {
        hb::emb::Feature f;
        f.name = "f";
        f.table = &t;
        f.pooling = HB_POOLING_NONE;
        hb::emb::Collection coll({f}, tw.endpoint(r));
        for (size_t s = 0; s < p.size(); ++s) {
          const hbtest::Batch &b = p[s][r];
          std::vector<int64_t> ones(b.ids.size(), 1);
          const int64_t *ids = b.ids.data(), *lens = ones.data();
          hb::emb::JaggedBatch in;
          in.batch = static_cast<int64_t>(b.ids.size());
          in.ids = &ids;
          in.lengths = &lens;
          std::vector<float> rows(b.ids.size() * 4);
          float *unpooled = rows.data();
          coll.lookup(in, nullptr, &unpooled);
          if (!hbtest::same_bits(rows.data(), e.lookups[s][r].data(),
                                 rows.size()))
            err.report("lookup of step " + std::to_string(s));
          const float *g = b.grads.data();
          coll.apply_gradients(in, nullptr, &g);
        }
        d.add(t);
      });
  ASSERT_EQ(err.first, "");
  hbtest::compare_final(ref, d, true);
  EXPECT_EQ(ev.got, e.evictions);
  EXPECT_GT(ref.ev_cap, 0u);
}

}  // namespace

namespace {

TEST(Eviction, WallClockTtlCutsAtRankZerosStep) {
  // ttl_seconds 1: rows updated 2.5 s ago go at the next boundary, rows
  // updated in that step stay; both ranks cut at the same step.
  hb_embedding_config c = base_config("wall", HB_OPT_SGD);
  hb_embedding_lifecycle life = HB_EMBEDDING_LIFECYCLE_INIT;
  life.ttl_seconds = 1.0;
  hbtest::Evictions ev;
  std::vector<int64_t> rows(2);
  hbtest::run_life_tables(2, c, life, &ev, [&](int r, hb::emb::Table &t) {
    std::vector<int64_t> old_ids = {10, 11, 12, 13}, new_ids = {20, 21};
    std::vector<float> g(4 * 4, 0.1f);
    t.apply_gradients(old_ids.data(), 4, g.data());
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    t.apply_gradients(new_ids.data(), r == 0 ? 2 : 0, g.data());
    rows[r] = t.shard().rows();
  });
  EXPECT_EQ(rows[0] + rows[1], 2);
  std::set<std::pair<uint64_t, int64_t>> want = {
      {2, 10}, {2, 11}, {2, 12}, {2, 13}};
  EXPECT_EQ(ev.got, want);
}

}  // namespace
