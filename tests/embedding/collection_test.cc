// Embedding collections with k ranks simulated by threads: bit-equal to an
// independent reference and to the single-table calls at world sizes 1-4,
// plan reuse (and re-planning when the update's ids differ), the round
// count, and errors that fail every rank.
#include "embedding/collection.h"  // first: it turns on HB_EXPERIMENTAL

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "abi/error.h"
#include "coll_test_util.h"

using hb::emb::Collection;
using hb::emb::Table;
using hbtest::CollCase;
using hbtest::CollRef;
using hbtest::JBatch;

namespace {

using Errors = hbtest::FirstError;
using hbtest::Outcomes;

// One rank's tables and collection over a thread world.
struct RankSetup {
  std::vector<std::unique_ptr<Table>> tables;
  std::unique_ptr<Collection> coll;
  // self_bytes: what the collection's exchanges send to rank r itself.
  RankSetup(hbtest::ThreadWorld &tw, int r, const CollCase &c,
            std::atomic<int64_t> *self_bytes = nullptr) {
    for (const auto &cfg : c.tables)
      tables.emplace_back(
          new Table(hb::emb::spec_from_config(&cfg), tw.endpoint(r)));
    std::vector<hb::emb::Feature> fs;
    for (size_t f = 0; f < c.features.size(); ++f)
      fs.push_back({c.names[f], tables[c.features[f].table].get(),
                    c.features[f].pooling});
    coll.reset(new Collection(fs, tw.endpoint(r, self_bytes)));
  }
};

hb::emb::JaggedBatch jb(JBatch &b) { return hbtest::internal_view(b); }

using hbtest::make_step;

bool same_bits(const std::vector<float> &a, const float *b, size_t n) {
  return a.size() == n && (n == 0 || !std::memcmp(a.data(), b, n * 4));
}

// Trains `steps` steps through a collection and, on twin tables, through
// the single-table calls; checks every lookup against the reference and,
// at the end, every row of both against the reference.
// edges: besides make_step's small ids, some ids anywhere in a static
// table and at its first and last row.
// adjust: applied to every rank's batch of every step before anything runs.
void check_world(int world, int steps, uint64_t seed, int partition = -1,
                 const CollCase &the_case = hbtest::standard_case(),
                 bool edges = false,
                 const std::function<void(JBatch &)> &adjust = nullptr) {
  CollCase c = the_case;
  if (partition >= 0)
    for (auto &t : c.tables)
      if (t.num_rows > 0) t.partition = partition;
  const int64_t W = hbtest::coll_width(c);
  CollRef ref(c);
  std::mt19937_64 g(seed);
  std::vector<std::vector<JBatch>> plan;
  for (int s = 0; s < steps; ++s) plan.push_back(make_step(g, c, world));
  if (edges)
    for (auto &step : plan)
      for (JBatch &b : step)
        for (size_t f = 0; f < c.features.size(); ++f) {
          const int64_t rows = c.tables[c.features[f].table].num_rows;
          for (size_t k = b.base[f]; k < b.ids[f].size() && rows > 0; ++k) {
            const uint64_t r = g() % 4;
            if (r == 1) b.ids[f][k] = static_cast<int64_t>(g() % rows);
            if (r == 2) b.ids[f][k] = g() % 2 ? 0 : rows - 1;
          }
        }
  if (adjust)
    for (auto &step : plan)
      for (JBatch &b : step) adjust(b);
  // Expected outputs, step by step (lookups create dynamic rows first).
  std::vector<std::vector<std::vector<float>>> want_out(steps);
  std::vector<std::vector<std::vector<std::vector<float>>>> want_unp(steps);
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < world; ++r) {
      std::vector<float> o;
      std::vector<std::vector<float>> u;
      ref.lookup(plan[s][r], &o, &u);
      want_out[s].push_back(o);
      want_unp[s].push_back(u);
    }
    ref.apply(plan[s]);
  }
  for (auto &t : ref.tables)  // untouched static rows: their initial value
    for (int64_t id = 0; id < t.c.num_rows; ++id) t.row(id);

  Errors err;
  hbtest::ThreadWorld tw(world);
  std::atomic<int64_t> self_bytes{0};
  hbtest::ThreadWorld::run(world, [&](int r) {
    RankSetup rs(tw, r, c, &self_bytes);
    std::vector<std::unique_ptr<Table>> twins;
    for (const auto &cfg : c.tables)
      twins.emplace_back(
          new Table(hb::emb::spec_from_config(&cfg), tw.endpoint(r)));
    for (int s = 0; s < steps; ++s) {
      JBatch &b = plan[s][r];
      std::vector<float> out(b.B * W, -7.0f);
      std::vector<std::vector<float>> unp(c.features.size());
      std::vector<float *> up(c.features.size(), nullptr);
      for (size_t f = 0; f < c.features.size(); ++f)
        if (c.features[f].pooling == HB_POOLING_NONE) {
          unp[f].assign(b.n(f) * c.tables[c.features[f].table].dim, -7.0f);
          up[f] = unp[f].data();
        }
      rs.coll->lookup(jb(b), out.data(), up.data());
      if (!same_bits(want_out[s][r], out.data(), out.size()))
        err.report("step " + std::to_string(s) + " rank " + std::to_string(r) +
                   ": pooled output differs");
      for (size_t f = 0; f < c.features.size(); ++f)
        if (up[f] && !same_bits(want_unp[s][r][f], up[f], unp[f].size()))
          err.report("step " + std::to_string(s) + " rank " +
                     std::to_string(r) + ": unpooled output of feature " +
                     std::to_string(f) + " differs");
      std::vector<const float *> gup(c.features.size());
      for (size_t f = 0; f < c.features.size(); ++f)
        gup[f] = b.grad_unpooled[f].data();
      rs.coll->apply_gradients(jb(b), b.grad_out.data(), gup.data());
      // The single-table calls on the concatenated ids and per-id grads.
      for (size_t t = 0; t < twins.size(); ++t) {
        std::vector<int64_t> ids;
        std::vector<float> grads, rows;
        ref.expand(b, static_cast<int>(t), &ids, &grads);
        rows.resize(grads.size());
        twins[t]->lookup(ids.data(), ids.size(), rows.data());
        twins[t]->apply_gradients(ids.data(), ids.size(), grads.data());
      }
    }
    // Exactly one plan per step, reused by its update: 4 rounds per step.
    const hb::emb::CollectionStats &st = rs.coll->stats();
    if (st.reused_plans != static_cast<uint64_t>(steps) ||
        st.rounds != 4u * steps)
      err.report("rank " + std::to_string(r) + ": " +
                 std::to_string(st.reused_plans) + " plans reused, " +
                 std::to_string(st.rounds) + " rounds in " +
                 std::to_string(steps) + " steps");
    for (size_t t = 0; t < c.tables.size(); ++t) {
      for (Table *tb : {rs.tables[t].get(), twins[t].get()})
        tb->shard().for_each([&](int64_t id, const float *rec) {
          std::string e = hbtest::compare_record(ref.tables[t], id, rec);
          if (!e.empty()) err.report("rank " + std::to_string(r) + ": " + e);
        });
    }
  });
  EXPECT_EQ(err.first, "");
  // A rank's own ids, rows and partial sums never ride the exchange (on
  // the shared-memory board they would be copied in and out for nothing).
  EXPECT_EQ(self_bytes.load(), 0)
      << "the collection's exchanges sent bytes to their own rank";
}

