// The ps module's pieces in one process: the staleness clock, and a ps
// server (ps::serve on a thread) spoken to through ps::Conn and raw
// sockets: rounds, the bound, lost workers, bad input, the end of a job.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#define HB_EXPERIMENTAL 1
#include "common/free_port.h"
#include "common/health.h"
#include "embedding/spec.h"
#include "ps/clock.h"
#include "ps/conn.h"
#include "ps/owned_table.h"
#include "ps/positions.h"
#include "ps/server.h"
#include "ps/split_queue.h"
#include "ps/wire.h"
#include "rendezvous/tcp.h"

namespace hb {
namespace ps {
namespace {

// What a job checkpoint keeps of each rank's committed pushes, per ps task.
TEST(Positions, RoundTripReshardAndDamage) {
  char tmpl[] = "/tmp/hb_ps_positions_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  Committed a, b;
  a.step = {{5, 2}, {-1, -1}, {7, 0}};
  a.position = {std::string("p\0a", 3), "", "x"};
  b.step = {{6, 0}, {3, 1}, {7, 0}};
  b.position = {"b0", "b1", "b2"};
  write_positions(dir, 42, "t", 0, 2, a);
  emb::ShardFile f = write_positions(dir, 42, "t", 1, 2, b);
  EXPECT_EQ(f.file, positions_file_name("t", 42, 1, 2));
  // Same number of ps tasks: each its own file, exactly.
  Committed got = read_positions(dir, 42, "t", 1, 2, 2, 3);
  EXPECT_EQ(got.step, b.step);
  EXPECT_EQ(got.position, b.position);
  // Another number: per rank the oldest of the old files (rank 1 never
  // pushed to ps task 0: none there is the oldest).
  got = read_positions(dir, 42, "t", 0, 1, 2, 3);
  EXPECT_EQ(got.step, (std::vector<std::pair<int64_t, int64_t>>{
                          {5, 2}, {-1, -1}, {7, 0}}));
  EXPECT_EQ(got.position[0], std::string("p\0a", 3));
  // A smaller world keeps its ranks; a missing or truncated file is
  // HB_ERR_CORRUPT naming it.
  EXPECT_EQ(read_positions(dir, 42, "t", 0, 2, 2, 1).step.size(), 1u);
  EXPECT_THROW(read_positions(dir, 43, "t", 0, 2, 2, 3), Error);
  const std::string path = dir + "/" + positions_file_name("t", 42, 0, 2);
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << "HBPSPOS1\x03"; }
  try {
    read_positions(dir, 42, "t", 0, 2, 2, 3);
    ADD_FAILURE() << "a truncated file was read";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_CORRUPT);
    EXPECT_NE(std::string(e.what()).find("positions"), std::string::npos)
        << e.what();
  }
  for (int i = 0; i < 2; ++i)
    std::remove((dir + "/" + positions_file_name("t", 42, i, 2)).c_str());
  rmdir(dir.c_str());
}

TEST(StalenessClock, BoundAgainstTheSlowestActiveRank) {
  StalenessClock c(3, 1);
  EXPECT_EQ(c.slowest(), 0);
  EXPECT_TRUE(c.may_go(0));
  c.attach(0);
  c.tick(0);
  EXPECT_EQ(c.lead(0), 1);
  EXPECT_TRUE(c.may_go(0));
  c.tick(0);
  EXPECT_FALSE(c.may_go(0));  // 2 ahead of ranks 1 and 2 (expected, at 0)
  c.lost(1);
  EXPECT_FALSE(c.may_go(0));  // rank 2 is still expected
  c.left(2);
  EXPECT_TRUE(c.may_go(0));  // nobody active but rank 0
  EXPECT_EQ(c.slowest(), 2);
  // A lost rank resumes at the slowest active clock: it cannot hold the
  // others back for the steps it missed.
  c.attach(1);
  EXPECT_EQ(c.clock(1), 2);
  EXPECT_EQ(c.lead(0), 0);
}

TEST(StalenessClock, RejoiningAnIdleTableResumesAtItsFloor) {
  StalenessClock c(2, 0);
  c.attach(0), c.attach(1);
  for (int i = 0; i < 5; ++i) c.tick(0), c.tick(1);
  c.left(0), c.lost(1);
  EXPECT_EQ(c.slowest(), StalenessClock::kNone);
  c.attach(1);
  EXPECT_EQ(c.clock(1), 5);
  c.attach(0);
  EXPECT_EQ(c.clock(0), 5);
}

// A ps server on a thread, on a free loopback port.
class Ps {
 public:
  explicit Ps(int64_t staleness, int64_t connect_timeout_ms = 20000,
              int64_t timeout_ms = 300000, bool age_bound = false) {
    cfg_.age_bound = age_bound;
    cfg_.timeout_ms = timeout_ms;
    cfg_.host = "127.0.0.1";
    cfg_.port = free_port();
    cfg_.staleness = staleness;
    cfg_.peer_timeout_ms = 1000;
    cfg_.connect_timeout_ms = connect_timeout_ms;
    done_ = std::async(std::launch::async, [this] {
      try {
        serve(cfg_, health_);
        return std::make_pair(hb_status{HB_OK}, std::string());
      } catch (const Error &e) {
        return std::make_pair(hb_status{e.status()}, std::string(e.what()));
      }
    });
  }
  ~Ps() {
    health_.fail(HB_ERR_ABORTED, "test over");
    if (done_.valid()) done_.wait();
  }
  int port() const { return cfg_.port; }
  // Waits for serve() to return (at most ms).
  std::pair<hb_status, std::string> result(int64_t ms) {
    if (done_.wait_for(std::chrono::milliseconds(ms)) !=
        std::future_status::ready)
      return {-1, "still serving"};
    return done_.get();
  }
  std::unique_ptr<Conn> connect(int rank, int world, Health *h) {
    ConnConfig cc;
    cc.host = "127.0.0.1";
    cc.port = cfg_.port;
    cc.rank = rank;
    cc.world = world;
    cc.connect_timeout_ms = 5000;
    cc.peer_timeout_ms = 3000;
    cc.timeout_ms = 10000;
    return std::unique_ptr<Conn>(new Conn(cc, h));
  }

