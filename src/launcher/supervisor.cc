#include "launcher/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "abi/error.h"
#include "launcher/signal_pipe.h"

namespace hb {
namespace launcher {
namespace {

int64_t ms_until(Clock::time_point t) {
  auto d =
      std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now())
          .count();
  return d > 0 ? d : 0;
}

}  // namespace

Supervisor::Supervisor(const SupervisorConfig &cfg)
    : cfg_(cfg), signal_fd_(install_signal_pipe()), start_(Clock::now()) {}

void Supervisor::add(const std::string &label, int rank,
                     const SpawnedProcess &p, Restarter restart) {
  Worker w;
  w.label = label;
  w.rank = rank;
  w.pid = p.pid;
  std::string prefix = "[" + label + "] ";
  if (p.stdout_fd >= 0) w.out.reset(new LineRelay(p.stdout_fd, 1, prefix));
  if (p.stderr_fd >= 0) w.err.reset(new LineRelay(p.stderr_fd, 2, prefix));
  w.restart = std::move(restart);
  workers_.push_back(std::move(w));
}

bool Supervisor::start_again(Worker &w) {
  try {
    SpawnedProcess p = w.restart();
    w.pid = p.pid;
    w.running = true;
    w.signals_sent = 0;
    std::string prefix = "[" + w.label + "] ";
    w.out.reset(p.stdout_fd >= 0 ? new LineRelay(p.stdout_fd, 1, prefix)
                                 : nullptr);
    w.err.reset(p.stderr_fd >= 0 ? new LineRelay(p.stderr_fd, 2, prefix)
                                 : nullptr);
    return true;
  } catch (const Error &e) {
    say("rank %s: cannot restart: %s", w.label.c_str(), e.what());
    return false;
  }
}

void Supervisor::launch_failed(int code) {
  launch_failed_ = true;
  stopped_by_failure_ = true;
  record_failure(code);
  begin_stop();
}

int Supervisor::running_count() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(),
                    [](const Worker &w) { return w.running; }));
}

void Supervisor::record_failure(int code) {
  if (first_failure_ == 0) first_failure_ = code;
}

void Supervisor::signal_all(int sig) {
  for (auto &w : workers_) {
    if (!w.running) continue;
    signal_group(w.pid, sig);
    w.signals_sent |= uint64_t{1} << (sig & 63);
    // A stopped worker (SIGSTOP, a debugger let go) must wake to see it.
    if (sig != SIGKILL) signal_group(w.pid, SIGCONT);
  }
  auto at = Clock::now() + std::chrono::milliseconds(cfg_.grace_ms);
  if (!kill_pending_ || at < kill_at_) kill_at_ = at;
  kill_pending_ = true;
}

void Supervisor::begin_stop() {
  if (stopping_) return;
  stopping_ = true;
  signal_all(SIGTERM);
}

void Supervisor::kill_all() {
  kill_pending_ = false;
  int n = running_count();
  if (n == 0) return;
  say("%d worker(s) still running after the grace period: sending SIGKILL", n);
  for (auto &w : workers_) {
    if (!w.running) continue;
    signal_group(w.pid, SIGKILL);
    w.signals_sent |= uint64_t{1} << SIGKILL;
  }
}

bool Supervisor::is_ps_task(const Worker &w) const {
  // hbrun --ps labels its ps tasks "ps:<i>" (the evaluator, also outside
  // the world and never restarted alone, is "evaluator").
  return cfg_.ps_mode && !w.restart && w.label.rfind("ps:", 0) == 0;
}

