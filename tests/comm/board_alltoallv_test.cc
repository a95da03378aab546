// alltoallv on the shared-memory call board: blocks of up to a slot's whole
// payload (inline part and staging area) travel in the same round as the
// call's print -- one rendezvous per call, where blocks over the inline
// part used to take the print's round and then a ring exchange. Checked
// here: the bytes (uneven and empty blocks, strided sends, receive blocks
// out of order), the round count (one board post per call, no ring
// message), calls too large for a slot (the rings, as before), mismatched
// pair counts (HB_ERR_MISMATCH on every rank, no bytes read) and a rank
// that dies between calls (HB_ERR_PEER_FAILED).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
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
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(posts[size_t(r)], 1u) << "rank " << r << ", call " << call
                                      << ": one board post, no ring message";
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
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(st[size_t(r)], HB_ERR_MISMATCH) << "rank " << r << ": " << msg[r];
    EXPECT_NE(msg[size_t(r)].find("rank 0 sends rank 1"), std::string::npos)
        << msg[size_t(r)];
  }
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

}  // namespace