void check_case(const CollCase &c, int world, int steps, uint64_t seed,
                int partition = -1) {
  check_world(world, steps, seed, partition, c);
}

TEST(Collection, BitEqualWorld1) { check_world(1, 6, 11); }

// Unweighted sum pooling over bags of 0-5 ids (the gradient expansion's
// path with the per-bag tests hoisted; empty bags), every optimizer, dims
// of one vector body (1, 8, 16) and with a tail (3), at world 1 (the
// partial sums straight to the optimizer) and world 3.
TEST(Collection, BitEqualSumBagsEveryDim) {
  using hbtest::coll_table;
  const CollCase c = hbtest::make_case(
      {coll_table("s8", 8, 64, HB_OPT_ADAGRAD, HB_PARTITION_MOD, HB_FLOAT32),
       coll_table("s3", 3, 0, HB_OPT_ADAM, HB_PARTITION_MOD, HB_FLOAT32),
       coll_table("s16", 16, 30, HB_OPT_FTRL, HB_PARTITION_DIV, HB_FLOAT32),
       coll_table("s1", 1, 40, HB_OPT_SGD, HB_PARTITION_MOD, HB_FLOAT32)},
      {{0, HB_POOLING_SUM, false, 4, false},
       {0, HB_POOLING_SUM, false, 1, true},
       {1, HB_POOLING_SUM, false, 3, false},
       {2, HB_POOLING_SUM, false, 5, false},
       {3, HB_POOLING_SUM, false, 2, false},
       {3, HB_POOLING_SUM, true, 3, false}});
  for (int world : {1, 3}) check_case(c, world, 8, 40 + world);
}
TEST(Collection, BitEqualWorld2) { check_world(2, 6, 12); }
TEST(Collection, BitEqualWorld3) { check_world(3, 6, 13); }
TEST(Collection, BitEqualWorld4) { check_world(4, 6, 14); }

