// The pieces under the lifecycle: IdMap::erase against std::map, a dynamic
// shard's free list, and the write stamps / evicted log of RowMeta through
// a table's owner path.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "embedding/harness.h"
#include "embedding/id_map.h"
#include "embedding/shard.h"
#include "embedding/table.h"

namespace {

using hb::emb::IdMap;

TEST(IdMapErase, MatchesStdMapUnderChurn) {
  // Few distinct keys with clustered hashes force long probe chains, so
  // backward-shift deletion is exercised across wrap-around.
  std::mt19937_64 g(7);
  IdMap m;
  std::map<int64_t, uint32_t> ref;
  for (int it = 0; it < 200000; ++it) {
    int64_t id = static_cast<int64_t>(g() % 3000) - 1500;
    if (g() % 3 == 0) {
      uint32_t got = m.erase(id);
      auto f = ref.find(id);
      ASSERT_EQ(got, f == ref.end() ? IdMap::kEmpty : f->second) << it;
      if (f != ref.end()) ref.erase(f);
    } else {
      bool ins;
      uint32_t v = static_cast<uint32_t>(it);
      uint32_t got = m.insert(id, v, &ins);
      auto f = ref.find(id);
      ASSERT_EQ(ins, f == ref.end());
      if (f == ref.end())
        ref[id] = v;
      else
        ASSERT_EQ(got, f->second);
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  for (const auto &kv : ref) ASSERT_EQ(m.find(kv.first), kv.second);
  size_t n = 0;
  m.for_each([&](int64_t id, uint32_t v) {
    ASSERT_EQ(ref.at(id), v);
    ++n;
  });
  EXPECT_EQ(n, ref.size());
}

hb_embedding_config dyn_config(const char *name) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = name;
  c.dim = 4;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -1;
  c.init_b = 1;
  c.optimizer = HB_OPT_ADAGRAD;
  return c;
}

TEST(ShardErase, FreedSlotsAreReusedAndRowsReinitialized) {
  hb_embedding_config c = dyn_config("t");
  hb::emb::Spec spec = hb::emb::spec_from_config(&c);
  hb::emb::Shard s(spec, 0, 1);
  std::vector<float> fresh(s.record_words());
  std::memcpy(fresh.data(), s.get(42), fresh.size() * 4);
  for (int64_t id = 0; id < 100; ++id) s.get(id);
  ASSERT_EQ(s.rows(), 100);  // 42 was there already
  s.get(42)[0] = 123.0f;     // a trained value
  ASSERT_TRUE(s.erase(42));
  ASSERT_FALSE(s.erase(42));
  ASSERT_TRUE(s.erase(7));
  EXPECT_EQ(s.rows(), 98);
  EXPECT_EQ(s.slots(), 100);
  EXPECT_EQ(s.find(42), nullptr);
  EXPECT_EQ(s.find_index(7), -1);
  int seen = 0;
  s.for_each([&](int64_t id, const float *) {
    EXPECT_NE(id, 42);
    EXPECT_NE(id, 7);
    ++seen;
  });
  EXPECT_EQ(seen, 98);
  // New rows take the freed slots (no growth) and start from their
  // initializer, not from the evicted row's values.
  float *r = s.get(42);
  EXPECT_EQ(std::memcmp(r, fresh.data(), fresh.size() * 4), 0);
  s.get(1000);
  EXPECT_EQ(s.slots(), 100);
  EXPECT_EQ(s.rows(), 100);
  s.get(1001);
  EXPECT_EQ(s.slots(), 101);
}

TEST(RowMeta, StampsFollowWritesAndEpochs) {
  hb_embedding_config c = dyn_config("stamps");
  hbtest::run_tables(2, c, [&](int r, hb::emb::Table &t) {
    std::vector<float> g(4 * 4, 0.5f), out(4 * 4);
    std::vector<int64_t> a = {1, 2, 3, 4}, b = {3, 4, 5, 6};
    t.lookup(a.data(), 4, out.data());
    t.apply_gradients(a.data(), 4, g.data());  // untracked: no meta
    ASSERT_EQ(t.row_meta(), nullptr);
    hb::lifecycle::RowMeta &m = t.track_writes();
    EXPECT_EQ(m.epoch(), 0u);
    EXPECT_EQ(m.seal(), 0u);  // a full export at epoch 0
    t.apply_gradients(b.data(), 4, g.data());
    std::map<int64_t, uint64_t> st;
    t.shard().for_each_indexed(
        [&](int64_t idx, int64_t id, const float *) { st[id] = m.stamp(idx); });
    for (const auto &kv : st) {
      bool written = kv.first >= 3;  // 3..6 after the seal
      EXPECT_EQ(kv.second, written ? 1u : 0u)
          << "rank " << r << " id " << kv.first;
    }
    // Rows a lookup creates are written too (they appear in an export).
    EXPECT_EQ(m.seal(), 1u);
    std::vector<int64_t> c2 = {7, 8};
    t.lookup(c2.data(), 2, out.data());
    t.shard().for_each_indexed([&](int64_t idx, int64_t id, const float *) {
      if (id >= 7) EXPECT_EQ(m.stamp(idx), 2u);
    });
  });
}

}  // namespace
