// hbrun: starts the workers of one hb job on this machine, serves their
// rendezvous store and supervises them (see launch_options.cc for --help).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "abi/error.h"
#include "common/fd_limit.h"
#include "common/free_port.h"
#include "common/log.h"
#include "context/options.h"
#include "gpu/gpu.h"
#include "launcher/job_file.h"
#include "launcher/launch_options.h"
#include "launcher/line_relay.h"
#include "launcher/process.h"
#include "launcher/supervisor.h"
#include "launcher/topology.h"
#include "rendezvous/server.h"

extern char **environ;

namespace hb {
namespace launcher {
namespace {

constexpr int kUsageExitCode = 2;

// The store's settings follow the same HB_* variables as the workers'.
// Throws HB_ERR_CONFIG for a malformed one.
rdv::ServerConfig rendezvous_config(const Topology &topo) {
  // hbrun reports lost ranks itself (below): the server's own warning would
  // say it twice. HB_LOG_LEVEL, if set, still wins.
  set_log_level(LogLevel::kError);
  Options env_opts = Options::from_environment();
  rdv::ServerConfig cfg;
  cfg.host = topo.bind_host;
  cfg.port = topo.bind_port;
  cfg.token = env_opts.get_string("rendezvous_token");
  cfg.world_size = topo.world_size;
  cfg.heartbeat_interval_ms = env_opts.get_int("heartbeat_interval_ms");
  cfg.peer_timeout_ms = env_opts.get_int("peer_timeout_ms");
  cfg.max_frame_bytes =
      static_cast<size_t>(env_opts.get_int("max_frame_bytes"));
  return cfg;
}

std::unique_ptr<rdv::Server> start_rendezvous(const rdv::ServerConfig &cfg,
                                              DepartureLog *departures) {
  auto server = rdv::Server::start(cfg);
  server->on_peer_lost([](int rank, const std::string &why) {
    say("rank %d lost (rendezvous): %s", rank, why.c_str());
  });
  server->on_departure([departures](int rank, rdv::Server::Departure) {
    departures->add(rank);
  });
  server->on_join([departures](int rank) { departures->add_join(rank); });
  return server;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

// --max-restarts and --min-nproc restart the job on this machine only: with
// TF_CONFIG the world is fixed by the cluster spec, and the hbruns of the
// other hosts would restart on their own (docs/fault-tolerance.md).
// --evaluator and --ps add roles that TF_CONFIG spells as tasks of their
// own.
void check_single_machine_options(const LaunchOptions &opts,
                                  const Topology &topo) {
  if (opts.evaluator && topo.from_tf_config)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --evaluator starts an evaluator beside the workers of a job "
         "on one machine; with TF_CONFIG (%s) run a task of type "
         "\"evaluator\" instead (docs/evaluator.md)",
         topo.description.c_str());
  if (opts.num_ps > 0 && !topo.in_world)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --ps: this TF_CONFIG task is itself a ps or evaluator task "
         "(list the ps tasks in TF_CONFIG instead)");
  if (opts.num_ps > 0 && topo.world_size != topo.local_world_size)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --ps starts the ps tasks of a job on one machine; across "
         "machines list them in TF_CONFIG's \"ps\"");
  if (opts.max_restarts == 0) return;
  if (!topo.in_world || !topo.serve || topo.world_size != topo.local_world_size)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --max-restarts restarts a job on one machine; %s: restart "
         "every task's hbrun from the scheduler instead (see "
         "docs/fault-tolerance.md)",
         topo.description.c_str());
  if (opts.min_nproc > topo.world_size)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --min-nproc: %d is more than the %d workers", opts.min_nproc,
         topo.world_size);
}

// HB_TEST_FAIL_START=R (for tests): on every restart, starting the worker
// of the first start's rank R fails as if its program could not be run.
int test_fail_start_slot() {
  const char *v = std::getenv("HB_TEST_FAIL_START");
  if (!v || !*v) return -1;
  char *end = nullptr;
  long r = std::strtol(v, &end, 10);
  return *end == '\0' && r >= 0 ? static_cast<int>(r) : -1;
}

