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
#include <utility>
#include <vector>

#include <gloo/context.h>

#include "../common/a2a_pattern.h"
#include "comm/region_p2p.h"
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

// The single-process fold, rank 0, 1, 2, ... (the bits every route keeps).
std::vector<float> reference(int n, size_t count) {
  std::vector<float> ref(count, 0.f);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> x = input(r, count);
    for (size_t i = 0; i < count; ++i) ref[i] += x[i];
  }
  return ref;
}

void expect_bits(const std::vector<std::vector<float>> &y,
                 const std::vector<float> &ref, const char *what) {
  for (size_t r = 0; r < y.size(); ++r)
    ASSERT_EQ(0, std::memcmp(y[r].data(), ref.data(), ref.size() * 4))
        << what << ", rank " << r;
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

// A sparse alltoallv: rank s sends 100 + s bytes of value 16 s + d to d
// for each (s, d) in edges, nothing else.
void sparse_alltoallv(ThreadWorld &w,
                      const std::vector<std::pair<int, int>> &edges) {
  w.run([&](int r) {
    const int n = w.size();
    const size_t ns = static_cast<size_t>(n);
    std::vector<int64_t> sc(ns, 0), rc(ns, 0), so(ns, 0), ro(ns, 0);
    for (const auto &e : edges) {
      if (e.first == r) sc[size_t(e.second)] = 100 + r;
      if (e.second == r) rc[size_t(e.first)] = 100 + e.first;
    }
    int64_t st = 0, rt = 0;
    for (int q = 0; q < n; ++q) {
      so[size_t(q)] = st, ro[size_t(q)] = rt;
      st += sc[size_t(q)], rt += rc[size_t(q)];
    }
    std::vector<uint8_t> out(size_t(st) + 1), in(size_t(rt) + 1, 0);
    for (int q = 0; q < n; ++q)
      std::memset(out.data() + so[size_t(q)], 16 * r + q, size_t(sc[q]));
    w.at(r).alltoallv(out.data(), sc.data(), so.data(), in.data(), rc.data(),
                      ro.data(), HB_UINT8);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < rc[size_t(q)]; ++i)
        if (in[size_t(ro[size_t(q)] + i)] != uint8_t(16 * q + r))
          hb::fail(HB_ERR_INTERNAL, "rank %d: byte %lld from %d wrong", r,
                   static_cast<long long>(i), q);
  });
}

