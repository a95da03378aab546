#include "launcher/topology.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "abi/error.h"
#include "context/cluster.h"

namespace hb {
namespace launcher {
namespace {

std::vector<std::string> split_list(const std::string &s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(start, comma - start);
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    start = comma + 1;
  }
  return out;
}

bool is_wildcard(const std::string &host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]";
}

// The CPU or GPU workers of one task: L of them, ranks first_rank.. .
void add_local_workers(const LaunchOptions &opts, const EnvLookup &env,
                       const std::function<int()> &gpu_count, int first_rank,
                       Topology *topo) {
  std::vector<std::string> gpus;
  int n = opts.nproc;
  if (n == 0) {
    gpus = visible_gpus(env, gpu_count);
    if (gpus.empty())
      fail(HB_ERR_CONFIG,
           "no workers to start: give -n N for N CPU workers, or set "
           "CUDA_VISIBLE_DEVICES (or NVIDIA_VISIBLE_DEVICES) to the GPUs to "
           "use, one worker each");
    n = static_cast<int>(gpus.size());
  }
  topo->local_world_size = n;
  for (int l = 0; l < n; ++l) {
    LocalWorker w;
    w.rank = first_rank + l;
    w.local_rank = l;
    w.label = std::to_string(w.rank);
    if (!gpus.empty()) w.cuda_device = gpus[l];
    topo->workers.push_back(w);
  }
}

Topology plan_single_machine(const LaunchOptions &opts, const EnvLookup &env,
                             const std::function<int()> &gpu_count) {
  Topology t;
  add_local_workers(opts, env, gpu_count, 0, &t);
  t.world_size = t.local_world_size;
  t.serve = true;
  t.bind_host = opts.host.empty() ? "127.0.0.1" : opts.host;
  t.bind_port = opts.port;
  t.connect_host = is_wildcard(t.bind_host) ? "127.0.0.1" : t.bind_host;
  t.description = format("%d %s worker(s) on this machine", t.world_size,
                         t.workers[0].cuda_device.empty() ? "CPU" : "GPU");
  return t;
}

Topology plan_tf_config(const LaunchOptions &opts, const EnvLookup &env,
                        const std::function<int()> &gpu_count,
                        const std::string &json) {
  TfConfig tf = parse_tf_config(json);
  Topology t;
  t.from_tf_config = true;
  if (tf.task_type == "ps" || tf.task_type == "evaluator") {
    // Not part of the collective world: one process that reads its role.
    t.in_world = false;
    t.world_size = 0;
    t.local_world_size = 1;
    LocalWorker w;
    w.rank = -1;
    w.label = format("%s:%d", tf.task_type.c_str(), tf.task_index);
    t.workers.push_back(w);
    t.description = format("TF_CONFIG task %s, outside the collective world",
                           w.label.c_str());
    return t;
  }
  // The world's tasks in rank order: the chief, then the workers.
  std::vector<std::string> tasks = tf.chief;
  tasks.insert(tasks.end(), tf.worker.begin(), tf.worker.end());
  if (tasks.empty())
    fail(HB_ERR_CONFIG, "TF_CONFIG lists no chief and no worker task");
  int pos = tf.task_index +
            (tf.task_type == "worker" ? static_cast<int>(tf.chief.size()) : 0);
  if (pos < 0 || pos >= static_cast<int>(tasks.size()))
    fail(HB_ERR_CONFIG, "TF_CONFIG task %s:%d is not in its cluster",
         tf.task_type.c_str(), tf.task_index);

  add_local_workers(opts, env, gpu_count, 0, &t);
  int local = t.local_world_size;
  for (auto &w : t.workers) {
    w.rank = pos * local + w.local_rank;
    w.label = std::to_string(w.rank);
  }
  t.world_size = static_cast<int>(tasks.size()) * local;

  split_host_port(tasks[0], "TF_CONFIG rendezvous task", &t.connect_host,
                  &t.connect_port);
  if (opts.port != 0) t.connect_port = opts.port;
  // Every host must agree on it without talking: the port after hb's.
  t.master_port = t.connect_port < 65535 ? t.connect_port + 1 : 65534;
  t.serve = pos == 0;
  if (t.serve) {
    t.bind_host = opts.host.empty() ? "0.0.0.0" : opts.host;
    t.bind_port = t.connect_port;
  }
  t.description =
      format("TF_CONFIG task %s:%d (position %d of %zu): ranks %d..%d of %d",
             tf.task_type.c_str(), tf.task_index, pos, tasks.size(),
             t.workers.front().rank, t.workers.back().rank, t.world_size);
  return t;
}

}  // namespace

