// Sharded-table semantics against the independent reference, with k ranks
// simulated by threads: bit-equal lookups and parameters for world sizes
// 1-4, every optimizer, partition, table kind and wire dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>

#include "abi/error.h"
#include "embedding/id_map.h"
#include "embedding/init.h"
#include "embedding/plan.h"
#include "embedding/shard.h"
#include "harness.h"

using hbtest::Batch;
using hbtest::RefTable;

namespace {

hb_embedding_config base_config(int opt, int64_t num_rows, int partition,
                                hb_dtype wire) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "tbl";
  c.dim = 5;
  c.num_rows = num_rows;
  c.partition = partition;
  c.initializer = HB_INIT_NORMAL;
  c.init_a = 0.0;
  c.init_b = 0.3;
  c.seed = 42;
  c.optimizer = opt;
  c.learning_rate = 0.05;
  c.l1 = 0.01;
  c.l2 = 0.02;
  c.wire_dtype = wire;
  return c;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Trains `steps` steps at world size `world` and compares every lookup and,
// at the end, every row and slot with the reference.
void check_bit_equal(const hb_embedding_config &cfg, int world, int steps,
                     uint64_t seed) {
  RefTable ref(cfg);
  hbtest::Zipf zipf(200, 1.1);
  std::mt19937_64 g(seed);
  std::vector<std::vector<Batch>> plan;
  for (int s = 0; s < steps; ++s)
    plan.push_back(hbtest::make_step(g, world, cfg.num_rows, cfg.dim, zipf));
  // Expected lookups (before each step's update) from the reference.
  std::vector<std::vector<std::vector<float>>> expect(steps);
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < world; ++r) {
      std::vector<float> e;
      for (int64_t id : plan[s][r].ids) {
        std::vector<float> row = ref.lookup(id);
        e.insert(e.end(), row.begin(), row.end());
      }
      expect[s].push_back(e);
    }
    std::vector<std::pair<std::vector<int64_t>, std::vector<float>>> b;
    for (int r = 0; r < world; ++r)
      b.emplace_back(plan[s][r].ids, plan[s][r].grads);
    ref.apply(b);
  }

  if (cfg.num_rows > 0)  // untouched static rows: their initial value
    for (int64_t id = 0; id < cfg.num_rows; ++id) ref.row(id);
  std::mutex mu;
  std::string first_error;
  std::atomic<int64_t> rows_seen{0};
  auto report = [&](const std::string &e) {
    std::lock_guard<std::mutex> lk(mu);
    if (first_error.empty()) first_error = e;
  };
  hbtest::run_tables(world, cfg, [&](int r, hb::emb::Table &t) {
    for (int s = 0; s < steps; ++s) {
      const Batch &b = plan[s][r];
      std::vector<float> out(b.ids.size() * cfg.dim, -7.0f);
      t.lookup(b.ids.data(), b.ids.size(), out.data());
      for (size_t i = 0; i < out.size(); ++i)
        if (!same_bits(out[i], expect[s][r][i])) {
          report("step " + std::to_string(s) + " rank " + std::to_string(r) +
                 " lookup element " + std::to_string(i) + ": " +
                 std::to_string(out[i]) + " vs " +
                 std::to_string(expect[s][r][i]));
          break;
        }
      t.apply_gradients(b.ids.data(), b.ids.size(), b.grads.data());
    }
    // Every row this rank holds must equal the reference's (untouched static
    // rows: their initial value), including the slots.
    const int64_t d = cfg.dim;
    t.shard().for_each([&](int64_t id, const float *rec) {
      ++rows_seen;
      // Read-only from the rank threads: every row exists already.
      auto it = ref.rows.find(id);
      if (it == ref.rows.end()) {
        report("row " + std::to_string(id) + " is not in the reference");
        return;
      }
      const RefTable::Row &want = it->second;
      for (int64_t k = 0; k < d; ++k) {
        bool ok = same_bits(rec[k], want.w[k]);
        if (cfg.optimizer != HB_OPT_SGD)
          ok = ok && same_bits(rec[d + k], want.s1[k]);
        if (cfg.optimizer == HB_OPT_ADAM || cfg.optimizer == HB_OPT_FTRL)
          ok = ok && same_bits(rec[2 * d + k], want.s2[k]);
        if (!ok) {
          report("final row " + std::to_string(id) + " col " +
                 std::to_string(k) + " rank " + std::to_string(r) + ": w " +
                 std::to_string(rec[k]) + " vs " + std::to_string(want.w[k]));
          return;
        }
      }
      if (cfg.optimizer == HB_OPT_ADAM &&
          hb::emb::Optimizer::adam_steps(rec, d) != want.t)
        report("adam step count of row " + std::to_string(id));
    });
  });
  EXPECT_EQ(first_error, "");
  if (cfg.num_rows > 0)
    EXPECT_EQ(rows_seen.load(), cfg.num_rows);
  else
    EXPECT_EQ(rows_seen.load(), static_cast<int64_t>(ref.rows.size()));
}

struct Kind {
  const char *label;
  int64_t num_rows;
  int partition;
};
const Kind kKinds[] = {{"static_mod", 97, HB_PARTITION_MOD},
                       {"static_div", 97, HB_PARTITION_DIV},
                       {"dynamic_mod", 0, HB_PARTITION_MOD}};

class BitEqual
    : public ::testing::TestWithParam<std::tuple<int, int, int, hb_dtype>> {};

