// "Last call, then destroy at once" under load (issue 30, item 2): runs
// jobs of mp_last_call (each rank a process, rank 0 serving the
// rendezvous), `jobs` at once, `runs` per case, for every case of
//   world x transport x op
// and counts the jobs in which some rank's last call failed. Exit 0 only
// when none failed (and none hung). CI runs a small count per case
// (tests/comm/CMakeLists.txt); the full campaign by hand:
//   last_call_stress <mp_last_call> --runs 200 --jobs 4
// Options: --runs N (per case), --jobs J (at once), --worlds 2,3,4,
// --transports tcp,shm, --ops allreduce_small,allreduce_1m,alltoallv,
// coll_update,table_create, --staged-bytes B (HB_CPU_STAGED_BYTES).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/rank_procs.h"

namespace {

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Case {
  int world;
  std::string transport, op;
};

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: last_call_stress <mp_last_call> [--runs N] [--jobs J] "
                 "[--worlds 2,3,4] [--transports tcp,shm] [--ops ...] "
                 "[--staged-bytes B]\n");
    return 2;
  }
  const std::string bin = argv[1];
  int runs = 20, jobs = 4;
  std::string worlds = "2,3,4", transports = "tcp,shm",
              ops =
                  "allreduce_small,allreduce_1m,alltoallv,coll_update,"
                  "table_create",
              staged;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--runs")
      runs = std::atoi(v.c_str());
    else if (k == "--jobs")
      jobs = std::atoi(v.c_str());
    else if (k == "--worlds")
      worlds = v;
    else if (k == "--transports")
      transports = v;
    else if (k == "--ops")
      ops = v;
    else if (k == "--staged-bytes")
      staged = v;
    else {
      std::fprintf(stderr, "last_call_stress: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  char tmpl[] = "/tmp/hb_last_call_XXXXXX";
  const char *dir = mkdtemp(tmpl);
  if (!dir) {
    std::perror("mkdtemp");
    return 2;
  }
  std::vector<Case> cases;
  for (const std::string &w : split(worlds))
    for (const std::string &t : split(transports))
      for (const std::string &o : split(ops))
        cases.push_back({std::atoi(w.c_str()), t, o});
  int total_failed = 0, total_restarts = 0;
  uint64_t job_serial = 0;
  // One thread: the ranks are forked from it (see start_rank_processes).
  struct Job {
    std::vector<pid_t> pid;
    std::vector<int> status;
    std::string prefix;
    std::chrono::steady_clock::time_point deadline;
    bool hung = false;
    std::string why;  // what the ranks of a hung job had printed
  };
  for (const Case &c : cases) {
    std::vector<std::pair<std::string, std::string>> env = {
        {"HB_CPU_TRANSPORT", c.transport},
        {"HB_TIMEOUT_MS", "20000"},
        {"HB_CONNECT_TIMEOUT_MS", "10000"}};
    if (!staged.empty()) env.push_back({"HB_CPU_STAGED_BYTES", staged});
    int started = 0, last_call = 0, other = 0, hung = 0, restarts = 0;
    std::string first_error, first_restart;
    std::vector<Job> active(static_cast<size_t>(jobs));
    std::vector<bool> busy(static_cast<size_t>(jobs), false);
    for (int running = 0; started < runs || running > 0;) {
      for (int j = 0; j < jobs && started < runs; ++j) {
        if (busy[size_t(j)]) continue;
        Job &job = active[size_t(j)];
        job.prefix = std::string(dir) + "/s" + std::to_string(j) + "_r";
        // A token per job: a rank never joins another job's rendezvous
        // when two jobs drew the same free port (that job fails to start).
        std::vector<std::pair<std::string, std::string>> job_env = env;
        job_env.push_back(
            {"HB_RENDEZVOUS_TOKEN", "lc-" + std::to_string(getpid()) + "-" +
                                        std::to_string(++job_serial)});
        job.pid =
            start_rank_processes(c.world, {bin, c.op}, job_env, job.prefix);
        job.status.assign(size_t(c.world), -1);
        job.deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(60);
        job.hung = false;
        job.why.clear();
        busy[size_t(j)] = true;
        ++started;
        ++running;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (int j = 0; j < jobs; ++j) {
        if (!busy[size_t(j)]) continue;
        Job &job = active[size_t(j)];
        int left = 0;
        for (int r = 0; r < c.world; ++r) {
          int st = 0;
          if (job.status[size_t(r)] == -1 &&
              waitpid(job.pid[size_t(r)], &st, WNOHANG) == job.pid[size_t(r)])
            job.status[size_t(r)] = st;
          left += job.status[size_t(r)] == -1;
        }
        if (left && !job.hung &&
            std::chrono::steady_clock::now() > job.deadline) {
          job.hung = true;  // reaped as killed on the next pass
          for (int r = 0; r < c.world; ++r)
            if (job.status[size_t(r)] == -1) {
              job.why += " [rank " + std::to_string(r) + " still running: " +
                         slurp(job.prefix + std::to_string(r)) + "]";
              kill(job.pid[size_t(r)], SIGKILL);
            }
        }
        if (left) continue;
        busy[size_t(j)] = false;
        --running;
        // A job that did not reach its last call on every rank (a rank
        // without a context, or whose warm-up failed: exit 4 or 5; the
        // others then fail or wait, rightly: that rank is gone) is run
        // again, at most `runs` times per case; how many and the first
        // reason are printed. Not what this checks, and other jobs at once
        // can take a job's rendezvous port.
        bool setup = false;
        for (int r = 0; r < c.world; ++r) {
          const int st = job.status[size_t(r)];
          const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
          setup |= code == 4 || code == 5;
        }
        if (setup && restarts < runs) {
          ++restarts;
          --started;
          for (int r = 0; r < c.world && first_restart.empty(); ++r) {
            const std::string e = slurp(job.prefix + std::to_string(r));
            if (e.find("no context") != std::string::npos ||
                e.find("warm-up failed") != std::string::npos)
              first_restart = e;
          }
          continue;
        }
        // Exit 3: a rank's last call failed; anything else: the job did not
        // get that far (or crashed): counted apart.
        std::string why =
            job.hung ? "a rank hung (SIGKILLed after 60 s)" + job.why : "";
        bool lc = false, bad = job.hung;
        for (int r = 0; r < c.world; ++r) {
          const int st = job.status[size_t(r)];
          if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
          const bool is_lc = WIFEXITED(st) && WEXITSTATUS(st) == 3;
          lc |= is_lc;
          bad |= !is_lc;
          // Every failed rank: the first one may only report the other.
          why += "[rank " + std::to_string(r) + " status " +
                 std::to_string(st) + ": " +
                 slurp(job.prefix + std::to_string(r)) + "] ";
        }
        last_call += lc;
        other += bad && !lc;
        hung += job.hung;
        if ((lc || bad) && first_error.empty()) first_error = why;
      }
    }
    std::printf(
        "world %d %-3s %-16s %d/%d runs: last call failed %d, other failures "
        "%d (%d hung); %d jobs that did not reach the last call run "
        "again%s%s%s%s\n",
        c.world, c.transport.c_str(), c.op.c_str(), last_call + other, runs,
        last_call, other, hung, restarts,
        first_restart.empty() ? "" : " (first: ", first_restart.c_str(),
        first_restart.empty() ? "" : ")",
        first_error.empty() ? "" : "; first: ", first_error.c_str());
    std::fflush(stdout);
    total_failed += last_call + other;
    total_restarts += restarts;
  }
  std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0)
    std::fprintf(stderr, "could not remove %s\n", dir);
  std::printf(
      "%d failed runs in all (%d jobs that did not reach the last "
      "call run again)\n",
      total_failed, total_restarts);
  return total_failed ? 1 : 0;
}