class Launch {
 public:
  Launch(const LaunchOptions &opts, const Topology &full,
         const rdv::ServerConfig &server_cfg, std::string program)
      : opts_(opts),
        full_(full),
        server_cfg_(server_cfg),
        program_(std::move(program)),
        job_path_(opts.num_ps > 0 ? job_file_path(std::to_string(::getpid()))
                                  : std::string()),
        supervisor_(SupervisorConfig{
            opts.grace_ms, opts.timeout_ms, &departures_, opts.num_ps > 0,
            opts.max_restarts,
            [path = job_path_] { return joiners_running(path); }}),
        base_env_(current_environment()),
        fail_slot_(test_fail_start_slot()) {
    for (size_t i = 0; i < full.workers.size(); ++i)
      slots_.push_back(static_cast<int>(i));
  }

  int run() {
    int code = run_starts();
    if (!job_path_.empty()) ::unlink(job_path_.c_str());
    return code;
  }

 private:
  int run_starts() {
    int restart = 0;  // this start's HB_RESTART_COUNT: the restarts so far
    for (;;) {
      int failed_slot = start_and_wait(restart);
      int code = supervisor_.exit_code();
      const bool interrupted = supervisor_.interrupted();
      if (failed_slot < 0 && code != 0 && restart > 0 && !interrupted)
        failed_slot = slot_that_died_before_joining();
      if (failed_slot >= 0 && !interrupted && can_shrink()) {
        drop_slot(failed_slot);
      } else {
        // Not a ps job that finished without its lost workers. The budget is
        // shared with ps mode's single-worker restarts (take_restart).
        if (code == 0 || interrupted || !supervisor_.stopped_by_failure() ||
            !supervisor_.take_restart())
          return code;
        restart = supervisor_.restarts();
        const WorkerFailure *f = supervisor_.root_failure();
        say("restarting the job (restart %d of %d) after %s", restart,
            opts_.max_restarts,
            f ? format("rank %s %s", f->label.c_str(), f->how.c_str()).c_str()
              : format("exit status %d", code).c_str());
      }
      supervisor_.reset();
      departures_.clear();
    }
  }

  bool can_shrink() const {
    return opts_.min_nproc > 0 &&
           static_cast<int>(slots_.size()) - 1 >= opts_.min_nproc;
  }

  void drop_slot(int slot) {
    slots_.erase(std::find(slots_.begin(), slots_.end(), slot));
    say("the first start's rank %d cannot be started again: going on with %zu "
        "worker(s) (--min-nproc %d)",
        slot, slots_.size(), opts_.min_nproc);
  }

  // On a restart, a worker that failed before it joined the rendezvous
  // store (it never left it, so it never was in it) could not start: a
  // broken GPU, a crash at start. Its slot, or -1.
  int slot_that_died_before_joining() const {
    const WorkerFailure *f = supervisor_.root_failure();
    if (!f || f->rank < 0 || f->rank >= static_cast<int>(slots_.size()))
      return -1;
    std::vector<int> left = departures_.order();
    if (std::find(left.begin(), left.end(), f->rank) != left.end()) return -1;
    return slots_[static_cast<size_t>(f->rank)];
  }

