// Starts mp_context as N ranks with only HB_RANK / HB_WORLD_SIZE /
// HB_RENDEZVOUS set, the way a scheduler without hbrun would: rank 0 serves
// the rendezvous store itself. Every child is killed if it outlives the
// test's deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

struct Spawn {
  std::string mode;
  int world = 2;
  std::map<std::string, std::string> env;
  int start_delay_ms = 0;  // between ranks, highest rank first
  int deadline_s = 60;
};

// Exit statuses (waitpid format) of every rank, indexed by rank.
std::vector<int> run(const Spawn &s) {
  int port = free_port();
  EXPECT_NE(port, 0);
  std::vector<pid_t> pids(s.world, -1);
  for (int r = s.world - 1; r >= 0; --r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("HB_RANK", std::to_string(r).c_str(), 1);
      setenv("HB_WORLD_SIZE", std::to_string(s.world).c_str(), 1);
      setenv("HB_RENDEZVOUS", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
      for (const char *v :
           {"HB_LOCAL_RANK", "HB_LOCAL_WORLD_SIZE", "HB_RENDEZVOUS_SERVED",
            "HB_RENDEZVOUS_TOKEN", "TF_CONFIG"})
        unsetenv(v);
      for (const auto &kv : s.env)
        setenv(kv.first.c_str(), kv.second.c_str(), 1);
      execl(HB_MP_CONTEXT_BIN, HB_MP_CONTEXT_BIN, s.mode.c_str(),
            (char *)nullptr);
      _exit(127);
    }
    pids[r] = pid;
    if (s.start_delay_ms)
      std::this_thread::sleep_for(std::chrono::milliseconds(s.start_delay_ms));
  }
  std::vector<int> status(s.world, -1);
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(s.deadline_s);
  int left = s.world;
  while (left > 0) {
    for (int r = 0; r < s.world; ++r) {
      if (pids[r] < 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        pids[r] = -1;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << s.mode << ": ranks still running after " << s.deadline_s
                    << " s; killing them";
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      for (int r = 0; r < s.world; ++r)
        if (pids[r] > 0) waitpid(pids[r], &status[r], 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

bool exited_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

void expect_all_ok(const std::vector<int> &status, const std::string &what) {
  for (size_t r = 0; r < status.size(); ++r)
    EXPECT_TRUE(exited_ok(status[r]))
        << what << ": rank " << r << " status " << status[r];
}

TEST(MpContext, FormsAndRunsBarriers) {
  for (int world : {2, 3, 4})
    expect_all_ok(run({"basic", world}),
                  "basic world " + std::to_string(world));
}

TEST(MpContext, LateJoinersAreFine) {
  Spawn s{"basic", 3};
  s.start_delay_ms = 300;  // rank 0 (the server) starts last
  expect_all_ok(run(s), "late joiners");
}

TEST(MpContext, KilledRankIsReportedToTheOthers) {
  for (int world : {2, 3}) {
    std::vector<int> st = run({"kill", world});
    for (int r = 0; r < world - 1; ++r)
      EXPECT_TRUE(exited_ok(st[r])) << "world " << world << " rank " << r;
    EXPECT_TRUE(WIFSIGNALED(st[world - 1]) &&
                WTERMSIG(st[world - 1]) == SIGKILL);
  }
}

TEST(MpContext, TokenMismatchIsRefused) {
  Spawn s{"token", 3};
  s.env["HB_RENDEZVOUS_TOKEN"] = "right";
  expect_all_ok(run(s), "token");
}

TEST(MpContext, AbortReachesEveryRank) {
  expect_all_ok(run({"abort", 3}), "abort");
}

TEST(MpContext, RankZeroWaitsForGoodbyes) {
  expect_all_ok(run({"bye", 3}), "bye");
}

}  // namespace