std::vector<std::string> visible_gpus(const EnvLookup &env,
                                      const std::function<int()> &gpu_count) {
  if (const char *cuda = env("CUDA_VISIBLE_DEVICES")) {
    std::vector<std::string> out;
    // CUDA stops at the first invalid entry; -1 is the usual "none".
    for (const auto &d : split_list(cuda)) {
      if (d == "-1") break;
      out.push_back(d);
    }
    return out;
  }
  if (const char *nv = env("NVIDIA_VISIBLE_DEVICES")) {
    std::string v = nv;
    // A container renumbers its GPUs from 0, whatever the host's ids were.
    size_t n = 0;
    if (v == "all")
      n = static_cast<size_t>(gpu_count());
    else if (v != "none" && v != "void")
      n = split_list(v).size();
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) out.push_back(std::to_string(i));
    return out;
  }
  return {};
}

Topology shrink_topology(const Topology &full, const std::vector<int> &slots) {
  Topology t = full;
  t.workers.clear();
  for (int slot : slots) {
    LocalWorker w = full.workers.at(static_cast<size_t>(slot));
    w.rank = w.local_rank = static_cast<int>(t.workers.size());
    w.label = std::to_string(w.rank);
    t.workers.push_back(w);
  }
  t.world_size = t.local_world_size = static_cast<int>(t.workers.size());
  if (t.world_size < full.world_size)
    t.description = format("%s, %d of them started", full.description.c_str(),
                           t.world_size);
  return t;
}

int count_nvidia_device_nodes(const std::string &dev_dir) {
  DIR *d = ::opendir(dev_dir.c_str());
  if (!d) return 0;
  int n = 0;
  while (const dirent *e = ::readdir(d)) {
    const char *name = e->d_name;
    if (std::strncmp(name, "nvidia", 6) != 0 || name[6] == '\0') continue;
    bool digits = true;
    for (const char *p = name + 6; *p; ++p)
      digits = digits && std::isdigit(static_cast<unsigned char>(*p));
    n += digits;
  }
  ::closedir(d);
  return n;
}

std::vector<int> usable_cpu_list() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