void Supervisor::on_exit(Worker &w, int wait_status) {
  w.running = false;
  // Every byte the worker wrote is in its pipes now.
  if (w.out) w.out->drain_and_close();
  if (w.err) w.err->drain_and_close();
  int code = exit_code_of(wait_status);
  if (code == 0) return;
  if (ps_stopped_ && !w.restart) return;  // a ps task hbrun stopped
  // Children the failed worker left behind go with it.
  signal_group(w.pid, SIGKILL);
  const std::string how = describe_wait_status(wait_status);
  // A worker that joined the store's collective world (job checkpoints
  // save collectively) broke that world by dying: a worker restarted alone
  // could not join it again, and every worker must restore the same
  // checkpoint. So the whole job restarts, as after a lost ps task.
  const bool alone =
      cfg_.ps_mode && w.restart &&
      !(cfg_.departures && w.rank >= 0 && cfg_.departures->joined(w.rank));
  if (alone && !stopping_) {
    // A lost worker is not a lost job: the ps tasks and the other workers
    // go on; it starts again (and rejoins) while restarts are left.
    const bool again = take_restart();
    say("rank %s %s; %s", w.label.c_str(), how.c_str(),
        again ? format("restarting it (restart %d of %d)", restarts_,
                       cfg_.max_restarts)
                    .c_str()
              : "the others go on without it");
    if (again && start_again(w)) return;
  }
  // A worker that died of a signal hbrun sent it was stopped, not failed:
  // it cannot be the root cause, however early the store saw it leave.
  bool stopped = WIFSIGNALED(wait_status) &&
                 ((w.signals_sent >> (WTERMSIG(wait_status) & 63)) & 1);
  if (!stopped)
    failures_.push_back(
        WorkerFailure{w.label, w.rank, code, how, is_ps_task(w)});
  // The first failure decides the exit code, even one caused by a signal
  // hbrun forwarded; the workers hbrun stops afterwards do not.
  record_failure(code);
  if (stopping_ || alone) return;
  if (!stopped) stop_cause_ = failures_.size() - 1;
  stopped_by_failure_ = true;
  int others = running_count();
  say("rank %s %s%s%s", w.label.c_str(), how.c_str(),
      cfg_.ps_mode && w.restart
          ? " (it had joined the workers' collective world, which it broke)"
          : "",
      others ? format("; stopping the other %d worker(s)", others).c_str()
             : "");
  begin_stop();
}

void Supervisor::reap() {
  for (auto &w : workers_) {
    if (!w.running) continue;
    int status = 0;
    pid_t r = ::waitpid(w.pid, &status, WNOHANG);
    if (r == w.pid) on_exit(w, status);
  }
  schedule_ps_stop();
}

void Supervisor::schedule_ps_stop() {
  if (!cfg_.ps_mode || stopping_ || ps_stop_pending_) return;
  for (const auto &w : workers_)
    if (w.restart && w.running) return;
  // Every worker is done: the ps tasks end by themselves once they saw the
  // goodbyes; a lost worker would keep them waiting for its restart.
  ps_stop_pending_ = true;
  ps_stop_at_ = Clock::now() + std::chrono::milliseconds(2000);
}

void Supervisor::handle_signals() {
  unsigned char sigs[64];
  ssize_t n;
  while ((n = ::read(signal_fd_, sigs, sizeof sigs)) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      int sig = sigs[i];
      if (sig == SIGCHLD) continue;  // reap() runs after every wake-up
      if (forwarded_signal_) {
        say("got signal %d (%s) again: killing the workers", sig,
            strsignal(sig));
        kill_all();
        continue;
      }
      forwarded_signal_ = true;
      stopping_ = true;
      say("got signal %d (%s): forwarding it to %d worker(s)", sig,
          strsignal(sig), running_count());
      signal_all(sig);
    }
  }
}

void Supervisor::check_timers() {
  if (cfg_.timeout_ms > 0 && !timed_out_ &&
      Clock::now() >= start_ + std::chrono::milliseconds(cfg_.timeout_ms)) {
    timed_out_ = true;
    stopping_ = true;
    say("timed out after %.3f s: stopping %d worker(s)",
        cfg_.timeout_ms / 1000.0, running_count());
    signal_all(SIGTERM);
  }
  if (kill_pending_ && Clock::now() >= kill_at_) kill_all();
  if (ps_stop_pending_ && !stopping_ && Clock::now() >= ps_stop_at_ &&
      running_count() > 0) {
    if (cfg_.outside_workers_running && cfg_.outside_workers_running()) {
      // A joined worker still trains with these ps tasks: ask again later.
      ps_stop_at_ = Clock::now() + std::chrono::milliseconds(500);
      return;
    }
    say("no worker left: stopping %d ps task(s)", running_count());
    ps_stopped_ = true;
    begin_stop();
  }
}

