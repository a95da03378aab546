// hb_shard_range, and the hb_data_sync decision simulated over virtual
// ranks (the real collective runs in mp_data_sync.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "data/data_sync.h"
#include "hb.h"

TEST(ShardRange, ContiguousEvenAndComplete) {
  for (int64_t n = 0; n <= 40; ++n)
    for (int32_t shards = 1; shards <= 9; ++shards) {
      int64_t next = 0;
      for (int32_t s = 0; s < shards; ++s) {
        int64_t b = -1, e = -1;
        ASSERT_EQ(hb_shard_range(n, shards, s, 0, &b, &e), HB_OK);
        EXPECT_EQ(b, next);
        int64_t size = e - b;
        EXPECT_TRUE(size == n / shards || size == n / shards + 1)
            << n << " " << shards << " " << s;
        EXPECT_EQ(size, n / shards +
                            (s < n % shards ? 1 : 0));  // larger shards first
        next = e;
        hb_status strict = hb_shard_range(n, shards, s, 1, &b, &e);
        EXPECT_EQ(strict, size == 0 ? HB_ERR_INVALID_ARGUMENT : HB_OK);
      }
      EXPECT_EQ(next, n);
    }
  int64_t b, e;
  ASSERT_EQ(hb_shard_range(INT64_C(1) << 40, 3, 2, 1, &b, &e), HB_OK);
  EXPECT_EQ(e, INT64_C(1) << 40);
  EXPECT_EQ(hb_shard_range(2, 3, 2, 1, &b, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("shard 2 of 3"),
            std::string::npos)
      << hb_last_error();
  EXPECT_EQ(hb_shard_range(-1, 3, 0, 0, &b, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_shard_range(5, 0, 0, 0, &b, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_shard_range(5, 3, 3, 0, &b, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_shard_range(5, 3, -1, 0, &b, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_shard_range(5, 3, 0, 0, nullptr, &e), HB_ERR_INVALID_ARGUMENT);
}

namespace {

struct SyncRun {
  std::vector<int> steps, empty_steps;
  int rounds = 0;
};

// Every rank calls data sync once per round; the MAX allreduce is done
// here by hand. A rank leaves when told to stop; the test fails if ranks
// ever disagree on continuing (a real run would hang).
SyncRun simulate(const std::vector<int> &batches, bool drop_remainder) {
  size_t n = batches.size();
  SyncRun r;
  r.steps.assign(n, 0);
  r.empty_steps.assign(n, 0);
  std::vector<int> consumed(n, 0);
  for (;;) {
    int32_t any_has = 0, any_out = 0;
    for (size_t k = 0; k < n; ++k) {
      bool has = consumed[k] < batches[k];
      any_has = std::max<int32_t>(any_has, has);
      any_out = std::max<int32_t>(any_out, !has);
    }
    int cont = -1;
    for (size_t k = 0; k < n; ++k) {
      bool has = consumed[k] < batches[k];
      hb::data::SyncDecision d =
          hb::data::decide(any_has, any_out, drop_remainder, has);
      if (cont == -1) cont = d.cont;
      EXPECT_EQ(d.cont, cont) << "ranks disagree at round " << r.rounds;
      if (!d.cont) continue;
      ++r.steps[k];
      if (d.feed_empty) {
        EXPECT_FALSE(has);
        ++r.empty_steps[k];
      } else {
        EXPECT_TRUE(has);
        ++consumed[k];
      }
    }
    ++r.rounds;
    if (!cont || r.rounds > 1000) break;
  }
  return r;
}

}  // namespace

TEST(DataSync, ThreeRanksWithFiveSevenAndZeroBatches) {
  SyncRun drop = simulate({5, 7, 0}, true);
  EXPECT_EQ(drop.steps, (std::vector<int>{0, 0, 0}));  // rank 2 is out at once
  SyncRun keep = simulate({5, 7, 0}, false);
  EXPECT_EQ(keep.steps, (std::vector<int>{7, 7, 7}));
  EXPECT_EQ(keep.empty_steps, (std::vector<int>{2, 0, 7}));
  EXPECT_EQ(keep.rounds, 8);  // seven steps, then everyone stops together
  SyncRun drop2 = simulate({5, 7, 3}, true);
  EXPECT_EQ(drop2.steps, (std::vector<int>{3, 3, 3}));
  SyncRun none = simulate({0, 0, 0}, false);
  EXPECT_EQ(none.steps, (std::vector<int>{0, 0, 0}));
}

TEST(DataSync, NullArguments) {
  int32_t cont, empty;
  EXPECT_EQ(hb_data_sync(nullptr, 1, 0, &cont, &empty),
            HB_ERR_INVALID_ARGUMENT);
}
