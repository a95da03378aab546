// Starts mp_context as N ranks with only HB_RANK / HB_WORLD_SIZE /
// HB_RENDEZVOUS set, the way a scheduler without hbrun would: rank 0 serves
// the rendezvous store itself. Every child is killed if it outlives the
// test's deadline.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "env_guard.h"

namespace {

int free_port() { return hb::free_port("127.0.0.1", 0); }

using Env = std::map<std::string, std::string>;

// Starts one mp_context per entry of envs (in reverse order, start_delay_ms
// apart) and returns their exit statuses (waitpid format), in order.
std::vector<int> run_processes(const std::string &mode,
                               const std::vector<Env> &envs,
                               int start_delay_ms = 0, int deadline_s = 60) {
  size_t n = envs.size();
  std::vector<pid_t> pids(n, -1);
  for (size_t i = n; i-- > 0;) {
    pid_t pid = fork();
    if (pid == 0) {
      hb_test::EnvGuard clean;  // never restored: the child execs
      for (const auto &kv : envs[i])
        setenv(kv.first.c_str(), kv.second.c_str(), 1);
      execl(HB_MP_CONTEXT_BIN, HB_MP_CONTEXT_BIN, mode.c_str(),
            (char *)nullptr);
      _exit(127);
    }
    pids[i] = pid;
    if (start_delay_ms)
      std::this_thread::sleep_for(std::chrono::milliseconds(start_delay_ms));
  }
  std::vector<int> status(n, -1);
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  size_t left = n;
  while (left > 0) {
    for (size_t i = 0; i < n; ++i) {
      int st = 0;
      if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        status[i] = st;
        pids[i] = -1;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << mode << ": processes still running after " << deadline_s
                    << " s; killing them";
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      for (size_t i = 0; i < n; ++i)
        if (pids[i] > 0) waitpid(pids[i], &status[i], 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

// N ranks with the launcher's variables on a free loopback port.
std::vector<int> run(const std::string &mode, int world, Env extra = {},
                     int start_delay_ms = 0) {
  int port = free_port();
  EXPECT_NE(port, 0);
  std::vector<Env> envs;
  for (int r = 0; r < world; ++r) {
    Env e = extra;
    e["HB_RANK"] = std::to_string(r);
    e["HB_WORLD_SIZE"] = std::to_string(world);
    e["HB_RENDEZVOUS"] = "127.0.0.1:" + std::to_string(port);
    envs.push_back(e);
  }
  return run_processes(mode, envs, start_delay_ms);
}

bool exited_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

void expect_all_ok(const std::vector<int> &status, const std::string &what) {
  for (size_t r = 0; r < status.size(); ++r)
    EXPECT_TRUE(exited_ok(status[r]))
        << what << ": rank " << r << " status " << status[r];
}

TEST(MpContext, FormsAndRunsBarriers) {
  for (int world : {2, 3, 4})
    expect_all_ok(run("basic", world), "basic world " + std::to_string(world));
}

TEST(MpContext, LateJoinersAreFine) {
  // Rank 0 (the server) starts last.
  expect_all_ok(run("basic", 3, {}, 300), "late joiners");
}

TEST(MpContext, KilledRankIsReportedToTheOthers) {
  for (int world : {2, 3}) {
    std::vector<int> st = run("kill", world);
    for (int r = 0; r < world - 1; ++r)
      EXPECT_TRUE(exited_ok(st[r])) << "world " << world << " rank " << r;
    EXPECT_TRUE(WIFSIGNALED(st[world - 1]) &&
                WTERMSIG(st[world - 1]) == SIGKILL);
  }
}

TEST(MpContext, KilledServerIsReportedToTheOthers) {
  std::vector<int> st = run("kill0", 3);
  EXPECT_TRUE(WIFSIGNALED(st[0]) && WTERMSIG(st[0]) == SIGKILL);
  EXPECT_TRUE(exited_ok(st[1]));
  EXPECT_TRUE(exited_ok(st[2]));
}

TEST(MpContext, BarrierTimeoutNamesTheLateRankAndIsNotFatal) {
  expect_all_ok(run("late", 3), "late");
}

TEST(MpContext, TokenMismatchIsRefused) {
  expect_all_ok(run("token", 3, {{"HB_RENDEZVOUS_TOKEN", "right"}}), "token");
}

TEST(MpContext, AbortReachesEveryRank) {
  expect_all_ok(run("abort", 3), "abort");
}

TEST(MpContext, RankZeroWaitsForGoodbyes) {
  expect_all_ok(run("bye", 3), "bye");
}

// TF_CONFIG only: the chief (rank 0) serves the store at its own address;
// a ps task in the same cluster stays out of the world.
TEST(MpContext, TfConfigCluster) {
  int port = free_port();
  ASSERT_NE(port, 0);
  auto addr = [&](int i) { return "127.0.0.1:" + std::to_string(port + i); };
  // Only the chief's port is listened on; the others just have to differ.
  std::string cluster = "{\"chief\":[\"" + addr(0) + "\"],\"worker\":[\"" +
                        addr(1) + "\",\"" + addr(2) + "\"],\"ps\":[\"" +
                        addr(3) + "\"]}";
  auto tf_config = [&](const char *type, int index) {
    return "{\"cluster\":" + cluster + ",\"task\":{\"type\":\"" + type +
           "\",\"index\":" + std::to_string(index) + "}}";
  };
  std::vector<Env> envs = {
      {{"TF_CONFIG", tf_config("chief", 0)}, {"HB_TEST_RANK", "0"}},
      {{"TF_CONFIG", tf_config("worker", 0)}, {"HB_TEST_RANK", "1"}},
      {{"TF_CONFIG", tf_config("worker", 1)}, {"HB_TEST_RANK", "2"}},
      {{"TF_CONFIG", tf_config("ps", 0)}, {"HB_TEST_RANK", "-1"}},
  };
  for (Env &e : envs) e["HB_TEST_WORLD"] = "3";
  expect_all_ok(run_processes("tf", envs), "tf");
}

// Other launchers, with their variables set by hand as they would set them
// (mpirun itself: mpirun_test.sh): one world, every rank where it should be.
Env launcher_env(const std::string &launcher, int rank, int world, int port) {
  std::string r = std::to_string(rank), w = std::to_string(world);
  std::string local = std::to_string(rank % 2);
  std::string local_size = std::to_string(std::min(2, world - rank / 2 * 2));
  Env e = {
      {"HB_TEST_RANK", r}, {"HB_TEST_WORLD", w}, {"HB_TEST_LOCAL_RANK", local}};
  std::string rv = "127.0.0.1:" + std::to_string(port);
  if (launcher == "torchrun") {
    e.insert({{"RANK", r},
              {"WORLD_SIZE", w},
              {"LOCAL_RANK", local},
              {"LOCAL_WORLD_SIZE", local_size},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(port - 1)}});
  } else if (launcher == "openmpi") {
    e.insert({{"OMPI_COMM_WORLD_RANK", r},
              {"OMPI_COMM_WORLD_SIZE", w},
              {"OMPI_COMM_WORLD_LOCAL_RANK", local},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", local_size},
              {"HB_RENDEZVOUS", rv}});
  } else if (launcher == "slurm") {
    e.insert({{"SLURM_PROCID", r},
              {"SLURM_NTASKS", w},
              {"SLURM_LOCALID", local},
              {"SLURM_NODEID", std::to_string(rank / 2)},
              {"SLURM_STEP_TASKS_PER_NODE",
               world % 2 ? "2(x" + std::to_string(world / 2) + "),1"
                         : "2(x" + std::to_string(world / 2) + ")"},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(port - 1)}});
  } else {
    e.insert({{"PMI_RANK", r},
              {"PMI_SIZE", w},
              {"MPI_LOCALRANKID", local},
              {"MPI_LOCALNRANKS", local_size},
              {"HB_RENDEZVOUS", rv}});
  }
  return e;
}

TEST(MpContext, OtherLaunchersFormOneWorld) {
  for (const char *launcher : {"torchrun", "openmpi", "slurm", "pmi"}) {
    int port = free_port();
    ASSERT_GT(port, 1);
    std::vector<Env> envs;
    for (int r = 0; r < 3; ++r)
      envs.push_back(launcher_env(launcher, r, 3, port));
    expect_all_ok(run_processes("launched", envs), launcher);
  }
}

}  // namespace