int64_t Supervisor::poll_timeout_ms() const {
  int64_t t = 1000;  // also a safety net: reap() runs at least this often
  if (cfg_.timeout_ms > 0 && !timed_out_)
    t = std::min(t,
                 ms_until(start_ + std::chrono::milliseconds(cfg_.timeout_ms)));
  if (kill_pending_) t = std::min(t, ms_until(kill_at_));
  if (ps_stop_pending_) t = std::min(t, ms_until(ps_stop_at_));
  return t;
}

void Supervisor::wait() {
  std::vector<pollfd> fds;
  std::vector<LineRelay *> relays;
  while (running_count() > 0) {
    fds.assign(1, pollfd{signal_fd_, POLLIN, 0});
    relays.assign(1, nullptr);
    for (auto &w : workers_) {
      for (LineRelay *r : {w.out.get(), w.err.get()}) {
        if (r && r->open()) {
          fds.push_back(pollfd{r->fd(), POLLIN, 0});
          relays.push_back(r);
        }
      }
    }
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(poll_timeout_ms()));
    if (n < 0 && errno != EINTR) {
      say("poll: %s", std::strerror(errno));
      record_failure(1);
      stopping_ = true;
      stopped_by_failure_ = true;
      kill_all();
    }
    if (n > 0) {
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) relays[i]->pump();
      if (fds[0].revents & POLLIN) handle_signals();
    }
    reap();
    check_timers();
  }
}

int Supervisor::exit_code() {
  if (timed_out_) return kTimeoutExitCode;
  if (launch_failed_ || failures_.empty()) return first_failure_;
  // From the failure that stopped the job on: in ps mode a failed ps task
  // decides, not the workers lost before it (nor those it failed).
  const std::vector<WorkerFailure> since(failures_.begin() + stop_cause_,
                                         failures_.end());
  root_ = static_cast<int>(
      stop_cause_ + root_cause(since, cfg_.departures ? cfg_.departures->order()
                                                      : std::vector<int>{}));
  // A worker that had joined the collective world stops the job when it
  // fails, also when it failed because a ps task died first and was reaped
  // later; a ps task never fails because a worker did (it waits for the
  // worker's restart), so a failed ps task is the root cause.
  for (size_t i = stop_cause_; i < failures_.size(); ++i) {
    if (!failures_[i].ps_task || static_cast<int>(i) == root_) continue;
    const WorkerFailure &f = failures_[i], &first = failures_[root_];
    say("ps task %s %s: the root cause (status %d), not rank %s (status %d), "
        "which lost it",
        f.label.c_str(), f.how.c_str(), f.code, first.label.c_str(),
        first.code);
    root_ = static_cast<int>(i);
    return f.code;
  }
  if (root_ != static_cast<int>(stop_cause_)) {
    const WorkerFailure &f = failures_[root_], &first = failures_[stop_cause_];
    say("rank %s %s first: the root cause (status %d), not rank %s "
        "(status %d), which followed it (the rendezvous store saw rank %s "
        "leave first)",
        f.label.c_str(), f.how.c_str(), f.code, first.label.c_str(), first.code,
        f.label.c_str());
  }
  return failures_[root_].code;
}

const WorkerFailure *Supervisor::root_failure() const {
  return root_ >= 0 ? &failures_[root_] : nullptr;
}

void Supervisor::reset() {
  workers_.clear();
  failures_.clear();
  stop_cause_ = 0;
  root_ = -1;
  first_failure_ = 0;
  stopping_ = false;
  launch_failed_ = false;
  stopped_by_failure_ = false;
  kill_pending_ = false;
  ps_stop_pending_ = false;
  ps_stopped_ = false;
}

bool Supervisor::take_restart() {
  if (restarts_ >= cfg_.max_restarts) return false;
  ++restarts_;
  return true;
}

}  // namespace launcher
}  // namespace hb