// Exchange::alltoallv_fill's staged default (the in-process exchange's)
// delivers blocks that stay valid until the exchange's next call, as the
// backends' do (common/agreement.h): a caller may read them after it
// returns.
TEST(Collection, FilledBlocksOutliveTheExchange) {
  const int world = 2;
  const size_t n = 300000;  // per block: past malloc's mmap threshold
  Errors err;
  hbtest::ThreadWorld tw(world);
  hbtest::ThreadWorld::run(world, [&](int r) {
    std::unique_ptr<hb::Exchange> x = tw.endpoint(r);
    std::vector<int64_t> bytes(world, static_cast<int64_t>(n));
    std::vector<const char *> got(world);
    x->alltoallv_fill(
        bytes.data(), bytes.data(),
        [&](int p, char *dst) { std::memset(dst, 16 * r + p + 1, n); },
        [&](int p, const char *data, size_t) { got[p] = data; });
    // Freed blocks would be this buffer's (or unmapped).
    std::vector<char> other(2 * n, 0x55);
    for (int p = 0; p < world; ++p)
      for (size_t i = 0; i < n; ++i)
        if (got[p][i] != static_cast<char>(16 * p + r + 1)) {
          err.report("rank " + std::to_string(r) + ": block from " +
                     std::to_string(p) + " changed at byte " +
                     std::to_string(i) + " after the exchange returned");
          return;
        }
    (void)other;
  });
  EXPECT_EQ(err.first, "");
}

