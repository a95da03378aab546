// alltoallv on the shared-memory call board: blocks of up to a slot's whole
// payload (inline part and staging area) travel in the same round as the
// call's print -- one rendezvous per call, where blocks over the inline
// part used to take the print's round and then a ring exchange. Checked
// here: the bytes (uneven and empty blocks, strided sends, receive blocks
// out of order), the round count (one board post per call, no ring
// message), calls too large for a slot (the rings, as before), mismatched
// pair counts (HB_ERR_MISMATCH on every rank, no bytes read) and a rank
// that dies between calls (HB_ERR_PEER_FAILED); the same for
// alltoallv_sized and alltoallv_fill.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/shm_transport.h"
#include "thread_world.h"

namespace {

using hb::test::ThreadWorld;

hb::comm::BackendConfig shm_config() {
  hb::comm::BackendConfig cfg;
  cfg.transport = "shm";
  cfg.timeout_ms = 20000;
  cfg.peer_report_grace_ms = 100;
  return cfg;
}

// Element e of the block rank `from` sends rank `to`.
int32_t value(int from, int to, int64_t e) {
  return int32_t(from * 1000003 + to * 7919 + e);
}

// One alltoallv of int32 blocks: rank r sends rank q count(r, q) elements
// from a send buffer with a gap of 3 elements after each block (not
// packed: the board stages them) and receives them in reverse rank order.
// Checks every element; returns the shm messages rank r posted.
template <class Count>
uint64_t run_alltoallv(ThreadWorld &w, int r, Count count) {
  const int n = w.size();
  std::vector<int64_t> sc(n), so(n), rc(n), ro(n);
  int64_t at = 0;
  for (int q = 0; q < n; ++q) {
    sc[q] = count(r, q), so[q] = at;
    at += sc[q] + 3;
  }
  std::vector<int32_t> send(size_t(at) + 1, -1);
  for (int q = 0; q < n; ++q)
    for (int64_t e = 0; e < sc[q]; ++e)
      send[size_t(so[q] + e)] = value(r, q, e);
  at = 0;
  for (int q = n - 1; q >= 0; --q) {
    rc[q] = count(q, r), ro[q] = at;
    at += rc[q];
  }
  std::vector<int32_t> recv(size_t(at) + 1, -1);
  const uint64_t before = w.at(r).traffic().shm_messages;
  w.at(r).alltoallv(send.data(), sc.data(), so.data(), recv.data(), rc.data(),
                    ro.data(), HB_INT32);
  const uint64_t posted = w.at(r).traffic().shm_messages - before;
  for (int q = 0; q < n; ++q)
    for (int64_t e = 0; e < rc[q]; ++e)
      if (recv[size_t(ro[q] + e)] != value(q, r, e))
        hb::fail(HB_ERR_INTERNAL, "rank %d: element %lld from rank %d wrong", r,
                 (long long)e, q);
  return posted;
}

// Every rank failed with HB_ERR_MISMATCH, saying `text`.
void expect_mismatch(const std::vector<hb_status> &st,
                     const std::vector<std::string> &msg, const char *text) {
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_EQ(st[r], HB_ERR_MISMATCH) << "rank " << r << ": " << msg[r];
    EXPECT_NE(msg[r].find(text), std::string::npos) << msg[r];
  }
}

// Every rank's call took one board post and no ring message.
void expect_one_post(const std::vector<uint64_t> &posts, int call) {
  for (size_t r = 0; r < posts.size(); ++r)
    EXPECT_EQ(posts[r], 1u) << "rank " << r << ", call " << call
                            << ": one board post, no ring message";
}

// The last rank makes three calls, then its backend goes (its segment
// says it is gone); the others call until they fail, every one with
// HB_ERR_PEER_FAILED.
void expect_dead_peer_fails(ThreadWorld &w,
                            const std::function<void(int)> &call) {
  const int n = w.size();
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r == n - 1) {
          for (int i = 0; i < 3; ++i) call(r);
          w.drop(r);
          return;
        }
        for (;;) call(r);
      },
      &msg);
  EXPECT_EQ(st[size_t(n - 1)], HB_OK);
  for (int r = 0; r < n - 1; ++r)
    EXPECT_EQ(st[size_t(r)], HB_ERR_PEER_FAILED)
        << "rank " << r << ": " << msg[size_t(r)];
}

class BoardAlltoallv : public ::testing::TestWithParam<int> {};