  // One start of the job: the workers at slots_ of the full topology, until
  // every one is reaped. The slot whose worker could not be started on a
  // restart, or -1.
  int start_and_wait(int restart) {
    int failed_slot = -1;
    // Fewer slots only ever on one machine (check_single_machine_options).
    Topology topo = slots_.size() < full_.workers.size()
                        ? shrink_topology(full_, slots_)
                        : full_;
    std::unique_ptr<rdv::Server> server;
    int port = topo.connect_port;
    // Three pipes per local worker (output, errors, start report) and the
    // store's socket per rank: past the usual soft limit of 1024 at a few
    // hundred workers. The workers inherit the raised limit.
    raise_fd_limit(size_t(topo.world_size) + 6 * topo.workers.size() + 64);
    if (topo.serve) {
      // A fresh store each start: nothing of the failed job's keys,
      // barriers or broken state reaches the new one.
      rdv::ServerConfig cfg = server_cfg_;
      cfg.world_size = topo.world_size;
      try {
        server = start_rendezvous(cfg, &departures_);
      } catch (const Error &e) {
        say("cannot serve the rendezvous store: %s", e.what());
        supervisor_.launch_failed(1);
        return failed_slot;
      }
      if (port == 0) port = server->port();
    }
    topo.restart_count = restart;
    topo.max_restarts = opts_.max_restarts;
    if (topo.in_world && topo.master_port == 0)
      topo.master_port =
          free_port(topo.connect_host, port < 65535 ? port + 1 : 1);
    topo.threads_per_worker =
        threads_per_worker(usable_cpus(), topo.local_world_size);
    if (opts_.verbose)
      say("%s; rendezvous %s:%d%s; program %s%s", topo.description.c_str(),
          topo.connect_host.c_str(), port, topo.serve ? " (served here)" : "",
          program_.c_str(),
          restart ? format("; restart %d", restart).c_str() : "");
    if (opts_.verbose && topo.threads_per_worker > 0)
      say("OMP_NUM_THREADS=%d per worker (%d CPUs, %d local workers)%s",
          topo.threads_per_worker, usable_cpus(), topo.local_world_size,
          std::getenv("OMP_NUM_THREADS") ? ": not used, OMP_NUM_THREADS is set"
                                         : "");
    const std::vector<int> cpus = usable_cpu_list();
    const auto slices = worker_cpu_slices(
        cpus, static_cast<int>(topo.workers.size()),
        !topo.workers.empty() && !topo.workers[0].cuda_device.empty(),
        opts_.bind_to);
    for (size_t i = 0; i < topo.workers.size(); ++i)
      topo.workers[i].cpus = slices[i];
    if (opts_.verbose && restart == 0)
      say("--bind-to %s: %s", opts_.bind_to.c_str(),
          slices.empty() || slices[0].empty()
              ? "workers not bound"
              : format("%zu CPU(s) per worker", slices[0].size()).c_str());

    // --ps: the ps tasks first (the workers wait for them anyway).
    std::vector<std::string> env = base_env_;
    bool started_all = opts_.num_ps == 0 || start_ps_tasks(topo, port, &env);
    for (size_t i = 0; started_all && i < topo.workers.size(); ++i) {
      const LocalWorker &w = topo.workers[i];
      try {
        Supervisor::Restarter again;
        if (opts_.num_ps > 0)
          again = [this, t = topo, env, i, port]() mutable {
            ++t.restart_count;
            return start_worker(t, env, i, port);
          };
        supervisor_.add(w.label, w.rank, start_worker(topo, env, i, port),
                        std::move(again));
      } catch (const Error &e) {
        say("rank %s: %s", w.label.c_str(), e.what());
        if (restart > 0) failed_slot = slots_[i];
        supervisor_.launch_failed(127);
        started_all = false;
      }
    }
    if (opts_.evaluator && started_all) start_evaluator(topo, env, port);
    supervisor_.wait();
    server.reset();  // after the workers: they may still be talking to it
    return failed_slot;
  }

  // Worker i of topo, its HB_RESTART_COUNT topo.restart_count. Throws
  // hb::Error when it cannot be started.
  SpawnedProcess start_worker(const Topology &topo,
                              const std::vector<std::string> &env, size_t i,
                              int port) const {
    const LocalWorker &w = topo.workers[i];
    if (topo.restart_count > 0 && slots_[i] == fail_slot_)
      fail(HB_ERR_IO, "HB_TEST_FAIL_START=%d: this worker fails to start",
           fail_slot_);
    SpawnRequest req;
    req.path = program_;
    req.argv = opts_.command;
    req.env = worker_environment(env, topo, w, port);
    req.capture_output = opts_.prefix;
    req.inherit_stdin =
        w.local_rank == 0 && !::isatty(0) && topo.restart_count == 0;
    req.cpus = w.cpus;
    return spawn_process(req);
  }

