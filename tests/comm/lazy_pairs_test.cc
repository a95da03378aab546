// TCP pairs made on first use (comm/mesh_connect.h, LazyMesh) in a world of
// several (pretend) hosts: no pair when the world forms, none ever to a
// peer of the same host, and after calls only the pairs they used (every
// other host's rank on the direct routes, the other leaders on the
// hierarchical ones); results bit-identical across routes and to a
// single-process fold; a rank lost before anyone connected to it fails
// every other rank with HB_ERR_PEER_FAILED within the test's bound.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/a2a_pattern.h"
#include "thread_world.h"

namespace {

using hb::test::ThreadWorld;

hb::comm::BackendConfig config(const char *route, bool check_calls) {
  hb::comm::BackendConfig cfg;
  cfg.test_hosts = 2;
  cfg.alltoallv = route;
  cfg.allreduce_route = route;
  cfg.check_calls = check_calls;
  cfg.timeout_ms = 20000;
  cfg.peer_report_grace_ms = 100;
  return cfg;
}

// Ranks 0-2 on one pretend host, 3-5 on the other; leaders 0 and 3.
constexpr int kRanks = 6;

std::vector<uint64_t> pairs(ThreadWorld &w) {
  std::vector<uint64_t> p;
  for (int r = 0; r < w.size(); ++r) p.push_back(w.at(r).traffic().tcp_pairs);
  return p;
}

std::string show(const std::vector<uint64_t> &p) {
  std::string s;
  for (uint64_t v : p) s += std::to_string(v) + " ";
  return s;
}

// Rank r's input: mixed magnitudes and signs (another fold order gives
// other bits).
std::vector<float> input(int r, size_t count) {
  std::mt19937 rng(unsigned(r * 7919 + count));
  std::vector<float> x(count);
  for (float &e : x)
    e = float(std::ldexp(double(int(rng() % 2001) - 1000) / 1000.0,
                         int(rng() % 40) - 20));
  return x;
}

std::vector<std::vector<float>> allreduce(ThreadWorld &w, size_t count) {
  std::vector<std::vector<float>> y(size_t(w.size()),
                                    std::vector<float>(count));
  w.run([&](int r) {
    const std::vector<float> x = input(r, count);
    w.at(r).allreduce(x.data(), y[size_t(r)].data(), count, HB_FLOAT32, HB_SUM);
  });
  return y;
}

// alltoallv: rank r sends r + q + 1 bytes of value 16 r + q to rank q.
void alltoallv(ThreadWorld &w) {
  w.run([&](int r) {
    const int n = w.size();
    const hb::test::A2aPattern p(n, r);
    std::vector<uint8_t> out(static_cast<size_t>(p.send_total)),
        in(static_cast<size_t>(p.recv_total));
    for (int q = 0; q < n; ++q)
      std::memset(out.data() + p.so[q], 16 * r + q, size_t(p.sc[q]));
    w.at(r).alltoallv(out.data(), p.sc.data(), p.so.data(), in.data(),
                      p.rc.data(), p.ro.data(), HB_UINT8);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < p.rc[q]; ++i)
        if (in[size_t(p.ro[q] + i)] != uint8_t(16 * q + r))
          hb::fail(HB_ERR_INTERNAL, "rank %d: byte %lld from %d wrong", r,
                   static_cast<long long>(i), q);
  });
}

TEST(LazyPairs, NoSameHostPairsAndOnlyThoseCallsUse) {
  ThreadWorld hier(kRanks, config("hier", false)),
      direct(kRanks, config("direct", false)),
      checked(kRanks, config("direct", true)),
      checked_hier(kRanks, config("hier", true));
  // Formed: no pair anywhere (a full mesh was 2 x 5 per rank).
  for (ThreadWorld *w : {&hier, &direct, &checked, &checked_hier})
    EXPECT_EQ(show(pairs(*w)), "0 0 0 0 0 0 ") << "after forming";
  // Small (registered buffers) and large (per-call buffers) reductions.
  for (size_t count : {size_t(7), size_t(1001), size_t(300007)}) {
    const auto a = allreduce(hier, count), b = allreduce(direct, count),
               c = allreduce(checked, count),
               d = allreduce(checked_hier, count);
    std::vector<float> ref(count, 0.f);
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<float> x = input(r, count);
      for (size_t i = 0; i < count; ++i) ref[i] += x[i];
    }
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(0, std::memcmp(a[r].data(), ref.data(), count * 4))
          << "hier, rank " << r << ", count " << count;
      ASSERT_EQ(0, std::memcmp(b[r].data(), ref.data(), count * 4))
          << "direct, rank " << r << ", count " << count;
      ASSERT_EQ(0, std::memcmp(c[r].data(), ref.data(), count * 4))
          << "checked, rank " << r << ", count " << count;
      ASSERT_EQ(0, std::memcmp(d[r].data(), ref.data(), count * 4))
          << "checked hier, rank " << r << ", count " << count;
    }
  }
  alltoallv(hier);
  alltoallv(direct);
  alltoallv(checked);
  alltoallv(checked_hier);
  // Through the leaders: one pair per context between the two leaders
  // (call prints too, when checked).
  EXPECT_EQ(show(pairs(hier)), "2 0 0 2 0 0 ");
  EXPECT_EQ(show(pairs(checked_hier)), "2 0 0 2 0 0 ");
  // Direct: every rank to the other host's 3 ranks, per context; never to
  // its own host's (the full mesh's 10).
  EXPECT_EQ(show(pairs(direct)), "6 6 6 6 6 6 ");
  EXPECT_EQ(show(pairs(checked)), "6 6 6 6 6 6 ");
}

// A rank lost before any rank connected to it: the others' first call
// waits for that pair (or for its data) and must fail with
// HB_ERR_PEER_FAILED naming it, not hang until the timeout.
TEST(LazyPairs, RankLostBeforeItsPairsConnectFailsEveryOther) {
  for (const char *route : {"direct", "hier"})
    for (int victim : {1, 3}) {
      ThreadWorld w(kRanks, config(route, false));
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::string> msg;
      auto st = w.try_run(
          [&](int r) {
            if (r == victim) {
              // The others are in their first call by now, waiting for
              // this rank's pairs or data.
              std::this_thread::sleep_for(std::chrono::milliseconds(300));
              w.drop(r);
              for (int s = 0; s < kRanks; ++s)
                if (s != victim)
                  w.health(s).fail(HB_ERR_PEER_FAILED,
                                   "rank " + std::to_string(victim) +
                                       " lost (rendezvous): connection closed");
              return;
            }
            std::vector<float> x(1001, 1.f), y(1001);
            for (;;)
              w.at(r).allreduce(x.data(), y.data(), x.size(), HB_FLOAT32,
                                HB_SUM);
          },
          &msg);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      EXPECT_LT(s, 10.0) << route << " victim " << victim;
      for (int r = 0; r < kRanks; ++r)
        if (r != victim) {
          EXPECT_EQ(st[r], HB_ERR_PEER_FAILED)
              << route << " victim " << victim << ": " << msg[r];
          EXPECT_NE(msg[r].find("rank " + std::to_string(victim)),
                    std::string::npos)
              << msg[r];
        }
    }
}

}  // namespace