TEST_P(BoardAlltoallv, BlocksBeyondTheInlinePartTakeOneRound) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  // Every rank sends 2-3x the inline part in all, uneven, one block empty.
  const int64_t big = int64_t(hb::comm::ShmTransport::kInlineBytes) / 4;
  auto count = [&](int from, int to) -> int64_t {
    if (from == 0 && to == n - 1) return 0;
    return big * 2 / (n - 1) + 977 * from + 131 * to;
  };
  std::vector<uint64_t> posts(static_cast<size_t>(n));
  for (int call = 0; call < 3; ++call) {
    w.run([&](int r) { posts[size_t(r)] = run_alltoallv(w, r, count); });
    expect_one_post(posts, call);
  }
}

TEST_P(BoardAlltoallv, CallsLargerThanASlotStillGoOverTheRings) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  // 4 MiB per rank: more than any world's slot payload.
  const int64_t per = (int64_t(4) << 20) / 4 / (n - 1);
  auto count = [&](int from, int to) { return per + from - to; };
  std::vector<uint64_t> posts(static_cast<size_t>(n));
  w.run([&](int r) { posts[size_t(r)] = run_alltoallv(w, r, count); });
  for (int r = 0; r < n; ++r) EXPECT_GT(posts[size_t(r)], 1u);
  // Then a board call again: the sequence is intact.
  w.run([&](int r) {
    run_alltoallv(w, r, [](int f, int t) { return int64_t(50000 + f + t); });
  });
}

TEST_P(BoardAlltoallv, MismatchedLargeBlocksFailEveryRank) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  const int64_t big = int64_t(hb::comm::ShmTransport::kInlineBytes) / 4;
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        // Rank 0 sends rank 1 one element less than rank 1 expects.
        run_alltoallv(w, r, [&](int from, int to) {
          return big + (from == 0 && to == 1 && r == 0 ? 0 : 1);
        });
      },
      &msg);
  expect_mismatch(st, msg, "rank 0 sends rank 1");
  // Still usable, in one round.
  w.run([&](int r) {
    EXPECT_EQ(run_alltoallv(w, r, [&](int, int) { return big; }), 1u);
  });
}

TEST_P(BoardAlltoallv, DeadPeerGivesPeerFailed) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  const int64_t big = int64_t(hb::comm::ShmTransport::kInlineBytes) / 2;
  auto count = [&](int, int) { return big; };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r == n - 1) {
          for (int i = 0; i < 3; ++i) run_alltoallv(w, r, count);
          w.drop(r);  // its segment says it is gone
          return;
        }
        for (;;) run_alltoallv(w, r, count);
      },
      &msg);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(took, 10.0);
  EXPECT_EQ(st[size_t(n - 1)], HB_OK);
  for (int r = 0; r < n - 1; ++r)
    EXPECT_EQ(st[size_t(r)], HB_ERR_PEER_FAILED)
        << "rank " << r << ": " << msg[size_t(r)];
}

INSTANTIATE_TEST_SUITE_P(Ranks, BoardAlltoallv, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return "np" + std::to_string(p.param);
                         });

// The bytes of the block rank `from` sends rank `to`.
char block_byte(int from, int to, int64_t i) {
  return static_cast<char>(from * 31 + to * 7 + i * 13);
}

// A Deliver that checks rank r's blocks arrive in rank order, with
// bytes(q, r) bytes of block_byte(q, r, i); check() after the call: every
// rank's came.
template <class Bytes>
struct CheckedDelivery {
  int r, n;
  Bytes bytes;
  int next = 0;
  void operator()(int q, const char *data, size_t got) {
    if (q != next++)
      hb::fail(HB_ERR_INTERNAL, "rank %d: block of rank %d out of order", r, q);
    if (int64_t(got) != bytes(q, r))
      hb::fail(HB_ERR_INTERNAL, "rank %d: %zu bytes from rank %d", r, got, q);
    for (size_t i = 0; i < got; ++i)
      if (data[i] != block_byte(q, r, int64_t(i)))
        hb::fail(HB_ERR_INTERNAL, "rank %d: byte %zu from rank %d wrong", r, i,
                 q);
  }
  void check() const {
    if (next != n)
      hb::fail(HB_ERR_INTERNAL, "rank %d: %d blocks delivered", r, next);
  }
};

