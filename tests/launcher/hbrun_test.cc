// End-to-end tests of the built hbrun on launcher_probe workers.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "launcher/hbrun_runner.h"

using hb_test::count_line;
using hb_test::HbrunProcess;
using hb_test::run_hbrun;
using hb_test::RunResult;
using hb_test::split_lines;

namespace {

const std::string kProbe = PROBE_PATH;

std::string describe(const RunResult &r) {
  return "exit " + std::to_string(r.exit_code) + " after " +
         std::to_string(r.seconds) + " s\n--- stdout\n" + r.out +
         "--- stderr\n" + r.err;
}

// Counts the "ready" lines on stdout (one per started worker).
auto ready_count(int n) {
  return [n](const std::string &out) {
    int k = 0;
    for (const auto &l : split_lines(out))
      k += l.size() > 6 && l.compare(l.size() - 6, 6, " ready") == 0;
    return k >= n;
  };
}

class HbrunWorlds : public ::testing::TestWithParam<int> {};

TEST_P(HbrunWorlds, SetsTheRankVariablesOfEveryWorker) {
  int n = GetParam();
  RunResult r = run_hbrun({"-n", std::to_string(n), "--", kProbe, "env"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::regex re(
      R"(\[(\d+)\] env rank=(\d+) world=(\d+) local_rank=(\d+) local_world=(\d+) )"
      R"(rdv=127\.0\.0\.1:(\d+) served=1 cuda=unset tf=unset)");
  std::set<int> ranks;
  std::set<std::string> ports;
  for (const auto &line : split_lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, re)) << line << "\n" << describe(r);
    int rank = std::stoi(m[1]);
    EXPECT_EQ(m[2], m[1]);  // the prefix is the rank
    EXPECT_EQ(std::stoi(m[3]), n);
    EXPECT_EQ(m[4], m[1]);  // one machine: local rank = rank
    EXPECT_EQ(std::stoi(m[5]), n);
    EXPECT_GT(std::stoi(m[6]), 0);
    ranks.insert(rank);
    ports.insert(m[6]);
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(n)) << describe(r);
  EXPECT_EQ(*ranks.rbegin(), n - 1);
  EXPECT_EQ(ports.size(), 1u) << "every rank must get the same store";
}

INSTANTIATE_TEST_SUITE_P(OneToFour, HbrunWorlds, ::testing::Values(1, 2, 3, 4));

// Workers share the CPUs: hbrun sets OMP_NUM_THREADS (as torchrun does)
// unless the user did, and leaves a single worker alone.
TEST(Hbrun, SplitsTheCpusBetweenWorkersThroughOmpNumThreads) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  int cpus = CPU_COUNT(&set);
  const std::vector<std::string> show = {"/bin/sh", "-c",
                                         "echo omp=${OMP_NUM_THREADS-unset}"};
  auto args = [&](const char *n) {
    std::vector<std::string> a = {"-n", n, "--"};
    a.insert(a.end(), show.begin(), show.end());
    return a;
  };
  hb_test::EnvChanges unset = {{"OMP_NUM_THREADS", std::nullopt}};
  RunResult r = run_hbrun(args("2"), unset);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::string want = "omp=" + std::to_string(std::max(1, cpus / 2));
  EXPECT_EQ(count_line(r.out, "[0] " + want), 1) << describe(r);
  EXPECT_EQ(count_line(r.out, "[1] " + want), 1) << describe(r);
  r = run_hbrun(args("2"), {{"OMP_NUM_THREADS", "7"}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(count_line(r.out, "[0] omp=7"), 1) << describe(r);
  EXPECT_EQ(count_line(r.out, "[1] omp=7"), 1) << describe(r);
  r = run_hbrun(args("1"), unset);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(count_line(r.out, "[0] omp=unset"), 1) << describe(r);
}

// --bind-to auto (the default) gives CPU workers disjoint slices of the
// CPUs hbrun may use when there are enough of them, else worker i CPU i mod
// CPUs; none leaves them alone.
TEST(Hbrun, BindsCpuWorkersToDisjointCpuSlices) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<std::string> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.push_back(std::to_string(c));
  auto join = [&](size_t from, size_t to) {
    std::string s;
    for (size_t i = from; i < to; ++i) s += (s.empty() ? "" : ",") + mine[i];
    return "cpus " + s;
  };
  const std::string all = join(0, mine.size());
  for (int n : {1, 2, 3}) {
    RunResult r = run_hbrun({"-n", std::to_string(n), "--", kProbe, "cpus"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    size_t per = mine.size() / n;
    for (int w = 0; w < n; ++w) {
      const size_t rr = w % mine.size();  // round-robin past the CPUs
      std::string want =
          per >= 1 ? join(w * per, (w + 1) * per) : join(rr, rr + 1);
      EXPECT_EQ(count_line(r.out, "[" + std::to_string(w) + "] " + want), 1)
          << "n=" << n << " worker " << w << "\n"
          << describe(r);
    }
    r = run_hbrun(
        {"-n", std::to_string(n), "--bind-to", "none", "--", kProbe, "cpus"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    for (int w = 0; w < n; ++w)
      EXPECT_EQ(count_line(r.out, "[" + std::to_string(w) + "] " + all), 1)
          << describe(r);
  }
  RunResult r =
      run_hbrun({"-n", "2", "--bind-to", "cores", "--", kProbe, "cpus"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("--bind-to"), std::string::npos) << describe(r);
}

TEST(Hbrun, PrefixesStdoutAndStderrLinesWithTheRank) {
  RunResult r = run_hbrun({"-n", "2", "--", kProbe, "lines", "3"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (int rank = 0; rank < 2; ++rank) {
    std::string p = "[" + std::to_string(rank) + "] ";
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(count_line(r.out, p + "out " + std::to_string(i)), 1)
          << describe(r);
      EXPECT_EQ(count_line(r.err, p + "err " + std::to_string(i)), 1)
          << describe(r);
    }
    // The last line had no newline: flushed at exit, as a line of its own.
    EXPECT_EQ(count_line(r.out, p + "partial"), 1) << describe(r);
  }
  EXPECT_EQ(split_lines(r.out).size(), 8u) << describe(r);
  EXPECT_EQ(r.out.back(), '\n');
}

TEST(Hbrun, NoPrefixPassesOutputThrough) {
  RunResult r = run_hbrun({"--no-prefix", "-n", "2", "--", kProbe, "env"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::vector<std::string> lines = split_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << describe(r);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines[0].compare(0, 17, "env rank=0 world="), 0) << describe(r);
  EXPECT_EQ(lines[1].compare(0, 17, "env rank=1 world="), 0) << describe(r);
  RunResult e =
      run_hbrun({"--no-prefix", "-n", "1", "--", kProbe, "lines", "1"});
  EXPECT_EQ(e.err, "err 0\n") << describe(e);
}

TEST(Hbrun, LongLinesOfManyWorkersNeverInterleave) {
  // 4 workers x 50 lines of 10000 bytes, written in 4 KiB blocks.
  RunResult r = run_hbrun({"-n", "4", "--", kProbe, "wide", "50", "10000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<int> per_rank(4, 0);
  for (const auto &line : split_lines(r.out)) {
    ASSERT_EQ(line.size(), 4u + 10000u) << line.substr(0, 80);
    ASSERT_EQ(line[0], '[');
    int rank = line[1] - '0';
    ASSERT_TRUE(rank >= 0 && rank < 4) << line.substr(0, 80);
    ASSERT_EQ(line.compare(0, 4, "[" + std::to_string(rank) + "] "), 0);
    ASSERT_EQ(line.find_first_not_of(line[1], 4), std::string::npos)
        << "a line mixes bytes of two workers";
    ++per_rank[rank];
  }
  for (int k : per_rank) EXPECT_EQ(k, 50);
}

TEST(Hbrun, FailingWorkerStopsTheOthersAndGivesItsStatus) {
  // Rank 1 exits 3 at once; the others would sleep 30 s.
  RunResult r = run_hbrun({"-n", "3", "--grace-ms", "5000", "--", kProbe,
                           "exit-if-rank", "1", "3", "30"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_LT(r.seconds, 10.0) << "the sleeping workers were not stopped\n"
                             << describe(r);
  EXPECT_NE(r.err.find("rank 1 exited with status 3"), std::string::npos)
      << describe(r);
}

TEST(Hbrun, WorkerKilledBySignalGives128PlusSignal) {
  RunResult r =
      run_hbrun({"-n", "2", "--", kProbe, "raise-if-rank", "0", "9", "30"});
  EXPECT_EQ(r.exit_code, 137) << describe(r);
  EXPECT_LT(r.seconds, 10.0) << describe(r);
  EXPECT_NE(r.err.find("rank 0 was killed by signal 9"), std::string::npos)
      << describe(r);
}

TEST(Hbrun, WorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  HbrunProcess p(
      {"-n", "2", "--grace-ms", "500", "--", kProbe, "ignore-term", "30"});
  ASSERT_TRUE(p.read_until(ready_count(2), 30)) << "workers never started";
  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);
  RunResult r = p.wait(30);
  // SIGTERM was ignored, so the SIGKILL after 0.5 s ended them.
  EXPECT_EQ(r.exit_code, 137) << describe(r);
  EXPECT_LT(r.seconds, 10.0) << describe(r);
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << describe(r);
}

TEST(Hbrun, TimeoutStopsEverythingAndExits124) {
  RunResult r =
      run_hbrun({"-n", "2", "--timeout", "1", "--", kProbe, "sleep", "30"});
  EXPECT_EQ(r.exit_code, 124) << describe(r);
  EXPECT_GE(r.seconds, 0.9) << describe(r);
  EXPECT_LT(r.seconds, 10.0) << describe(r);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << describe(r);
}

TEST(Hbrun, SigtermReachesEveryWorker) {
  HbrunProcess p({"-n", "3", "--", kProbe, "catch-term"});
  ASSERT_TRUE(p.read_until(ready_count(3), 30)) << "workers never started";
  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);
  RunResult r = p.wait(30);
  EXPECT_EQ(r.exit_code, 0)
      << describe(r);  // each worker handled it and exited 0
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_EQ(count_line(r.out, "[" + std::to_string(rank) + "] caught 15"), 1)
        << describe(r);
}

TEST(Hbrun, SigintKillsDefaultWorkersAndGives130) {
  HbrunProcess p({"-n", "2", "--", kProbe, "sleep", "30"});
  ASSERT_TRUE(p.read_until(ready_count(2), 30)) << "workers never started";
  ASSERT_EQ(::kill(p.pid(), SIGINT), 0);
  RunResult r = p.wait(30);
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << describe(r);
  EXPECT_LT(r.seconds, 10.0) << describe(r);
}

// True while pid exists and is not a zombie (a container's init may not
// reap the orphans it inherits).
bool process_alive(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  if (!std::getline(stat, content)) return false;
  size_t paren = content.rfind(')');
  return paren != std::string::npos && paren + 2 < content.size() &&
         content[paren + 2] != 'Z';
}

TEST(Hbrun, WorkersDieWithAKilledHbrun) {
  HbrunProcess p({"-n", "2", "--", kProbe, "sleep", "30"});
  ASSERT_TRUE(p.read_until(ready_count(2), 30)) << "workers never started";
  RunResult r = p.wait(0);  // SIGKILLs hbrun: no chance to stop anyone
  std::vector<long> pids;
  std::regex re(R"(\[\d\] pid (\d+))");
  for (const auto &line : split_lines(r.out)) {
    std::smatch m;
    if (std::regex_match(line, m, re)) pids.push_back(std::stol(m[1]));
  }
  ASSERT_EQ(pids.size(), 2u) << describe(r);
  for (long pid : pids) {
    for (int i = 0; i < 500 && process_alive(pid); ++i) ::usleep(10000);
    EXPECT_FALSE(process_alive(pid)) << "worker " << pid << " outlived hbrun";
  }
}

TEST(Hbrun, ReportsTheRankTheRendezvousLostAndStopsTheJob) {
  // Rank 1 stops itself: only its heartbeats going silent can tell.
  RunResult r = run_hbrun(
      {"-n", "3", "--grace-ms", "1000", "--", CONTEXT_PROBE_PATH, "stop-rank",
       "1"},
      {{"HB_PEER_TIMEOUT_MS", "1000"}, {"HB_HEARTBEAT_INTERVAL_MS", "100"}});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("hbrun: rank 1 lost (rendezvous)"), std::string::npos)
      << describe(r);
  EXPECT_EQ(r.err.find("rendezvous server: rank"), std::string::npos)
      << "the server's own warning should not repeat hbrun's line\n"
      << describe(r);
  // The others saw the loss instead of hanging.
  EXPECT_TRUE(count_line(r.out, "[0] barrier: HB_ERR_PEER_FAILED") +
                  count_line(r.out, "[2] barrier: HB_ERR_PEER_FAILED") >=
              1)
      << describe(r);
  EXPECT_LT(r.seconds, 20.0) << describe(r);
}

// Rank 2 dies (SIGABRT, or exit 3) without leaving the context; the others
// exit 4 the moment they see HB_ERR_PEER_FAILED, often before hbrun reaps
// rank 2. hbrun must report rank 2's own status every time (issue 21.3:
// it gave 4 and named rank 0 in about one run in three).
TEST(Hbrun, ReportsTheRankThatFailedFirstNotTheRanksThatFollowed) {
  const int kRuns = 40;
  int wrong = 0;
  for (int i = 0; i < kRuns; ++i) {
    bool aborts = i % 2 == 0;
    RunResult r = run_hbrun({"-n", "4", "--", CONTEXT_PROBE_PATH, "fail-rank",
                             "2", aborts ? "abort" : "exit"},
                            {{"HB_LOG_LEVEL", "error"}});
    int want = aborts ? 128 + SIGABRT : 3;
    std::string said = aborts ? "rank 2 was killed by signal 6"
                              : "rank 2 exited with status 3";
    bool ok = r.exit_code == want && r.err.find(said) != std::string::npos;
    wrong += !ok;
    EXPECT_TRUE(ok) << "run " << i << ": want exit " << want << " and '" << said
                    << "'\n"
                    << describe(r);
  }
  EXPECT_EQ(wrong, 0) << "of " << kRuns << " runs";
}

// --max-restarts: a failed job starts again, every worker told how often.
TEST(HbrunRestart, StartsTheJobAgainUntilItSucceeds) {
  // Rank 1 fails on the first two starts.
  RunResult r = run_hbrun({"-n", "3", "--max-restarts", "3", "--", kProbe,
                           "exit-before-restart", "2", "1", "3"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (int restart = 0; restart < 3; ++restart)
    for (int rank = 0; rank < 3; ++rank) {
      std::string n = std::to_string(restart);
      EXPECT_EQ(count_line(r.out, "[" + std::to_string(rank) +
                                      "] start rank=" + std::to_string(rank) +
                                      " world=3 restart=" + n +
                                      " torch_restart=" + n),
                1)
          << describe(r);
    }
  EXPECT_NE(r.err.find("restarting the job (restart 2 of 3) after rank 1 "
                       "exited with status 3"),
            std::string::npos)
      << describe(r);
  // Without --max-restarts nothing is started again; the count is 0.
  r = run_hbrun(
      {"-n", "2", "--", kProbe, "exit-before-restart", "2", "1", "3"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_EQ(count_line(r.out,
                       "[0] start rank=0 world=2 restart=0 "
                       "torch_restart=0"),
            1)
      << describe(r);
  EXPECT_EQ(r.out.find("restart=1"), std::string::npos) << describe(r);
}

TEST(HbrunRestart, GivesUpAfterMaxRestartsWithTheRootCausesStatus) {
  RunResult r = run_hbrun({"-n", "2", "--max-restarts", "2", "--", kProbe,
                           "exit-before-restart", "99", "0", "5"});
  EXPECT_EQ(r.exit_code, 5) << describe(r);
  EXPECT_EQ(count_line(r.out,
                       "[0] start rank=0 world=2 restart=2 "
                       "torch_restart=2"),
            1)
      << describe(r);
  EXPECT_EQ(r.out.find("restart=3"), std::string::npos) << describe(r);
}

// Each start gets a store of its own: rank 2 aborts inside the first
// context and the survivors fail; the second start forms a new context and
// passes its barrier (an old store would refuse it: the world was broken).
TEST(HbrunRestart, EveryStartGetsAFreshRendezvousStore) {
  // On a new ephemeral port each start, and on the same port with --port.
  for (bool fixed : {false, true}) {
    std::vector<std::string> args = {"-n", "3", "--max-restarts", "1"};
    if (fixed)
      args.insert(args.end(), {"--port", std::to_string(hb_test::free_port())});
    args.insert(args.end(),
                {"--", CONTEXT_PROBE_PATH, "fail-rank", "2", "abort", "1"});
    RunResult r = run_hbrun(args, {{"HB_LOG_LEVEL", "error"}});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    for (int rank = 0; rank < 3; ++rank)
      EXPECT_EQ(count_line(r.out, "[" + std::to_string(rank) +
                                      "] barrier: HB_OK restart=1"),
                1)
          << describe(r);
    EXPECT_NE(r.err.find("restarting the job (restart 1 of 1) after rank 2 "
                         "was killed by signal 6"),
              std::string::npos)
        << describe(r);
  }
}

// --min-nproc: a worker that cannot be started again is left out and the
// others form a smaller world, ranks 0..n-2.
TEST(HbrunRestart, GoesOnWithFewerWorkersWhenOneCannotStartAgain) {
  RunResult r = run_hbrun({"-n", "4", "--max-restarts", "1", "--min-nproc", "3",
                           "--", kProbe, "exit-before-restart", "1", "3", "9"},
                          {{"HB_TEST_FAIL_START", "3"}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_EQ(count_line(r.out, "[" + std::to_string(rank) +
                                    "] start rank=" + std::to_string(rank) +
                                    " world=3 restart=1 torch_restart=1"),
              1)
        << describe(r);
  EXPECT_NE(r.err.find("HB_TEST_FAIL_START=3"), std::string::npos)
      << describe(r);
  EXPECT_NE(r.err.find("going on with 3 worker(s) (--min-nproc 3)"),
            std::string::npos)
      << describe(r);
  // Not below --min-nproc: the job fails with the start failure.
  r = run_hbrun({"-n", "3", "--max-restarts", "1", "--min-nproc", "3", "--",
                 kProbe, "exit-before-restart", "1", "2", "9"},
                {{"HB_TEST_FAIL_START", "2"}});
  EXPECT_EQ(r.exit_code, 127) << describe(r);
}

// A worker that fails again on a restart before it joins the store (a
// broken device, a crash at start) cannot be started: its slot is dropped.
TEST(HbrunRestart, AWorkerThatDiesBeforeJoiningOnARestartIsLeftOut) {
  RunResult r = run_hbrun({"-n", "3", "--max-restarts", "2", "--min-nproc", "2",
                           "--", kProbe, "exit-before-restart", "2", "2", "9"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // Rank 2 failed twice (first start, restart 1); restart 1 then went on
  // with ranks 0-1 of a world of 2.
  EXPECT_NE(r.err.find("the first start's rank 2 cannot be started again"),
            std::string::npos)
      << describe(r);
  EXPECT_EQ(count_line(r.out,
                       "[1] start rank=1 world=2 restart=1 "
                       "torch_restart=1"),
            1)
      << describe(r);
}

TEST(HbrunRestart, ASignalToHbrunStopsTheJobWithoutRestarting) {
  HbrunProcess p(
      {"-n", "2", "--max-restarts", "5", "--", kProbe, "sleep", "30"});
  ASSERT_TRUE(p.read_until(ready_count(2), 30)) << "workers never started";
  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);
  RunResult r = p.wait(30);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << describe(r);
  EXPECT_EQ(r.err.find("restarting"), std::string::npos) << describe(r);
}

TEST(HbrunRestart, UsageErrors) {
  RunResult r = run_hbrun({"-n", "2", "--min-nproc", "1", "--", kProbe});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("--min-nproc needs --max-restarts"), std::string::npos)
      << describe(r);
  r = run_hbrun(
      {"-n", "2", "--max-restarts", "1", "--min-nproc", "3", "--", kProbe});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  std::string tf =
      R"({"cluster": {"chief": ["127.0.0.1:29871"], "worker": ["h1:1"]},)"
      R"( "task": {"type": "worker", "index": 0}})";
  r = run_hbrun({"-n", "2", "--max-restarts", "1", "--", kProbe, "env"},
                {{"TF_CONFIG", tf}});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("docs/fault-tolerance.md"), std::string::npos)
      << describe(r);
}

// Two "machines" on loopback: the chief's and a worker's hbrun, each with
// two workers, forming one world of four from TF_CONFIG.
TEST(Hbrun, TfConfigChiefAndWorkerTasksFormOneWorld) {
  if (!*CLUSTER_DEMO_PATH)
    GTEST_SKIP() << "built without examples (HB_BUILD_EXAMPLES=OFF)";
  int port = hb_test::free_port();
  auto tf = [port](const char *type) {
    return std::string(R"({"cluster": {"chief": ["127.0.0.1:)") +
           std::to_string(port) +
           R"("], "worker": ["127.0.0.1:1"]}, "task": {"type": ")" + type +
           R"(", "index": 0}})";
  };
  HbrunProcess worker({"-n", "2", "--timeout", "60", "--", CLUSTER_DEMO_PATH},
                      {{"TF_CONFIG", tf("worker")}});
  HbrunProcess chief({"-n", "2", "--timeout", "60", "--", CLUSTER_DEMO_PATH},
                     {{"TF_CONFIG", tf("chief")}});
  RunResult c = chief.wait(90), w = worker.wait(90);
  ASSERT_EQ(c.exit_code, 0) << describe(c) << describe(w);
  ASSERT_EQ(w.exit_code, 0) << describe(c) << describe(w);
  for (int rank = 0; rank < 4; ++rank) {
    const RunResult &r = rank < 2 ? c : w;
    std::string line = "[" + std::to_string(rank) + "] cluster_demo: rank " +
                       std::to_string(rank) + " of 4, local " +
                       std::to_string(rank % 2) + " of 2, device cpu:0";
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n"
                                                   << describe(r);
  }
  EXPECT_NE(c.out.find("[0] cluster_demo: 4 ranks passed 5 barriers"),
            std::string::npos)
      << describe(c);
}

TEST(Hbrun, ServesWithTheRendezvousToken) {
  if (!*CLUSTER_DEMO_PATH)
    GTEST_SKIP() << "built without examples (HB_BUILD_EXAMPLES=OFF)";
  hb_test::EnvChanges token = {{"HB_RENDEZVOUS_TOKEN", "s3cret"}};
  RunResult ok =
      run_hbrun({"-n", "2", "--timeout", "60", "--", CLUSTER_DEMO_PATH}, token);
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
  // Workers without the token are refused by hbrun's store.
  RunResult refused =
      run_hbrun({"-n", "2", "--timeout", "60", "--", "/usr/bin/env", "-u",
                 "HB_RENDEZVOUS_TOKEN", CLUSTER_DEMO_PATH},
                token);
  EXPECT_NE(refused.exit_code, 0) << describe(refused);
  EXPECT_NE(refused.err.find("HB_ERR_PERMISSION"), std::string::npos)
      << describe(refused);
}

TEST(Hbrun, OneWorkerPerGpuInCudaVisibleDevices) {
  RunResult r =
      run_hbrun({"--", kProbe, "env"}, {{"CUDA_VISIBLE_DEVICES", "3, 5"}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(split_lines(r.out).size(), 2u) << describe(r);
  std::regex re0(
      R"(\[0\] env rank=0 world=2 local_rank=0 local_world=2 .* cuda=3 tf=unset)");
  std::regex re1(
      R"(\[1\] env rank=1 world=2 local_rank=1 local_world=2 .* cuda=5 tf=unset)");
  EXPECT_TRUE(std::regex_search(r.out, re0)) << describe(r);
  EXPECT_TRUE(std::regex_search(r.out, re1)) << describe(r);
}

TEST(Hbrun, ContainerGpusAreRenumberedFromZero) {
  RunResult r =
      run_hbrun({"--", kProbe, "env"}, {{"NVIDIA_VISIBLE_DEVICES", "4,6,7"}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(split_lines(r.out).size(), 3u) << describe(r);
  for (int i = 0; i < 3; ++i) {
    std::regex re("\\[" + std::to_string(i) +
                  "\\] env rank=" + std::to_string(i) +
                  " world=3 .* cuda=" + std::to_string(i) + " ");
    EXPECT_TRUE(std::regex_search(r.out, re)) << describe(r);
  }
}

TEST(Hbrun, DashNWinsOverGpusAndLeavesCudaVisibleDevicesAlone) {
  RunResult r = run_hbrun({"-n", "1", "--", kProbe, "env"},
                          {{"CUDA_VISIBLE_DEVICES", "0,1"}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(split_lines(r.out).size(), 1u) << describe(r);
  EXPECT_NE(r.out.find("world=1 "), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("cuda=0,1 "), std::string::npos) << describe(r);
}

TEST(Hbrun, NoWorkersIsAClearError) {
  RunResult r = run_hbrun({"--", kProbe, "env"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("-n N"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("CUDA_VISIBLE_DEVICES"), std::string::npos)
      << describe(r);
  RunResult empty =
      run_hbrun({"--", kProbe, "env"}, {{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(empty.exit_code, 2) << describe(empty);
}

TEST(Hbrun, UsageErrors) {
  RunResult bad = run_hbrun({"-n", "0", "--", kProbe, "env"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("-n"), std::string::npos) << describe(bad);
  RunResult unknown = run_hbrun({"--frobnicate", "--", kProbe});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--frobnicate"), std::string::npos)
      << describe(unknown);
  RunResult none = run_hbrun({"-n", "2"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no program"), std::string::npos) << describe(none);
  RunResult missing = run_hbrun({"-n", "2", "--", "/nonexistent/hb-program"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("/nonexistent/hb-program"), std::string::npos)
      << describe(missing);
  RunResult help = run_hbrun({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("TF_CONFIG"), std::string::npos);
}

// TF_CONFIG mode without a second machine: the worker task's hbrun serves
// nothing and derives its ranks from its position.
TEST(Hbrun, TfConfigWorkerTaskGetsRanksAfterTheChief) {
  std::string tf =
      R"({"cluster": {"chief": ["127.0.0.1:29871"], "worker": ["h1:1", "h2:2"],)"
      R"( "ps": ["p0:1"]}, "task": {"type": "worker", "index": 1}})";
  RunResult r =
      run_hbrun({"-n", "2", "--", kProbe, "env"}, {{"TF_CONFIG", tf}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // Position 2 of 3 tasks, 2 workers each: ranks 4 and 5 of 6.
  EXPECT_NE(r.out.find("[4] env rank=4 world=6 local_rank=0 local_world=2 "
                       "rdv=127.0.0.1:29871 served=1 cuda=unset tf=set"),
            std::string::npos)
      << describe(r);
  EXPECT_NE(r.out.find("[5] env rank=5 world=6 local_rank=1 local_world=2 "
                       "rdv=127.0.0.1:29871 served=1 cuda=unset tf=set"),
            std::string::npos)
      << describe(r);
}

TEST(Hbrun, TfConfigPsTaskRunsOnceOutsideTheWorld) {
  std::string tf =
      R"({"cluster": {"chief": ["127.0.0.1:29871"], "ps": ["p0:1", "p1:1"]},)"
      R"( "task": {"type": "ps", "index": 1}})";
  RunResult r =
      run_hbrun({"-n", "4", "--", kProbe, "env"}, {{"TF_CONFIG", tf}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(
      r.out,
      "[ps:1] env rank=unset world=unset local_rank=unset local_world=unset "
      "rdv=unset served=unset cuda=unset tf=set\n")
      << describe(r);
}

TEST(Hbrun, NoTfConfigFlagIgnoresIt) {
  RunResult r = run_hbrun({"--no-tf-config", "-n", "1", "--", kProbe, "env"},
                          {{"TF_CONFIG", "not json at all"}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("[0] env rank=0 world=1 "), std::string::npos)
      << describe(r);
  RunResult bad = run_hbrun({"-n", "1", "--", kProbe, "env"},
                            {{"TF_CONFIG", "not json at all"}});
  EXPECT_EQ(bad.exit_code, 2) << describe(bad);
  EXPECT_NE(bad.err.find("TF_CONFIG"), std::string::npos) << describe(bad);
}

}  // namespace
