// Every collective x dtype x op against a locally computed reference, for
// world sizes 1 to 4, ranks as threads over the in-memory KV.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "comm/backend.h"
#include "thread_world.h"
#include "typed.h"

using hb::test::get;
using hb::test::input;
using hb::test::put;
using hb::test::reference;
using hb::test::ThreadWorld;
using hb::test::through;

namespace {

using Bytes = std::vector<unsigned char>;

Bytes make(hb_dtype t, size_t n) {
  return Bytes(std::max<size_t>(n, 1) * hb_dtype_size(t));
}

// The ways an allreduce can run: the default (small buffers over
// registered pair buffers, large ones in 1 MiB pieces over per-call
// buffers), the per-call path in tiny pieces (two rounds, or one round with
// in-place waits), and Gloo's halving-doubling on a scratch copy.
enum class Path { kDefault, kPieces, kOneRound, kLegacy };
const char *path_name(Path p) {
  switch (p) {
    case Path::kDefault:
      return "default";
    case Path::kPieces:
      return "pieces";
    case Path::kOneRound:
      return "one_round";
    case Path::kLegacy:
      return "legacy_hd";
  }
  return "?";
}
// Every path runs over both CPU transports: TCP (Gloo) and same-host
// shared memory (ranks as threads share the segments as processes would).
hb::comm::BackendConfig config_for(Path p, const std::string &transport) {
  hb::comm::BackendConfig cfg;
  cfg.transport = transport == "mixed" ? "auto" : transport;
  if (transport == "mixed") cfg.test_hosts = 2;  // shm within, TCP across
  if (p == Path::kPieces || p == Path::kOneRound) {
    cfg.staged_bytes = 0;
    cfg.piece_bytes = 40;  // pieces of 5..40 elements, and partial ones
    cfg.one_round_bytes = p == Path::kOneRound ? (int64_t(1) << 30) : 0;
  }
  if (p == Path::kLegacy) cfg.allreduce_algorithm = "halving_doubling";
  return cfg;
}

// One world per (size, path), shared by the tests of the suite, torn down
// before static destructors run.
using Param = std::tuple<int, Path, std::string>;
std::map<Param, std::unique_ptr<ThreadWorld>> g_worlds;
struct DropWorlds : ::testing::Environment {
  void TearDown() override { g_worlds.clear(); }
};
const auto *g_env = ::testing::AddGlobalTestEnvironment(new DropWorlds);

class Collectives : public ::testing::TestWithParam<Param> {
 protected:
  ThreadWorld &world() {
    const Param &key = GetParam();
    auto &w = g_worlds[key];
    if (!w)
      w = std::make_unique<ThreadWorld>(
          std::get<0>(key), config_for(std::get<1>(key), std::get<2>(key)));
    return *w;
  }
};

const size_t kCounts[] = {1, 13, 1031};

TEST_P(Collectives, AllreduceEveryDtypeAndOp) {
  ThreadWorld &w = world();
  const int n = w.size();
  for (hb_dtype t : hb::test::kAllDtypes)
    for (hb_reduce_op op : hb::test::kAllOps)
      for (size_t count : kCounts)
        for (bool in_place : {false, true}) {
          std::vector<Bytes> send(n), recv(n);
          for (int r = 0; r < n; ++r) {
            send[r] = make(t, count);
            recv[r] = make(t, count);
            for (size_t i = 0; i < count; ++i)
              put(t, send[r].data(), i, input(r, i, op, t));
          }
          w.run([&](int r) {
            void *out = in_place ? send[r].data() : recv[r].data();
            w.at(r).allreduce(send[r].data(), out, count, t, op);
          });
          for (int r = 0; r < n; ++r) {
            const void *out = in_place ? send[r].data() : recv[r].data();
            for (size_t i = 0; i < count; ++i) {
              std::vector<double> x(n);
              for (int q = 0; q < n; ++q) x[q] = input(q, i, op, t);
              double want = through(t, reference(x, op, t));
              ASSERT_EQ(get(t, out, i), want)
                  << "world " << n << " rank " << r << " " << hb::dtype_name(t)
                  << " op " << op << " count " << count << " index " << i
                  << (in_place ? " in place" : "");
            }
          }
        }
}

TEST_P(Collectives, ReduceScatterEveryDtypeAndOp) {
  ThreadWorld &w = world();
  const int n = w.size();
  for (hb_dtype t : hb::test::kAllDtypes)
    for (hb_reduce_op op : hb::test::kAllOps)
      for (size_t count : {size_t(1), size_t(77)}) {
        std::vector<Bytes> send(n), recv(n);
        for (int r = 0; r < n; ++r) {
          send[r] = make(t, count * n);
          recv[r] = make(t, count);
          for (size_t i = 0; i < count * n; ++i)
            put(t, send[r].data(), i, input(r, i, op, t));
        }
        w.run([&](int r) {
          w.at(r).reduce_scatter(send[r].data(), recv[r].data(), count, t, op);
        });
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            std::vector<double> x(n);
            for (int q = 0; q < n; ++q) x[q] = input(q, r * count + i, op, t);
            ASSERT_EQ(get(t, recv[r].data(), i),
                      through(t, reference(x, op, t)))
                << "world " << n << " rank " << r << " " << hb::dtype_name(t)
                << " op " << op << " index " << i;
          }
      }
}