// World 1 pools float32 rows of static tables straight from the shard
// (Collection::rows_in_place), prefetching them ahead in tables larger
// than the cache: bit-equal to the reference for every pooling, weights,
// empty bags, one-id bags, ids at a table's first and last row, dims of
// run-time width (5) and of the unrolled widths (1, 8), tables with and
// without the prefetch, the gathered path beside it (a dynamic table).
CollCase in_place_case() {
  using hb_f = hbtest::CollFeature;
  CollCase c;
  c.tables = {
      // 20000 x 16 words and 140000 x 2 words: over the 1 MiB from which
      // the pool prefetches; 64 and 300 rows: under it.
      hbtest::coll_table("big8", 8, 20000, HB_OPT_ADAGRAD, HB_PARTITION_MOD,
                         HB_FLOAT32),
      hbtest::coll_table("big1", 1, 140000, HB_OPT_ADAGRAD, HB_PARTITION_DIV,
                         HB_FLOAT32),
      hbtest::coll_table("small5", 5, 64, HB_OPT_SGD, HB_PARTITION_MOD,
                         HB_FLOAT32),
      hbtest::coll_table("small8", 8, 300, HB_OPT_SGD, HB_PARTITION_MOD,
                         HB_FLOAT32),
      hbtest::coll_table("dyn", 8, 0, HB_OPT_SGD, HB_PARTITION_MOD,
                         HB_FLOAT32)};
  c.features = {hb_f{0, HB_POOLING_SUM, false, 30, false},
                hb_f{0, HB_POOLING_NONE, true, 3, false},
                hb_f{0, HB_POOLING_MEAN, true, 12, false},
                hb_f{1, HB_POOLING_SUM, false, 26, false},
                hb_f{1, HB_POOLING_SQRTN, true, 5, false},
                hb_f{2, HB_POOLING_MEAN, false, 4, false},
                hb_f{2, HB_POOLING_NONE, false, 2, false},
                hb_f{3, HB_POOLING_SUM, false, 1, true},
                hb_f{3, HB_POOLING_SQRTN, false, 9, false},
                hb_f{4, HB_POOLING_SUM, true, 4, false}};
  for (size_t f = 0; f < c.features.size(); ++f)
    c.names.push_back("f" + std::to_string(f));
  return c;
}
TEST(Collection, InPlaceRowsBitEqualWorld1) {
  check_world(1, 8, 31, -1, in_place_case(), /*edges=*/true);
}
// The same tables at world 3: the owners gather and update rows of tables
// over the cache (Table::encode_rows / step_rows prefetch them ahead),
// deduplicated across requesters or not.
TEST(Collection, LargeTablesBitEqualWorld3) {
  check_world(3, 8, 32, -1, in_place_case(), /*edges=*/true);
}

// Features whose bags all hold one id (Bags::one: the pool copies or
// scales each bag's row without the per-bag bounds) give the reference's
// bits for every pooling, weighted or not, from rows read in place (world
// 1; a table over the prefetch threshold and under it) and gathered (a
// dynamic table; world 2), beside multi-id features.
CollCase one_id_case() {
  CollCase c = in_place_case();  // its tables: big8 big1 small5 small8 dyn
  c.features.clear();
  const int32_t kPoolings[] = {HB_POOLING_SUM, HB_POOLING_MEAN,
                               HB_POOLING_SQRTN, HB_POOLING_NONE};
  for (int t : {0, 1, 2, 4})
    for (int k = 0; k < 4; ++k)  // weighted every other one, by table
      c.features.push_back({t, kPoolings[k], (t + k) % 2 == 1, 1, true});
  c.features.push_back({1, HB_POOLING_SUM, false, 4, false});
  c.features.push_back({4, HB_POOLING_SQRTN, false, 3, false});
  c.names.clear();
  for (size_t f = 0; f < c.features.size(); ++f)
    c.names.push_back("f" + std::to_string(f));
  return c;
}
TEST(Collection, OneIdBagsBitEqual) {
  for (int world : {1, 2})
    check_world(world, 8, 50 + world, -1, one_id_case(), /*edges=*/true);
}

