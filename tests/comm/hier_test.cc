// The hierarchical alltoallv (comm/hier_alltoallv.h) with ranks as threads
// on pretend hosts (BackendConfig::test_hosts): the same bytes as the
// direct exchange for uneven counts with zeros, offsets and blocks larger
// than a ring; only leaders send over TCP, at most hosts - 1 messages a
// call; a rank lost in a hierarchical round fails every other rank with
// HB_ERR_PEER_FAILED.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "thread_world.h"

namespace {

using hb::test::ThreadWorld;

hb::comm::BackendConfig config(int hosts, const char *route) {
  hb::comm::BackendConfig cfg;
  cfg.test_hosts = hosts;
  cfg.alltoallv = route;
  cfg.timeout_ms = 20000;
  cfg.peer_report_grace_ms = 100;
  return cfg;
}

bool leader(int r, int n, int hosts) {
  return r == 0 || r * hosts / n != (r - 1) * hosts / n;
}

// One call's blocks: counts[s][d] bytes from s to d, strided offsets.
struct Case {
  int n;
  std::vector<std::vector<int64_t>> sc, so, rc, ro;
  std::vector<std::vector<uint8_t>> send;
  Case(int n, unsigned seed) : n(n), sc(n, std::vector<int64_t>(n)) {
    std::mt19937 rng(seed);
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) {
        const unsigned k = rng() % 8;
        // Zeros, small blocks, and now and then one beyond a ring.
        sc[s][d] = k < 2 ? 0 : k == 7 ? 300000 + rng() % 1000 : rng() % 200;
      }
    so = rc = ro = sc;
    send.resize(size_t(n));
    for (int r = 0; r < n; ++r) {
      int64_t sat = 0, rat = 0;
      for (int k = 0; k < n; ++k) {
        const int p = n - 1 - k;  // blocks in reverse: real offsets
        so[r][p] = sat + 1;
        sat = so[r][p] + sc[r][p];
        rc[r][p] = sc[p][r];
        ro[r][p] = rat + 3;
        rat = ro[r][p] + rc[r][p];
      }
      send[r].resize(size_t(sat));
      for (auto &b : send[r]) b = uint8_t(rng());
    }
  }
  std::vector<std::vector<uint8_t>> run(ThreadWorld &w) const {
    std::vector<std::vector<uint8_t>> recv{size_t(n)};
    for (int r = 0; r < n; ++r)
      recv[r].assign(size_t(ro[r][0] + rc[r][0] + 3), 0xEE);
    w.run([&](int r) {
      w.at(r).alltoallv(send[r].data(), sc[r].data(), so[r].data(),
                        recv[r].data(), rc[r].data(), ro[r].data(), HB_UINT8);
    });
    return recv;
  }
};

TEST(HierAlltoallv, SameBytesAsDirectAndOnlyLeadersUseTheNetwork) {
  // (ranks, hosts): 2+1, 3+2, 3+2+2 and 2+2 ranks per host.
  for (auto [n, hosts] :
       std::vector<std::pair<int, int>>{{3, 2}, {5, 2}, {7, 3}, {4, 2}}) {
    ThreadWorld hier(n, config(hosts, "hier")),
        direct(n, config(hosts, "direct"));
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const Case c(n, seed * 100 + unsigned(n));
      std::vector<hb::comm::Traffic> before{size_t(n)};
      for (int r = 0; r < n; ++r) before[r] = hier.at(r).traffic();
      const auto a = c.run(hier), b = c.run(direct);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(a[r], b[r]) << "np" << n << " rank " << r << " seed " << seed;
        for (int p = 0; p < n; ++p)
          for (int64_t i = 0; i < c.rc[r][p]; ++i)
            ASSERT_EQ(a[r][size_t(c.ro[r][p] + i)],
                      c.send[p][size_t(c.so[p][r] + i)])
                << "np" << n << " rank " << r << " from " << p;
        const uint64_t tcp =
            hier.at(r).traffic().tcp_messages - before[r].tcp_messages;
        if (leader(r, n, hosts))
          EXPECT_LE(tcp, uint64_t(hosts - 1)) << "np" << n << " rank " << r;
        else
          EXPECT_EQ(tcp, 0u) << "np" << n << " rank " << r;
      }
    }
    // The direct route sends every remote peer its block over TCP.
    uint64_t direct_tcp = 0;
    for (int r = 0; r < n; ++r)
      if (!leader(r, n, hosts))
        direct_tcp += direct.at(r).traffic().tcp_messages;
    EXPECT_GT(direct_tcp, 0u) << "np" << n;
  }
}