TEST_P(BitEqual, MatchesReference) {
  int opt, kind, world;
  hb_dtype wire;
  std::tie(opt, kind, world, wire) = GetParam();
  hb_embedding_config c =
      base_config(opt, kKinds[kind].num_rows, kKinds[kind].partition, wire);
  check_bit_equal(c, world, 25, 1000 + opt * 31 + kind * 7 + world);
}

INSTANTIATE_TEST_SUITE_P(
    AllTables, BitEqual,
    ::testing::Combine(::testing::Values(HB_OPT_SGD, HB_OPT_ADAGRAD,
                                         HB_OPT_ADAM, HB_OPT_FTRL),
                       ::testing::Values(0, 1, 2),
                       ::testing::Values(1, 2, 3, 4),
                       ::testing::Values(HB_FLOAT32, HB_FLOAT16, HB_BFLOAT16)));

TEST(BitEqual, WorldLargerThanIds) {
  hb_embedding_config c =
      base_config(HB_OPT_ADAGRAD, 3, HB_PARTITION_DIV, HB_FLOAT32);
  check_bit_equal(c, 4, 10, 7);  // rank 3 owns nothing
  c.partition = HB_PARTITION_MOD;
  check_bit_equal(c, 4, 10, 8);
}

TEST(BitEqual, FtrlGeneralPower) {
  hb_embedding_config c =
      base_config(HB_OPT_FTRL, 0, HB_PARTITION_MOD, HB_FLOAT32);
  c.lr_power = -0.7;
  check_bit_equal(c, 3, 15, 9);
}

// ---- Optimizers against hand-computed values -----------------------------

// One row (id 0 of a 1-row table, constant init 1.0), one or two steps.
std::vector<float> train_one(hb_embedding_config c,
                             const std::vector<std::vector<float>> &gs,
                             std::vector<float> *slots = nullptr) {
  c.num_rows = 1;
  c.dim = 2;
  c.initializer = HB_INIT_CONSTANT;
  c.init_a = 1.0;
  std::vector<float> w(2), rec;
  hbtest::run_tables(1, c, [&](int, hb::emb::Table &t) {
    int64_t id = 0;
    for (const auto &g : gs) t.apply_gradients(&id, 1, g.data());
    t.lookup(&id, 1, w.data());
    const float *r = t.shard().find(0);
    rec.assign(r, r + t.shard().record_words());
  });
  if (slots) *slots = rec;
  return w;
}

TEST(Optimizer, SgdByHand) {
  hb_embedding_config c = base_config(HB_OPT_SGD, 1, 0, HB_FLOAT32);
  c.learning_rate = 0.1;
  std::vector<float> w = train_one(c, {{0.5f, -2.0f}});
  EXPECT_NEAR(w[0], 1.0 - 0.1 * 0.5, 1e-7);  // 0.95
  EXPECT_NEAR(w[1], 1.0 + 0.1 * 2.0, 1e-7);  // 1.2
}

TEST(Optimizer, DuplicatesSummedOneStep) {
  // Two occurrences of id 0 with g = 0.5 each: one Adagrad step with g = 1.
  hb_embedding_config c = base_config(HB_OPT_ADAGRAD, 1, 0, HB_FLOAT32);
  c.num_rows = 1;
  c.dim = 1;
  c.initializer = HB_INIT_CONSTANT;
  c.init_a = 1.0;
  c.learning_rate = 0.1;
  c.initial_accumulator = 0.1;
  c.epsilon = 0;
  float w = 0;
  hbtest::run_tables(1, c, [&](int, hb::emb::Table &t) {
    int64_t ids[2] = {0, 0};
    float g[2] = {0.5f, 0.5f};
    t.apply_gradients(ids, 2, g);
    t.lookup(ids, 1, &w);
  });
  EXPECT_NEAR(w, 1.0 - 0.1 * 1.0 / std::sqrt(1.1), 1e-6);
}

TEST(Optimizer, AdagradByHand) {
  hb_embedding_config c = base_config(HB_OPT_ADAGRAD, 1, 0, HB_FLOAT32);
  c.learning_rate = 0.1;
  c.initial_accumulator = 0.5;
  c.epsilon = 1e-7;
  std::vector<float> s;
  std::vector<float> w = train_one(c, {{1.0f, 2.0f}, {1.0f, 0.0f}}, &s);
  // acc: 0.5 -> 1.5 -> 2.5 ; w0 = 1 - .1/sqrt(1.5) - .1/sqrt(2.5)
  EXPECT_NEAR(
      w[0], 1.0 - 0.1 / (std::sqrt(1.5) + 1e-7) - 0.1 / (std::sqrt(2.5) + 1e-7),
      1e-6);
  EXPECT_NEAR(w[1], 1.0 - 0.2 / (std::sqrt(4.5) + 1e-7), 1e-6);
  EXPECT_NEAR(s[2], 2.5, 1e-6);
  EXPECT_NEAR(s[3], 4.5, 1e-6);
}