// Values that identify (source rank, index) in every dtype.
double tagged(int rank, size_t i, hb_dtype t) {
  return t == HB_UINT8 ? double((rank * 31 + i) % 251)
                       : double(rank * 100 + i % 97);
}

TEST_P(Collectives, AllgathervUnevenWithOffsets) {
  ThreadWorld &w = world();
  const int n = w.size();
  for (hb_dtype t : hb::test::kAllDtypes)
    for (bool strided : {false, true}) {
      std::vector<int64_t> counts(n), offs(n);
      int64_t at = 0;
      for (int r = 0; r < n; ++r) {
        counts[r] = (r * 5 + 3) % 7;  // includes zero for rank 1... and uneven
        if (r == n - 1 && n > 1) counts[r] = 0;
        offs[r] = at + (strided ? 2 : 0);
        at = offs[r] + counts[r];
      }
      std::vector<Bytes> send(n), recv(n);
      for (int r = 0; r < n; ++r) {
        send[r] = make(t, counts[r]);
        recv[r] = make(t, at + 1);
        for (int64_t i = 0; i < counts[r]; ++i)
          put(t, send[r].data(), i, tagged(r, i, t));
        for (int64_t i = 0; i <= at; ++i) put(t, recv[r].data(), i, 7);
      }
      w.run([&](int r) {
        w.at(r).allgatherv(send[r].data(), counts[r], recv[r].data(),
                           counts.data(), offs.data(), t);
      });
      for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q)
          for (int64_t i = 0; i < counts[q]; ++i)
            ASSERT_EQ(get(t, recv[r].data(), offs[q] + i),
                      through(t, tagged(q, i, t)))
                << "rank " << r << " block " << q << " index " << i;
      if (strided)  // the gaps are untouched
        for (int r = 0; r < n; ++r) ASSERT_EQ(get(t, recv[r].data(), 0), 7);
    }
}

TEST_P(Collectives, AllgatherInPlaceBlock) {
  ThreadWorld &w = world();
  const int n = w.size();
  const size_t count = 300;
  std::vector<std::vector<float>> buf(n, std::vector<float>(count * n, -1));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      buf[r][r * count + i] = float(r * 1000 + i);
  std::vector<int64_t> counts(n, count), offs(n);
  for (int r = 0; r < n; ++r) offs[r] = r * count;
  // send is this rank's own block of recv (MPI_IN_PLACE style).
  w.run([&](int r) {
    w.at(r).allgatherv(buf[r].data() + r * count, count, buf[r].data(),
                       counts.data(), offs.data(), HB_FLOAT32);
  });
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(buf[r][q * count + i], float(q * 1000 + i));
}