// The direct alltoallv connects only the pairs that carry bytes either way
// in the call (each side knows from its own counts), on first use; a later
// call with other peers connects theirs. Checked calls whose prints go
// through the leaders (a routed reduction) add only the leaders' pair.
TEST(LazyPairs, DirectAlltoallvConnectsOnlyPeersWithBytes) {
  hb::comm::BackendConfig routed_prints = config("direct", true);
  routed_prints.allreduce_route = "hier";
  ThreadWorld plain(kRanks, config("direct", false)),
      checked(kRanks, routed_prints);
  // Rank 0 sends only to rank 4, rank 5 only to rank 1 (and to its own
  // host's rank 3, over shared memory).
  const std::vector<std::pair<int, int>> first{{0, 4}, {5, 1}, {5, 3}};
  sparse_alltoallv(plain, first);
  sparse_alltoallv(checked, first);
  EXPECT_EQ(show(pairs(plain)), "2 2 0 0 2 2 ");
  EXPECT_EQ(show(pairs(checked)), "4 2 0 2 2 2 ");  // + leaders 0 and 3
  // Rank 3 to rank 2 next; the pairs already made stay.
  sparse_alltoallv(plain, {{3, 2}, {0, 4}});
  sparse_alltoallv(checked, {{3, 2}, {0, 4}});
  EXPECT_EQ(show(pairs(plain)), "2 2 2 2 2 2 ");
  EXPECT_EQ(show(pairs(checked)), "4 2 2 4 2 2 ");
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
    const std::vector<float> ref = reference(kRanks, count);
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

// The registered regions (comm/region_p2p.h) in such a world: nothing
// registered when it forms; the first call that takes them connects the
// pairs of its route, then registers on those only, on both sides: the
// direct reduction's to the other host's 3 ranks (not all 5 peers), the
// routed reduction's between the two leaders only (nothing on the other
// ranks), and every TCP message of such calls goes on them.
TEST(LazyPairs, RegionsRegisterOnlyTheRoutesPairsOnFirstUse) {
  ThreadWorld hier(kRanks, config("hier", false)),
      direct(kRanks, config("direct", false));
  for (ThreadWorld *w : {&hier, &direct})
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(w->at(r).traffic().region_bytes, 0u) << "formed, rank " << r;
  const size_t count = 1001;
  const std::vector<float> ref = reference(kRanks, count);
  expect_bits(allreduce(hier, count), ref, "hier");
  expect_bits(allreduce(direct, count), ref, "direct");
  expect_bits(allreduce(hier, count), ref, "hier, again");
  expect_bits(allreduce(direct, count), ref, "direct, again");
  EXPECT_EQ(show(pairs(hier)), "2 0 0 2 0 0 ");
  EXPECT_EQ(show(pairs(direct)), "6 6 6 6 6 6 ");
  const hb::comm::BackendConfig cfg = config("direct", false);
  gloo::Context sizes(0, kRanks);  // no transport: the sizes only
  const hb::comm::PairRegions r6(sizes, size_t(cfg.staged_bytes),
                                 size_t(cfg.one_round_bytes));
  const uint64_t three_peers =
      2 *
      (3 * hb::comm::RegionP2P::kChannels * r6.area_bytes() + r6.send_bytes());
  for (int r = 0; r < kRanks; ++r) {
    const hb::comm::Traffic d = direct.at(r).traffic(),
                            h = hier.at(r).traffic();
    EXPECT_EQ(d.region_bytes, three_peers) << "direct, rank " << r;
    EXPECT_GT(d.tcp_registered, 0u) << "direct, rank " << r;
    EXPECT_EQ(d.tcp_registered, d.tcp_messages) << "direct, rank " << r;
    if (r == 0 || r == 3) {  // the leaders
      EXPECT_GT(h.region_bytes, 0u) << "hier, rank " << r;
      EXPECT_GT(h.tcp_registered, 0u) << "hier, rank " << r;
      EXPECT_EQ(h.tcp_registered, h.tcp_messages) << "hier, rank " << r;
    } else {
      EXPECT_EQ(h.region_bytes + h.tcp_registered + h.tcp_messages, 0u)
          << "hier, rank " << r;
    }
  }
}

// cpu_allreduce_route=auto routes through the leaders from 8 ranks, and
// cpu_alltoallv=auto stays direct below 64: the reductions connect (and
// register on) the leaders' pairs only; the first alltoallv then connects
// every other host's rank; reductions after it keep their bits.
TEST(LazyPairs, AutoFromEightRanksConnectsTheLeadersFirst) {
  constexpr int n = 8;  // 4 + 4: leaders 0 and 4
  ThreadWorld w(n, config("auto", true));
  const size_t count = 5000;
  const std::vector<float> ref = reference(n, count);
  expect_bits(allreduce(w, count), ref, "first");
  EXPECT_EQ(show(pairs(w)), "2 0 0 0 2 0 0 0 ");
  EXPECT_GT(w.at(0).traffic().tcp_registered, 0u);
  EXPECT_EQ(w.at(1).traffic().tcp_messages, 0u);
  alltoallv(w);
  EXPECT_EQ(show(pairs(w)), "8 8 8 8 8 8 8 8 ");
  expect_bits(allreduce(w, count), ref, "after the alltoallv");
  expect_bits(allreduce(w, 7), reference(n, 7), "one round");
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
