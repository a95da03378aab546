// A rank the rendezvous store refuses for good (wrong world size, a bad
// option) learns it at once, with the store's reason, instead of retrying
// until connect_timeout_ms. Rank 0 runs in a thread of the same process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/free_port.h"
#include "hb.h"

namespace {

struct Attempt {
  hb_status status = HB_OK;
  std::string message;
  int64_t ms = 0;
};

Attempt create(int rank, int world, const std::string &rv,
               const char *options) {
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.rank = rank;
  o.world_size = world;
  o.local_rank = rank;
  o.local_world_size = world;
  o.rendezvous = rv.c_str();
  o.options = options;
  auto t0 = std::chrono::steady_clock::now();
  hb_context *ctx = nullptr;
  Attempt a;
  a.status = hb_context_create(&o, &ctx);
  a.ms = std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - t0)
             .count();
  a.message = hb_last_error();
  hb_context_destroy(ctx);
  return a;
}

void expect_refused_at_once(int world1, const char *options1,
                            const char *needle) {
  const std::string rv =
      "127.0.0.1:" + std::to_string(hb::free_port("127.0.0.1", 0));
  Attempt r0;
  std::thread rank0([&] { r0 = create(0, 2, rv, "connect_timeout_ms=3000"); });
  Attempt r1 = create(1, world1, rv, options1);
  rank0.join();
  EXPECT_EQ(r1.status, HB_ERR_CONFIG) << r1.message;
  EXPECT_NE(r1.message.find(needle), std::string::npos) << r1.message;
  EXPECT_LT(r1.ms, 2000) << r1.message;  // connect_timeout_ms is 60 s
  EXPECT_NE(r0.status, HB_OK);           // rank 1 never joined
  EXPECT_NE(r0.message.find("3000"), std::string::npos)  // the figure in force
      << r0.message;
}

TEST(Refusal, WorldSizeMismatchIsImmediate) {
  expect_refused_at_once(3, "connect_timeout_ms=60000", "world size");
}

TEST(Refusal, BadHeartbeatIsImmediate) {
  expect_refused_at_once(2,
                         "connect_timeout_ms=60000,heartbeat_interval_ms="
                         "10000,peer_timeout_ms=5000",
                         "heartbeat");
}

// Rank 0 serves the store; rank 1 (another process) is still busy when
// rank 0 destroys its context. The store waits for rank 1's BYE only up to
// peer_timeout_ms, not timeout_ms (300 s by default).
TEST(Destroy, PromptWhileAPeerIsBusy) {
  const std::string rv =
      "127.0.0.1:" + std::to_string(hb::free_port("127.0.0.1", 0));
  auto options = [&](int rank, hb_context_options *o) {
    *o = HB_CONTEXT_OPTIONS_INIT;
    o->rank = o->local_rank = rank;
    o->world_size = o->local_world_size = 2;
    o->rendezvous = rv.c_str();
    o->options = "peer_timeout_ms=1000,heartbeat_interval_ms=100";
  };
  pid_t child = fork();
  if (child == 0) {  // rank 1: joins, then stays busy for 20 s
    hb_context_options o;
    options(1, &o);
    hb_context *c1 = nullptr;
    if (hb_context_create(&o, &c1) != HB_OK) _exit(1);
    std::this_thread::sleep_for(std::chrono::seconds(20));
    _exit(0);
  }
  ASSERT_GT(child, 0);
  hb_context_options o;
  options(0, &o);
  hb_context *c0 = nullptr;
  hb_status st = hb_context_create(&o, &c0);
  EXPECT_EQ(st, HB_OK) << hb_last_error();
  auto t0 = std::chrono::steady_clock::now();
  hb_context_destroy(c0);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - t0)
                .count();
  EXPECT_LT(ms, 1000 + 1500);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
}

}  // namespace