TEST_P(Collectives, AlltoallvUnevenWithZerosAndOffsets) {
  ThreadWorld &w = world();
  const int n = w.size();
  // count[s][d]: elements s sends to d; zero on some pairs (and self for s=1).
  auto cnt = [](int s, int d) -> int64_t {
    return ((s * 3 + d * 5) % 4 == 0) ? 0 : (s + 1) * 3 + d;
  };
  for (hb_dtype t : hb::test::kAllDtypes)
    for (bool strided : {false, true}) {
      std::vector<std::vector<int64_t>> sc(n, std::vector<int64_t>(n)),
          so = sc, rc = sc, ro = sc;
      std::vector<Bytes> send(n), recv(n);
      for (int r = 0; r < n; ++r) {
        int64_t sat = 0, rat = 0;
        // Reverse order of blocks when strided, to test real offsets.
        for (int k = 0; k < n; ++k) {
          int p = strided ? n - 1 - k : k;
          sc[r][p] = cnt(r, p);
          so[r][p] = sat + (strided ? 1 : 0);
          sat = so[r][p] + sc[r][p];
          rc[r][p] = cnt(p, r);
          ro[r][p] = rat + (strided ? 3 : 0);
          rat = ro[r][p] + rc[r][p];
        }
        send[r] = make(t, sat);
        recv[r] = make(t, rat);
        for (int p = 0; p < n; ++p)
          for (int64_t i = 0; i < sc[r][p]; ++i)
            put(t, send[r].data(), so[r][p] + i, tagged(r * n + p, i, t));
      }
      w.run([&](int r) {
        w.at(r).alltoallv(send[r].data(), sc[r].data(), so[r].data(),
                          recv[r].data(), rc[r].data(), ro[r].data(), t);
      });
      for (int r = 0; r < n; ++r)
        for (int p = 0; p < n; ++p)
          for (int64_t i = 0; i < rc[r][p]; ++i)
            ASSERT_EQ(get(t, recv[r].data(), ro[r][p] + i),
                      through(t, tagged(p * n + r, i, t)))
                << hb::dtype_name(t) << " rank " << r << " from " << p
                << " index " << i << (strided ? " strided" : "");
    }
}

// Over shared memory, small alltoallv calls go over the call board when
// every rank's sends fit a slot; here rank 0's do not (80 KiB per peer),
// so every rank must agree to take the rings.
TEST_P(Collectives, AlltoallvOneRankBeyondTheBoard) {
  ThreadWorld &w = world();
  const int n = w.size();
  auto cnt = [](int s, int d) -> int64_t { return s == 0 ? 20000 + d : 7 + d; };
  std::vector<std::vector<int64_t>> sc(n, std::vector<int64_t>(n)),
      so = sc, rc = sc, ro = sc;
  std::vector<std::vector<float>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    int64_t sat = 0, rat = 0;
    for (int p = 0; p < n; ++p) {
      sc[r][p] = cnt(r, p), so[r][p] = sat, sat += sc[r][p];
      rc[r][p] = cnt(p, r), ro[r][p] = rat, rat += rc[r][p];
    }
    send[r].resize(size_t(sat));
    recv[r].assign(size_t(rat), -1.f);
    for (int p = 0; p < n; ++p)
      for (int64_t i = 0; i < sc[r][p]; ++i)
        send[r][size_t(so[r][p] + i)] = float(r * 100000 + p * 1000 + i % 997);
  }
  w.run([&](int r) {
    w.at(r).alltoallv(send[r].data(), sc[r].data(), so[r].data(),
                      recv[r].data(), rc[r].data(), ro[r].data(), HB_FLOAT32);
  });
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p)
      for (int64_t i = 0; i < rc[r][p]; ++i)
        ASSERT_EQ(recv[r][size_t(ro[r][p] + i)],
                  float(p * 100000 + r * 1000 + i % 997))
            << "rank " << r << " from " << p << " index " << i;
}