TEST(Optimizer, AdamByHand) {
  hb_embedding_config c = base_config(HB_OPT_ADAM, 1, 0, HB_FLOAT32);
  c.learning_rate = 0.01;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.epsilon = 1e-8;
  std::vector<float> s;
  std::vector<float> w = train_one(c, {{0.5f, -1.0f}, {0.5f, -1.0f}}, &s);
  // Step 1: m = .05, v = .00025 ; lr1 = .01*sqrt(.001)/.1 ; w -= lr1*m/sqrt(v)
  double m = 0.05, v = 0.00025, w0 = 1.0;
  w0 -= 0.01 * std::sqrt(1 - 0.999) / (1 - 0.9) * m / (std::sqrt(v) + 1e-8);
  m = 0.9 * m + 0.1 * 0.5;
  v = 0.999 * v + 0.001 * 0.25;
  w0 -= 0.01 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.81) * m /
        (std::sqrt(v) + 1e-8);
  EXPECT_NEAR(w[0], w0, 1e-6);
  EXPECT_NEAR(w[1], 2.0 - w0, 1e-6);  // symmetric gradient of twice the size
  EXPECT_EQ(hb::emb::Optimizer::adam_steps(s.data(), 2), 2);
}

TEST(Optimizer, AdamLazyPerRowSteps) {
  // Row 1 touched once, row 0 three times: their step counts differ.
  hb_embedding_config c = base_config(HB_OPT_ADAM, 2, 0, HB_FLOAT32);
  hbtest::run_tables(2, c, [&](int r, hb::emb::Table &t) {
    int64_t ids[2] = {0, 1};
    std::vector<float> g(2 * c.dim, 0.1f);
    for (int s = 0; s < 3; ++s)
      t.apply_gradients(ids, r == 0 && s == 0 ? 2 : (r == 0 ? 1 : 0), g.data());
    int64_t want = r == 0 ? 3 : 1;  // MOD: rank 0 owns id 0, rank 1 owns id 1
    EXPECT_EQ(hb::emb::Optimizer::adam_steps(t.shard().find(r), c.dim), want);
  });
}

TEST(Optimizer, FtrlByHand) {
  hb_embedding_config c = base_config(HB_OPT_FTRL, 1, 0, HB_FLOAT32);
  c.learning_rate = 0.1;
  c.initial_accumulator = 0.1;
  c.l1 = 0.001;
  c.l2 = 0.01;
  c.lr_power = -0.5;
  std::vector<float> w = train_one(c, {{1.0f, 0.0f}});
  // n1 = 1.1, sigma = (sqrt(1.1)-sqrt(.1))/.1, z = 1 - sigma*1,
  // w = (sign(z)*l1 - z) / (sqrt(1.1)/.1 + .02)
  double sigma = (std::sqrt(1.1) - std::sqrt(0.1)) / 0.1;
  double z = 1.0 - sigma;
  double want = (std::copysign(0.001, z) - z) / (std::sqrt(1.1) / 0.1 + 0.02);
  EXPECT_NEAR(w[0], want, 1e-6);
  // Column 1: g = 0, sigma = 0, z = 0 -> |z| <= l1 -> w = 0.
  EXPECT_EQ(w[1], 0.0f);
}

// ---- Initializers ----------------------------------------------------------

// Optimizer::step_rows (the owner's loop, with the row width a constant
// for the common dims) makes bit for bit the records of step() per row,
// for every optimizer, common and other dims.
TEST(Optimizer, StepRowsEqualsStepPerRow) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int opt : {HB_OPT_SGD, HB_OPT_ADAGRAD, HB_OPT_ADAM, HB_OPT_FTRL})
    for (int64_t dim : {1, 3, 8, 16, 64}) {
      hb::emb::Spec sp;
      sp.dim = dim;
      sp.optimizer = opt;
      sp.l1 = 0.01;
      sp.l2 = 0.02;
      hb::emb::Optimizer o(sp);
      const int64_t words = o.record_words();
      const size_t n = 11;
      std::vector<float> a(n * words), g(n * dim);
      for (float &x : a) x = std::fabs(u(rng));  // slots must be >= 0
      for (float &x : g) x = u(rng);
      for (size_t k = 0; k < n; ++k) o.init_slots(&a[k * words]);
      std::vector<float> b = a;
      for (int rep = 0; rep < 3; ++rep) {
        for (size_t k = 0; k < n; ++k) o.step(&a[k * words], &g[k * dim]);
        o.step_rows(
            n, [&](size_t k) { return &b[k * words]; }, g.data());
      }
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4))
          << "optimizer " << opt << " dim " << dim;
    }
}

// The owner's update over a static table (Table::step_rows: record
// addresses computed once, their cache lines prefetched a few ids ahead)
// against the reference, for every optimizer, at dims whose rows are one
// vector body (1, 4, 8, 16, 64 floats) and at dims with a tail (3, 12); a
// 13-row table, so the rows at both edges are touched in every few steps,
// and batches of 0-48 ids with duplicates merged (local and across ranks).
TEST(Optimizer, StaticUpdateEqualsReferenceEveryDim) {
  for (int opt : {HB_OPT_SGD, HB_OPT_ADAGRAD, HB_OPT_ADAM, HB_OPT_FTRL})
    for (int64_t dim : {1, 3, 4, 8, 12, 16, 64})
      for (int world : {1, 2}) {
        SCOPED_TRACE("optimizer " + std::to_string(opt) + " dim " +
                     std::to_string(dim) + " world " + std::to_string(world));
        hb_embedding_config c =
            base_config(opt, 13, HB_PARTITION_MOD, HB_FLOAT32);
        c.dim = dim;
        check_bit_equal(c, world, 12, 500 + opt * 7 + dim + world);
      }
}

