// The store's state machine alone (no sockets): parking, expiry, barrier
// generations, dropped connections. And MemoryKV across threads.
#include <gtest/gtest.h>

#include <thread>

#include "abi/error.h"
#include "common/health.h"
#include "rendezvous/memory_kv.h"
#include "rendezvous/protocol.h"
#include "rendezvous/store.h"

namespace hb {
namespace rdv {
namespace {

hb_status status_of(const Outgoing &o) {
  return static_cast<hb_status>(o.frame.ints[0]);
}

TEST(Store, GetParksUntilSetAndExpiresNamingTheKey) {
  Store s(2);
  std::vector<Outgoing> out;
  s.get(/*conn=*/1, /*id=*/10, "k", 100, /*now=*/1000, &out);
  s.get(2, 20, "other", 50, 1000, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.next_deadline(), 1050);
  s.set("k", "v", &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].conn, 1u);
  EXPECT_EQ(out[0].frame.id, 10u);
  EXPECT_EQ(out[0].frame.strs[0], "v");
  out.clear();
  s.expire(1049, &out);
  EXPECT_TRUE(out.empty());
  s.expire(1050, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(status_of(out[0]), HB_ERR_TIMEOUT);
  EXPECT_NE(out[0].frame.strs[0].find("'other'"), std::string::npos);
  EXPECT_EQ(s.num_parked(), 0u);
  EXPECT_EQ(s.next_deadline(), INT64_MAX);
}

TEST(Store, WaitWakesOnlyWhenEveryKeyExists) {
  Store s(1);
  std::vector<Outgoing> out;
  s.wait(1, 1, {"a", "b"}, 1000, 0, &out);
  s.set("a", "", &out);
  EXPECT_TRUE(out.empty());
  s.add(2, 2, "b", 1, &out);  // add sets the key too
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].frame.ints[1], 1);  // the add's reply
  EXPECT_EQ(out[1].conn, 1u);          // the woken wait
  EXPECT_EQ(status_of(out[1]), HB_OK);
}

TEST(Store, BarrierGenerationsAndTimeoutNamesMissingRanks) {
  Store s(3);
  std::vector<Outgoing> out;
  for (uint64_t gen = 0; gen < 3; ++gen) {
    for (int r = 0; r < 3; ++r) s.barrier(10 + r, gen, r, "b", 100, 0, &out);
    ASSERT_EQ(out.size(), 3u);
    for (auto &o : out) EXPECT_EQ(o.frame.ints[1], static_cast<int64_t>(gen));
    out.clear();
  }
  s.barrier(10, 7, 0, "b", 100, 0, &out);
  s.barrier(10, 8, 0, "b", 100, 0, &out);  // same rank twice
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(status_of(out[0]), HB_ERR_INVALID_ARGUMENT);
  out.clear();
  s.expire(100, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].frame.strs[0].find("generation 3"), std::string::npos)
      << out[0].frame.strs[0];
  EXPECT_NE(out[0].frame.strs[0].find("ranks 1, 2 did not arrive"),
            std::string::npos)
      << out[0].frame.strs[0];
}

TEST(Store, StaggeredBarrierTimeoutsBlameOnlyTheAbsent) {
  Store s(4);
  std::vector<Outgoing> out;
  s.barrier(1, 1, 0, "b", 100, 0, &out);
  s.barrier(3, 1, 2, "b", 100, 50, &out);
  s.expire(100, &out);
  s.expire(150, &out);
  ASSERT_EQ(out.size(), 2u);
  for (auto &o : out)
    EXPECT_NE(o.frame.strs[0].find("ranks 1, 3 did not arrive (2 of 4 did)"),
              std::string::npos)
        << o.frame.strs[0];
}

TEST(Store, DroppedConnectionLeavesItsRoundsAndWaits) {
  Store s(2);
  std::vector<Outgoing> out;
  s.barrier(1, 1, 0, "b", 1000, 0, &out);
  s.get(1, 2, "k", 1000, 0, &out);
  s.drop(1);
  EXPECT_EQ(s.num_parked(), 0u);
  s.set("k", "v", &out);
  s.barrier(2, 3, 1, "b", 1000, 0, &out);
  EXPECT_TRUE(out.empty());  // rank 0's arrival was dropped with it
}

TEST(Store, ParseInt64IsStrict) {
  int64_t v;
  EXPECT_TRUE(parse_int64("-42", &v));
  EXPECT_EQ(v, -42);
  EXPECT_FALSE(parse_int64("", &v));
  EXPECT_FALSE(parse_int64(" 1", &v));
  EXPECT_FALSE(parse_int64("1x", &v));
  EXPECT_FALSE(parse_int64("99999999999999999999", &v));
}

TEST(MemoryKV, ThreadsRendezvous) {
  MemoryKV kv;
  constexpr int kThreads = 4;
  std::vector<std::thread> ts;
  for (int r = 0; r < kThreads; ++r)
    ts.emplace_back([&, r] {
      kv.set("addr/" + std::to_string(r), std::to_string(r * 10));
      for (int i = 0; i < 100; ++i) kv.add("n", 1);
      for (int p = 0; p < kThreads; ++p)
        EXPECT_EQ(kv.get("addr/" + std::to_string(p), 2000),
                  std::to_string(p * 10));
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(kv.add("n", 0), 400);
}

TEST(MemoryKV, TimeoutsNameTheKeysAndHealthWakesWaiters) {
  Health health;
  MemoryKV kv(&health);
  kv.set("a", "1");
  try {
    kv.wait({"a", "b"}, 50);
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_TIMEOUT);
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("'a'"), std::string::npos);
  }
  try {
    kv.add("a", INT64_MAX);
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
  }
  std::thread failer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    health.fail(HB_ERR_PEER_FAILED, "rank 3 lost: test");
  });
  try {
    kv.get("never", 5000);
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_PEER_FAILED);
    EXPECT_STREQ(e.what(), "rank 3 lost: test");
  }
  failer.join();
}

}  // namespace
}  // namespace rdv
}  // namespace hb