// Signed zeros: the gradient expansion assigns an id's first gradient by
// adding it to a row of -0.0f (no branch per id), which must keep a -0.0f
// gradient -0.0f, as a copy does. Rows start at -0.0f and SGD (no l1, l2)
// subtracts lr * g: -0 - lr * (-0) = +0 but -0 - lr * (+0) = -0, so a
// +0.0f start (the sum of a zero row and -0.0f) shows in the rows. The
// gradients are +-0 and +-1 at random, over one-id and multi-id bags,
// weighted or not, at the unrolled dims (1, 8) and a run-time one (3).
TEST(Collection, SignedZeroGradsBitEqual) {
  using hb_f = hbtest::CollFeature;
  CollCase c;
  for (int64_t dim : {8, 1, 3}) {
    hb_embedding_config t = hbtest::coll_table("z", dim, 40, HB_OPT_SGD,
                                               HB_PARTITION_MOD, HB_FLOAT32);
    t.initializer = HB_INIT_CONSTANT;
    t.init_a = -0.0;
    t.l1 = t.l2 = 0.0;
    c.tables.push_back(t);
  }
  c.tables[0].name = "z8", c.tables[1].name = "z1", c.tables[2].name = "z3";
  for (int t = 0; t < 3; ++t) {
    c.features.push_back(hb_f{t, HB_POOLING_SUM, false, 1, true});
    c.features.push_back(hb_f{t, HB_POOLING_SUM, false, 4, false});
    c.features.push_back(hb_f{t, HB_POOLING_MEAN, true, 3, false});
  }
  for (size_t f = 0; f < c.features.size(); ++f)
    c.names.push_back("f" + std::to_string(f));
  std::mt19937_64 g(77);
  auto zeros = [&](JBatch &b) {
    const float kv[] = {-0.0f, 0.0f, -0.0f, 1.0f, -1.0f};
    for (float &v : b.grad_out) v = kv[g() % 5];
  };
  for (int world : {1, 2})
    check_world(world, 6, 60 + world, -1, c, false, zeros);
}

// Every partition gives the reference's bits (the reference has none).
TEST(Collection, BitEqualPartitionDiv) {
  check_world(3, 4, 21, HB_PARTITION_DIV);
}
TEST(Collection, BitEqualPartitionMod) {
  check_world(2, 4, 22, HB_PARTITION_MOD);
}

// The update's ids differ from the lookup's on one rank only: every rank
// must plan again (and the result must follow the update's ids).
TEST(Collection, ReplansWhenUpdateIdsDiffer) {
  const int world = 3;
  CollCase c = hbtest::standard_case();
  CollRef ref(c);
  std::mt19937_64 g(5);
  std::vector<JBatch> look = make_step(g, c, world);
  std::vector<JBatch> upd = look;
  // Rank 1 updates other ids than it looked up (same shape), others equal.
  hbtest::shift_ids(upd[1], c);
  upd[1].B = look[1].B;
  std::vector<float> o;
  std::vector<std::vector<float>> u;
  for (int r = 0; r < world; ++r) ref.lookup(look[r], &o, &u);
  ref.apply(upd);
  std::vector<JBatch> look2 = make_step(g, c, world);
  for (int r = 0; r < world; ++r) ref.lookup(look2[r], &o, &u);
  ref.apply(look2);
  for (auto &t : ref.tables)
    for (int64_t id = 0; id < t.c.num_rows; ++id) t.row(id);

  Errors err;
  hbtest::ThreadWorld tw(world);
  hbtest::ThreadWorld::run(world, [&](int r) {
    RankSetup rs(tw, r, c);
    auto step = [&](JBatch &lb, JBatch &ub) {
      std::vector<float> out(lb.B * hbtest::coll_width(c));
      std::vector<std::vector<float>> unp(c.features.size());
      std::vector<float *> up(c.features.size());
      std::vector<const float *> gup(c.features.size());
      for (size_t f = 0; f < c.features.size(); ++f) {
        unp[f].resize(lb.n(f) * c.tables[c.features[f].table].dim);
        up[f] = unp[f].data();
        gup[f] = ub.grad_unpooled[f].data();
      }
      rs.coll->lookup(jb(lb), out.data(), up.data());
      rs.coll->apply_gradients(jb(ub), ub.grad_out.data(), gup.data());
    };
    step(look[r], upd[r]);
    const hb::emb::CollectionStats st = rs.coll->stats();
    // lookup 3, the speculative exchange 1, then header, ids, grads 3.
    if (st.reused_plans != 0 || st.rounds != 7)
      err.report("rank " + std::to_string(r) + ": reused " +
                 std::to_string(st.reused_plans) + ", rounds " +
                 std::to_string(st.rounds));
    step(look2[r], look2[r]);
    if (rs.coll->stats().reused_plans != 1)
      err.report("rank " + std::to_string(r) + ": second step not reused");
    // An update without a lookup before it plans directly (3 rounds).
    uint64_t before = rs.coll->stats().rounds;
    std::mt19937_64 own(static_cast<uint64_t>(r));  // g is shared: not here
    JBatch empty = hbtest::make_jbatch(own, c, 0);
    std::vector<const float *> gup(c.features.size(), nullptr);
    rs.coll->apply_gradients(jb(empty), nullptr, gup.data());
    if (rs.coll->stats().rounds - before != 3)
      err.report("update without lookup: " +
                 std::to_string(rs.coll->stats().rounds - before) + " rounds");
    for (size_t t = 0; t < c.tables.size(); ++t)
      rs.tables[t]->shard().for_each([&](int64_t id, const float *rec) {
        std::string e = hbtest::compare_record(ref.tables[t], id, rec);
        if (!e.empty()) err.report("rank " + std::to_string(r) + ": " + e);
      });
  });
  EXPECT_EQ(err.first, "");
}

