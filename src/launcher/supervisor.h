// Watches the workers until they are all gone: relays their output, reaps
// them, forwards hbrun's signals, stops everyone when one fails or the
// timeout passes (in ps mode: restarts a failed worker alone unless it was
// in the workers' collective world), and computes hbrun's exit code.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
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
  // which failure is reported when several workers failed; and which ranks
  // joined the store's collective world (see ps_mode).
  const DepartureLog *departures = nullptr;
  // Parameter-server mode (hbrun --ps): a failed worker stops nobody (the
  // ps tasks and the other workers go on) and is started again while
  // restarts are left; a failed ps task stops everyone, and so does a
  // failed worker that had joined the store's collective world (departures
  // says so: job checkpoints), whose loss broke that world for all.
  bool ps_mode = false;
  // Restarts in all (take_restart): of the whole job and, in ps mode, of
  // single workers; one budget, as --max-restarts documents.
  int max_restarts = 0;
  // ps mode: whether workers of this job that other hbruns supervise
  // (hbrun --join) still run; the ps tasks are not stopped while they do.
  std::function<bool()> outside_workers_running;
};

class Supervisor {
 public:
  static constexpr int kTimeoutExitCode = 124;

  // Installs the signal handlers; the timeout starts now.
  explicit Supervisor(const SupervisorConfig &cfg);

  // Starts a failed worker again (with the next HB_RESTART_COUNT); throws
  // hb::Error when it cannot.
  using Restarter = std::function<SpawnedProcess()>;

  // Takes over a started worker (and its output pipes, if captured); rank
  // -1 for a task outside the world. restart: ps mode's workers (a ps task
  // has none, nor has any process outside ps mode).
  void add(const std::string &label, int rank, const SpawnedProcess &p,
           Restarter restart = nullptr);
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
  // The last wait() ended because a failure stopped everyone. In ps mode a
  // lost worker does not: the others went on and finished without it.
  bool stopped_by_failure() const { return stopped_by_failure_; }
  // The label and rank of the last wait()'s root-cause failure.
  const WorkerFailure *root_failure() const;
  // Forgets the reaped workers of the last wait(), for a restart; the
  // timeout and the restarts taken keep counting from the first start.
  void reset();
  // Uses up one of max_restarts; false when none is left.
  bool take_restart();
  // The restarts taken so far.
  int restarts() const { return restarts_; }

 private:
  struct Worker {
    std::string label;
    pid_t pid = -1;
    int rank = -1;
    bool running = true;
    uint64_t signals_sent = 0;  // bit s: hbrun sent it signal s
    std::unique_ptr<LineRelay> out, err;
    Restarter restart;  // ps mode: set for the workers, not the ps tasks
  };
  // ps mode: starts w again; false when it could not be.
  bool start_again(Worker &w);
  bool is_ps_task(const Worker &w) const;

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
  bool stopped_by_failure_ = false;
  bool timed_out_ = false;
  bool forwarded_signal_ = false;  // a second signal means SIGKILL now
  bool kill_pending_ = false;
  Clock::time_point kill_at_;
  int first_failure_ = 0;  // hbrun's exit code once something failed
  std::vector<WorkerFailure> failures_;  // in reap order
  // Index into failures_ of the one that stopped the job. In ps mode the
  // workers lost before it (the job went on without them) did not.
  size_t stop_cause_ = 0;
  int root_ = -1;     // index into failures_
  int restarts_ = 0;  // taken so far, of all kinds (take_restart)
  // ps mode: once no worker runs (none to restart), the ps tasks get a
  // grace period to see the last goodbyes and exit; then hbrun stops them,
  // and their exit is not a failure.
  bool ps_stop_pending_ = false, ps_stopped_ = false;
  Clock::time_point ps_stop_at_;
  void schedule_ps_stop();
};

}  // namespace launcher
}  // namespace hb