TEST_P(Collectives, BroadcastEveryRootAndDtype) {
  ThreadWorld &w = world();
  const int n = w.size();
  for (hb_dtype t : hb::test::kAllDtypes)
    for (int root = 0; root < n; ++root)
      for (bool in_place : {false, true}) {
        const size_t count = 257;
        std::vector<Bytes> send(n), recv(n);
        for (int r = 0; r < n; ++r) {
          send[r] = make(t, count);
          recv[r] = make(t, count);
          for (size_t i = 0; i < count; ++i)
            put(t, send[r].data(), i, tagged(r, i, t));
        }
        w.run([&](int r) {
          void *out = in_place ? send[r].data() : recv[r].data();
          w.at(r).broadcast(send[r].data(), out, count, t, root);
        });
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(get(t, in_place ? send[r].data() : recv[r].data(), i),
                      through(t, tagged(root, i, t)))
                << "root " << root << " rank " << r;
      }
}

TEST_P(Collectives, HalfPrecisionRandomWithinRounding) {
  ThreadWorld &w = world();
  const int n = w.size();
  const size_t count = 4099;
  for (hb_dtype t : {HB_FLOAT16, HB_BFLOAT16})
    for (hb_reduce_op op : {HB_SUM, HB_AVG}) {
      std::vector<Bytes> buf(n);
      std::mt19937 rng(42);
      std::uniform_real_distribution<float> dist(-4, 4);
      for (int r = 0; r < n; ++r) {
        buf[r] = make(t, count);
        for (size_t i = 0; i < count; ++i) put(t, buf[r].data(), i, dist(rng));
      }
      std::vector<Bytes> orig = buf;
      w.run([&](int r) {
        w.at(r).allreduce(buf[r].data(), buf[r].data(), count, t, op);
      });
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int q = 0; q < n; ++q) exact += get(t, orig[q].data(), i);
        if (op == HB_AVG) exact /= n;
        // One rounding to the 16-bit type: within half a unit of its last
        // place, plus the float32 sum's own rounding.
        double ulp =
            std::fabs(through(t, exact)) * (t == HB_FLOAT16 ? 0x1p-10 : 0x1p-7);
        double tol = std::max(ulp, t == HB_FLOAT16 ? 0x1p-24 : 0x1p-126);
        for (int r = 0; r < n; ++r)
          ASSERT_LE(std::fabs(get(t, buf[r].data(), i) - exact), tol)
              << hb::dtype_name(t) << " op " << op << " index " << i;
        // Every rank holds the same bits.
        for (int r = 1; r < n; ++r)
          ASSERT_EQ(
              0, std::memcmp(buf[r].data() + i * 2, buf[0].data() + i * 2, 2));
      }
    }
}

TEST_P(Collectives, LargeAllreduceAndRepeatedCallsReuseState) {
  const Path path = std::get<1>(GetParam());
  if (path == Path::kPieces || path == Path::kOneRound)
    GTEST_SKIP() << "100k pieces of 40 bytes: the default path covers it";
  ThreadWorld &w = world();
  const int n = w.size();
  const size_t count = (1 << 20) + 3;  // 4 MiB + a tail that does not divide
  std::vector<std::vector<float>> buf(n, std::vector<float>(count));
  for (int iter = 0; iter < 3; ++iter) {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        buf[r][i] = float((r + 1) * ((i + iter) % 64));
    w.run([&](int r) {
      w.at(r).allreduce(buf[r].data(), buf[r].data(), count, HB_FLOAT32,
                        HB_SUM);
    });
    const float f = float(n * (n + 1) / 2);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; i += 997)
        ASSERT_EQ(buf[r][i], f * float((i + iter) % 64));
  }
}

