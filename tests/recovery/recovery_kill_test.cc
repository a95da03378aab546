// Real processes, real kills: trains recovery_train under hbrun
// uninterrupted, then as a sequence of runs that die -- a rank SIGKILLed
// mid-step by this test, ranks that SIGKILL themselves mid-checkpoint
// (files written, manifest not) and mid-restore, a clean stop -- each
// resuming from the latest checkpoint, and compares the final state.
//
//   recovery_kill_test exact NP ASYNC   same world: final table, w, b, AUC
//                                       and counts bit-identical; every
//                                       sample trained exactly once
//   recovery_kill_test shrink           4 ranks stop after a checkpoint, 3
//                                       ranks finish: every sample exactly
//                                       once, AUC within 0.005
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/hbrun_runner.h"

namespace {

const int kFiles = 3, kLinesPerFile = 700, kEpochs = 2, kEvery = 7;
int failures = 0;

#define EXPECT(cond, ...)                                         \
  do {                                                            \
    if (!(cond)) {                                                \
      std::fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                          \
      std::fprintf(stderr, "\n");                                 \
      ++failures;                                                 \
    }                                                             \
  } while (0)

std::string g_train, g_tmp;

std::string read_file(const std::string &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void make_data(const std::string &dir) {
  std::mt19937 rng(42);
  int serial = 0;
  for (int f = 0; f < kFiles; ++f) {
    std::ofstream o(dir + "/part-" + std::to_string(f), std::ios::binary);
    for (int i = 0; i < kLinesPerFile; ++i) {
      // Few ids, and a label that leans on them: the model learns, and
      // the AUC is a stable figure to compare.
      unsigned a = rng() % 50, b = 500 + rng() % 50;
      int label = ((a % 3 == 0) || (b % 5 == 0)) ^ (rng() % 10 == 0);
      char hex[64];
      std::snprintf(hex, sizeof hex, "%x\t%x", a, b);
      o << label << "\t" << serial++ << "\t" << hex << "\n";
    }
  }
}

std::vector<std::string> train_args(int np, const std::string &ckpt,
                                    const std::string &dump, int async,
                                    const std::vector<std::string> &extra) {
  std::vector<std::string> a = {
      "-n",        std::to_string(np),
      "--timeout", "60",
      "--",        g_train,
      "--data",    g_tmp + "/data",
      "--files",   std::to_string(kFiles),
      "--lines",   std::to_string(kFiles * kLinesPerFile),
      "--dir",     ckpt,
      "--out",     dump,
      "--every",   std::to_string(kEvery),
      "--async",   std::to_string(async),
      "--epochs",  std::to_string(kEpochs)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

hb_test::RunResult run(const std::vector<std::string> &args, const char *what) {
  hb_test::RunResult r = hb_test::run_hbrun(args, {}, 90);
  std::fprintf(stderr, "-- %s: exit %d in %.2f s\n", what, r.exit_code,
               r.seconds);
  return r;
}

// A run that this test kills: a random rank, after a random number of ms
// once every rank has started training.
hb_test::RunResult run_and_kill(const std::vector<std::string> &args, int np,
                                std::mt19937 &rng) {
  hb_test::HbrunProcess p(args);
  std::regex pid_line(R"(rank (\d+) pid (\d+))");
  std::vector<int> pids(np, -1);
  p.read_until(
      [&](const std::string &out) {
        for (std::sregex_iterator it(out.begin(), out.end(), pid_line), end;
             it != end; ++it)
          pids[std::stoi((*it)[1])] = std::stoi((*it)[2]);
        for (int q : pids)
          if (q < 0) return false;
        return true;
      },
      30);
  int victim = static_cast<int>(rng() % np);
  int delay = 30 + static_cast<int>(rng() % 250);
  std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  if (pids[victim] > 0) ::kill(pids[victim], SIGKILL);
  hb_test::RunResult r = p.wait(60);
  std::fprintf(stderr, "-- killed rank %d after %d ms: exit %d\n", victim,
               delay, r.exit_code);
  return r;
}

// The dump's counts: every (epoch, line) trained exactly once.
void check_counts(const std::string &dump, const char *what) {
  std::string d = read_file(dump);
  const size_t head = 1000 * 4 * 4 + 16 + 4 + 8;
  const size_t n = static_cast<size_t>(kFiles) * kLinesPerFile * kEpochs;
  EXPECT(d.size() == head + n * 4, "%s: dump '%s' has %zu bytes", what,
         dump.c_str(), d.size());
  if (d.size() != head + n * 4) return;
  std::vector<int32_t> counts(n);
  std::memcpy(counts.data(), d.data() + head, n * 4);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    if (counts[i] != 1) {
      if (bad++ < 5)
        std::fprintf(stderr, "%s: epoch %zu line %zu trained %d times\n", what,
                     i / (kFiles * kLinesPerFile), i % (kFiles * kLinesPerFile),
                     counts[i]);
    }
  EXPECT(bad == 0, "%s: %zu samples not trained exactly once", what, bad);
}

double dump_auc(const std::string &dump) {
  std::string d = read_file(dump);
  double a = -1;
  if (d.size() >= 1000 * 16 + 28) std::memcpy(&a, d.data() + 1000 * 16 + 20, 8);
  return a;
}

int exact(int np, int async) {
  std::string ref = g_tmp + "/ref.dump", got = g_tmp + "/got.dump";
  hb_test::RunResult r =
      run(train_args(np, g_tmp + "/ref_ckpt", ref, async, {}), "reference");
  EXPECT(r.exit_code == 0, "reference run failed:\n%s", r.err.c_str());
  check_counts(ref, "reference");

  const std::string ck = g_tmp + "/ckpt";
  std::mt19937 rng(1234 + np * 10 + async);
  // Deaths at the hard moments, then random ones, then a clean stop.
  struct Death {
    const char *kill;
    const char *what;
  };
  const Death deaths[] = {
      {"files_written:1:1", "rank 1 dies mid-checkpoint (files, no manifest)"},
      {"manifest:0:0", "rank 0 dies before the manifest"},
      {"restore_tables:1:0", "rank 1 dies mid-restore"},
      {"step:0:4", "rank 0 dies mid-step"},
  };
  for (const Death &d : deaths) {
    r = run(train_args(np, ck, got, async, {"--kill", d.kill}), d.what);
    EXPECT(r.exit_code != 0, "%s: the run did not die", d.what);
    EXPECT(r.err.find("killing itself") != std::string::npos,
           "%s: the kill point was not reached:\n%s", d.what, r.err.c_str());
  }
  for (int k = 0; k < 2; ++k) {
    r = run_and_kill(train_args(np, ck, got, async, {"--step-ms", "2"}), np,
                     rng);
    if (r.exit_code == 0) break;  // it finished before the kill
  }
  std::string stop = std::to_string(kEvery * 12);
  r = run(train_args(np, ck, got, async, {"--stop-at", stop}), "clean stop");
  r = run(train_args(np, ck, got, async, {}), "final run");
  EXPECT(r.exit_code == 0, "final run failed:\n%s", r.err.c_str());
  EXPECT(r.out.find("restored step") != std::string::npos &&
             r.out.find("restored step -1") == std::string::npos,
         "final run did not resume:\n%s", r.out.c_str());
  check_counts(got, "resumed");
  std::string a = read_file(ref), b = read_file(got);
  EXPECT(!a.empty() && a == b,
         "final state differs from the uninterrupted run (%zu vs %zu bytes)",
         a.size(), b.size());
  return failures;
}

int shrink() {
  std::string ref = g_tmp + "/ref.dump", got = g_tmp + "/got.dump";
  hb_test::RunResult r =
      run(train_args(4, g_tmp + "/ref_ckpt", ref, 0, {}), "reference (4)");
  EXPECT(r.exit_code == 0, "reference run failed:\n%s", r.err.c_str());
  const std::string ck = g_tmp + "/ckpt";
  r = run(train_args(4, ck, got, 1, {"--stop-at", std::to_string(kEvery * 6)}),
          "4 ranks, stop after a checkpoint");
  EXPECT(r.exit_code != 0, "the 4-rank run did not stop");
  r = run(train_args(3, ck, got, 1, {}), "3 ranks resume");
  EXPECT(r.exit_code == 0, "3-rank run failed:\n%s", r.err.c_str());
  EXPECT(r.out.find("restored step " + std::to_string(kEvery * 6)) !=
             std::string::npos,
         "3-rank run did not resume at step %d:\n%s", kEvery * 6,
         r.out.c_str());
  check_counts(got, "shrunk");
  double a = dump_auc(ref), b = dump_auc(got);
  std::fprintf(stderr, "AUC uninterrupted %.6f, shrunk %.6f\n", a, b);
  EXPECT(a > 0.55 && std::fabs(a - b) <= 0.005, "AUC %.6f vs %.6f", a, b);
  return failures;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TRAIN exact NP ASYNC | TRAIN shrink\n",
                 argv[0]);
    return 2;
  }
  g_train = argv[1];
  char tmpl[] = "/tmp/hb_recovery_kill_XXXXXX";
  g_tmp = ::mkdtemp(tmpl);
  ::mkdir((g_tmp + "/data").c_str(), 0755);
  make_data(g_tmp + "/data");
  std::string mode = argv[2];
  int rc = 2;
  if (mode == "exact" && argc == 5)
    rc = exact(std::atoi(argv[3]), std::atoi(argv[4]));
  else if (mode == "shrink")
    rc = shrink();
  if (rc == 0)
    std::system(("rm -rf '" + g_tmp + "'").c_str());
  else
    std::fprintf(stderr, "kept %s\n", g_tmp.c_str());
  std::fprintf(stderr, rc == 0 ? "PASSED\n" : "FAILED\n");
  return rc == 0 ? 0 : 1;
}