// Row records start on a cache line (shard.h, kRecordAlign): dynamic and
// static shards (small, and over 2 MiB: advised for huge pages), every
// optimizer's record width.
TEST(Shard, RecordsStartOnCacheLines) {
  for (int opt : {HB_OPT_SGD, HB_OPT_ADAGRAD, HB_OPT_ADAM, HB_OPT_FTRL})
    for (int64_t num_rows : {int64_t{0}, int64_t{1000}, int64_t{40000}}) {
      hb_embedding_config c =
          base_config(opt, num_rows, HB_PARTITION_MOD, HB_FLOAT32);
      c.dim = 8;
      hb::emb::Shard sh(hb::emb::spec_from_config(&c), 0, 1);
      sh.get(num_rows > 0 ? 999 : 12345);  // a dynamic shard's first chunk
      EXPECT_EQ(reinterpret_cast<uintptr_t>(sh.record_at(0)) % 64, 0u)
          << "optimizer " << opt << " rows " << num_rows;
    }
}

// Dedup's stamp array (ids of a static table index it directly) gives the
// hash table's unique ids and inverse, call after call; an id outside
// [0, bound), or a bound too large for the batch, takes the hash table.
TEST(Dedup, StampArrayEqualsHashTable) {
  std::mt19937_64 rng(3);
  hb::emb::Dedup direct, hashed;
  for (int call = 0; call < 40; ++call) {
    const size_t n = 1 + rng() % 3000;
    const int64_t bound = 1 + static_cast<int64_t>(rng() % (4 * n));
    std::vector<int64_t> ids(n);
    for (int64_t &id : ids) id = static_cast<int64_t>(rng() % bound);
    const bool bad = call % 5 == 4;
    if (bad) ids[rng() % n] = call % 2 ? -1 : bound;
    const bool huge = call % 7 == 6;  // too large for the stamp array
    const int64_t b = huge ? int64_t{1} << 40 : bound;
    EXPECT_EQ(!bad && !huge, direct.run(ids.data(), n, b)) << call;
    hashed.run(ids.data(), n);
    ASSERT_EQ(hashed.unique(), direct.unique()) << call;
    ASSERT_EQ(hashed.inverse(), direct.inverse()) << call;
  }
}

// Realistic static tables (131072 rows, a batch of 512 ids) index the
// array too: before, it was used only while the table had at most 8 hash
// slots per row. The index is shared by every Dedup of a thread: calls of
// several Dedups with different bounds, batches and overlapping ids
// interleave, and each still gives the hash table's result. Ids outside
// [0, bound) -- negative, near 2^63, at the bound -- take the hash table.
TEST(Dedup, SharedArrayForLargeTables) {
  std::mt19937_64 rng(7);
  const int64_t kMax = static_cast<int64_t>(hb::emb::Dedup::kDirectRows);
  const int64_t bounds[] = {131072, 2048, 131072 + 5, kMax, 1, 17};
  hb::emb::Dedup direct[6], hashed;
  for (int call = 0; call < 120; ++call) {
    const int d = call % 6;
    const int64_t bound = bounds[d];
    const size_t n = 1 + rng() % (call % 3 ? 512 : 4096);
    std::vector<int64_t> ids(n);
    for (int64_t &id : ids) {
      // Skewed draws (many repeats, like Zipf) mixed with the table's ends.
      const uint64_t r = rng();
      id = r % 4 == 0 ? bound - 1
           : r % 4 == 1
               ? static_cast<int64_t>((r >> 8) % bound)
               : static_cast<int64_t>((r >> 8) % (bound < 64 ? bound : 64));
    }
    const int bad = call % 10;  // 7: negative, 8: near 2^63, 9: the bound
    if (bad == 7) ids[rng() % n] = -1 - static_cast<int64_t>(rng() % 1000);
    if (bad == 8) ids[rng() % n] = INT64_MAX - static_cast<int64_t>(rng() % 3);
    if (bad == 9) ids[rng() % n] = bound;
    EXPECT_EQ(bad < 7, direct[d].run(ids.data(), n, bound)) << call;
    hashed.run(ids.data(), n);
    ASSERT_EQ(hashed.unique(), direct[d].unique()) << call;
    ASSERT_EQ(hashed.inverse(), direct[d].inverse()) << call;
  }
  // Past the cap only a batch large beside the table takes the array.
  hb::emb::Dedup big;
  const int64_t one[] = {kMax};
  EXPECT_FALSE(big.run(one, 1, kMax + 1));
  EXPECT_EQ(big.unique(), std::vector<int64_t>{kMax});
}

// The straightforward dedup the fast paths must equal: unique ids in
// first-occurrence order, each position's index among them.
void reference_dedup(const std::vector<int64_t> &ids,
                     std::vector<int64_t> *unique,
                     std::vector<uint32_t> *inverse) {
  std::unordered_map<int64_t, uint32_t> seen;
  unique->clear();
  inverse->clear();
  for (int64_t id : ids) {
    auto it = seen.emplace(id, static_cast<uint32_t>(unique->size())).first;
    if (it->second == unique->size()) unique->push_back(id);
    inverse->push_back(it->second);
  }
}