// n ranks' random float inputs and their sum folded in rank order:
// ((x0 + x1) + x2) + x3, element by element.
void random_inputs_and_sum(int n, size_t count, unsigned seed,
                           std::vector<std::vector<float>> *x,
                           std::vector<float> *want) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  x->assign(size_t(n), std::vector<float>(count));
  for (auto &v : *x)
    for (auto &e : v) e = dist(rng) * 1000.f;
  want->assign(count, 0.f);
  for (size_t i = 0; i < count; ++i) {
    float acc = (*x)[0][i];
    for (int q = 1; q < n; ++q) acc += (*x)[size_t(q)][i];
    (*want)[i] = acc;
  }
}

// Every element of an allreduce is reduced in rank order: the result is
// bit for bit ((x0 + x1) + x2) + x3 on every rank, whatever the path, also
// for a buffer whose input and output partly overlap, and reduce_scatter
// (in place, NCCL style: recv is this rank's block of send) gives the same
// bits for its block.
TEST_P(Collectives, RankOrderBitsAndOverlaps) {
  ThreadWorld &w = world();
  const int n = w.size();
  if (std::get<1>(GetParam()) == Path::kLegacy)
    GTEST_SKIP() << "halving-doubling reduces in its own order";
  for (size_t count : {size_t(1), size_t(3), size_t(257), size_t(70001)}) {
    std::vector<std::vector<float>> x;
    std::vector<float> want;
    random_inputs_and_sum(n, count, static_cast<unsigned>(count), &x, &want);
    // Allreduce with recv = send + 1 element (a partial overlap).
    std::vector<std::vector<float>> buf(n);
    for (int r = 0; r < n; ++r) {
      buf[r] = x[r];
      buf[r].push_back(0);
    }
    w.run([&](int r) {
      w.at(r).allreduce(buf[r].data(), buf[r].data() + 1, count, HB_FLOAT32,
                        HB_SUM);
    });
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(0, std::memcmp(buf[r].data() + 1, want.data(), count * 4))
          << "world " << n << " rank " << r << " count " << count;
    // Reduce-scatter of n blocks of count: block r of the in-place buffer.
    std::vector<std::vector<float>> rs(n);
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < n; ++b)
        rs[r].insert(rs[r].end(), x[(r + b) % n].begin(), x[(r + b) % n].end());
    w.run([&](int r) {
      w.at(r).reduce_scatter(rs[r].data(), rs[r].data() + size_t(r) * count,
                             count, HB_FLOAT32, HB_SUM);
    });
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        float acc = x[r % n][i];  // rank 0's block r is x[(0 + r) % n]
        for (int q = 1; q < n; ++q) acc += x[(q + r) % n][i];
        ASSERT_EQ(rs[r][size_t(r) * count + i], acc)
            << "world " << n << " rank " << r << " index " << i;
      }
  }
}