// auto keeps small worlds direct (docs/scaling.md: below 64 ranks the
// leader's hops and copies cost about what they save).
TEST(HierAlltoallv, AutoKeepsSmallWorldsDirect) {
  ThreadWorld w(4, config(2, "auto"));
  const Case c(4, 11);
  c.run(w);
  EXPECT_GT(w.at(1).traffic().tcp_messages, 0u);  // rank 1 is no leader
}

TEST(HierAlltoallv, UnknownRouteIsAConfigError) {
  hb::comm::BackendConfig cfg = config(2, "leaders");
  cfg.world_size = 2;
  EXPECT_EQ(HB_ERR_CONFIG, hb::test::make_backend_alone(cfg));
  EXPECT_NE(std::string(hb_last_error()).find("cpu_alltoallv"),
            std::string::npos);
}

// Every rank reads every rank's route: ranks set differently all fail at
// creation, naming them, instead of posting messages nobody expects.
TEST(HierAlltoallv, RanksOnDifferentRoutesFailAlike) {
  hb::rdv::MemoryKV kv;
  std::vector<hb::Health> health(4);
  std::vector<hb_status> st(4);
  std::vector<std::string> msg(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      hb::comm::BackendConfig cfg = config(2, r < 2 ? "hier" : "direct");
      cfg.rank = r;
      cfg.world_size = 4;
      cfg.key_prefix = "routes/";
      std::shared_ptr<hb::comm::Backend> b;
      st[r] =
          hb::guard([&] { b = hb::comm::make_backend(cfg, &kv, health[r]); });
      if (st[r] != HB_OK) msg[r] = hb_last_error();
    });
  for (auto &t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(st[r], HB_ERR_CONFIG) << "rank " << r;
    EXPECT_NE(msg[r].find("cpu_alltoallv differs across ranks: direct (ranks "
                          "2,3) vs hier (ranks 0,1)"),
              std::string::npos)
        << msg[r];
  }
}

// A leader (rank 2) or another rank (rank 1) of 2 hosts x 2 ranks leaves
// while the others loop on hierarchical alltoallv calls; the rendezvous
// then reports it (as in failure_test.cc): every other rank fails with
// HB_ERR_PEER_FAILED, promptly.
TEST(HierAlltoallv, LostRankFailsEveryOtherRank) {
  for (int victim : {1, 2}) {
    ThreadWorld w(4, config(2, "hier"));
    const Case c(4, 7);
    std::vector<std::vector<uint8_t>> recv(4);
    for (int r = 0; r < 4; ++r)
      recv[r].resize(size_t(c.ro[r][0] + c.rc[r][0] + 3));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> msg;
    auto call = [&](int r) {
      w.at(r).alltoallv(c.send[r].data(), c.sc[r].data(), c.so[r].data(),
                        recv[r].data(), c.rc[r].data(), c.ro[r].data(),
                        HB_UINT8);
    };
    auto st = w.try_run(
        [&](int r) {
          if (r == victim) {
            for (int i = 0; i < 3; ++i) call(r);
            w.drop(r);
            for (int s = 0; s < 4; ++s)
              if (s != victim)
                w.health(s).fail(HB_ERR_PEER_FAILED,
                                 "rank " + std::to_string(victim) +
                                     " lost (rendezvous): connection closed");
            return;
          }
          for (;;) call(r);
        },
        &msg);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_LT(s, 10.0);
    for (int r = 0; r < 4; ++r)
      if (r != victim) {
        EXPECT_EQ(st[r], HB_ERR_PEER_FAILED)
            << "victim " << victim << ": " << msg[r];
        EXPECT_NE(msg[r].find("rank " + std::to_string(victim)),
                  std::string::npos)
            << msg[r];
      }
  }
}

}  // namespace