 private:
  static int free_port() { return hb::free_port("127.0.0.1", 0); }
  ServerConfig cfg_;
  Health health_;
  std::future<std::pair<hb_status, std::string>> done_;
};

emb::Spec sgd_spec(const char *name, int64_t rows) {
  emb::Spec s;
  s.name = name;
  s.dim = 2;
  s.num_rows = rows;
  s.optimizer = HB_OPT_SGD;
  s.learning_rate = 1.0;
  return s;
}

int64_t attach(Conn &c, const emb::Spec &s) {
  return c.call(request(kAttach, {}, {encode_spec(s)}), "attach").ints.at(0);
}

// version: where to put the table's version the pull returned.
std::vector<float> pull(Conn &c, int64_t table, std::vector<int64_t> ids,
                        int64_t *version = nullptr) {
  Frame r =
      c.call(request(kPull, {table}, {pack(ids.data(), ids.size())}), "pull");
  if (version) *version = r.ints.at(0);
  return unpack<float>(r.strs.at(0), "rows");
}

// pulled: the version the gradients were computed on (-1: unknown).
void push(Conn &c, int64_t table, int64_t step, std::vector<int64_t> ids,
          std::vector<float> g, int64_t pulled = -1) {
  c.call(request(kPush, {table, step, 0, pulled},
                 {pack(ids.data(), ids.size()), pack(g.data(), g.size()), ""}),
         "push");
}

// Two workers of a ps with table "t" (SGD, lr 1, 10 rows of 2) attached.
struct TwoWorkers {
  explicit TwoWorkers(Ps &ps)
      : c0(ps.connect(0, 2, &h0)), c1(ps.connect(1, 2, &h1)) {
    t = attach(*c0, sgd_spec("t", 10));
    EXPECT_EQ(attach(*c1, sgd_spec("t", 10)), t);
  }
  Health h0, h1;
  std::unique_ptr<Conn> c0, c1;
  int64_t t = -1;
};

TEST(PsServer, StalenessZeroSumsARoundInRankOrderThenSteps) {
  Ps ps(0);
  TwoWorkers w(ps);
  auto &c0 = w.c0, &c1 = w.c1;
  const int64_t t = w.t;
  push(*c0, t, 0, {3}, {1.0f, 2.0f});
  // Rank 0's next pull waits for rank 1's push of the round.
  auto next = std::async(std::launch::async, [&] { return pull(*c0, t, {3}); });
  EXPECT_EQ(next.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  push(*c1, t, 0, {3, 4}, {0.5f, 0.25f, 1.0f, 1.0f});
  std::vector<float> row = next.get();
  EXPECT_EQ(row, (std::vector<float>{-1.5f, -2.25f}));  // 0 - (g0 + g1)
  EXPECT_EQ(pull(*c1, t, {4}), (std::vector<float>{-1.0f, -1.0f}));
}

TEST(PsServer, ALostWorkerHoldsNobodyBack) {
  Ps ps(0);
  TwoWorkers w(ps);
  auto &c0 = w.c0, &c1 = w.c1;
  const int64_t t = w.t;
  push(*c0, t, 0, {1}, {1.0f, 1.0f});
  auto next = std::async(std::launch::async, [&] { return pull(*c0, t, {1}); });
  c1.reset();  // rank 1 dies: its connection closes
  EXPECT_EQ(next.wait_for(std::chrono::milliseconds(3000)),
            std::future_status::ready);
  EXPECT_EQ(next.get(), (std::vector<float>{-1.0f, -1.0f}));
}

TEST(PsServer, ASilentWorkerIsLostAfterThePeerTimeout) {
  Ps ps(1);
  TwoWorkers w(ps);
  auto &c0 = w.c0;
  const int64_t t = w.t;
  push(*c0, t, 0, {1}, {1.0f, 1.0f});
  push(*c0, t, 1, {1}, {1.0f, 1.0f});  // 2 ahead now: the next must wait
  auto start = std::chrono::steady_clock::now();
  pull(*c0, t, {1});  // rank 1 says nothing: lost after 1 s, then this goes
  double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_GE(s, 0.8);
  EXPECT_LT(s, 3.0);
}

TEST(PsServer, AWaitThatCannotEndIsATimeoutNamingWhatItWaitedFor) {
  // Rank 1 is alive (its connection open, heartbeats would keep it) but
  // never pushes: rank 0's pull of its next step is answered after
  // timeout_ms with what it waited for, not parked for ever.
  Ps ps(0, 20000, /*timeout_ms=*/700);
  TwoWorkers w(ps);
  const int64_t t = w.t;
  push(*w.c0, t, 0, {1}, {1.0f, 1.0f});
  auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> ids = {1};
  try {
    w.c0->call(request(kPull, {t, 1}, {pack(ids.data(), ids.size())}), "pull");
    ADD_FAILURE() << "the pull was answered";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_TIMEOUT);
    const std::string m = e.what();
    for (const char *want : {"worker rank 0's pull of step 1", "table 't'",
                             "rank 1 (alive)", "timeout_ms=700"})
      EXPECT_NE(m.find(want), std::string::npos) << want << " in: " << m;
  }
  double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_GE(s, 0.6);
  EXPECT_LT(s, 3.0);
  // The connection still serves: once rank 1 pushes, rank 0 goes on.
  push(*w.c1, t, 0, {2}, {1.0f, 1.0f});
  EXPECT_EQ(pull(*w.c0, t, {1}), (std::vector<float>{-1.0f, -1.0f}));
}

TEST(PsServer, TheAgeBoundWaitsForNobodyAndScalesOldPushes) {
  Ps ps(/*staleness=*/1, 20000, 300000, /*age_bound=*/true);
  TwoWorkers w(ps);
  auto &c0 = w.c0, &c1 = w.c1;
  const int64_t t = w.t;
  int64_t v1 = -1, v0 = -1;
  pull(*c1, t, {3}, &v1);  // rank 1 computes on version 0
  EXPECT_EQ(v1, 0);
  // Rank 0 runs 4 steps ahead: with the step bound 1 its third pull would
  // wait for rank 1; by age nobody waits.
  for (int s = 0; s < 4; ++s) {
    pull(*c0, t, {3}, &v0);
    EXPECT_EQ(v0, s);  // a version per push applied
    push(*c0, t, s, {3}, {1.0f, 1.0f}, v0);
  }
  EXPECT_EQ(pull(*c0, t, {3}, &v0), (std::vector<float>{-4.0f, -4.0f}));
  EXPECT_EQ(v0, 4);
  // Rank 1's push is 4 versions old (> 1): applied at 1 / (1 + 4).
  push(*c1, t, 0, {3}, {10.0f, 5.0f}, v1);
  EXPECT_EQ(pull(*c0, t, {3}, &v0), (std::vector<float>{-6.0f, -5.0f}));
  // One version old (<= 1): applied in full.
  pull(*c1, t, {4}, &v1);
  push(*c0, t, 4, {4}, {1.0f, 1.0f}, v0);
  push(*c1, t, 1, {4}, {2.0f, 2.0f}, v1);
  EXPECT_EQ(pull(*c0, t, {4}), (std::vector<float>{-3.0f, -3.0f}));
  // An empty push changes no row and no version.
  pull(*c1, t, {4}, &v1);
  push(*c0, t, 5, {}, {}, v0);
  int64_t v = -1;
  pull(*c1, t, {4}, &v);
  EXPECT_EQ(v, v1);
}

TEST(PsServer, AgeBoundZeroMakesRoundsAsTheStepBound) {
  Ps ps(0, 20000, 300000, /*age_bound=*/true);
  TwoWorkers w(ps);
  push(*w.c0, w.t, 0, {3}, {1.0f, 2.0f});
  auto next =
      std::async(std::launch::async, [&] { return pull(*w.c0, w.t, {3}); });
  EXPECT_EQ(next.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  push(*w.c1, w.t, 0, {3, 4}, {0.5f, 0.25f, 1.0f, 1.0f});
  EXPECT_EQ(next.get(), (std::vector<float>{-1.5f, -2.25f}));
}

TEST(PsServer, BadInputIsAnErrorAndLosesNothing) {
  Ps ps(2);
  Health h0;
  auto c0 = ps.connect(0, 1, &h0);
  int64_t t = attach(*c0, sgd_spec("t", 10));
  // Another config under the same name.
  emb::Spec other = sgd_spec("t", 10);
  other.dim = 3;
  try {
    attach(*c0, other);
    FAIL() << "a second config was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("another config"), std::string::npos);
  }
  // An id out of range: named, and the table unchanged.
  try {
    push(*c0, t, 0, {1, 12}, {1, 1, 1, 1});
    FAIL() << "id 12 was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("id 12"), std::string::npos);
  }
  EXPECT_EQ(pull(*c0, t, {1}), (std::vector<float>{0.0f, 0.0f}));
  // Gradients that do not match the ids.
  try {
    push(*c0, t, 0, {1}, {1});
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_CORRUPT);
  }
  // A malformed frame closes that connection only.
  std::string err;
  int fd = rdv::tcp_connect("127.0.0.1", ps.port(), 2000, &err);
  ASSERT_GE(fd, 0) << err;
  const char junk[] = "this is not a frame at all.......";
  ASSERT_GT(::send(fd, junk, sizeof junk, MSG_NOSIGNAL), 0);
  char b[16];
  ssize_t n = -1;
  for (int i = 0; i < 100 && n != 0; ++i) {
    n = ::recv(fd, b, sizeof b, 0);
    if (n < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(n, 0);  // closed by the ps
  ::close(fd);
  EXPECT_EQ(pull(*c0, t, {1}), (std::vector<float>{0.0f, 0.0f}));
  // A replayed step is dropped, once.
  push(*c0, t, 0, {2}, {1, 1});
  push(*c0, t, 0, {2}, {1, 1});
  EXPECT_EQ(pull(*c0, t, {2}), (std::vector<float>{-1.0f, -1.0f}));
}

TEST(PsServer, ServingEndsWhenEveryWorkerLeaves) {
  Ps ps(0);
  Health h0, h1;
  auto c0 = ps.connect(0, 2, &h0), c1 = ps.connect(1, 2, &h1);
  c0->bye();
  EXPECT_EQ(ps.result(300).first, -1);  // rank 1 is still there
  c1->bye();
  auto r = ps.result(3000);
  EXPECT_EQ(r.first, HB_OK) << r.second;
}

TEST(PsServer, NoWorkerWithinTheConnectTimeoutIsATimeout) {
  Ps ps(0, /*connect_timeout_ms=*/300);
  auto r = ps.result(3000);
  EXPECT_EQ(r.first, HB_ERR_TIMEOUT) << r.second;
}

// The public calls, through a world of one with a ps task (options
// "ps_hosts=...": no environment needed).
hb_context *ps_context(int port) {
  std::string o = "ps_hosts=127.0.0.1:" + std::to_string(port) +
                  ",peer_timeout_ms=2000,connect_timeout_ms=5000";
  hb_context_options opts = HB_CONTEXT_OPTIONS_INIT;
  opts.options = o.c_str();
  hb_context *ctx = nullptr;
  EXPECT_EQ(hb_context_create(&opts, &ctx), HB_OK) << hb_last_error();
  return ctx;
}

hb_embedding_config table_config(const char *name, int32_t placement) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = name;
  c.dim = 4;
  c.num_rows = 100;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -1, c.init_b = 1;
  c.placement = placement;
  return c;
}

TEST(PsApi, RefusalsNameWhatIsWrong) {
  hb_context *plain = nullptr;
  ASSERT_EQ(hb_context_create(nullptr, &plain), HB_OK);
  EXPECT_EQ(hb_context_num_ps(plain), 0);
  hb_embedding *e = nullptr;
  hb_embedding_config c = table_config("t", HB_PLACEMENT_PS);
  EXPECT_EQ(hb_embedding_create(plain, &c, &e), HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("no ps tasks"), std::string::npos)
      << hb_last_error();
  c.placement = 2;
  EXPECT_EQ(hb_embedding_create(plain, &c, &e), HB_ERR_INVALID_ARGUMENT);
  c.placement = HB_PLACEMENT_PS;
  c.device = 0;
  EXPECT_EQ(hb_embedding_create(plain, &c, &e), HB_ERR_UNSUPPORTED);
  EXPECT_EQ(hb_context_serve(plain), HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("not a ps task"),
            std::string::npos);
  hb_context_destroy(plain);

  hb_context_options bad = HB_CONTEXT_OPTIONS_INIT;
  bad.options = "ps_hosts=nonsense";
  hb_context *ctx = nullptr;
  EXPECT_EQ(hb_context_create(&bad, &ctx), HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("ps_hosts"), std::string::npos)
      << hb_last_error();

  // A worker of a ps job forms its collective world on first use: without
  // a rendezvous address that first use says what is missing (creating
  // the context needed none).
  hb_context_options w = HB_CONTEXT_OPTIONS_INIT;
  w.rank = 0, w.world_size = 2, w.local_rank = 0, w.local_world_size = 2;
  w.options = "ps_hosts=127.0.0.1:1";
  ASSERT_EQ(hb_context_create(&w, &ctx), HB_OK) << hb_last_error();
  float x = 1;
  EXPECT_EQ(hb_allreduce(ctx, &x, &x, 1, HB_FLOAT32, HB_SUM), HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("rendezvous"), std::string::npos)
      << hb_last_error();
  EXPECT_EQ(hb_context_barrier(ctx, 1000), HB_ERR_CONFIG);
  hb_context_destroy(ctx);
}

TEST(PsApi, TablesCollectionsPositionsOnAPsTask) {
  Ps ps(0);
  hb_context *ctx = ps_context(ps.port());
  EXPECT_EQ(hb_context_num_ps(ctx), 1);
  hb_embedding *on_ps = nullptr, *local = nullptr;
  hb_embedding_config c = table_config("a", HB_PLACEMENT_PS);
  ASSERT_EQ(hb_embedding_create(ctx, &c, &on_ps), HB_OK) << hb_last_error();
  c = table_config("b", HB_PLACEMENT_WORKERS);
  ASSERT_EQ(hb_embedding_create(ctx, &c, &local), HB_OK) << hb_last_error();
  EXPECT_EQ(hb_embedding_local_rows(on_ps), 0);
  // A row's initial value does not depend on where it lives.
  c = table_config("a", HB_PLACEMENT_WORKERS);
  hb_context *alone = nullptr;
  ASSERT_EQ(hb_context_create(nullptr, &alone), HB_OK);
  hb_embedding *ref = nullptr;
  ASSERT_EQ(hb_embedding_create(alone, &c, &ref), HB_OK);
  int64_t ids[3] = {7, 3, 7};
  float got[12], want[12];
  ASSERT_EQ(hb_embedding_lookup(on_ps, ids, 3, got), HB_OK) << hb_last_error();
  ASSERT_EQ(hb_embedding_lookup(ref, ids, 3, want), HB_OK);
  EXPECT_EQ(std::memcmp(got, want, sizeof got), 0);
  // One step each, the same bits (duplicates summed in batch order).
  float g[12];
  for (int i = 0; i < 12; ++i) g[i] = 0.1f * static_cast<float>(i + 1);
  ASSERT_EQ(hb_ps_set_position(ctx, "p1", 2), HB_OK);
  ASSERT_EQ(hb_embedding_apply_gradients(on_ps, ids, 3, g), HB_OK)
      << hb_last_error();
  ASSERT_EQ(hb_embedding_apply_gradients(ref, ids, 3, g), HB_OK);
  ASSERT_EQ(hb_embedding_lookup(on_ps, ids, 3, got), HB_OK);
  ASSERT_EQ(hb_embedding_lookup(ref, ids, 3, want), HB_OK);
  EXPECT_EQ(std::memcmp(got, want, sizeof got), 0);
  // The committed position.
  char pos[8];
  size_t needed = 0;
  int64_t step = -1;
  EXPECT_EQ(hb_ps_position(ctx, pos, 1, &needed, &step),
            HB_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(hb_ps_position(ctx, pos, sizeof pos, &needed, &step), HB_OK);
  EXPECT_EQ(needed, 2u);
  EXPECT_EQ(std::string(pos, 2), "p1");
  EXPECT_EQ(step, 1);
  // A collection: all its tables on the ps tasks, or none.
  hb_collection_feature f[2] = {HB_COLLECTION_FEATURE_INIT,
                                HB_COLLECTION_FEATURE_INIT};
  f[0].table = on_ps, f[1].table = local;
  hb_collection *coll = nullptr;
  EXPECT_EQ(hb_collection_create(ctx, f, 2, &coll), HB_ERR_UNSUPPORTED);
  ASSERT_EQ(hb_collection_create(ctx, f, 1, &coll), HB_OK) << hb_last_error();
  int64_t offs[3] = {0, 2, 3};
  const int64_t *fid[1] = {ids}, *foff[1] = {offs};
  hb_jagged_batch b = HB_JAGGED_BATCH_INIT;
  b.batch_size = 2, b.ids = fid, b.offsets = foff;
  float pooled[8];
  ASSERT_EQ(hb_collection_lookup(coll, &b, pooled, nullptr), HB_OK)
      << hb_last_error();
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(pooled[d], got[d] + got[4 + d]);
    EXPECT_EQ(pooled[4 + d], got[8 + d]);
  }
  hb_collection_destroy(coll);
  hb_embedding_destroy(ref);
  hb_context_destroy(alone);
  // Tables may outlive their context: the worker leaves the ps with its
  // last ps table.
  hb_context_destroy(ctx);
  EXPECT_EQ(ps.result(300).first, -1);
  hb_embedding_destroy(on_ps);
  hb_embedding_destroy(local);
  auto r = ps.result(3000);
  EXPECT_EQ(r.first, HB_OK) << r.second;
}

// The dynamic splits' queue (split_queue.h), as the ps would drive it.
namespace split_test {

// Workers take splits and process them in batches of `batch`, committing
// each; with `loss` per mille a worker is lost after a batch (its split
// goes back at its committed offset) and restarts at once. Every sample of
// every epoch must be processed exactly once. Returns the splits each rank
// took and the order of (epoch, split) handed out.
struct Run {
  std::vector<int64_t> taken;
  std::vector<std::pair<int64_t, int64_t>> order;
};

Run drain(SplitQueue &q, int world, int64_t samples, int64_t epochs,
          int64_t batch, int loss, uint64_t rng, std::vector<int> *count) {
  Run out;
  out.taken.assign(world, 0);
  count->assign(samples * epochs, 0);
  std::vector<SplitLease> cur(world);
  std::vector<char> has(world, 0), over(world, 0);
  int live = world;
  for (int64_t turn = 0; live > 0; ++turn) {
    // Rank 0 is twice as fast as the others: every other turn is its.
    const int r =
        turn % 2 == 0 ? 0 : 1 + static_cast<int>((turn / 2) % (world - 1));
    if (over[r]) continue;
    if (!has[r]) {
      cur[r] = q.next(r);
      if (cur[r].split == SplitLease::kWait) continue;  // another holds one
      if (cur[r].split < 0) {
        over[r] = 1, --live;
        continue;
      }
      has[r] = 1;
      ++out.taken[r];
      out.order.push_back({cur[r].epoch, cur[r].split});
    }
    SplitLease &l = cur[r];
    const int64_t end = std::min(l.end, l.from + batch);
    for (int64_t s = l.from; s < end; ++s) ++(*count)[l.epoch * samples + s];
    l.from = end;
    if (end == l.end) {
      q.done(r, l.split);
      has[r] = 0;
    } else {
      q.commit(r, l.split, end);
    }
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    if (has[r] && static_cast<int>((rng >> 33) % 1000) < loss) {
      q.give_back(r);  // lost: the rest of its split goes back
      has[r] = 0;
    }
  }
  return out;
}

}  // namespace split_test

TEST(SplitQueue, EverySampleExactlyOnceWhateverIsLost) {
  for (int loss : {0, 50, 300}) {
    for (int world : {2, 3}) {
      SplitQueue q(1000, 64, 3, 42, world);
      std::vector<int> count;
      split_test::Run run =
          split_test::drain(q, world, 1000, 3, 10, loss, 7 + loss, &count);
      EXPECT_TRUE(q.finished()) << "loss " << loss << " world " << world;
      EXPECT_EQ(q.splits_done(), 3 * 16);
      for (size_t i = 0; i < count.size(); ++i)
        ASSERT_EQ(count[i], 1) << "sample " << i % 1000 << " of epoch "
                               << i / 1000 << ", loss " << loss;
      // The fast rank takes more splits than any other.
      for (int r = 1; r < world && loss == 0; ++r)
        EXPECT_GT(run.taken[0], run.taken[r]);
    }
  }
}

TEST(SplitQueue, TheOrderIsSeededAndReproducible) {
  std::vector<int> count;
  SplitQueue a(5000, 50, 2, 9, 2), b(5000, 50, 2, 9, 2), c(5000, 50, 2, 10, 2);
  auto ra = split_test::drain(a, 2, 5000, 2, 50, 0, 1, &count);
  auto rb = split_test::drain(b, 2, 5000, 2, 50, 0, 1, &count);
  auto rc = split_test::drain(c, 2, 5000, 2, 50, 0, 1, &count);
  EXPECT_EQ(ra.order, rb.order);
  EXPECT_NE(ra.order, rc.order);
  // An epoch is a permutation, and the next epoch's order differs.
  std::vector<int64_t> e0, e1;
  for (auto &p : ra.order) (p.first == 0 ? e0 : e1).push_back(p.second);
  ASSERT_EQ(e0.size(), 100u);
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(e0[i], i);
}

TEST(SplitQueue, ARestartedWorkerGetsItsSplitBackAtItsCommittedOffset) {
  SplitQueue q(100, 10, 1, 1, 2);
  SplitLease l = q.next(1);
  q.commit(1, l.split, l.begin + 4);
  SplitLease again = q.next(1);  // not lost: restarted before the ps knew
  EXPECT_EQ(again.split, l.split);
  EXPECT_EQ(again.from, l.begin + 4);
  q.give_back(1);  // lost: rank 0 finishes it from there
  SplitLease other = q.next(0);
  EXPECT_EQ(other.split, l.split);
  EXPECT_EQ(other.from, l.begin + 4);
  EXPECT_THROW(q.commit(1, l.split, l.begin + 5), Error);  // not its own now
  EXPECT_THROW(q.commit(0, l.split, l.end + 1), Error);    // outside
}

// A worker lost for good: the others are told to wait (not that all is
// done) while it holds its split, and one of them finishes it once it is
// given back.
TEST(SplitQueue, OthersWaitForTheSplitOfALostWorker) {
  SplitQueue q(20, 10, 1, 3, 2);
  SplitLease a = q.next(0), b = q.next(1);
  q.commit(1, b.split, b.begin + 4);
  q.done(0, a.split);
  EXPECT_EQ(q.next(0).split, SplitLease::kWait);
  q.give_back(1);
  SplitLease c = q.next(0);
  EXPECT_EQ(c.split, b.split);
  EXPECT_EQ(c.from, b.begin + 4);
  q.done(0, c.split);
  EXPECT_EQ(q.next(0).split, -1);
  EXPECT_TRUE(q.finished());
}

// What an evaluator reads from a checkpoint's queue: epoch, splits done and
// open, samples trained up to the committed offsets -- the same after a
// save and load (the open splits given back at their offsets).
TEST(SplitQueue, ProgressCountsFinishedSplitsAndCommittedOffsets) {
  SplitQueue q(95, 10, 2, 5, 2);  // 10 splits per epoch, the last of 5
  SplitProgress p0 = q.progress();
  EXPECT_EQ(p0.epoch, 0);
  EXPECT_EQ(p0.splits_per_epoch, 10);
  EXPECT_EQ(p0.samples_done, 0);
  EXPECT_EQ(p0.samples_total, 190);
  int64_t done = 0;
  for (int i = 0; i < 10; ++i) {  // the whole first epoch
    SplitLease l = q.next(0);
    done += l.end - l.begin;
    q.done(0, l.split);
  }
  EXPECT_EQ(done, 95);
  SplitLease a = q.next(0), b = q.next(1);  // epoch 1
  q.commit(0, a.split, a.begin + 3);
  SplitProgress p = q.progress();
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(p.splits_done, 10);
  ASSERT_EQ(p.open.size(), 2u);
  EXPECT_EQ(p.samples_done, 95 + 3);
  for (const SplitProgress &r : {p, SplitQueue::load(q.save(), 2).progress()}) {
    EXPECT_EQ(r.samples_done, 98);
    ASSERT_EQ(r.open.size(), 2u);
    for (const SplitLease &o : r.open)
      EXPECT_EQ(o.from, o.split == a.split ? a.begin + 3 : b.begin);
  }
  q.done(1, b.split);
  EXPECT_EQ(q.progress().samples_done, 98 + (b.end - b.begin));
}

// A table knows which batches of which split it applied, whoever pushed
// them: the same batch again is a replay, the next one is not, and one
// that straddles what it applied is refused.
TEST(OwnedTable, SplitBatchesAppliedOnceWhoeverPushes) {
  OwnedTable t(sgd_spec("t", 100), 0, 1, 2, 1);
  t.attach(0);
  t.attach(1);
  Stats st;
  SplitTag a;
  a.epoch = 1, a.split = 3, a.begin = 300, a.end = 320;
  EXPECT_FALSE(t.split_replay(a));
  t.push(0, {1, 0}, {1}, {-1.0f, -1.0f}, "p", st, -1, a);
  EXPECT_EQ(t.split_applied(1, 3), 320);
  EXPECT_EQ(t.split_applied(0, 3), -1);  // another epoch
  EXPECT_TRUE(t.split_replay(a));        // rank 1 taking the split over
  SplitTag b = a;
  b.begin = 320, b.end = 340;
  EXPECT_FALSE(t.split_replay(b));
  b.begin = 310;
  EXPECT_THROW(t.split_replay(b), Error);
  EXPECT_FALSE(t.split_replay(SplitTag()));  // no split: never a replay
  // A dropped batch at a new step commits that step for the pusher.
  const std::string q = "q";
  t.replayed(1, st, {4, 0}, &q);
  EXPECT_EQ(t.committed(1), std::make_pair(int64_t{4}, int64_t{0}));
  EXPECT_EQ(t.position(1), "q");
}

// A worker that joins beyond the world starts at the slowest clock.
TEST(StalenessClock, AJoinerStartsAtTheSlowest) {
  StalenessClock c(2, 1);
  c.attach(0);
  c.attach(1);
  for (int i = 0; i < 5; ++i) c.tick(0);
  for (int i = 0; i < 4; ++i) c.tick(1);
  c.grow(3);
  EXPECT_EQ(c.state(2), StalenessClock::kLeft);  // holds nobody back
  EXPECT_EQ(c.slowest(), 4);
  c.attach(2);
  EXPECT_EQ(c.clock(2), 4);
  EXPECT_TRUE(c.may_go(2));
  EXPECT_TRUE(c.may_go(0));
}

TEST(SplitQueue, ASavedQueueResumesExactlyOnce) {
  SplitQueue q(1000, 64, 2, 5, 3);
  std::vector<int> count(2000, 0);
  // Part of the job: a few splits done, two held mid-way.
  for (int i = 0; i < 5; ++i) {
    SplitLease l = q.next(0);
    for (int64_t s = l.from; s < l.end; ++s) ++count[l.epoch * 1000 + s];
    q.done(0, l.split);
  }
  for (int r : {1, 2}) {
    SplitLease l = q.next(r);
    for (int64_t s = l.from; s < l.from + 7; ++s) ++count[l.epoch * 1000 + s];
    q.commit(r, l.split, l.from + 7);
  }
  SplitQueue back = SplitQueue::load(q.save(), 3);
  EXPECT_EQ(back.save(), SplitQueue::load(back.save(), 3).save());
  // The rest, from the loaded queue.
  std::vector<int> rest;
  split_test::drain(back, 3, 1000, 2, 10, 0, 3, &rest);
  EXPECT_TRUE(back.finished());
  for (size_t i = 0; i < count.size(); ++i)
    ASSERT_EQ(count[i] + rest[i], 1) << "sample " << i;
  std::string bad = q.save();
  bad[0] = 'X';
  EXPECT_THROW(SplitQueue::load(bad, 3), Error);
  EXPECT_THROW(SplitQueue::load(q.save().substr(0, 40), 3), Error);
  EXPECT_THROW(SplitQueue(0, 10, 1, 0, 2), Error);
}

}  // namespace
}  // namespace ps
}  // namespace hb
