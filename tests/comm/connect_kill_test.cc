// Kill during the first collective, many times: the victim (the last rank)
// SIGKILLs itself 0-6 ms into its first allreduce, which is when the Gloo
// full mesh connects. Survivors must fail with HB_ERR_PEER_FAILED within the
// liveness bound and exit 0; none may hang (they are killed after 20 s and
// the trial fails). timeout_ms is 60 s, so waiting for it is a failure too.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "common/rank_procs.h"

namespace {

// Gloo's own event-loop thread may throw when a peer resets its connection
// between Gloo's accept and its getpeername (gloo::EnforceNotMet in
// tcp/address.cc, outside any hb call, so std::terminate): a known Gloo
// limitation hb cannot catch (see docs/guide.md). Such an abort is counted
// and shown, not a failure; any other abnormal exit is.
bool gloo_loop_thread_abort(int status, const std::string &stderr_file) {
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) return false;
  std::ifstream in(stderr_file);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  return text.find("gloo/transport/tcp/address.cc") != std::string::npos;
}

TEST(ConnectKill, ThirtyTrialsNoHang) {
  std::mt19937 rng(12);
  int hangs = 0, gloo_aborts = 0;
  char dir[] = "/tmp/hb_connect_kill_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string prefix = std::string(dir) + "/stderr.";
  for (int trial = 0; trial < 30; ++trial) {
    const int world = 3 + trial % 2;
    const long after_us = std::uniform_int_distribution<long>(0, 6000)(rng);
    RankRun t =
        run_rank_processes(world, {HB_MP_CONNECT_KILL_BIN},
                           {{"HB_TIMEOUT_MS", "60000"},
                            {"HB_KILL_AFTER_US", std::to_string(after_us)}},
                           20, prefix);
    hangs += t.hung;
    const int victim = world - 1;
    EXPECT_TRUE(WIFSIGNALED(t.status[victim]) &&
                WTERMSIG(t.status[victim]) == SIGKILL)
        << "trial " << trial << ": victim status " << t.status[victim];
    for (int r = 0; r < victim; ++r) {
      if (gloo_loop_thread_abort(t.status[r], prefix + std::to_string(r))) {
        ++gloo_aborts;
        continue;
      }
      EXPECT_TRUE(WIFEXITED(t.status[r]) && WEXITSTATUS(t.status[r]) == 0)
          << "trial " << trial << " (world " << world << ", kill after "
          << after_us << " us): rank " << r << " status " << t.status[r]
          << (t.hung ? " (hung)" : "") << " (stderr in " << prefix << r << ")";
    }
  }
  EXPECT_EQ(hangs, 0);
  EXPECT_LE(gloo_aborts, 3);
  if (gloo_aborts)
    std::printf("[ note ] %d survivor(s) aborted in Gloo's event-loop thread\n",
                gloo_aborts);
}

// The victim stops (SIGSTOP) 0-6 ms into its first allreduce: alive but
// silent, it never connects. The others must fail within peer_timeout_ms
// (1 s here) plus the detection bound, not wait in Gloo's connect for five
// times timeout_ms.
TEST(ConnectKill, StoppedDuringConnectIsSeenWithinPeerTimeout) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    const int world = 3;
    const long after_us = std::uniform_int_distribution<long>(0, 6000)(rng);
    RankRun t =
        run_rank_processes(world, {HB_MP_CONNECT_KILL_BIN},
                           {{"HB_TIMEOUT_MS", "60000"},
                            {"HB_PEER_TIMEOUT_MS", "1000"},
                            {"HB_HEARTBEAT_INTERVAL_MS", "100"},
                            {"HB_STOP", "1"},
                            {"HB_KILL_AFTER_US", std::to_string(after_us)}},
                           20, "", world - 1);
    EXPECT_FALSE(t.hung) << "trial " << trial;
    for (int r = 0; r < world - 1; ++r)
      EXPECT_TRUE(WIFEXITED(t.status[r]) && WEXITSTATUS(t.status[r]) == 0)
          << "trial " << trial << " (stop after " << after_us << " us): rank "
          << r << " status " << t.status[r];
  }
}

// A rank that leaves cleanly (hb_context_destroy, exit 0) while the others
// go on calling allreduce: they fail at once, told that it left (before,
// they waited 10 s for the rendezvous to name a failure that never came).
TEST(ConnectKill, CleanLeaveIsReportedAtOnce) {
  for (int trial = 0; trial < 5; ++trial) {
    RankRun t = run_rank_processes(
        3, {HB_MP_CONNECT_KILL_BIN},
        {{"HB_LEAVE_AFTER", std::to_string(5 + 7 * trial)},
         {"HB_PEER_TIMEOUT_MS", "2000"}},  // bound: 5 s, below the old 10 s
        20);
    EXPECT_FALSE(t.hung) << "trial " << trial;
    for (int r = 0; r < 3; ++r)
      EXPECT_TRUE(WIFEXITED(t.status[r]) && WEXITSTATUS(t.status[r]) == 0)
          << "trial " << trial << ": rank " << r << " status " << t.status[r]
          << " (see its stderr)";
  }
}

}  // namespace
