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

void Supervisor::add(const std::string &label, const SpawnedProcess &p,
                     const SpawnRequest *restart) {
  Worker w;
  w.label = label;
  w.pid = p.pid;
  std::string prefix = "[" + label + "] ";
  if (p.stdout_fd >= 0) w.out.reset(new LineRelay(p.stdout_fd, 1, prefix));
  if (p.stderr_fd >= 0) w.err.reset(new LineRelay(p.stderr_fd, 2, prefix));
  if (restart) {
    w.restartable = true;
    w.request = *restart;
  }
  workers_.push_back(std::move(w));
}

bool Supervisor::restart(Worker &w) {
  SpawnRequest req = w.request;
  std::string count = "HB_RESTART_COUNT=" + std::to_string(w.starts);
  bool replaced = false;
  for (std::string &e : req.env)
    if (e.compare(0, 17, "HB_RESTART_COUNT=") == 0) e = count, replaced = true;
  if (!replaced) req.env.push_back(count);
  try {
    SpawnedProcess p = spawn_process(req);
    w.pid = p.pid;
    w.running = true;
    ++w.starts;
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
  for (auto &w : workers_)
    if (w.running) signal_group(w.pid, SIGKILL);
}

void Supervisor::on_exit(Worker &w, int wait_status) {
  w.running = false;
  // Every byte the worker wrote is in its pipes now.
  if (w.out) w.out->drain_and_close();
  if (w.err) w.err->drain_and_close();
  int code = exit_code_of(wait_status);
  if (code == 0) return;
  if (ps_stopped_ && !w.restartable) return;  // a ps task hbrun stopped
  // Children the failed worker left behind go with it.
  signal_group(w.pid, SIGKILL);
  if (cfg_.ps_mode && w.restartable && !stopping_) {
    // A lost worker is not a lost job: the ps tasks and the other workers
    // go on; it starts again (and rejoins) while restarts are left.
    bool again = restarts_ < cfg_.max_restarts;
    say("rank %s %s; %s", w.label.c_str(),
        describe_wait_status(wait_status).c_str(),
        again ? format("restarting it (restart %d of %d)", restarts_ + 1,
                       cfg_.max_restarts)
                    .c_str()
              : "the others go on without it");
    if (again) {
      ++restarts_;
      if (restart(w)) return;
    }
    record_failure(code);
    return;
  }
  // The first failure decides the exit code, even one caused by a signal
  // hbrun forwarded; the workers hbrun stops afterwards do not.
  record_failure(code);
  if (stopping_) return;
  int others = running_count();
  say("rank %s %s%s", w.label.c_str(),
      describe_wait_status(wait_status).c_str(),
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
    if (w.restartable && w.running) return;
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

int Supervisor::wait() {
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
  if (timed_out_) return kTimeoutExitCode;
  return first_failure_;
}

}  // namespace launcher
}  // namespace hb