// An id for the random tests: mostly a skewed draw in [0, bound) (a hot
// head, like the demo's Zipf ids), else the bounds' neighbours; on the
// hashed path (bound 0) also negative and huge ids.
int64_t draw_id(std::mt19937_64 &rng, int64_t bound) {
  const int64_t range = bound > 0 ? bound : int64_t{1} << 20;
  const uint64_t r = rng();
  switch (r % 8) {
    case 0:
      return range - 1 - static_cast<int64_t>((r >> 8) % 3 % range);
    case 1:
      return static_cast<int64_t>((r >> 8) % 3 % range);
    case 2:
      if (bound == 0) return INT64_MIN + static_cast<int64_t>((r >> 8) % 3);
      [[fallthrough]];
    case 3:
      if (bound == 0) return INT64_MAX - static_cast<int64_t>((r >> 8) % 3);
      [[fallthrough]];
    case 4:
      if (bound == 0) return -1 - static_cast<int64_t>((r >> 8) % 50);
      [[fallthrough]];
    default:
      return static_cast<int64_t>((r >> 8) % (r % 3 ? 64 : range) % range);
  }
}

// Dedup::run against the reference on random batches: the array path
// (static bounds up to kDirectRows and past it), the hashed path with
// negative and huge ids, repeats within and across calls, empty batches.
TEST(Dedup, RunEqualsReference) {
  std::mt19937_64 rng(21);
  const int64_t kMax = static_cast<int64_t>(hb::emb::Dedup::kDirectRows);
  const int64_t bounds[] = {0, 1, 2048, 131072, kMax, 3 * kMax};
  hb::emb::Dedup d[6];
  std::vector<int64_t> want_u;
  std::vector<uint32_t> want_inv;
  for (int call = 0; call < 300; ++call) {
    const int b = call % 6;
    const size_t n = call % 17 == 0 ? 0 : rng() % (call % 2 ? 600 : 9000);
    std::vector<int64_t> ids(n);
    for (int64_t &id : ids) id = draw_id(rng, bounds[b]);
    d[b].run(ids.data(), n, bounds[b]);
    reference_dedup(ids, &want_u, &want_inv);
    ASSERT_EQ(want_u, d[b].unique()) << call;
    ASSERT_EQ(want_inv, d[b].inverse()) << call;
  }
}

// An owner's received ids: 1-5 blocks (counts), each of distinct draws (a
// sender's unique ids; up to max_draws draws, some blocks empty), which may
// repeat each other's ids, concatenated in ids.
void draw_unique_blocks(std::mt19937_64 &rng, int64_t bound, size_t max_draws,
                        std::vector<int64_t> *counts,
                        std::vector<int64_t> *ids) {
  counts->assign(1 + rng() % 5, 0);
  ids->clear();
  for (int64_t &count : *counts) {
    std::vector<int64_t> block;
    const size_t want = rng() % 4 == 0 ? 0 : rng() % max_draws;
    for (size_t j = 0; j < want; ++j) {
      const int64_t id = draw_id(rng, bound);
      if (std::find(block.begin(), block.end(), id) == block.end())
        block.push_back(id);
    }
    count = static_cast<int64_t>(block.size());
    ids->insert(ids->end(), block.begin(), block.end());
  }
}

// run_unique_blocks (an owner's blocks, each free of repeats, which may
// repeat each other's ids) against the reference over their concatenation:
// 1-5 blocks, some empty, static bounds and the hashed path (negative and
// huge ids), and a bad id in a static table's block taking the hash table.
TEST(Dedup, UniqueBlocksEqualReference) {
  std::mt19937_64 rng(22);
  const int64_t bounds[] = {0, 1, 17, 2048, 131072, int64_t{1} << 40};
  hb::emb::Dedup d[6];
  std::vector<int64_t> want_u;
  std::vector<uint32_t> want_inv;
  for (int call = 0; call < 400; ++call) {
    const int b = call % 6;
    const int64_t bound = bounds[b];
    std::vector<int64_t> counts, ids;
    draw_unique_blocks(rng, bound, 700, &counts, &ids);
    const size_t nblocks = counts.size();
    const bool bad = bound > 0 && !ids.empty() && call % 9 == 4;
    if (bad) {
      // An id outside [0, bound) that no other position holds.
      int64_t &id = ids[rng() % ids.size()];
      const int64_t out = call % 2 ? -7 : bound + 3;
      if (std::count(ids.begin(), ids.end(), out) == 0) id = out;
    }
    d[b].run_unique_blocks(ids.data(), counts.data(), nblocks, bound);
    reference_dedup(ids, &want_u, &want_inv);
    ASSERT_EQ(want_u, d[b].unique()) << call;
    ASSERT_EQ(want_inv, d[b].inverse()) << call;
    // The first non-empty block's ids are new, in order.
    size_t lead = 0;
    for (int64_t c : counts)
      if (c) {
        lead = static_cast<size_t>(c);
        break;
      }
    ASSERT_EQ(lead, d[b].leading_new()) << call;
    for (size_t i = 0; i < lead; ++i) ASSERT_EQ(i, want_inv[i]) << call;
    // The same blocks where they lie apart (an owner's, in the exchange's
    // blocks): the same result.
    std::vector<std::vector<int64_t>> apart(nblocks);
    std::vector<const int64_t *> starts(nblocks);
    for (size_t k = 0, at = 0; k < nblocks; at += counts[k], ++k) {
      apart[k].assign(ids.begin() + at, ids.begin() + at + counts[k]);
      starts[k] = apart[k].data();
    }
    hb::emb::Dedup e;
    e.run_unique_blocks(starts.data(), counts.data(), nblocks, bound);
    ASSERT_EQ(want_u, e.unique()) << call;
    ASSERT_EQ(want_inv, e.inverse()) << call;
    ASSERT_EQ(lead, e.leading_new()) << call;
  }
  // No blocks at all.
  hb::emb::Dedup none;
  EXPECT_TRUE(none.run_unique_blocks(static_cast<const int64_t *>(nullptr),
                                     nullptr, 0, 2048));
  EXPECT_TRUE(none.unique().empty());
  EXPECT_TRUE(none.inverse().empty());
}

