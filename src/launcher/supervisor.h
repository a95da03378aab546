// Watches the workers until they are all gone: relays their output, reaps
// them, forwards hbrun's signals, stops everyone when one fails or the
// timeout passes, and computes hbrun's exit code.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "launcher/line_relay.h"
#include "launcher/process.h"
#include "launcher/root_cause.h"

namespace hb {
namespace launcher {

struct SupervisorConfig {
  int64_t grace_ms = 3000;  // SIGTERM -> SIGKILL
  int64_t timeout_ms = 0;   // 0: none; else exit 124 when it passes
  // The order the rendezvous store saw ranks leave (may be null): decides
  // which failure is reported when several workers failed.
  const DepartureLog *departures = nullptr;
};

class Supervisor {
 public:
  static constexpr int kTimeoutExitCode = 124;

  // Installs the signal handlers; the timeout starts now.
  explicit Supervisor(const SupervisorConfig &cfg);

  // Takes over a started worker (and its output pipes, if captured); rank
  // -1 for a task outside the world.
  void add(const std::string &label, int rank, const SpawnedProcess &p);
  // A worker could not be started: stop the others, exit with `code`.
  void launch_failed(int code);
  // Runs until every worker has been reaped.
  void wait();
  // hbrun's exit code after wait(): 0, 124 (timeout), or the status of the
  // root-cause failure (root_cause.h; logged when it is not the first
  // failure reaped). Ask once the store has seen every worker's connection
  // close (after the server is stopped): a worker may exit before the
  // store's thread has read its connection's end.
  int exit_code();
  // The last wait() ended because of a signal to hbrun or --timeout: the
  // user wants the job stopped, not restarted.
  bool interrupted() const { return forwarded_signal_ || timed_out_; }
  // The label and rank of the last wait()'s root-cause failure.
  const WorkerFailure *root_failure() const;
  // Forgets the reaped workers of the last wait(), for a restart; the
  // timeout keeps counting from the first start.
  void reset();

 private:
  struct Worker {
    std::string label;
    pid_t pid = -1;
    int rank = -1;
    bool running = true;
    uint64_t signals_sent = 0;  // bit s: hbrun sent it signal s
    std::unique_ptr<LineRelay> out, err;
  };

  int running_count() const;
  int64_t poll_timeout_ms() const;
  void handle_signals();
  void reap();
  void on_exit(Worker &w, int wait_status);
  void record_failure(int code);
  // Sends sig to every running worker and schedules SIGKILL for those
  // still running after the grace period (keeping an earlier one).
  void signal_all(int sig);
  // SIGTERM to everyone, once: a worker failed or could not be started.
  void begin_stop();
  void kill_all();
  void check_timers();

  SupervisorConfig cfg_;
  int signal_fd_;
  Clock::time_point start_;
  std::vector<Worker> workers_;
  bool stopping_ = false;
  bool launch_failed_ = false;
  bool timed_out_ = false;
  bool forwarded_signal_ = false;  // a second signal means SIGKILL now
  bool kill_pending_ = false;
  Clock::time_point kill_at_;
  int first_failure_ = 0;  // hbrun's exit code once something failed
  std::vector<WorkerFailure> failures_;  // in reap order
  int root_ = -1;                        // index into failures_
};

}  // namespace launcher
}  // namespace hb