// alltoallv_sized (comm/backend.h): the receivers learn the sizes from the
// round itself -- on the board each slot carries its sender's sizes ahead
// of its blocks, so the lookup's header and ids take one rendezvous
// (docs/performance.md, "The lookup's header in its ids round").
// Rank r sends rank q bytes(r, q) bytes of block_byte(r, q, i); checks
// every byte delivered; returns the shm messages rank r posted.
template <class Bytes>
uint64_t run_sized(ThreadWorld &w, int r, Bytes bytes) {
  const int n = w.size();
  std::vector<int64_t> sb(static_cast<size_t>(n));
  std::vector<char> send;
  for (int q = 0; q < n; ++q) {
    sb[size_t(q)] = bytes(r, q);
    for (int64_t i = 0; i < sb[size_t(q)]; ++i)
      send.push_back(block_byte(r, q, i));
  }
  const uint64_t before = w.at(r).traffic().shm_messages;
  CheckedDelivery<Bytes> got{r, n, bytes};
  w.at(r).alltoallv_sized(send.data(), sb.data(), std::ref(got));
  got.check();
  return w.at(r).traffic().shm_messages - before;
}

class SizedAlltoallv : public ::testing::TestWithParam<int> {};

TEST_P(SizedAlltoallv, SizesAndBlocksTakeOneRound) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  const int64_t big = int64_t(hb::comm::ShmTransport::kInlineBytes);
  for (int call = 0; call < 3; ++call) {
    // Uneven, one block empty, odd sizes; the last call beyond the inline
    // part. Sizes no rank could know from its own arguments.
    auto bytes = [&](int from, int to) -> int64_t {
      if (from == 0 && to == n - 1) return 0;
      return (call == 2 ? big : 0) + 8 * (call + 1) * (from + 1) + 3 * to;
    };
    std::vector<uint64_t> posts(static_cast<size_t>(n));
    w.run([&](int r) {
      EXPECT_TRUE(w.at(r).sized_in_one_round());
      posts[size_t(r)] = run_sized(w, r, bytes);
    });
    expect_one_post(posts, call);
  }
}

TEST_P(SizedAlltoallv, LargerThanASlotTakesASecondCall) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  // Only rank 1's sends exceed its slot: every rank still agrees.
  const int64_t over = (int64_t(4) << 20) / (n - 1);
  auto bytes = [&](int from, int to) -> int64_t {
    return from == 1 ? over + to : 100 + from + to;
  };
  std::vector<uint64_t> posts(static_cast<size_t>(n));
  w.run([&](int r) { posts[size_t(r)] = run_sized(w, r, bytes); });
  for (int r = 0; r < n; ++r) EXPECT_GT(posts[size_t(r)], 1u);
  w.run([&](int r) {
    EXPECT_EQ(run_sized(w, r, [](int f, int t) { return int64_t(f + t); }), 1u);
  });
}

TEST_P(SizedAlltoallv, AnotherCallOnOneRankIsAMismatch) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r != 1)
          return (void)run_sized(w, r, [](int, int) { return int64_t(64); });
        // Rank 1 makes a plain alltoallv of the same bytes.
        run_alltoallv(w, r, [](int, int) { return int64_t(16); });
      },
      &msg);
  expect_mismatch(st, msg, "sizes with the data");
  w.run([&](int r) {
    EXPECT_EQ(run_sized(w, r, [](int f, int) { return int64_t(f); }), 1u);
  });
}

TEST_P(SizedAlltoallv, DeadPeerGivesPeerFailed) {
  ThreadWorld w(GetParam(), shm_config());
  auto bytes = [](int from, int to) { return int64_t(1000 + from + to); };
  expect_dead_peer_fails(w, [&](int r) { run_sized(w, r, bytes); });
}