// sum_rows (per-id rows summed by unique id, in batch order) for the dims
// it takes as constants and others, with and without a slot map: the same
// bits as a plain loop that adds in the same order.
TEST(SumRows, EqualsReferenceForEveryDim) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (int64_t dim : {1, 2, 3, 4, 8, 16, 32, 64, 65}) {
    for (bool mapped : {false, true}) {
      const size_t n = 1 + rng() % 900;
      std::vector<int64_t> ids(n);
      for (int64_t &id : ids) id = draw_id(rng, 2048);
      hb::emb::Dedup d;
      d.run(ids.data(), n, 2048);
      const size_t nu = d.unique().size();
      std::vector<uint32_t> map(nu);
      for (size_t u = 0; u < nu; ++u) map[u] = static_cast<uint32_t>(u);
      std::shuffle(map.begin(), map.end(), rng);
      std::vector<float> src(n * dim);
      for (float &x : src) x = val(rng);
      std::vector<float> got(nu * dim, 7.0f), want(nu * dim, 7.0f);
      std::vector<bool> started(nu, false);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = d.inverse()[i];
        float *w = want.data() + (mapped ? map[u] : u) * dim;
        for (int64_t c = 0; c < dim; ++c)
          w[c] = started[u] ? w[c] + src[i * dim + c] : src[i * dim + c];
        started[u] = true;
      }
      hb::emb::sum_rows(src.data(), n, d.inverse().data(),
                        mapped ? map.data() : nullptr, dim, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4))
          << "dim " << dim << " mapped " << mapped;
    }
  }
}

// An owner's sum of the sources' partial sums (sum_rows with its dedup's
// leading_new(): the first source's rows copied in one piece, the later
// ones copied or added without a branch) against a plain loop that copies
// a new id's row and adds a repeat's, in position order: the same bits for
// 1-5 sources (some empty), dims 1-65, values with signed zeros.
TEST(SumRows, OwnerSourcesEqualReference) {
  std::mt19937_64 rng(24);
  const float vals[] = {0.0f, -0.0f, 1.5f, -2.25f, 1e-30f, -3e38f};
  for (int64_t dim : {1, 2, 3, 4, 8, 16, 32, 64, 65}) {
    for (int call = 0; call < 12; ++call) {
      std::vector<int64_t> counts, ids;
      draw_unique_blocks(rng, call % 2 ? 2048 : 0, 300, &counts, &ids);
      hb::emb::Dedup d;
      d.run_unique_blocks(ids.data(), counts.data(), counts.size(),
                          call % 2 ? 2048 : 0);
      const size_t n = ids.size(), nu = d.unique().size();
      std::vector<float> src(n * dim);
      for (float &x : src)
        x = rng() % 3 ? vals[rng() % 6] * static_cast<float>(rng() % 7)
                      : vals[rng() % 6];
      std::vector<float> got(nu * dim, 7.0f), want(nu * dim, 7.0f);
      std::vector<bool> started(nu, false);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = d.inverse()[i];
        float *w = want.data() + u * dim;
        for (int64_t c = 0; c < dim; ++c)
          w[c] = started[u] ? w[c] + src[i * dim + c] : src[i * dim + c];
        started[u] = true;
      }
      hb::emb::sum_rows(src.data(), n, d.inverse().data(), nullptr, dim,
                        got.data(), d.leading_new());
      // memcmp only when there is a row: an empty vector's data() may be
      // NULL, which memcmp must not get (UBSan).
      ASSERT_TRUE(want.empty() ||
                  !std::memcmp(want.data(), got.data(), want.size() * 4))
          << "dim " << dim << " call " << call;
    }
  }
}

// An owner that received ids from several ranks dedups them by id for a
// static table (the senders checked them against [0, num_rows)), as the
// local dedup does, and hashes them for a dynamic one; either way the
// result is the hash table's (first occurrence from the lowest rank).
TEST(StepPlan, OwnerDedupIndexesStaticTables) {
  std::mt19937_64 rng(11);
  for (int64_t num_rows : {int64_t{2048}, int64_t{0}}) {
    hb_embedding_config c =
        base_config(HB_OPT_SGD, num_rows, HB_PARTITION_MOD, HB_FLOAT32);
    hb::emb::StepPlan plan(hb::emb::spec_from_config(&c), 0, 2);
    hb::emb::Dedup hashed;
    for (int call = 0; call < 20; ++call) {
      // Ids rank 0 owns (MOD partition: even), each sender's block free of
      // repeats (it deduplicated its ids) and the blocks overlapping.
      std::vector<int64_t> recv, counts;
      for (int from = 0; from < 2; ++from) {
        std::vector<int64_t> block;
        for (int64_t j = 1 + rng() % 600; j > 0; --j) {
          const int64_t id = 2 * static_cast<int64_t>(
                                     rng() % (num_rows ? num_rows / 2 : 5000));
          if (std::find(block.begin(), block.end(), id) == block.end())
            block.push_back(id);
        }
        counts.push_back(static_cast<int64_t>(block.size()));
        recv.insert(recv.end(), block.begin(), block.end());
      }
      plan.set_recv_counts(counts);
      const int64_t nu = plan.owner_dedup(recv.data(), recv.size());
      ASSERT_EQ(nu, static_cast<int64_t>(plan.owner().unique().size()));
      EXPECT_EQ(num_rows > 0, plan.owner_indexed()) << num_rows;
      hashed.run(recv.data(), recv.size());
      ASSERT_EQ(hashed.unique(), plan.owner().unique()) << call;
      ASSERT_EQ(hashed.inverse(), plan.owner().inverse()) << call;
      // The blocks where they arrived (each source's own buffer).
      std::vector<int64_t> b0(recv.begin(), recv.begin() + counts[0]),
          b1(recv.begin() + counts[0], recv.end());
      const int64_t *blocks[] = {b0.data(), b1.data()};
      ASSERT_EQ(nu, plan.owner_dedup(blocks)) << call;
      EXPECT_EQ(num_rows > 0, plan.owner_indexed()) << num_rows;
      ASSERT_EQ(hashed.unique(), plan.owner().unique()) << call;
      ASSERT_EQ(hashed.inverse(), plan.owner().inverse()) << call;
    }
    // One source: the received ids are already unique, no dedup.
    plan.set_recv_counts({3, 0});
    const int64_t three[] = {0, 2, 4};
    EXPECT_EQ(-1, plan.owner_dedup(three, 3));
    EXPECT_FALSE(plan.owner_indexed());
    const int64_t *one[] = {three, nullptr};
    EXPECT_EQ(-1, plan.owner_dedup(one));
    EXPECT_FALSE(plan.owner_indexed());
  }
}

