// The kill test: mp_collectives ranks started as separate processes (rank 0
// serves the rendezvous); the last one SIGKILLs itself during a long
// allreduce / alltoallv, and every other rank must return
// HB_ERR_PEER_FAILED within the liveness bound and exit cleanly.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "shm_segments.h"

namespace {

using hb::test::hb_segments;

int unused_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// waitpid statuses of `world` ranks of `mp_collectives kill <what>`; any
// rank still alive after 60 s is SIGKILLed (and reported as such).
std::vector<int> run_ranks(int world, const std::string &what,
                           const std::string &transport) {
  const std::string rv = "127.0.0.1:" + std::to_string(unused_port());
  std::vector<pid_t> pid(world);
  for (int r = 0; r < world; ++r) {
    pid[r] = fork();
    if (pid[r] == 0) {
      setenv("HB_RANK", std::to_string(r).c_str(), 1);
      setenv("HB_WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("HB_RENDEZVOUS", rv.c_str(), 1);
      unsetenv("HB_RENDEZVOUS_SERVED");
      unsetenv("TF_CONFIG");
      setenv("HB_CPU_TRANSPORT", transport.c_str(), 1);
      execl(HB_MP_COLLECTIVES_BIN, HB_MP_COLLECTIVES_BIN, "kill", what.c_str(),
            (char *)nullptr);
      _exit(127);
    }
  }
  std::vector<int> status(world, -1);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int left = world; left > 0;) {
    for (int r = 0; r < world; ++r) {
      int s = 0;
      if (status[r] == -1 && waitpid(pid[r], &s, WNOHANG) == pid[r]) {
        status[r] = s;
        --left;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < world; ++r)
        if (status[r] == -1) kill(pid[r], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

// hb's shared-memory segments present now (other programs' are not ours).
void expect_survivors_clean(int world, const std::string &what,
                            const std::string &transport = "tcp") {
  const int segments = hb_segments();
  auto st = run_ranks(world, what, transport);
  // Segments are unlinked once every rank attached: a SIGKILL leaves none.
  EXPECT_EQ(hb_segments(), segments) << "segments left in /dev/shm";
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
TEST(CommKill, AlltoallvThreeRanksShm) {
  for (int i = 0; i < repeats(); ++i)
    expect_survivors_clean(3, "alltoallv", "shm");
}

}  // namespace
