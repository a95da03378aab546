// The kill test: mp_collectives ranks started as separate processes (rank 0
// serves the rendezvous); the last one SIGKILLs itself during a long
// allreduce / alltoallv, and every other rank must return
// HB_ERR_PEER_FAILED within the liveness bound and exit cleanly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/rank_procs.h"

namespace {

// waitpid statuses of `world` ranks of `mp_collectives kill <what>`; any
// rank still alive after 60 s is SIGKILLed (and reported as such).
std::vector<int> run_ranks(int world, const std::string &what) {
  return run_rank_processes(world, {HB_MP_COLLECTIVES_BIN, "kill", what}, {},
                            60)
      .status;
}

void expect_survivors_clean(int world, const std::string &what) {
  auto st = run_ranks(world, what);
  const int victim = world - 1;
  EXPECT_TRUE(WIFSIGNALED(st[victim]) && WTERMSIG(st[victim]) == SIGKILL)
      << "victim status " << st[victim];
  for (int r = 0; r < victim; ++r)
    EXPECT_TRUE(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0)
        << what << ": rank " << r << " status " << st[r] << " (see its stderr)";
}

TEST(CommKill, AllreduceFourRanks) { expect_survivors_clean(4, "allreduce"); }
TEST(CommKill, AlltoallvThreeRanks) { expect_survivors_clean(3, "alltoallv"); }

}  // namespace