Outcomes run_failing(int world, const CollCase &c,
                     const std::function<void(int, RankSetup &)> &fn) {
  hbtest::ThreadWorld tw(world);
  return hbtest::run_failing<RankSetup>(
      world,
      [&](int r) {
        return std::unique_ptr<RankSetup>(new RankSetup(tw, r, c));
      },
      fn);
}

TEST(Collection, BadIdFailsEveryRank) {
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(3);
  std::vector<JBatch> step = make_step(g, c, 3);
  step[2] = hbtest::make_jbatch(g, c, 2);
  step[2].ids[0].back() = 1000;  // table ta has 50 rows
  Outcomes o = run_failing(3, c, [&](int r, RankSetup &rs) {
    std::vector<float> out(step[r].B * hbtest::coll_width(c));
    std::vector<std::vector<float>> unp(c.features.size());
    std::vector<float *> up(c.features.size());
    for (size_t f = 0; f < c.features.size(); ++f) {
      unp[f].resize(step[r].n(f) * 8);
      up[f] = unp[f].data();
    }
    rs.coll->lookup(jb(step[r]), out.data(), up.data());
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(o.st[r], HB_ERR_INVALID_ARGUMENT) << r;
    EXPECT_NE(o.msg[r].find("1000"), std::string::npos) << o.msg[r];
  }
  EXPECT_NE(o.msg[0].find("rank 2"), std::string::npos) << o.msg[0];
}

TEST(Collection, BadOffsetsFailEveryRank) {
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(4);
  std::vector<JBatch> step;
  for (int r = 0; r < 2; ++r) step.push_back(hbtest::make_jbatch(g, c, 3));
  step[0].use_lengths = false;
  step[0].offsets[2][2] = step[0].offsets[2][1] - 1;
  Outcomes o = run_failing(2, c, [&](int r, RankSetup &rs) {
    std::vector<float> out(step[r].B * hbtest::coll_width(c));
    std::vector<std::vector<float>> unp(c.features.size());
    std::vector<float *> up(c.features.size());
    for (size_t f = 0; f < c.features.size(); ++f) {
      unp[f].resize(step[r].n(f) * 8 + 64);
      up[f] = unp[f].data();
    }
    rs.coll->lookup(jb(step[r]), out.data(), up.data());
  });
  EXPECT_EQ(o.st[0], HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(o.msg[0].find("decrease"), std::string::npos) << o.msg[0];
  EXPECT_EQ(o.st[1], HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(o.msg[1].find("rank 0"), std::string::npos) << o.msg[1];
}

// Rank 0 updates while rank 1 looks up (same header size): both get
// HB_ERR_MISMATCH instead of exchanging garbage.
TEST(Collection, MismatchedCallsFailEveryRank) {
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(8);
  const JBatch empty = hbtest::make_jbatch(g, c, 0);
  Outcomes o = run_failing(2, c, [&](int r, RankSetup &rs) {
    JBatch b = empty;  // view() writes into the batch: one per rank thread
    std::vector<float *> up(c.features.size(), nullptr);
    std::vector<const float *> gup(c.features.size(), nullptr);
    if (r == 0)
      rs.coll->apply_gradients(jb(b), nullptr, gup.data());
    else
      rs.coll->lookup(jb(b), nullptr, up.data());
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(o.st[r], HB_ERR_MISMATCH) << o.msg[r];
    EXPECT_NE(o.msg[r].find(r == 0 ? "rank 1" : "rank 0"), std::string::npos)
        << o.msg[r];
  }
}

TEST(Collection, RejectsGpuTablesAndBadFeatures) {
  hb_embedding_config cfg =
      hbtest::coll_table("g", 4, 10, HB_OPT_SGD, HB_PARTITION_MOD, HB_FLOAT32);
  hbtest::ThreadWorld tw(1);
  hb::emb::Spec spec = hb::emb::spec_from_config(&cfg);
  Table host(spec, tw.endpoint(0));
  spec.device = 0;
  spec.name = "g2";
  Table gpu(spec, tw.endpoint(0));  // the host side of a GPU table
  auto make = [&](std::vector<hb::emb::Feature> fs) -> hb_status {
    try {
      Collection c(fs, tw.endpoint(0));
      return HB_OK;
    } catch (const hb::Error &e) {
      return e.status();
    }
  };
  EXPECT_EQ(make({{"a", &gpu, HB_POOLING_SUM}}), HB_ERR_UNSUPPORTED);
  EXPECT_EQ(make({{"a", &host, 9}}), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make({{"a", nullptr, HB_POOLING_SUM}}), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make({}), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make({{"a", &host, HB_POOLING_SUM}, {"b", &host, HB_POOLING_NONE}}),
            HB_OK);
}

// Ranks that build different collections fail at creation, naming the
// feature, what differs and every rank's value (worlds 2 and 3).
TEST(Collection, DifferentFeaturesFailCreation) {
  CollCase c = hbtest::standard_case();
  for (int world : {2, 3}) {
    std::vector<hb_status> st(world, HB_OK);
    std::vector<std::string> msg(world);
    hbtest::ThreadWorld tw(world);
    hbtest::ThreadWorld::run(world, [&](int r) {
      std::vector<std::unique_ptr<Table>> ts;
      for (const auto &cfg : c.tables)
        ts.emplace_back(
            new Table(hb::emb::spec_from_config(&cfg), tw.endpoint(r)));
      std::vector<hb::emb::Feature> fs = {
          {"x", ts[0].get(), r == 1 ? HB_POOLING_MEAN : HB_POOLING_SUM},
          {"y", ts[r == 1 ? 1 : 0].get(), HB_POOLING_NONE}};
      if (r == world - 1 && world == 3) fs.pop_back();
      try {
        Collection coll(fs, tw.endpoint(r));
      } catch (const hb::Error &e) {
        st[r] = e.status();
        msg[r] = e.what();
      }
    });
    const std::string sum = world == 2 ? "(rank 0)" : "(ranks 0,2)";
    std::vector<std::string> needles = {
        "feature 0 ('x') pooling: HB_POOLING_SUM " + sum +
            " vs HB_POOLING_MEAN (rank 1)",
        "feature 1 ('y') table: 'ta' (rank 0) vs 'tb' (rank 1)",
        "feature 1 ('y') dim: 3 (rank 0) vs 5 (rank 1)"};
    if (world == 3) {
      needles.push_back("ranks 1,2 differ from rank 0");
      needles.push_back("features: 2 (ranks 0,1) vs 1 (rank 2)");
      needles.push_back("feature 1 name: 'y' (ranks 0,1) vs (none) (rank 2)");
    }
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(st[r], HB_ERR_INVALID_ARGUMENT) << r;
      for (const std::string &n : needles)
        EXPECT_NE(msg[r].find(n), std::string::npos)
            << "world " << world << " rank " << r << ": " << msg[r];
    }
  }
}

}  // namespace
