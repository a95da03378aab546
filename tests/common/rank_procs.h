// Starts `world` ranks of a test program as separate processes (rank 0
// serves the rendezvous on a free loopback port, as under a plain
// scheduler) and reaps them; used by the kill tests, where hbrun would stop
// the survivors itself.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/free_port.h"

struct RankRun {
  std::vector<int> status;  // waitpid statuses by rank
  std::vector<pid_t> pid;   // the ranks' process ids
  bool hung = false;        // some rank outlived the deadline (SIGKILLed)
};

// Forks and execs `world` ranks of argv (rank 0 serves the rendezvous on
// a free loopback port); env: extra NAME=value pairs; stderr_prefix: if not
// empty, rank r's stderr goes to <prefix><r>. Call it from a single-threaded
// process: the children set variables (malloc) between fork and exec.
inline std::vector<pid_t> start_rank_processes(
    int world, const std::vector<std::string> &argv,
    const std::vector<std::pair<std::string, std::string>> &env,
    const std::string &stderr_prefix = "") {
  const std::string rv =
      "127.0.0.1:" + std::to_string(hb::free_port("127.0.0.1", 0));
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  std::vector<pid_t> pid(world);
  for (int r = 0; r < world; ++r) {
    pid[r] = fork();
    if (pid[r] == 0) {
      setenv("HB_RANK", std::to_string(r).c_str(), 1);
      setenv("HB_WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("HB_RENDEZVOUS", rv.c_str(), 1);
      unsetenv("HB_RENDEZVOUS_SERVED");
      unsetenv("TF_CONFIG");
      for (const auto &kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
      if (!stderr_prefix.empty()) {
        std::string path = stderr_prefix + std::to_string(r);
        int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
      }
      execv(args[0], args.data());
      _exit(127);
    }
  }
  return pid;
}

// Starts the ranks (start_rank_processes) and reaps them; stopped_rank: a
// rank expected to stop itself (SIGSTOP), SIGKILLed once every other rank
// has exited.
inline RankRun run_rank_processes(
    int world, const std::vector<std::string> &argv,
    const std::vector<std::pair<std::string, std::string>> &env, int deadline_s,
    const std::string &stderr_prefix = "", int stopped_rank = -1) {
  const std::vector<pid_t> pid =
      start_rank_processes(world, argv, env, stderr_prefix);
  RankRun run;
  run.status.assign(world, -1);
  run.pid = pid;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  for (int left = world; left > 0;) {
    for (int r = 0; r < world; ++r) {
      int s = 0;
      if (run.status[r] == -1 && waitpid(pid[r], &s, WNOHANG) == pid[r]) {
        run.status[r] = s;
        --left;
      }
    }
    if (left == 1 && stopped_rank >= 0 && run.status[stopped_rank] == -1)
      kill(pid[stopped_rank], SIGKILL);
    if (left && std::chrono::steady_clock::now() > deadline) {
      run.hung = true;
      for (int r = 0; r < world; ++r)
        if (run.status[r] == -1) kill(pid[r], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return run;
}