TEST(Initializer, SameRowsForEveryWorldAndPartition) {
  for (int init : {HB_INIT_CONSTANT, HB_INIT_UNIFORM, HB_INIT_NORMAL}) {
    hb_embedding_config c =
        base_config(HB_OPT_SGD, 50, HB_PARTITION_MOD, HB_FLOAT32);
    c.initializer = init;
    c.init_a = init == HB_INIT_UNIFORM ? -0.25 : 0.5;
    c.init_b = 0.25;
    std::map<int64_t, std::vector<float>> first;
    for (int part : {HB_PARTITION_MOD, HB_PARTITION_DIV})
      for (int world : {1, 3, 4}) {
        c.partition = part;
        std::mutex mu;
        std::map<int64_t, std::vector<float>> rows;
        hbtest::run_tables(world, c, [&](int, hb::emb::Table &t) {
          std::lock_guard<std::mutex> lk(mu);
          t.shard().for_each([&](int64_t id, const float *r) {
            rows[id].assign(r, r + c.dim);
          });
        });
        ASSERT_EQ(rows.size(), 50u);
        if (first.empty()) first = rows;
        EXPECT_TRUE(rows == first) << "init " << init << " world " << world;
      }
    for (auto &kv : first)
      for (float v : kv.second) {
        if (init == HB_INIT_CONSTANT) EXPECT_EQ(v, 0.5f);
        if (init == HB_INIT_UNIFORM) EXPECT_TRUE(v >= -0.25f && v < 0.25f);
      }
  }
}

TEST(Initializer, NormalMoments) {
  hb::emb::Spec s;
  s.name = "moments";
  s.dim = 1000;
  s.initializer = HB_INIT_NORMAL;
  s.init_a = 1.0;
  s.init_b = 2.0;
  std::vector<float> w(1000);
  double sum = 0, sq = 0;
  for (int64_t id = 0; id < 100; ++id) {
    hb::emb::init_row(s, 77, id, w.data());
    for (float v : w) sum += v, sq += v * (double)v;
  }
  double mean = sum / 1e5, var = sq / 1e5 - mean * mean;
  EXPECT_NEAR(mean, 1.0, 0.03);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.03);
}

// ---- Partitioner
// -------------------------------------------------------------

// Power-of-two worlds take a mask and a shift (shard.h); every world must
// give what the division gives, for any id (owner) and any row id (rows).
TEST(Partitioner, MaskAndShiftEqualDivision) {
  hb::emb::Spec s;
  s.num_rows = int64_t{1} << 40;
  const int64_t ids[] = {0,
                         1,
                         2,
                         3,
                         7,
                         8,
                         1023,
                         4097,
                         (int64_t{1} << 40) - 1,
                         int64_t{0x7fffffffffffffff}};
  const int64_t negative[] = {-1, -2, -3, -4096, INT64_MIN};
  for (int world = 1; world <= 9; ++world) {
    hb::emb::Partitioner p(s, world);
    EXPECT_EQ(p.shift >= 0, (world & (world - 1)) == 0) << world;
    for (int64_t id : ids) {
      EXPECT_EQ(p.owner(id), static_cast<int>(id % world))
          << world << " " << id;
      EXPECT_EQ(p.local_index(id), id / world) << world << " " << id;
      EXPECT_EQ(p.global_id(p.owner(id), p.local_index(id)), id);
    }
    for (int64_t id : negative)  // dynamic tables: owners of any int64
      EXPECT_EQ(p.owner(id), static_cast<int>(static_cast<uint64_t>(id) %
                                              static_cast<uint64_t>(world)))
          << world << " " << id;
  }
}

// ---- Errors ----------------------------------------------------------------