// Reductions larger than the call board's inline payload: on shared memory
// from 3 ranks they go through the board's staging areas in pieces (option
// cpu_shm_reduce), elsewhere over the rings or TCP. Several pieces per
// block, a tail that divides nothing, in place, every dtype, and
// reduce_scatter: the same bits as a fold in rank order computed here. On
// shared memory the other choice of cpu_shm_reduce runs too.
TEST_P(Collectives, LargeReductionsFoldInRankOrder) {
  const Path path = std::get<1>(GetParam());
  // One round (a block shared by every rank) matters on the board only;
  // elsewhere its 40-byte pieces would take minutes.
  if (path != Path::kDefault &&
      !(path == Path::kOneRound && std::get<2>(GetParam()) == "shm"))
    GTEST_SKIP() << "the default path and one round on shm cover it";
  const int n = world().size();
  std::vector<ThreadWorld *> worlds = {&world()};
  std::unique_ptr<ThreadWorld> other;
  if (std::get<2>(GetParam()) == "shm" && n > 1) {
    hb::comm::BackendConfig cfg = config_for(path, "shm");
    cfg.shm_reduce = n >= 3 ? "rings" : "board";
    other = std::make_unique<ThreadWorld>(n, cfg);
    worlds.push_back(other.get());
  }
  const size_t count = 700001;  // 2.8 MB of float32: pieces and a tail
  std::vector<std::vector<float>> x;
  std::vector<float> want;
  random_inputs_and_sum(n, count, 7, &x, &want);
  for (ThreadWorld *w : worlds) {
    std::vector<std::vector<float>> buf = x;
    w->run([&](int r) {
      w->at(r).allreduce(buf[r].data(), buf[r].data(), count, HB_FLOAT32,
                         HB_SUM);
    });
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(0, std::memcmp(buf[r].data(), want.data(), count * 4))
          << "world " << n << " rank " << r;
    // reduce_scatter: rank r's block is x[.][r * per ..].
    const size_t per = count / size_t(n);
    std::vector<std::vector<float>> rs(n, std::vector<float>(per));
    w->run([&](int r) {
      w->at(r).reduce_scatter(x[r].data(), rs[r].data(), per, HB_FLOAT32,
                              HB_SUM);
    });
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(
          0, std::memcmp(rs[r].data(), want.data() + size_t(r) * per, per * 4))
          << "world " << n << " rank " << r;
    // Every dtype and op, against the reference.
    const size_t big = 300007;
    for (hb_dtype t : hb::test::kAllDtypes)
      for (hb_reduce_op op : {HB_SUM, HB_MAX}) {
        std::vector<Bytes> send(n), recv(n);
        for (int r = 0; r < n; ++r) {
          send[r] = make(t, big);
          recv[r] = make(t, big);
          for (size_t i = 0; i < big; ++i)
            put(t, send[r].data(), i, input(r, i % 1000, op, t));
        }
        w->run([&](int r) {
          w->at(r).allreduce(send[r].data(), recv[r].data(), big, t, op);
        });
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < big; i += 101) {
            std::vector<double> v(n);
            for (int q = 0; q < n; ++q) v[q] = input(q, i % 1000, op, t);
            ASSERT_EQ(get(t, recv[r].data(), i),
                      through(t, reference(v, op, t)))
                << "world " << n << " rank " << r << " " << hb::dtype_name(t)
                << " op " << op << " index " << i;
          }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, Collectives,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(Path::kDefault, Path::kPieces,
                                         Path::kOneRound, Path::kLegacy),
                       ::testing::Values(std::string("tcp"), std::string("shm"),
                                         std::string("mixed"))),
    [](const ::testing::TestParamInfo<Param> &p) {
      return "np" + std::to_string(std::get<0>(p.param)) + "_" +
             path_name(std::get<1>(p.param)) + "_" + std::get<2>(p.param);
    });

// Each Gloo algorithm the option offers agrees with the reference.
TEST(CollectivesAlgorithms, EveryAllreduceAlgorithm) {
  for (const char *algo : {"ring", "ring_chunked", "halving_doubling", "bcube"})
    for (int n : {2, 3, 4}) {
      if (std::string(algo) == "bcube" && n == 3) continue;
      hb::comm::BackendConfig cfg;
      cfg.allreduce_algorithm = algo;
      ThreadWorld w(n, cfg);
      for (size_t count : {size_t(1), size_t(1000)}) {
        std::vector<std::vector<int32_t>> buf(n, std::vector<int32_t>(count));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) buf[r][i] = int32_t(r * 10 + i);
        w.run([&](int r) {
          w.at(r).allreduce(buf[r].data(), buf[r].data(), count, HB_INT32,
                            HB_MAX);
        });
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(buf[r][i], int32_t((n - 1) * 10 + i))
                << algo << " np" << n;
      }
    }
}

TEST(CollectivesAlgorithms, BcubeNeedsPowerOfTwo) {
  hb::comm::BackendConfig cfg;
  cfg.allreduce_algorithm = "bcube";
  cfg.world_size = 3;
  EXPECT_EQ(HB_ERR_CONFIG, hb::test::make_backend_alone(cfg));
  EXPECT_NE(std::string(hb_last_error()).find("power-of-two"),
            std::string::npos);
}

}  // namespace
