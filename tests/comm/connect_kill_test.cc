// Kill during the first collective, many times: the victim (the last rank)
// SIGKILLs itself 0-6 ms into its first allreduce, which is when the Gloo
// full mesh connects. Survivors must fail with HB_ERR_PEER_FAILED within the
// liveness bound and exit 0; none may hang (they are killed after 20 s and
// the trial fails). timeout_ms is 60 s, so waiting for it is a failure too.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"

namespace {

struct Trial {
  std::vector<int> status;
  bool hung = false;
};

Trial run_trial(int world, long kill_after_us) {
  const std::string rv = "127.0.0.1:" + std::to_string(hb_test_free_port());
  std::vector<pid_t> pid(world);
  for (int r = 0; r < world; ++r) {
    pid[r] = fork();
    if (pid[r] == 0) {
      setenv("HB_RANK", std::to_string(r).c_str(), 1);
      setenv("HB_WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("HB_RENDEZVOUS", rv.c_str(), 1);
      setenv("HB_TIMEOUT_MS", "60000", 1);
      setenv("HB_KILL_AFTER_US", std::to_string(kill_after_us).c_str(), 1);
      unsetenv("HB_RENDEZVOUS_SERVED");
      unsetenv("TF_CONFIG");
      execl(HB_MP_CONNECT_KILL_BIN, HB_MP_CONNECT_KILL_BIN, (char *)nullptr);
      _exit(127);
    }
  }
  Trial t;
  t.status.assign(world, -1);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int left = world; left > 0;) {
    for (int r = 0; r < world; ++r) {
      int s = 0;
      if (t.status[r] == -1 && waitpid(pid[r], &s, WNOHANG) == pid[r]) {
        t.status[r] = s;
        --left;
      }
    }
    if (left && std::chrono::steady_clock::now() > deadline) {
      t.hung = true;
      for (int r = 0; r < world; ++r)
        if (t.status[r] == -1) kill(pid[r], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return t;
}

TEST(ConnectKill, ThirtyTrialsNoHang) {
  std::mt19937 rng(12);
  int hangs = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const int world = 3 + trial % 2;
    const long after_us = std::uniform_int_distribution<long>(0, 6000)(rng);
    Trial t = run_trial(world, after_us);
    hangs += t.hung;
    const int victim = world - 1;
    EXPECT_TRUE(WIFSIGNALED(t.status[victim]) &&
                WTERMSIG(t.status[victim]) == SIGKILL)
        << "trial " << trial << ": victim status " << t.status[victim];
    for (int r = 0; r < victim; ++r)
      EXPECT_TRUE(WIFEXITED(t.status[r]) && WEXITSTATUS(t.status[r]) == 0)
          << "trial " << trial << " (world " << world << ", kill after "
          << after_us << " us): rank " << r << " status " << t.status[r]
          << (t.hung ? " (hung)" : "") << " (see its stderr)";
  }
  EXPECT_EQ(hangs, 0);
}

}  // namespace