TEST(Errors, OutOfRangeIdFailsEveryRankAndNamesIt) {
  hb_embedding_config c =
      base_config(HB_OPT_SGD, 10, HB_PARTITION_MOD, HB_FLOAT32);
  std::vector<hb_status> st(3);
  std::vector<std::string> msg(3);
  std::vector<float> after(3);
  hbtest::run_tables(3, c, [&](int r, hb::emb::Table &t) {
    int64_t ids[2] = {1, r == 1 ? int64_t{12} : int64_t{2}};
    std::vector<float> out(2 * c.dim);
    try {
      t.lookup(ids, 2, out.data());
    } catch (const hb::Error &e) {
      st[r] = e.status();
      msg[r] = e.what();
    }
    // The table still works afterwards, and nothing changed.
    int64_t ok[1] = {3};
    t.lookup(ok, 1, out.data());
    after[r] = out[0];
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(st[r], HB_ERR_INVALID_ARGUMENT) << r;
    EXPECT_NE(msg[r].find("12"), std::string::npos) << msg[r];
    EXPECT_EQ(after[r], after[0]);
  }
  EXPECT_NE(msg[1].find("outside [0, 10)"), std::string::npos) << msg[1];
  EXPECT_NE(msg[0].find("rank 1"), std::string::npos) << msg[0];
}

TEST(Errors, NegativeIdInStaticTable) {
  hb_embedding_config c =
      base_config(HB_OPT_SGD, 10, HB_PARTITION_DIV, HB_FLOAT32);
  hbtest::run_tables(1, c, [&](int, hb::emb::Table &t) {
    int64_t id = -1;
    float g[5] = {0};
    try {
      t.apply_gradients(&id, 1, g);
      ADD_FAILURE() << "no error";
    } catch (const hb::Error &e) {
      EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("id -1"), std::string::npos)
          << e.what();
    }
  });
}

// Ranks passing different configs all fail, naming each field that
// differs and every rank's value (at worlds 2 and 3, rank 1 the odd one).
TEST(Errors, ConfigMismatchAcrossRanks) {
  hb_embedding_config c =
      base_config(HB_OPT_SGD, 10, HB_PARTITION_MOD, HB_FLOAT32);
  for (int world : {2, 3}) {
    hbtest::ThreadWorld tw(world);
    std::vector<hb_status> st(world, HB_OK);
    std::vector<std::string> msg(world);
    hbtest::ThreadWorld::run(world, [&](int r) {
      hb_embedding_config mine = c;
      if (r == 1) {
        mine.dim = 6;
        mine.optimizer = HB_OPT_ADAGRAD;
        mine.partition = HB_PARTITION_DIV;
      }
      try {
        hb::emb::Table t(hb::emb::spec_from_config(&mine), tw.endpoint(r));
      } catch (const hb::Error &e) {
        st[r] = e.status();
        msg[r] = e.what();
      }
    });
    const std::string others = world == 2 ? "(rank 0)" : "(ranks 0,2)";
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(st[r], HB_ERR_INVALID_ARGUMENT) << r;
      for (const std::string &n :
           {std::string("rank 1 differs from rank 0"),
            "dim: 5 " + others + " vs 6 (rank 1)",
            "partition: HB_PARTITION_MOD " + others +
                " vs HB_PARTITION_DIV (rank 1)",
            "optimizer: HB_OPT_SGD " + others + " vs HB_OPT_ADAGRAD (rank 1)"})
        EXPECT_NE(msg[r].find(n), std::string::npos)
            << "world " << world << " rank " << r << ": " << msg[r];
      EXPECT_EQ(msg[r].find("learning_rate"), std::string::npos) << msg[r];
    }
  }
}

TEST(Errors, BadConfigs) {
  auto bad = [](std::function<void(hb_embedding_config &)> edit) -> hb_status {
    hb_embedding_config c =
        base_config(HB_OPT_SGD, 10, HB_PARTITION_MOD, HB_FLOAT32);
    edit(c);
    try {
      hb::emb::spec_from_config(&c);
    } catch (const hb::Error &e) {
      return e.status();
    }
    return HB_OK;
  };
  EXPECT_EQ(bad([](auto &c) { c.name = nullptr; }), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.name = "a/b"; }), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.dim = 0; }), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.num_rows = -1; }), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(
      bad([](auto &c) { c.num_rows = 0, c.partition = HB_PARTITION_DIV; }),
      HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.partition = 7; }), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.learning_rate = -1; }),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.wire_dtype = HB_INT32; }),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.optimizer = HB_OPT_FTRL, c.lr_power = 0.5; }),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &c) { c.device = -2; }), HB_ERR_INVALID_ARGUMENT);
  // GPU placement is checked at creation (plugin, device, wire dtype).
  EXPECT_EQ(bad([](auto &c) { c.device = 0; }), HB_OK);
  EXPECT_EQ(bad([](auto &c) { c.dtype = HB_FLOAT16; }),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad([](auto &) {}), HB_OK);
}

TEST(Stats, DedupKeepsWireSmall) {
  // 2 ranks, each looks up 1000 copies of 4 ids: the wire carries 4 ids and
  // 4 rows per rank at most (plus headers), not 1000.
  hb_embedding_config c =
      base_config(HB_OPT_SGD, 100, HB_PARTITION_MOD, HB_FLOAT32);
  hbtest::run_tables(2, c, [&](int, hb::emb::Table &t) {
    std::vector<int64_t> ids;
    for (int i = 0; i < 1000; ++i) ids.push_back(i % 4);
    std::vector<float> out(ids.size() * c.dim);
    t.lookup(ids.data(), ids.size(), out.data());
    EXPECT_EQ(t.stats().unique_ids, 4u);
    EXPECT_LE(t.stats().wire_bytes_sent, 24u + 2 * 8 + 2 * 4 * c.dim);
  });
}

}  // namespace
