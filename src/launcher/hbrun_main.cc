// hbrun: starts the workers of one hb job on this machine, serves their
// rendezvous store and supervises them (see launch_options.cc for --help).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "abi/error.h"
#include "common/log.h"
#include "context/options.h"
#include "gpu/gpu.h"
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

std::unique_ptr<rdv::Server> start_rendezvous(const rdv::ServerConfig &cfg) {
  auto server = rdv::Server::start(cfg);
  server->on_peer_lost([](int rank, const std::string &why) {
    say("rank %d lost (rendezvous): %s", rank, why.c_str());
  });
  return server;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) env.emplace_back(*e);
  return env;
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
    topo = plan_topology(
        opts, [](const char *n) { return std::getenv(n); },
        // /dev/nvidia<N> first: it needs no CUDA initialisation in hbrun.
        [] {
          int n = count_nvidia_device_nodes("/dev");
          return n > 0 ? n : gpu::device_count();
        });
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

  if (opts.max_restarts > 0 && opts.num_ps == 0) {
    say("--max-restarts restarts workers of a --ps job (see hbrun --help)");
    return kUsageExitCode;
  }
  if (opts.num_ps > 0 && !topo.in_world) {
    say("--ps: this TF_CONFIG task is itself a ps or evaluator task (list "
        "the ps tasks in TF_CONFIG instead) (see hbrun --help)");
    return kUsageExitCode;
  }
  if (opts.num_ps > 0 && topo.world_size != topo.local_world_size) {
    say("--ps starts the ps tasks of a job on one machine; across machines "
        "list them in TF_CONFIG's \"ps\" (see hbrun --help)");
    return kUsageExitCode;
  }
  SupervisorConfig scfg{opts.grace_ms, opts.timeout_ms};
  scfg.ps_mode = opts.num_ps > 0;
  scfg.max_restarts = opts.max_restarts;
  Supervisor supervisor(scfg);
  std::unique_ptr<rdv::Server> server;
  int port = topo.connect_port;
  if (topo.serve) {
    try {
      server = start_rendezvous(server_cfg);
    } catch (const Error &e) {
      say("cannot serve the rendezvous store: %s", e.what());
      return 1;
    }
    if (port == 0) port = server->port();
  }
  if (topo.in_world && topo.master_port == 0)
    topo.master_port =
        free_port(topo.connect_host, port < 65535 ? port + 1 : 1);
  topo.threads_per_worker =
      threads_per_worker(usable_cpus(), topo.local_world_size);
  if (opts.verbose)
    say("%s; rendezvous %s:%d%s; program %s", topo.description.c_str(),
        topo.connect_host.c_str(), port, topo.serve ? " (served here)" : "",
        program.c_str());
  if (opts.verbose && topo.threads_per_worker > 0)
    say("OMP_NUM_THREADS=%d per worker (%d CPUs, %d local workers)%s",
        topo.threads_per_worker, usable_cpus(), topo.local_world_size,
        std::getenv("OMP_NUM_THREADS") ? ": not used, OMP_NUM_THREADS is set"
                                       : "");

  const std::vector<int> cpus = usable_cpu_list();
  const auto slices = worker_cpu_slices(
      cpus, static_cast<int>(topo.workers.size()),
      !topo.workers.empty() && !topo.workers[0].cuda_device.empty(),
      opts.bind_to);
  for (size_t i = 0; i < topo.workers.size(); ++i)
    topo.workers[i].cpus = slices[i];
  if (opts.verbose)
    say("--bind-to %s: %s", opts.bind_to.c_str(),
        slices.empty() || slices[0].empty()
            ? "workers not bound"
            : format("%zu CPU(s) per worker", slices[0].size()).c_str());

  std::vector<std::string> base_env = current_environment();
  // --ps: the ps tasks first (the workers wait for them anyway).
  std::string ps_hosts;
  std::vector<int> ps_ports;
  for (int i = 0; i < opts.num_ps; ++i) {
    int p = 0;
    for (int tries = 0; tries < 100; ++tries) {
      p = free_port("127.0.0.1", 0);
      if (p > 0 && p != port &&
          std::find(ps_ports.begin(), ps_ports.end(), p) == ps_ports.end())
        break;
    }
    if (p <= 0) {
      say("--ps: no free port for ps task %d", i);
      return 1;
    }
    ps_ports.push_back(p);
    ps_hosts += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(p);
  }
  auto with_ps = [&](std::vector<std::string> env) {
    if (opts.num_ps == 0) return env;
    env.erase(std::remove_if(env.begin(), env.end(),
                             [](const std::string &e) {
                               return e.rfind("HB_PS_HOSTS=", 0) == 0 ||
                                      e.rfind("HB_TASK_TYPE=", 0) == 0 ||
                                      e.rfind("HB_TASK_ID=", 0) == 0;
                             }),
              env.end());
    env.push_back("HB_PS_HOSTS=" + ps_hosts);
    return env;
  };
  for (int i = 0; i < opts.num_ps; ++i) {
    SpawnRequest req;
    req.path = program;
    req.argv = opts.command;
    req.env = with_ps(base_env);
    req.env.push_back("HB_TASK_TYPE=ps");
    req.env.push_back("HB_TASK_ID=" + std::to_string(i));
    req.capture_output = opts.prefix;
    std::string label = "ps:" + std::to_string(i);
    try {
      supervisor.add(label, spawn_process(req));
    } catch (const Error &e) {
      say("%s: %s", label.c_str(), e.what());
      supervisor.launch_failed(127);
      break;
    }
  }
  for (const LocalWorker &w : topo.workers) {
    SpawnRequest req;
    req.path = program;
    req.argv = opts.command;
    req.env = with_ps(worker_environment(base_env, topo, w, port));
    req.capture_output = opts.prefix;
    req.inherit_stdin = w.local_rank == 0 && !::isatty(0);
    req.cpus = w.cpus;
    try {
      supervisor.add(w.label, spawn_process(req),
                     opts.num_ps > 0 ? &req : nullptr);
    } catch (const Error &e) {
      say("rank %s: %s", w.label.c_str(), e.what());
      supervisor.launch_failed(127);
      break;
    }
  }
  int code = supervisor.wait();
  server.reset();  // after the workers: they may still be talking to it
  return code;
}

}  // namespace
}  // namespace launcher
}  // namespace hb

int main(int argc, char **argv) { return hb::launcher::run(argc, argv); }
