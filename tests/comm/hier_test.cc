// The hierarchical alltoallv (comm/hier_alltoallv.h) and rank-order
// reductions (comm/hier_reduce.h) with ranks as threads on pretend hosts
// (BackendConfig::test_hosts): the same bytes as the direct exchange for
// uneven counts with zeros, offsets and blocks larger than a ring, and the
// same bits as the direct reduction and a single-process fold in rank
// order; only leaders send over TCP, at most hosts - 1 messages a round;
// a rank lost in a hierarchical round fails every other rank with
// HB_ERR_PEER_FAILED.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
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

// The TCP messages every rank but the leaders sent so far.
uint64_t non_leader_tcp(ThreadWorld &w, int hosts) {
  uint64_t t = 0;
  for (int r = 0; r < w.size(); ++r)
    if (!leader(r, w.size(), hosts)) t += w.at(r).traffic().tcp_messages;
  return t;
}

// Since before: a leader sent at most `most` TCP messages, another none.
void expect_only_leaders_on_tcp(ThreadWorld &w, int r, int hosts,
                                const hb::comm::Traffic &before, uint64_t most,
                                const std::string &at) {
  const uint64_t tcp = w.at(r).traffic().tcp_messages - before.tcp_messages;
  if (leader(r, w.size(), hosts))
    EXPECT_LE(tcp, most) << at;
  else
    EXPECT_EQ(tcp, 0u) << at;
}

// Block sizes of a Case: zeros, small blocks and now and then one beyond a
// ring (kMixed); small only (kSmall); 30 KB each (kLarge); nothing between
// hosts (kLocal); between hosts only from the first host (kOneWay).
enum class Sizes { kMixed, kSmall, kLarge, kLocal, kOneWay };

// One call's blocks: counts[s][d] bytes from s to d, strided offsets
// (hosts: for kLocal and kOneWay).
struct Case {
  int n;
  std::vector<std::vector<int64_t>> sc, so, rc, ro;
  std::vector<std::vector<uint8_t>> send;
  Case(int n, unsigned seed, Sizes sizes = Sizes::kMixed, int hosts = 1)
      : n(n), sc(n, std::vector<int64_t>(n)) {
    std::mt19937 rng(seed);
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) {
        const unsigned k = rng() % 8;
        const int hs = s * hosts / n, hd = d * hosts / n;
        int64_t &c = sc[s][d];
        c = k < 2 ? 0 : k == 7 ? 300000 + rng() % 1000 : rng() % 200;
        if (sizes == Sizes::kSmall) c = rng() % 200;
        if (sizes == Sizes::kLarge) c = 30000 + rng() % 1000;
        if ((sizes == Sizes::kLocal && hs != hd) ||
            (sizes == Sizes::kOneWay && hs > hd))
          c = 0;
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
        expect_only_leaders_on_tcp(
            hier, r, hosts, before[r], uint64_t(hosts - 1),
            "np" + std::to_string(n) + " rank " + std::to_string(r));
      }
    }
    // The direct route sends every remote peer its block over TCP.
    EXPECT_GT(non_leader_tcp(direct, hosts), 0u) << "np" << n;
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

// An unknown route names its option; ranks set differently all fail at
// creation, naming them, instead of posting messages nobody expects
// (every rank reads every rank's routes).
using Route = std::string hb::comm::BackendConfig::*;

void expect_unknown_route(Route route, const std::string &option) {
  hb::comm::BackendConfig cfg = config(2, "auto");
  cfg.*route = "leaders";
  cfg.world_size = 2;
  EXPECT_EQ(HB_ERR_CONFIG, hb::test::make_backend_alone(cfg));
  EXPECT_NE(std::string(hb_last_error())
                .find("option " + option + ": unknown route 'leaders'"),
            std::string::npos)
      << hb_last_error();
}

void expect_routes_disagree(Route route, const std::string &option) {
  const std::string want =
      option + " differs across ranks: direct (ranks 2,3) vs hier (ranks 0,1)";
  hb::rdv::MemoryKV kv;
  std::vector<hb::Health> health(4);
  std::vector<hb_status> st(4);
  std::vector<std::string> msg(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      hb::comm::BackendConfig cfg = config(2, "auto");
      cfg.*route = r < 2 ? "hier" : "direct";
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
    EXPECT_NE(msg[r].find(want), std::string::npos) << msg[r];
  }
}

