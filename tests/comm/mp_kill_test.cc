// The kill test: mp_collectives ranks started as separate processes (rank 0
// serves the rendezvous); the last one SIGKILLs itself during a long
// allreduce / alltoallv, and every other rank must return
// HB_ERR_PEER_FAILED within the liveness bound and exit cleanly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "common/rank_procs.h"
#include "shm_segments.h"

namespace {

using hb::test::hb_segment_names;

// `world` ranks of `mp_collectives kill <what>` over the given CPU
// transport; any rank still alive after 60 s is SIGKILLed (and reported as
// such).
RankRun run_ranks(int world, const std::string &what,
                  const std::string &transport) {
  return run_rank_processes(world, {HB_MP_COLLECTIVES_BIN, "kill", what},
                            {{"HB_CPU_TRANSPORT", transport}}, 60);
}

void expect_survivors_clean(int world, const std::string &what,
                            const std::string &transport = "tcp") {
  const time_t start = time(nullptr);
  const RankRun run = run_ranks(world, what, transport);
  const std::vector<int> &st = run.status;
  // Segments are unlinked once every rank attached: a SIGKILL leaves none
  // of the ranks' names behind. Only names made since the start (a second
  // of slack: timestamps are coarse) are these ranks' (shm_segments.h).
  std::string left;
  for (const std::string &name : hb_segment_names(run.pid, start - 1))
    left += " " + name;
  EXPECT_EQ(left, "") << "segments left in /dev/shm";
  const int victim = world - 1;
  EXPECT_TRUE(WIFSIGNALED(st[victim]) && WTERMSIG(st[victim]) == SIGKILL)
      << "victim status " << st[victim];
  for (int r = 0; r < victim; ++r)
    EXPECT_TRUE(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0)
        << what << ": rank " << r << " status " << st[r] << " (see its stderr)";
}

TEST(CommKill, AllreduceFourRanks) { expect_survivors_clean(4, "allreduce"); }
TEST(CommKill, AlltoallvThreeRanks) { expect_survivors_clean(3, "alltoallv"); }

// Over shared memory the victim dies holding half-written rings; the
// rendezvous liveness breaks the survivors' futex waits. HB_KILL_REPEAT
// runs each more times (the check: 20, 0 hangs).
int repeats() {
  const char *r = std::getenv("HB_KILL_REPEAT");
  return r ? std::max(1, std::atoi(r)) : 2;
}
TEST(CommKill, AllreduceFourRanksShm) {
  for (int i = 0; i < repeats(); ++i)
    expect_survivors_clean(4, "allreduce", "shm");
}
// Small calls go over the call board: the victim dies between (or while)
// publishing its slots.
TEST(CommKill, SmallAllreduceThreeRanksShm) {
  for (int i = 0; i < repeats(); ++i)
    expect_survivors_clean(3, "allreduce_small", "shm");
}
TEST(CommKill, AlltoallvThreeRanksShm) {
  for (int i = 0; i < repeats(); ++i)
    expect_survivors_clean(3, "alltoallv", "shm");
}

}  // namespace
