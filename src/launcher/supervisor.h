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

namespace hb {
namespace launcher {

struct SupervisorConfig {
  int64_t grace_ms = 3000;  // SIGTERM -> SIGKILL
  int64_t timeout_ms = 0;   // 0: none; else exit 124 when it passes
  // Parameter-server mode (hbrun --ps): a failed worker stops nobody (the
  // ps tasks and the other workers go on) and is started again while
  // max_restarts allows (each start gets HB_RESTART_COUNT); a failed ps
  // task stops everyone.
  bool ps_mode = false;
  int max_restarts = 0;  // restarts of workers, all together
};

class Supervisor {
 public:
  static constexpr int kTimeoutExitCode = 124;

  // Installs the signal handlers; the timeout starts now.
  explicit Supervisor(const SupervisorConfig &cfg);

  // Takes over a started worker (and its output pipes, if captured).
  // restart: how to start it again (ps mode; nullptr: never, e.g. a ps
  // task).
  void add(const std::string &label, const SpawnedProcess &p,
           const SpawnRequest *restart = nullptr);
  // A worker could not be started: stop the others, exit with `code`.
  void launch_failed(int code);
  // Runs until every worker has been reaped; returns hbrun's exit code.
  int wait();

 private:
  struct Worker {
    std::string label;
    pid_t pid = -1;
    bool running = true;
    std::unique_ptr<LineRelay> out, err;
    bool restartable = false;
    SpawnRequest request;  // restartable: how it was started
    int starts = 1;
  };
  // ps mode: starts w again; false when it could not be.
  bool restart(Worker &w);

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
  bool timed_out_ = false;
  bool forwarded_signal_ = false;  // a second signal means SIGKILL now
  bool kill_pending_ = false;
  Clock::time_point kill_at_;
  int first_failure_ = 0;  // hbrun's exit code once something failed
  int restarts_ = 0;       // ps mode: worker restarts so far
  // ps mode: once no worker runs (none to restart), the ps tasks get a
  // grace period to see the last goodbyes and exit; then hbrun stops them,
  // and their exit is not a failure.
  bool ps_stop_pending_ = false, ps_stopped_ = false;
  Clock::time_point ps_stop_at_;
  void schedule_ps_stop();
};

}  // namespace launcher
}  // namespace hb
