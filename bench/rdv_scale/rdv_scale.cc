// rdv_scale: the rendezvous server (src/rendezvous/) driven by N simulated
// ranks, real rdv::Clients (their own reader/heartbeat thread each, at the
// default 500 ms interval) spread over a few processes, with the server
// alone in the parent so that its CPU and memory can be read (issue 34
// item 1; docs/scaling.md).
//
//   rdv_scale N [PROCS=8] [IDLE_S=5] [START=gather|peers]
//
// Phases, each timed from the parent (CLOCK_MONOTONIC is system-wide):
//   form     every rank connects, authenticates (token) and meets the others
//            at a barrier, as hb_context_create does;
//   start    every rank publishes an address and learns every peer's, then
//            a barrier: START=gather through rank 0 (comm/kv_gather.h, hb's
//            same-host bootstrap), START=peers by reading every peer's key
//            (N(N-1) requests: the Gloo full mesh's bootstrap, per context);
//   collect  a collection create: an add on a shared counter, a barrier,
//            a get of rank 0's plan key;
//   commit   a checkpoint commit: every rank sets its part, rank 0 waits for
//            all N, sets the commit key, every rank reads it;
//   idle     IDLE_S seconds of heartbeats only: server CPU (% of one core)
//            and resident memory;
//   fail     one more rank (a process of its own) is SIGKILLed: the time
//            until every rank's pending call has failed with
//            HB_ERR_PEER_FAILED (the failure broadcast).
// One line per phase; RESULT line at the end:
//   RESULT n=N form_s=.. start_s=.. collect_s=.. commit_s=.. idle_cpu_pct=..
//          server_rss_mib=.. fail_s=..
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../common/proc_mem.h"
#include "abi/error.h"
#include "comm/kv_gather.h"
#include "common/fd_limit.h"
#include "common/log.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"

namespace {

constexpr int kPhases = 4;  // form, start, collect, commit
const char *kToken = "rdv-scale-token";

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Report {  // per child process: when its last rank finished a phase
  double phase_end[kPhases];
  double failed_at;  // when its last rank saw the failure (0: never)
  int errors;
};

void write_all(int fd, const void *p, size_t n) {
  const char *c = static_cast<const char *>(p);
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) _exit(3);
    c += w;
    n -= size_t(w);
  }
}
bool read_all(int fd, void *p, size_t n) {
  char *c = static_cast<char *>(p);
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= size_t(r);
  }
  return true;
}

hb::rdv::ClientConfig client_config(int port, int rank, int n) {
  hb::rdv::ClientConfig cc;
  cc.port = port;
  cc.token = kToken;
  cc.rank = rank;
  cc.world_size = n;
  return cc;
}

// One simulated rank: the phases, then a get that only a failure ends.
void run_rank(int port, int rank, int n, bool gather, std::atomic<int> *errs,
              std::vector<double> *ends, double *failed_at) {
  try {
    auto c = hb::rdv::Client::connect(client_config(port, rank, n), nullptr);
    c->barrier("create", 60000);
    (*ends)[0] = now_s();
    if (gather) {  // hb's same-host bootstrap (comm/kv_gather.h)
      hb::comm::kv_allgather(*c, "addr/", rank, n, std::string(64, 'a'), 60000);
    } else {  // a full mesh's: every rank reads every peer's key
      c->set("addr/" + std::to_string(rank), std::string(64, 'a'));
      for (int q = 0; q < n; ++q)
        if (q != rank) c->get("addr/" + std::to_string(q), 60000);
    }
    c->barrier("start", 60000);
    (*ends)[1] = now_s();
    c->add("collection/0/joined", 1);
    c->barrier("collection/0", 60000);
    if (rank == 0) c->set("collection/0/plan", std::string(256, 'p'));
    c->get("collection/0/plan", 60000);
    (*ends)[2] = now_s();
    c->set("ckpt/1/part/" + std::to_string(rank), "ok");
    if (rank == 0) {
      std::vector<std::string> keys;
      for (int q = 0; q < n; ++q)
        keys.push_back("ckpt/1/part/" + std::to_string(q));
      c->wait(keys, 60000);
      c->set("ckpt/1/commit", "1");
    }
    c->get("ckpt/1/commit", 60000);
    (*ends)[3] = now_s();
    try {
      c->get("never", 600000);  // idle; ends with the failure broadcast
    } catch (const hb::Error &e) {
      if (e.status() == HB_ERR_PEER_FAILED) *failed_at = now_s();
    }
    c->close();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rdv_scale: rank %d: %s\n", rank, e.what());
    errs->fetch_add(1);
  }
}

