// Call fingerprints: ranks that make mismatched collective calls all get
// HB_ERR_MISMATCH naming the operation and the ranks, over every transport,
// and the communicator stays usable. Also: shared-memory segments never
// outlive the attach (nothing in /dev/shm while the world runs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "comm/fingerprint.h"
#include "shm_segments.h"
#include "thread_world.h"

namespace {

using hb::test::hb_segments;
using hb::test::ThreadWorld;

class Mismatch : public ::testing::TestWithParam<std::string> {
 protected:
  hb::comm::BackendConfig config() const {
    hb::comm::BackendConfig cfg;
    cfg.timeout_ms = 20000;
    cfg.transport = GetParam() == "mixed" ? "auto" : GetParam();
    if (GetParam() == "mixed") cfg.test_hosts = 2;
    return cfg;
  }
  // Every rank fails with HB_ERR_MISMATCH and a message with every needle.
  static void expect_mismatch(const std::vector<hb_status> &st,
                              const std::vector<std::string> &msg,
                              const std::vector<std::string> &needles) {
    for (size_t r = 0; r < st.size(); ++r) {
      EXPECT_EQ(st[r], HB_ERR_MISMATCH) << "rank " << r << ": " << msg[r];
      for (const auto &n : needles)
        EXPECT_NE(msg[r].find(n), std::string::npos)
            << "rank " << r << " lacks '" << n << "': " << msg[r];
    }
  }
  // A correct call afterwards: the transports are still in step.
  static void expect_usable(ThreadWorld &w) {
    std::vector<std::vector<float>> b(size_t(w.size()),
                                      std::vector<float>(1000, 1.f));
    w.run([&](int r) {
      w.at(r).allreduce(b[r].data(), b[r].data(), 1000, HB_FLOAT32, HB_SUM);
      for (float x : b[r]) ASSERT_EQ(x, float(w.size()));
    });
  }
};

TEST_P(Mismatch, AllreduceCounts) {
  ThreadWorld w(4, config());
  std::vector<std::vector<float>> b(4, std::vector<float>(1 << 20, 1.f));
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        // Rank 2 reduces a 2 MiB buffer where the others reduce 4 KiB.
        const size_t n = r == 2 ? (size_t(1) << 19) : 1024;
        w.at(r).allreduce(b[r].data(), b[r].data(), n, HB_FLOAT32, HB_SUM);
      },
      &msg);
  expect_mismatch(st, msg,
                  {"allreduce", "ranks 0,1,3", "rank 2", "count=524288"});
  expect_usable(w);
}

TEST_P(Mismatch, DifferentOperations) {
  ThreadWorld w(3, config());
  std::vector<std::vector<int32_t>> b(3, std::vector<int32_t>(300, 1));
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r == 1)
          w.at(r).broadcast(b[r].data(), b[r].data(), 300, HB_INT32, 0);
        else
          w.at(r).allreduce(b[r].data(), b[r].data(), 300, HB_INT32, HB_MAX);
      },
      &msg);
  expect_mismatch(st, msg, {"broadcast", "allreduce", "rank 1"});
  // Root and op differences too.
  st = w.try_run(
      [&](int r) {
        w.at(r).broadcast(b[r].data(), b[r].data(), 300, HB_INT32,
                          r == 0 ? 1 : 0);
      },
      &msg);
  expect_mismatch(st, msg, {"root=1", "root=0"});
  st = w.try_run(
      [&](int r) {
        w.at(r).reduce_scatter(b[r].data(), b[r].data(), 100, HB_INT32,
                               r == 2 ? HB_MIN : HB_SUM);
      },
      &msg);
  expect_mismatch(st, msg, {"reduce_scatter", "op=min", "op=sum"});
  expect_usable(w);
}