// Over TCP the receivers cannot learn sizes in the round: the backend says
// so (callers then run their own round of sizes), and a call anyway takes
// the sizes' round first, with the same bytes.
TEST_P(SizedAlltoallv, OverTcpTakesARoundOfSizesFirst) {
  const int n = GetParam();
  hb::comm::BackendConfig cfg = shm_config();
  cfg.transport = "tcp";
  ThreadWorld w(n, cfg);
  w.run([&](int r) {
    EXPECT_FALSE(w.at(r).sized_in_one_round());
    run_sized(w, r, [](int f, int t) { return int64_t(5000 * f + t); });
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SizedAlltoallv, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return "np" + std::to_string(p.param);
                         });

// alltoallv_fill (comm/backend.h): the caller writes each block in place
// (on the board: straight into its slot) and reads each in place (from
// the peers' slots). As run_sized, and checks that fill runs once per
// non-empty block, in rank order.
template <class Bytes>
uint64_t run_fill(ThreadWorld &w, int r, Bytes bytes) {
  const int n = w.size();
  std::vector<int64_t> sb(static_cast<size_t>(n)), rb(sb);
  for (int q = 0; q < n; ++q)
    sb[size_t(q)] = bytes(r, q), rb[size_t(q)] = bytes(q, r);
  const uint64_t before = w.at(r).traffic().shm_messages;
  int filled = 0;
  auto skip_empty = [&] {
    while (filled < n && sb[size_t(filled)] == 0) ++filled;
  };
  CheckedDelivery<Bytes> got{r, n, bytes};
  w.at(r).alltoallv_fill(
      sb.data(), rb.data(),
      [&](int q, char *dst) {
        skip_empty();
        if (q != filled++)
          hb::fail(HB_ERR_INTERNAL,
                   "rank %d: block for rank %d filled out of order (or "
                   "empty, or twice)",
                   r, q);
        for (int64_t i = 0; i < sb[size_t(q)]; ++i)
          dst[i] = block_byte(r, q, i);
      },
      std::ref(got));
  got.check();
  skip_empty();
  if (filled != n)
    hb::fail(HB_ERR_INTERNAL, "rank %d: %d blocks filled", r, filled);
  return w.at(r).traffic().shm_messages - before;
}

class FillAlltoallv : public ::testing::TestWithParam<int> {};

TEST_P(FillAlltoallv, BlocksWrittenAndReadInTheSlotsInOneRound) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  const int64_t big = int64_t(hb::comm::ShmTransport::kInlineBytes);
  for (int call = 0; call < 4; ++call) {
    // Uneven and odd sizes, one block empty, the own block empty on odd
    // calls (as a collection's), the last call beyond the inline part.
    auto bytes = [&](int from, int to) -> int64_t {
      if (from == 0 && to == n - 1) return 0;
      if (from == to && call % 2) return 0;
      return (call == 3 ? big : 0) + 8 * (call + 1) * (from + 1) + 3 * to;
    };
    std::vector<uint64_t> posts(static_cast<size_t>(n));
    w.run([&](int r) { posts[size_t(r)] = run_fill(w, r, bytes); });
    expect_one_post(posts, call);
    // Mixed with plain calls: the board's sequence stays intact.
    w.run([&](int r) {
      run_alltoallv(w, r, [](int f, int t) { return int64_t(f + t); });
    });
  }
}

TEST_P(FillAlltoallv, LargerThanASlotIsStagedOverTheRings) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  // Only rank 1's sends exceed its slot: every rank still agrees, rank 1
  // fills a staging buffer, the others send from their slots.
  const int64_t over = (int64_t(4) << 20) / (n - 1);
  auto bytes = [&](int from, int to) -> int64_t {
    return from == 1 ? over + to : 100 + from + to;
  };
  std::vector<uint64_t> posts(static_cast<size_t>(n));
  w.run([&](int r) { posts[size_t(r)] = run_fill(w, r, bytes); });
  for (int r = 0; r < n; ++r) EXPECT_GT(posts[size_t(r)], 1u);
  w.run([&](int r) {
    EXPECT_EQ(run_fill(w, r, [](int f, int t) { return int64_t(f * 3 + t); }),
              1u);
  });
}

TEST_P(FillAlltoallv, MismatchedSizesFailEveryRank) {
  const int n = GetParam();
  ThreadWorld w(n, shm_config());
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        // Rank 0 sends rank 1 one byte less than rank 1 expects.
        run_fill(w, r, [&](int from, int to) -> int64_t {
          return 64 + (from == 0 && to == 1 && r == 0 ? 0 : 1);
        });
      },
      &msg);
  expect_mismatch(st, msg, "rank 0 sends rank 1");
  w.run([&](int r) {
    EXPECT_EQ(run_fill(w, r, [](int f, int) { return int64_t(f); }), 1u);
  });
}

TEST_P(FillAlltoallv, DeadPeerGivesPeerFailed) {
  ThreadWorld w(GetParam(), shm_config());
  auto bytes = [](int from, int to) { return int64_t(1000 + from + to); };
  expect_dead_peer_fails(w, [&](int r) { run_fill(w, r, bytes); });
}

// Off the board (TCP; unchecked calls, whose print does not say where a
// block sits in a slot) the blocks are staged: the same bytes.
TEST_P(FillAlltoallv, OffTheBoardTheBlocksAreStaged) {
  const int n = GetParam();
  for (int variant = 0; variant < 2; ++variant) {
    hb::comm::BackendConfig cfg = shm_config();
    if (variant == 0)
      cfg.transport = "tcp";
    else
      cfg.check_calls = false;
    ThreadWorld w(n, cfg);
    for (int call = 0; call < 2; ++call)
      w.run([&](int r) {
        run_fill(w, r, [&](int f, int t) -> int64_t {
          return f == t ? 0 : (call ? 300000 : 40) + 7 * f + t;
        });
      });
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, FillAlltoallv, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return "np" + std::to_string(p.param);
                         });

}  // namespace