[[noreturn]] void child(int port_fd, int report_fd, int lo, int hi, int n,
                        bool gather) {
  int port = 0;
  if (!read_all(port_fd, &port, sizeof port)) _exit(2);
  std::atomic<int> errs{0};
  std::vector<std::vector<double>> ends(size_t(hi - lo),
                                        std::vector<double>(kPhases, 0));
  std::vector<double> failed(size_t(hi - lo), 0);
  Report rep{};
  std::vector<std::thread> threads;
  for (int r = lo; r < hi; ++r)
    threads.emplace_back(run_rank, port, r, n, gather, &errs,
                         &ends[size_t(r - lo)], &failed[size_t(r - lo)]);
  // The phase times reach the parent as soon as every rank here is idle.
  for (int p = 0; p < kPhases; ++p) {
    double last = 0;
    for (;;) {
      bool all = true;
      last = 0;
      for (auto &e : ends) {
        all &= e[size_t(p)] > 0;
        last = std::max(last, e[size_t(p)]);
      }
      if (all || errs.load() > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    rep.phase_end[p] = last;
  }
  rep.errors = errs.load();
  rep.failed_at = 0;
  write_all(report_fd, &rep, sizeof rep);
  for (auto &t : threads) t.join();
  for (double f : failed)  // -1: some rank never saw it
    rep.failed_at =
        f > 0 && rep.failed_at >= 0 ? std::max(rep.failed_at, f) : -1;
  rep.errors = errs.load();
  write_all(report_fd, &rep, sizeof rep);
  _exit(0);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: rdv_scale N [PROCS=8] [IDLE_S=5] [START=gather|peers]\n");
    return 2;
  }
  const int n_sim = std::atoi(argv[1]);
  const int procs = argc > 2 ? std::atoi(argv[2]) : 8;
  const double idle_s = argc > 3 ? std::atof(argv[3]) : 5;
  const bool gather = argc <= 4 || std::strcmp(argv[4], "peers") != 0;
  const int n = n_sim + 1;  // plus the victim rank, alone in a process
  hb::set_log_level(hb::LogLevel::kError);  // not N lines of "rank lost"
  // The server holds one socket per rank (hb's server raises it too).
  hb::raise_fd_limit(size_t(n) + 64);
  std::vector<int> port_w, report_r;
  std::vector<pid_t> pids;
  for (int p = 0; p <= procs; ++p) {  // the last one: the victim
    int pp[2], rp[2];
    if (pipe(pp) || pipe(rp)) return 3;
    const int lo = p < procs ? n_sim * p / procs : n_sim;
    const int hi = p < procs ? n_sim * (p + 1) / procs : n;
    pid_t pid = fork();
    if (pid == 0) {
      close(pp[1]);
      close(rp[0]);
      child(pp[0], rp[1], lo, hi, n, gather);
    }
    close(pp[0]);
    close(rp[1]);
    port_w.push_back(pp[1]);
    report_r.push_back(rp[0]);
    pids.push_back(pid);
  }
  const long rss0 = hbbench::rss_kib(), hwm0 = hbbench::peak_rss_kib();
  hb::rdv::ServerConfig sc;
  sc.host = "127.0.0.1";
  sc.token = kToken;
  sc.world_size = n;
  sc.linger_ms = 0;
  auto server = hb::rdv::Server::start(sc);
  const int port = server->port();
  const double t0 = now_s();
  for (int fd : port_w) write_all(fd, &port, sizeof port);
  std::vector<Report> reps(pids.size());
  int errors = 0;
  double end[kPhases] = {0, 0, 0, 0};
  for (size_t p = 0; p < pids.size(); ++p) {
    if (!read_all(report_r[p], &reps[p], sizeof(Report))) ++errors;
    errors += reps[p].errors;
    for (int k = 0; k < kPhases; ++k)
      end[k] = std::max(end[k], reps[p].phase_end[k]);
  }
  const char *names[kPhases] = {"form", "start", "collect", "commit"};
  double prev = t0, secs[kPhases];
  for (int k = 0; k < kPhases; ++k) {
    secs[k] = end[k] - prev;
    prev = end[k];
    std::printf("%-8s %8.3f s  (N=%d)\n", names[k], secs[k], n);
  }
  std::fflush(stdout);
  // Idle: heartbeats only.
  const double c0 = cpu_s(), w0 = now_s();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
  const double cpu_pct = 100 * (cpu_s() - c0) / (now_s() - w0);
  const double rss_mib = double(hbbench::rss_kib() - rss0) / 1024;
  // The peak: replies queued at once (e.g. every rank's get of the
  // gather's key answered in one loop iteration), whatever malloc kept.
  const double hwm_mib = double(hbbench::peak_rss_kib() - hwm0) / 1024;
  std::printf(
      "idle     %8.2f %% of one core, server +%.1f MiB resident (peak "
      "+%.1f MiB)\n",
      cpu_pct, rss_mib, hwm_mib);
  // Failure: the victim process dies; everyone's pending get must fail.
  const double kill_at = now_s();
  kill(pids.back(), SIGKILL);
  double failed = 0;
  for (size_t p = 0; p + 1 < pids.size(); ++p) {
    Report r{};
    if (!read_all(report_r[p], &r, sizeof r) || r.failed_at <= 0) {
      ++errors;
      continue;
    }
    failed = std::max(failed, r.failed_at - kill_at);
  }
  std::printf("fail     %8.3f s until all %d ranks saw it\n", failed, n - 1);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  std::printf(
      "RESULT n=%d start=%s form_s=%.3f start_s=%.3f collect_s=%.3f "
      "commit_s=%.3f "
      "idle_cpu_pct=%.2f server_rss_mib=%.1f fail_s=%.3f errors=%d\n",
      n, gather ? "gather" : "peers", secs[0], secs[1], secs[2], secs[3],
      cpu_pct, rss_mib, failed, errors);
  return errors ? 1 : 0;
}