int usable_cpus() {
  const size_t mask = usable_cpu_list().size();
  if (mask > 0) return static_cast<int>(mask);
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<std::vector<int>> worker_cpu_slices(const std::vector<int> &cpus,
                                                int workers, bool gpu_workers,
                                                const std::string &mode) {
  std::vector<std::vector<int>> out(workers > 0 ? workers : 0);
  const int n = static_cast<int>(cpus.size());
  if (mode == "none" || n == 0 || (mode == "auto" && gpu_workers)) return out;
  if (n < workers) {
    // Round-robin, under auto too: unbound, 3-4 ranks on 2 CPUs migrated
    // and queued behind each other and trained 1.1-1.4x slower for the
    // same CPU time (docs/performance.md, "More ranks than CPUs").
    for (int w = 0; w < workers; ++w) out[w] = {cpus[w % n]};
    return out;
  }
  const int per = n / workers;
  for (int w = 0; w < workers; ++w)
    out[w].assign(cpus.begin() + w * per, cpus.begin() + (w + 1) * per);
  return out;
}

int threads_per_worker(int cpus, int local_workers) {
  if (local_workers <= 1) return 0;
  return cpus / local_workers > 1 ? cpus / local_workers : 1;
}

Topology plan_topology(const LaunchOptions &opts, const EnvLookup &env,
                       const std::function<int()> &gpu_count) {
  const char *tf = opts.use_tf_config ? env("TF_CONFIG") : nullptr;
  if (tf && *tf) return plan_tf_config(opts, env, gpu_count, tf);
  return plan_single_machine(opts, env, gpu_count);
}

std::vector<std::string> joined_worker_environment(
    const std::vector<std::string> &base, const Topology &topo_in, int rank,
    int world, const std::string &ps_hosts) {
  Topology topo = topo_in;
  topo.in_world = true;
  topo.world_size = world;
  topo.local_world_size = 1;
  topo.connect_host = "127.0.0.1";  // dropped below
  LocalWorker w;
  w.rank = rank;
  w.label = std::to_string(rank);
  std::vector<std::string> env = worker_environment(base, topo, w, 1);
  static const char *const kDropped[] = {
      "HB_RENDEZVOUS=", "HB_RENDEZVOUS_SERVED=", "MASTER_ADDR=", "MASTER_PORT=",
      "HB_PS_HOSTS=",   "HB_TASK_TYPE=",         "HB_TASK_ID=",  "TF_CONFIG="};
  env.erase(std::remove_if(env.begin(), env.end(),
                           [](const std::string &e) {
                             for (const char *d : kDropped)
                               if (e.rfind(d, 0) == 0) return true;
                             return false;
                           }),
            env.end());
  env.push_back("HB_PS_HOSTS=" + ps_hosts);
  return env;
}

std::vector<std::string> evaluator_environment(
    const std::vector<std::string> &base, const Topology &topo,
    int rendezvous_port) {
  static const char *const kDropped[] = {"HB_RANK",
                                         "HB_WORLD_SIZE",
                                         "HB_LOCAL_RANK",
                                         "HB_LOCAL_WORLD_SIZE",
                                         "HB_RENDEZVOUS",
                                         "HB_RENDEZVOUS_SERVED",
                                         "RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "LOCAL_WORLD_SIZE",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "OMPI_COMM_WORLD_LOCAL_SIZE",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS",
                                         "SLURM_LOCALID",
                                         "PMI_RANK",
                                         "PMI_SIZE",
                                         "MPI_LOCALRANKID",
                                         "MPI_LOCALNRANKS",
                                         "TF_CONFIG",
                                         "HB_RESTART_COUNT"};
  std::vector<std::string> env;
  bool has_unbuffered = false;
  for (const std::string &kv : base) {
    bool dropped = false;
    for (const char *name : kDropped)
      if (kv.compare(0, std::strlen(name) + 1, std::string(name) + "=") == 0)
        dropped = true;
    if (kv.compare(0, 17, "PYTHONUNBUFFERED=") == 0) has_unbuffered = true;
    if (!dropped) env.push_back(kv);
  }
  if (!has_unbuffered) env.emplace_back("PYTHONUNBUFFERED=1");
  std::string host = topo.connect_host;
  if (host.find(':') != std::string::npos && host.front() != '[')
    host = "[" + host + "]";
  int port = topo.connect_port ? topo.connect_port : rendezvous_port;
  std::string workers;
  for (int r = 0; r < topo.world_size; ++r)
    workers +=
        format("%s\"%s:%d\"", r ? "," : "", host.c_str(), (port + r) % 65536);
  env.push_back(
      format("TF_CONFIG={\"cluster\":{\"worker\":[%s]},\"task\":{\"type\":"
             "\"evaluator\",\"index\":0}}",
             workers.c_str()));
  if (topo.restart_count >= 0)
    env.push_back("HB_RESTART_COUNT=" + std::to_string(topo.restart_count));
  return env;
}

std::vector<std::string> worker_environment(
    const std::vector<std::string> &base, const Topology &topo,
    const LocalWorker &w, int rendezvous_port) {
  std::vector<std::pair<std::string, std::string>> set;
  if (topo.in_world) {
    int port = topo.connect_port ? topo.connect_port : rendezvous_port;
    // An IPv6 address: bracketed in host:port, bare in MASTER_ADDR.
    std::string host = topo.connect_host;
    if (host.size() > 2 && host.front() == '[')
      host = host.substr(1, host.size() - 2);
    bool ipv6 = host.find(':') != std::string::npos;
    std::string rendezvous =
        format(ipv6 ? "[%s]:%d" : "%s:%d", host.c_str(), port);
    set = {{"HB_RANK", std::to_string(w.rank)},
           {"HB_WORLD_SIZE", std::to_string(topo.world_size)},
           {"HB_LOCAL_RANK", std::to_string(w.local_rank)},
           {"HB_LOCAL_WORLD_SIZE", std::to_string(topo.local_world_size)},
           {"HB_RENDEZVOUS", rendezvous},
           {"HB_RENDEZVOUS_SERVED", "1"}};
    // torchrun's variables, so framework code under hbrun initialises as
    // under torchrun (init_process_group's env:// needs RANK and friends).
    set.insert(set.end(),
               {{"RANK", std::to_string(w.rank)},
                {"WORLD_SIZE", std::to_string(topo.world_size)},
                {"LOCAL_RANK", std::to_string(w.local_rank)},
                {"LOCAL_WORLD_SIZE", std::to_string(topo.local_world_size)},
                {"MASTER_ADDR", host},
                {"MASTER_PORT", std::to_string(topo.master_port)}});
    if (topo.restart_count >= 0)
      set.insert(
          set.end(),
          {{"HB_RESTART_COUNT", std::to_string(topo.restart_count)},
           // torchrun's names, for framework code written for its agent.
           {"TORCHELASTIC_RESTART_COUNT", std::to_string(topo.restart_count)},
           {"TORCHELASTIC_MAX_RESTARTS", std::to_string(topo.max_restarts)}});
  }
  if (!w.cuda_device.empty())
    set.emplace_back("CUDA_VISIBLE_DEVICES", w.cuda_device);

  std::vector<std::string> env;
  bool has_unbuffered = false, has_omp_threads = false;
  for (const auto &kv : base) {
    bool replaced = false;
    for (const auto &s : set)
      if (kv.compare(0, s.first.size() + 1, s.first + "=") == 0)
        replaced = true;
    if (kv.compare(0, 17, "PYTHONUNBUFFERED=") == 0) has_unbuffered = true;
    if (kv.compare(0, 16, "OMP_NUM_THREADS=") == 0) has_omp_threads = true;
    if (!replaced) env.push_back(kv);
  }
  for (const auto &s : set) env.push_back(s.first + "=" + s.second);
  // Python workers write through a pipe: without this their prints would
  // arrive in blocks, long after the fact.
  if (!has_unbuffered) env.emplace_back("PYTHONUNBUFFERED=1");
  // Workers that each start a thread per CPU (OpenMP, a BLAS) would run
  // local_workers times as many threads as CPUs; the user's setting wins.
  if (topo.threads_per_worker > 0 && !has_omp_threads)
    env.push_back("OMP_NUM_THREADS=" + std::to_string(topo.threads_per_worker));
  return env;
}

}  // namespace launcher
}  // namespace hb