TEST_P(Mismatch, AlltoallvPairCounts) {
  ThreadWorld w(3, config());
  std::vector<std::vector<float>> s(3, std::vector<float>(30, 1.f)), d = s;
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        int64_t sc[3] = {10, 10, 10}, rc[3] = {10, 10, 10},
                off[3] = {0, 10, 20};
        if (r == 0) sc[2] = 9;  // rank 2 expects 10 from rank 0
        w.at(r).alltoallv(s[r].data(), sc, off, d[r].data(), rc, off,
                          HB_FLOAT32);
      },
      &msg);
  expect_mismatch(st, msg, {"alltoall", "rank 0 sends rank 2 9", "expects 10"});
  st = w.try_run(
      [&](int r) {
        int64_t rc[3] = {10, 10, 10}, off[3] = {0, 10, 20};
        if (r == 1) rc[0] = 5, rc[1] = 15;
        w.at(r).allgatherv(s[r].data(), size_t(rc[r]), d[r].data(), rc, off,
                           HB_FLOAT32);
      },
      &msg);
  expect_mismatch(st, msg, {"allgather", "recv_counts=[5,15,10]"});
  expect_usable(w);
}

TEST_P(Mismatch, AllreduceManyTensorLists) {
  ThreadWorld w(2, config());
  std::vector<std::vector<float>> b(2, std::vector<float>(64, 1.f));
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        // Same total, different tensors.
        std::vector<hb::comm::Tensor> t;
        if (r == 0)
          t = {{b[r].data(), 32}, {b[r].data() + 32, 32}};
        else
          t = {{b[r].data(), 16}, {b[r].data() + 16, 48}};
        w.at(r).allreduce_buckets({t}, HB_FLOAT32, HB_SUM);
      },
      &msg);
  expect_mismatch(st, msg, {"allreduce_many", "count=64"});
  expect_usable(w);
}

// The board compares prints by digest: every field change must show.
TEST(CallPrintDigest, EveryFieldChangesIt) {
  const int world = 3;
  hb::comm::CallPrint a;
  a.kind = hb::comm::CallPrint::kAllgatherv;
  a.dtype = HB_FLOAT32;
  a.seq = 7;
  a.counts = {10, 10, 10};
  auto digest = [&](const hb::comm::CallPrint &p) {
    std::vector<char> w(hb::comm::CallPrint::wire_bytes(world));
    p.to_wire(world, w.data());
    return hb::comm::CallPrint::wire_hash(w.data(), w.size());
  };
  const uint64_t base = digest(a);
  EXPECT_EQ(digest(a), base);
  std::vector<hb::comm::CallPrint> changed(6, a);
  changed[0].kind = hb::comm::CallPrint::kAlltoallv;
  changed[1].dtype = HB_FLOAT64;
  changed[2].seq = 8;
  changed[3].counts[2] = 11;
  changed[4].root = 0;
  changed[5].op = HB_SUM;
  for (const auto &c : changed) EXPECT_NE(digest(c), base);
}

// Without prints, the shared-memory call board still compares what every
// rank posted: different sizes are a mismatch on every rank, not a fold of
// bytes that were never written.
TEST_P(Mismatch, BoardSizesWithoutPrints) {
  if (GetParam() != "shm") GTEST_SKIP() << "only the board compares sizes";
  hb::comm::BackendConfig cfg = config();
  cfg.check_calls = false;
  ThreadWorld w(3, cfg);
  std::vector<std::vector<float>> b(3, std::vector<float>(200, 1.f));
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        w.at(r).allreduce(b[r].data(), b[r].data(), r == 1 ? 200 : 100,
                          HB_FLOAT32, HB_SUM);
      },
      &msg);
  expect_mismatch(st, msg, {"800", "400", "rank 1"});
  expect_usable(w);
}

INSTANTIATE_TEST_SUITE_P(Transports, Mismatch,
                         ::testing::Values("tcp", "shm", "mixed"),
                         [](const ::testing::TestParamInfo<std::string> &p) {
                           return p.param;
                         });

TEST(ShmSegments, UnlinkedOnceEveryRankAttached) {
  const std::vector<pid_t> me = {::getpid()};  // ranks are threads here
  const int before = hb_segments(me);
  {
    hb::comm::BackendConfig cfg;
    cfg.transport = "shm";
    ThreadWorld w(4, cfg);
    EXPECT_EQ(hb_segments(me), before) << "a live world left names in /dev/shm";
    std::vector<std::vector<double>> b(4, std::vector<double>(5000, 0.5));
    w.run([&](int r) {
      w.at(r).allreduce(b[r].data(), b[r].data(), 5000, HB_FLOAT64, HB_SUM);
    });
    EXPECT_EQ(b[3][4999], 2.0);
  }
  EXPECT_EQ(hb_segments(me), before);
}

}  // namespace