TEST(HierAlltoallv, UnknownRouteIsAConfigError) {
  expect_unknown_route(&hb::comm::BackendConfig::alltoallv, "cpu_alltoallv");
}

TEST(HierAlltoallv, RanksOnDifferentRoutesFailAlike) {
  expect_routes_disagree(&hb::comm::BackendConfig::alltoallv, "cpu_alltoallv");
}

// A leader (rank 2) or another rank (rank 1) of 2 hosts x 2 ranks leaves
// while the others loop on hierarchical calls; the rendezvous then reports
// it (as in failure_test.cc): every other rank fails with
// HB_ERR_PEER_FAILED, promptly.
void expect_lost_rank_fails_others(
    const hb::comm::BackendConfig &cfg, const std::function<void(int)> &setup,
    const std::function<void(ThreadWorld &, int)> &call) {
  for (int victim : {1, 2}) {
    ThreadWorld w(4, cfg);
    setup(4);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> msg;
    auto st = w.try_run(
        [&](int r) {
          if (r == victim) {
            for (int i = 0; i < 3; ++i) call(w, r);
            w.drop(r);
            for (int s = 0; s < 4; ++s)
              if (s != victim)
                w.health(s).fail(HB_ERR_PEER_FAILED,
                                 "rank " + std::to_string(victim) +
                                     " lost (rendezvous): connection closed");
            return;
          }
          for (;;) call(w, r);
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

// Loops of c's exchange on 2 hosts x 2 ranks, a rank lost meanwhile; the
// leader messages rank 0 sent on its registered regions (every routed
// exchange sends one each way there: its payload, or a token in place of
// an empty or too large one).
uint64_t expect_lost_rank_fails_others_in_alltoallv(const Case &c) {
  std::vector<std::vector<uint8_t>> recv(4);
  std::atomic<uint64_t> on_regions{0};
  expect_lost_rank_fails_others(
      config(2, "hier"),
      [&](int n) {
        for (int r = 0; r < n; ++r)
          recv[r].assign(size_t(c.ro[r][0] + c.rc[r][0] + 3), 0);
      },
      [&](ThreadWorld &w, int r) {
        w.at(r).alltoallv(c.send[r].data(), c.sc[r].data(), c.so[r].data(),
                          recv[r].data(), c.rc[r].data(), c.ro[r].data(),
                          HB_UINT8);
        if (r == 0) on_regions = w.at(0).traffic().tcp_registered;
      });
  return on_regions.load();
}

TEST(HierAlltoallv, LostRankFailsEveryOtherRank) {
  EXPECT_GT(expect_lost_rank_fails_others_in_alltoallv(Case(4, 7)), 0u);
}

// --- The rank-order reductions through the leaders (comm/hier_reduce.h).

hb::comm::BackendConfig reduce_config(int hosts, const char *route) {
  hb::comm::BackendConfig cfg = config(hosts, "direct");
  cfg.allreduce_route = route;
  return cfg;
}

// Every rank's input: values of mixed magnitudes and signs, so that a sum
// in any other order than rank 0, 1, 2, ... gives other bits.
template <class T>
std::vector<std::vector<T>> inputs(int n, size_t count, hb_reduce_op op,
                                   unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<T>> x(size_t(n), std::vector<T>(count, T(0)));
  for (auto &v : x)
    for (auto &e : v) {
      if (op == HB_PROD)  // near 1: no overflow in a product of 7
        e = T(1) + T(int(rng() % 5)) / T(4);
      else if (std::is_floating_point<T>::value)
        e = T(std::ldexp(double(int(rng() % 2001) - 1000) / 1000.0,
                         int(rng() % 40) - 20));
      else
        e = T(int(rng() % 2001) - 1000);
    }
  return x;
}

// The single-process reference: op folded over ranks 0, 1, 2, ... .
template <class T>
std::vector<T> fold_reference(const std::vector<std::vector<T>> &x,
                              hb_reduce_op op) {
  std::vector<T> acc = x[0];
  for (size_t p = 1; p < x.size(); ++p)
    for (size_t i = 0; i < acc.size(); ++i) {
      const T a = acc[i], b = x[p][i];
      acc[i] = op == HB_SUM    ? T(a + b)
               : op == HB_PROD ? T(a * b)
               : op == HB_MIN  ? std::min(a, b)
                               : std::max(a, b);
    }
  return acc;
}

template <class T>
std::vector<std::vector<T>> allreduce_all(ThreadWorld &w,
                                          std::vector<std::vector<T>> x,
                                          hb_dtype dt, hb_reduce_op op,
                                          bool in_place) {
  const size_t count = x[0].size();
  std::vector<std::vector<T>> y(x.size(), std::vector<T>(count));
  w.run([&](int r) {
    if (in_place)
      w.at(r).allreduce(x[r].data(), x[r].data(), count, dt, op);
    else
      w.at(r).allreduce(x[r].data(), y[r].data(), count, dt, op);
  });
  return in_place ? x : y;
}

template <class T>
void expect_same_bits(ThreadWorld &hier, ThreadWorld &direct, int n, int hosts,
                      hb_dtype dt, const std::vector<size_t> &counts) {
  for (size_t count : counts)
    for (hb_reduce_op op : {HB_SUM, HB_MAX, HB_MIN, HB_PROD, HB_AVG}) {
      const auto x = inputs<T>(n, count, op, unsigned(count + op * 7 + n));
      const bool in_place = count == 20011 && op == HB_SUM;
      std::vector<hb::comm::Traffic> before{size_t(n)};
      for (int r = 0; r < n; ++r) before[r] = hier.at(r).traffic();
      const auto a = allreduce_all(hier, x, dt, op, in_place);
      const auto b = allreduce_all(direct, x, dt, op, in_place);
      const std::vector<T> ref = op == HB_AVG ? b[0] : fold_reference(x, op);
      for (int r = 0; r < n; ++r) {
        const std::string at =
            "np" + std::to_string(n) + " dtype " + std::to_string(dt) + " op " +
            std::to_string(op) + " count " + std::to_string(count) + " rank " +
            std::to_string(r);
        ASSERT_EQ(0, std::memcmp(a[r].data(), b[r].data(), count * sizeof(T)))
            << at;
        ASSERT_EQ(0, std::memcmp(a[r].data(), ref.data(), count * sizeof(T)))
            << at;
        // At most one message to each other host's leader per round.
        expect_only_leaders_on_tcp(hier, r, hosts, before[r],
                                   uint64_t(2 * (hosts - 1)), at);
      }
    }
}

TEST(HierAllreduce, SameBitsAsDirectAndRankOrderAndOnlyLeadersUseTheNetwork) {
  // 2+1, 3+2 and 3+2+2 ranks per host.
  for (auto [n, hosts] :
       std::vector<std::pair<int, int>>{{3, 2}, {5, 2}, {7, 3}}) {
    ThreadWorld hier(n, reduce_config(hosts, "hier")),
        direct(n, reduce_config(hosts, "direct"));
    // 1 and 7 elements (blocks of 0 or 1 at 7 ranks), odd counts in one
    // round, and two rounds (over one_round_bytes) with uneven blocks;
    // the other dtypes in one count of each round.
    expect_same_bits<float>(hier, direct, n, hosts, HB_FLOAT32,
                            {1, 7, 1001, 20011});
    expect_same_bits<double>(hier, direct, n, hosts, HB_FLOAT64, {7, 20011});
    expect_same_bits<int32_t>(hier, direct, n, hosts, HB_INT32, {7, 20011});
    // The direct route sends every remote peer its part over TCP.
    EXPECT_GT(non_leader_tcp(direct, hosts), 0u) << "np" << n;
  }
}

// reduce_scatter and fused buckets take the same route, same bits.
TEST(HierAllreduce, ReduceScatterAndBucketsSameBitsAsDirect) {
  const int n = 5, hosts = 2;
  ThreadWorld hier(n, reduce_config(hosts, "hier")),
      direct(n, reduce_config(hosts, "direct"));
  for (size_t per : {size_t(3), size_t(5003)}) {
    const auto x = inputs<float>(n, per * n, HB_SUM, unsigned(per));
    const auto ref = fold_reference(x, HB_SUM);
    for (ThreadWorld *w : {&hier, &direct}) {
      std::vector<std::vector<float>> y(n, std::vector<float>(per));
      w->run([&](int r) {
        w->at(r).reduce_scatter(x[r].data(), y[r].data(), per, HB_FLOAT32,
                                HB_SUM);
      });
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(0, std::memcmp(y[r].data(), ref.data() + r * per,
                                 per * sizeof(float)))
            << "per " << per << " rank " << r;
    }
  }
  const auto x = inputs<float>(n, 3001, HB_SUM, 5);
  const auto ref = fold_reference(x, HB_SUM);
  for (ThreadWorld *w : {&hier, &direct}) {
    auto y = x;
    w->run([&](int r) {
      std::vector<std::vector<hb::comm::Tensor>> buckets{
          {{y[r].data(), 1000}, {y[r].data() + 1000, 1}},
          {{y[r].data() + 1001, 2000}}};
      w->at(r).allreduce_buckets(buckets, HB_FLOAT32, HB_SUM);
    });
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(0, std::memcmp(y[r].data(), ref.data(), 3001 * sizeof(float)))
          << "rank " << r;
  }
  // Every call went through the leaders.
  EXPECT_EQ(non_leader_tcp(hier, hosts), 0u);
}

// A buffer of many pieces (the leaders' buffers hold one piece at a time):
// same bits, in place and not, allreduce and reduce_scatter.
TEST(HierAllreduce, ManyPiecesSameBits) {
  const int n = 5, hosts = 2;
  hb::comm::BackendConfig cfg = reduce_config(hosts, "hier");
  cfg.piece_bytes = 4096;  // 204 floats of each block per piece
  ThreadWorld hier(n, cfg);
  const auto x = inputs<float>(n, 20011, HB_SUM, 21);
  const auto ref = fold_reference(x, HB_SUM);
  for (bool in_place : {false, true}) {
    const auto y = allreduce_all(hier, x, HB_FLOAT32, HB_SUM, in_place);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(0, std::memcmp(y[r].data(), ref.data(), 20011 * sizeof(float)))
          << "in place " << in_place << " rank " << r;
  }
  const size_t per = 4001;
  std::vector<std::vector<float>> out(n, std::vector<float>(per));
  hier.run([&](int r) {
    hier.at(r).reduce_scatter(x[r].data(), out[r].data(), per, HB_FLOAT32,
                              HB_SUM);
  });
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(0, std::memcmp(out[r].data(), ref.data() + r * per,
                             per * sizeof(float)))
        << "reduce_scatter rank " << r;
}

TEST(HierAllreduce, UnknownRouteIsAConfigError) {
  expect_unknown_route(&hb::comm::BackendConfig::allreduce_route,
                       "cpu_allreduce_route");
}

TEST(HierAllreduce, RanksOnDifferentRoutesFailAlike) {
  expect_routes_disagree(&hb::comm::BackendConfig::allreduce_route,
                         "cpu_allreduce_route");
}

// auto keeps small worlds direct, as cpu_alltoallv's.
TEST(HierAllreduce, AutoKeepsSmallWorldsDirect) {
  ThreadWorld w(4, reduce_config(2, "auto"));
  allreduce_all(w, inputs<float>(4, 100, HB_SUM, 3), HB_FLOAT32, HB_SUM, false);
  EXPECT_GT(w.at(1).traffic().tcp_messages, 0u);  // rank 1 is no leader
}

// ... and takes the leaders from 8 ranks (kHierReduceMinWorld: measured
// no slower than direct there, docs/scaling.md): rank 1 sends no TCP.
TEST(HierAllreduce, AutoRoutesThroughLeadersFromEightRanks) {
  ThreadWorld w(8, reduce_config(2, "auto"));
  const auto x = inputs<float>(8, 5000, HB_SUM, 3);
  const auto y = allreduce_all(w, x, HB_FLOAT32, HB_SUM, false);
  const auto ref = fold_reference(x, HB_SUM);
  for (int r = 0; r < 8; ++r)
    ASSERT_EQ(0, std::memcmp(y[r].data(), ref.data(), 5000 * sizeof(float)));
  EXPECT_EQ(w.at(1).traffic().tcp_messages, 0u);
  EXPECT_GT(w.at(0).traffic().tcp_registered, 0u);
}

TEST(HierAllreduce, LostRankFailsEveryOtherRank) {
  // Two rounds (over one_round_bytes): the loss may hit either.
  std::vector<std::vector<float>> x;
  expect_lost_rank_fails_others(
      reduce_config(2, "hier"),
      [&](int n) { x = inputs<float>(n, 40000, HB_SUM, 9); },
      [&](ThreadWorld &w, int r) {
        w.at(r).allreduce(x[r].data(), x[r].data(), x[r].size(), HB_FLOAT32,
                          HB_SUM);
      });
}

// --- The leaders' messages on registered pair buffers (comm/region_p2p.h).

uint64_t registered(ThreadWorld &w, int r) {
  return w.at(r).traffic().tcp_registered;
}

// Every TCP message a leader sends in a routed reduction that fits its
// regions goes on them (one hop, no per-call buffer); one that does not fit
// (its pieces together exceed a region: cpu_staged_bytes shrunk here) takes
// per-call buffers; calls of both kinds interleaved (the regions' call
// parity counts only theirs) and of many pieces keep the bits.
TEST(HierAllreduce, LeadersUseRegisteredBuffersWhenTheCallFits) {
  const int n = 5, hosts = 2;
  hb::comm::BackendConfig cfg = reduce_config(hosts, "hier");
  cfg.piece_bytes = 4096;    // many pieces per call
  cfg.staged_bytes = 64000;  // a leader's area per peer and channel
  ThreadWorld w(n, cfg);
  // Hosts of 3 and 2 ranks, two rounds (over one_round_bytes). 5000
  // floats: blocks of 1000, so a leader sends the other 3 x 2000 or
  // 2 x 3000 floats (24 KB) per channel; 20011 floats: 96 KB, over the area.
  const std::vector<size_t> counts{5000, 20011, 5000, 5000, 20011, 20011, 5000};
  for (size_t i = 0; i < counts.size(); ++i) {
    const size_t count = counts[i];
    const bool fits = count == 5000;
    const auto x = inputs<float>(n, count, HB_SUM, unsigned(40 + i));
    const auto ref = fold_reference(x, HB_SUM);
    std::vector<hb::comm::Traffic> before{size_t(n)};
    for (int r = 0; r < n; ++r) before[r] = w.at(r).traffic();
    const auto y = allreduce_all(w, x, HB_FLOAT32, HB_SUM, i % 2 == 1);
    for (int r = 0; r < n; ++r) {
      const std::string at =
          "call " + std::to_string(i) + " rank " + std::to_string(r);
      ASSERT_EQ(0, std::memcmp(y[r].data(), ref.data(), count * sizeof(float)))
          << at;
      const hb::comm::Traffic t = w.at(r).traffic();
      const uint64_t tcp = t.tcp_messages - before[r].tcp_messages;
      const uint64_t reg = t.tcp_registered - before[r].tcp_registered;
      if (leader(r, n, hosts)) {
        EXPECT_GT(tcp, 2u) << at;  // several pieces, two rounds each
        EXPECT_EQ(reg, fits ? tcp : 0u) << at;
      } else {
        EXPECT_EQ(tcp + reg, 0u) << at;
      }
    }
  }
  // Only the leaders hold reduction regions, of at most 8 x
  // cpu_staged_bytes; every rank holds the call checks' (2 x 5 x 128 B).
  for (int r = 0; r < n; ++r) {
    const uint64_t b = w.at(r).traffic().region_bytes;
    if (leader(r, n, hosts)) EXPECT_GT(b, 4 * 64000u) << r;
    EXPECT_LE(b, (leader(r, n, hosts) ? 8 * 64000u : 0u) + 2048u) << r;
  }
}

// A rank lost while the others are inside a many-piece reduction whose
// leader messages travel on the registered buffers: HB_ERR_PEER_FAILED on
// every other rank, promptly (a leader's region wait ends on the lost pair
// or the health report, never by hanging).
TEST(HierAllreduce, LostRankMidPieceOnRegisteredBuffersFailsEveryOtherRank) {
  hb::comm::BackendConfig cfg = reduce_config(2, "hier");
  cfg.piece_bytes = 4096;  // 256 floats of each block per piece: ~40 pieces
  std::vector<std::vector<float>> x;
  std::atomic<uint64_t> on_regions{0};
  expect_lost_rank_fails_others(
      cfg, [&](int n) { x = inputs<float>(n, 40000, HB_SUM, 11); },
      [&](ThreadWorld &w, int r) {
        w.at(r).allreduce(x[r].data(), x[r].data(), x[r].size(), HB_FLOAT32,
                          HB_SUM);
        if (r == 0) on_regions = registered(w, 0);
      });
  EXPECT_GT(on_regions.load(), 0u);  // the calls took the regions
}

// The routed alltoallv's leader-to-leader message on the leaders'
// registered regions (comm/hier_alltoallv.h): exactly one message each way
// between the two leaders there per call, the payload when it fits a
// region (cpu_staged_bytes shrunk here to 64 KB per peer and channel), a
// one-byte token in place of an empty or too large one (which then takes a
// per-call buffer); calls of every kind interleaved with routed
// reductions on the same regions (one call parity) keep their bytes.
TEST(HierAlltoallv, LeadersUseRegisteredBuffersWhenTheMessageFits) {
  const int n = 5, hosts = 2;  // 3 + 2 ranks: leaders 0 and 3
  hb::comm::BackendConfig cfg = config(hosts, "hier");
  cfg.allreduce_route = "hier";
  cfg.staged_bytes = 64000;
  ThreadWorld hier(n, cfg), direct(n, config(hosts, "direct"));
  // kLarge: a leader's message to the other is 6 blocks of 30 KB.
  const std::vector<Sizes> calls{Sizes::kSmall, Sizes::kLarge,  Sizes::kLocal,
                                 Sizes::kSmall, Sizes::kOneWay, Sizes::kLarge,
                                 Sizes::kMixed, Sizes::kSmall};
  for (size_t i = 0; i < calls.size(); ++i) {
    const Case c(n, unsigned(70 + i), calls[i], hosts);
    std::vector<hb::comm::Traffic> before{size_t(n)};
    for (int r = 0; r < n; ++r) before[r] = hier.at(r).traffic();
    const auto a = c.run(hier), b = c.run(direct);
    // What each host sends the other: over a region (64000 B) or not.
    int64_t out[2] = {0, 0};
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d)
        if (s * hosts / n != d * hosts / n) out[s * hosts / n] += c.sc[s][d];
    for (int r = 0; r < n; ++r) {
      const std::string at =
          "call " + std::to_string(i) + " rank " + std::to_string(r);
      ASSERT_EQ(a[r], b[r]) << at;
      for (int p = 0; p < n; ++p)
        for (int64_t k = 0; k < c.rc[r][p]; ++k)
          ASSERT_EQ(a[r][size_t(c.ro[r][p] + k)],
                    c.send[p][size_t(c.so[p][r] + k)])
              << at << " from " << p;
      const hb::comm::Traffic t = hier.at(r).traffic();
      const uint64_t tcp = t.tcp_messages - before[r].tcp_messages;
      const uint64_t reg = t.tcp_registered - before[r].tcp_registered;
      if (leader(r, n, hosts)) {
        EXPECT_EQ(reg, 1u) << at;
        EXPECT_EQ(tcp, out[r * hosts / n] > 64000 ? 2u : 1u) << at;
      } else {
        EXPECT_EQ(tcp + reg, 0u) << at;
      }
    }
    // A routed reduction on the same regions between the exchanges.
    const auto x = inputs<float>(n, 1000, HB_SUM, unsigned(i));
    const auto y = allreduce_all(hier, x, HB_FLOAT32, HB_SUM, false);
    const auto ref = fold_reference(x, HB_SUM);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(0, std::memcmp(y[r].data(), ref.data(), 1000 * sizeof(float)))
          << "allreduce after call " << i << ", rank " << r;
  }
}

// A rank lost while the others loop on routed exchanges whose leader
// messages travel on the registered regions: HB_ERR_PEER_FAILED on every
// other rank, promptly (a leader's region wait ends on the lost pair or
// the health report).
TEST(HierAlltoallv, LostRankOnRegisteredBuffersFailsEveryOtherRank) {
  // Every leader message fits: all of them on the regions.
  EXPECT_GT(
      expect_lost_rank_fails_others_in_alltoallv(Case(4, 13, Sizes::kSmall, 2)),
      0u);
}

}  // namespace