  // hbrun --ps: starts the ps tasks, each on a free port of its own, and
  // adds their addresses to env (for the workers). False when one could
  // not be started (the job is then stopping).
  bool start_ps_tasks(const Topology &topo, int port,
                      std::vector<std::string> *env) {
    std::vector<int> ports;
    std::string hosts;
    for (int i = 0; i < opts_.num_ps; ++i) {
      int p = 0;
      for (int tries = 0; tries < 100 && p <= 0; ++tries) {
        int q = free_port("127.0.0.1", 0);
        if (q > 0 && q != port && q != topo.master_port &&
            std::find(ports.begin(), ports.end(), q) == ports.end())
          p = q;
      }
      if (p <= 0) {
        say("--ps: no free port for ps task %d", i);
        supervisor_.launch_failed(1);
        return false;
      }
      ports.push_back(p);
      hosts += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(p);
    }
    // Ps task variables in hbrun's own environment would make every
    // worker a ps task.
    env->erase(std::remove_if(env->begin(), env->end(),
                              [](const std::string &e) {
                                return e.rfind("HB_PS_HOSTS=", 0) == 0 ||
                                       e.rfind("HB_TASK_TYPE=", 0) == 0 ||
                                       e.rfind("HB_TASK_ID=", 0) == 0;
                              }),
               env->end());
    env->push_back("HB_PS_HOSTS=" + hosts);
    for (int i = 0; i < opts_.num_ps; ++i) {
      SpawnRequest req;
      req.path = program_;
      req.argv = opts_.command;
      req.env = *env;
      req.env.push_back("HB_TASK_TYPE=ps");
      req.env.push_back("HB_TASK_ID=" + std::to_string(i));
      req.capture_output = opts_.prefix;
      const std::string label = "ps:" + std::to_string(i);
      try {
        supervisor_.add(label, -1, spawn_process(req));
      } catch (const Error &e) {
        say("%s: %s", label.c_str(), e.what());
        supervisor_.launch_failed(127);
        return false;
      }
    }
    // For hbrun --join: where the ps tasks of this start are.
    try {
      JobInfo info;
      info.pid = ::getpid();
      info.ps_hosts = hosts;
      info.world = topo.world_size;
      write_job_file(job_path_, info);
      if (opts_.verbose)
        say("job %ld (add workers with hbrun --join %ld; job file %s)",
            info.pid, info.pid, job_path_.c_str());
    } catch (const Error &e) {
      say("%s: hbrun --join cannot find this job", e.what());
    }
    return true;
  }

  // hbrun --evaluator: the program once more, as a TF_CONFIG evaluator task.
  // env: the workers' (HB_PS_HOSTS with --ps: it is a task of that job).
  void start_evaluator(const Topology &topo,
                       const std::vector<std::string> &env, int port) {
    SpawnRequest req;
    req.path = program_;
    req.argv = opts_.command;
    req.env = evaluator_environment(env, topo, port);
    req.capture_output = opts_.prefix;
    try {
      supervisor_.add("evaluator", -1, spawn_process(req));
    } catch (const Error &e) {
      say("evaluator: %s", e.what());
      supervisor_.launch_failed(127);
    }
  }

  const LaunchOptions &opts_;
  const Topology &full_;
  const rdv::ServerConfig &server_cfg_;
  const std::string program_;
  const std::string job_path_;  // --ps: the job file (job_file.h)
  DepartureLog departures_;
  Supervisor supervisor_;
  const std::vector<std::string> base_env_;
  const int fail_slot_;
  std::vector<int> slots_;  // the full topology's workers still started
};

// hbrun --join: -n workers (default 1) into the running ps job opts.join,
// supervised here as ps mode's workers (restarted alone, with their rank).
int run_join(const LaunchOptions &opts, const std::string &program) {
  const int count = opts.nproc > 0 ? opts.nproc : 1;
  JobInfo job;
  try {
    job = join_job(opts.join, count, ::getpid());
  } catch (const Error &e) {
    say("%s", e.what());
    return kUsageExitCode;
  }
  const int world = job.next_rank + count;
  if (opts.verbose)
    say("joining job %ld (ps tasks %s, started with %d workers): ranks "
        "%d..%d of %d",
        job.pid, job.ps_hosts.c_str(), job.world, job.next_rank, world - 1,
        world);
  Topology topo;
  topo.restart_count = 0;
  topo.max_restarts = opts.max_restarts;
  topo.threads_per_worker = threads_per_worker(usable_cpus(), world);
  Supervisor supervisor(SupervisorConfig{opts.grace_ms, opts.timeout_ms,
                                         nullptr, true, opts.max_restarts,
                                         nullptr});
  const std::vector<std::string> base = current_environment();
  auto start = [&opts, &program, base, world](const Topology &t, int rank,
                                              const std::string &hosts) {
    SpawnRequest req;
    req.path = program;
    req.argv = opts.command;
    req.env = joined_worker_environment(base, t, rank, world, hosts);
    req.capture_output = opts.prefix;
    return spawn_process(req);
  };
  for (int i = 0; i < count; ++i) {
    const int rank = job.next_rank + i;
    const std::string label = std::to_string(rank);
    // A restart finds the ps tasks where the job has them now (a job
    // restarted as a whole serves them on new ports).
    Supervisor::Restarter again = [&opts, start, topo, rank]() mutable {
      ++topo.restart_count;
      return start(topo, rank, read_job_file(opts.join).ps_hosts);
    };
    try {
      supervisor.add(label, rank, start(topo, rank, job.ps_hosts),
                     std::move(again));
    } catch (const Error &e) {
      say("rank %s: %s", label.c_str(), e.what());
      supervisor.launch_failed(127);
      break;
    }
  }
  supervisor.wait();
  return supervisor.exit_code();
}

int run(int argc, char **argv) {
  LaunchOptions opts;
  Topology topo;
  rdv::ServerConfig server_cfg;
  try {
    opts = parse_command_line(argc, argv);
    if (opts.help) {
      std::fputs(usage_text(), stdout);
      return 0;
    }
    if (!opts.join.empty()) {
      // A joiner's workers are not planned from GPUs or TF_CONFIG: the
      // job it joins fixed where they meet.
      const char *tf = std::getenv("TF_CONFIG");
      if (opts.use_tf_config && tf && *tf)
        fail(HB_ERR_INVALID_ARGUMENT,
             "option --join adds workers to a hbrun --ps job on this "
             "machine; with TF_CONFIG start a worker task listed in the "
             "cluster spec instead (or pass --no-tf-config)");
    } else {
      topo = plan_topology(
          opts, [](const char *n) { return std::getenv(n); },
          // /dev/nvidia<N> first: it needs no CUDA initialisation in hbrun.
          [] {
            int n = count_nvidia_device_nodes("/dev");
            return n > 0 ? n : gpu::device_count();
          });
      check_single_machine_options(opts, topo);
    }
    if (topo.serve) server_cfg = rendezvous_config(topo);
  } catch (const Error &e) {
    say("%s (see hbrun --help)", e.what());
    return kUsageExitCode;
  }
  std::string program;
  try {
    program = find_program(opts.command[0], std::getenv("PATH"));
  } catch (const Error &e) {
    say("%s", e.what());
    return e.status() == HB_ERR_PERMISSION ? 126 : 127;  // as a shell does
  }
  if (!opts.join.empty()) return run_join(opts, program);
  return Launch(opts, topo, server_cfg, program).run();
}

}  // namespace
}  // namespace launcher
}  // namespace hb

int main(int argc, char **argv) { return hb::launcher::run(argc, argv); }
