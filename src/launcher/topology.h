// Which workers this hbrun starts and where their rendezvous is: from the
// command line, the GPU lists and TF_CONFIG (semantics in hbrun --help).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launcher/launch_options.h"

namespace hb {
namespace launcher {

// Reads an environment variable; nullptr when unset. Tests pass a map.
using EnvLookup = std::function<const char *(const char *name)>;

struct LocalWorker {
  int rank = 0;  // global rank (-1 for a ps/evaluator task)
  int local_rank = 0;
  std::string label;        // the output prefix: "0", "ps:1"
  std::string cuda_device;  // CUDA_VISIBLE_DEVICES for it; empty: unchanged
  std::vector<int> cpus;    // the CPUs it is bound to; empty: not bound
};

struct Topology {
  int world_size = 0;
  int local_world_size = 0;
  bool in_world = true;  // false: a ps/evaluator task (no HB_* variables)
  bool from_tf_config = false;  // the roles come from TF_CONFIG
  std::vector<LocalWorker> workers;

  bool serve = false;        // this hbrun serves the rendezvous store
  std::string bind_host;     // where the store listens (when serve)
  int bind_port = 0;         // 0: ephemeral
  std::string connect_host;  // what the workers' HB_RENDEZVOUS names
  int connect_port = 0;      // 0: the served store's actual port
  // MASTER_PORT for the workers' own framework store (torch.distributed):
  // never the rendezvous port. 0: hbrun picks a free one at launch.
  int master_port = 0;
  // OMP_NUM_THREADS for each worker unless the environment sets it (0: do
  // not add it); see threads_per_worker.
  int threads_per_worker = 0;
  // HB_RESTART_COUNT for the workers (how often hbrun started the job
  // again; -1: not set) and --max-restarts.
  int restart_count = -1;
  int max_restarts = 0;

  std::string description;  // one line for hbrun's startup message
};

// The GPUs the workers split between them (see --help); gpu_count is asked
// only for NVIDIA_VISIBLE_DEVICES=all.
std::vector<std::string> visible_gpus(const EnvLookup &env,
                                      const std::function<int()> &gpu_count);

// The single-machine world of only the workers at `slots` (indices into
// full.workers, ascending): they become ranks 0..slots.size()-1 and keep
// their GPUs; the world and local world shrink to match. hbrun --min-nproc
// goes on with it when some workers cannot be started again.
Topology shrink_topology(const Topology &full, const std::vector<int> &slots);

// How many GPUs a machine (or container) exposes as /dev/nvidia<N> nodes
// under dev_dir: counting them needs no CUDA library.
int count_nvidia_device_nodes(const std::string &dev_dir);

// Throws HB_ERR_CONFIG (no -n and no GPUs, malformed TF_CONFIG) or
// HB_ERR_INVALID_ARGUMENT, naming what was wrong.
Topology plan_topology(const LaunchOptions &opts, const EnvLookup &env,
                       const std::function<int()> &gpu_count);

// CPUs this process may run on (its affinity mask; at least 1).
int usable_cpus();

// Their numbers, ascending.
std::vector<int> usable_cpu_list();

// The CPUs each of `workers` workers is bound to under --bind-to `mode`
// (launch_options.h): consecutive, disjoint slices of cpus.size() / workers
// CPUs when there are at least as many CPUs as workers; with fewer, worker
// i gets CPU i mod cpus.size(); "none", or `gpu_workers` under "auto",
// binds nobody. Empty lists mean not bound.
std::vector<std::vector<int>> worker_cpu_slices(const std::vector<int> &cpus,
                                                int workers, bool gpu_workers,
                                                const std::string &mode);

// The OMP_NUM_THREADS that keeps local_workers workers' thread pools
// (OpenMP, and OpenBLAS / MKL, which fall back to it) from oversubscribing
// `cpus` CPUs: max(1, cpus / local_workers); 0 (leave it unset) for a single
// worker, as torchrun does.
int threads_per_worker(int cpus, int local_workers);

// The environment of one worker: `base` ("NAME=value" entries) with the
// HB_* variables, torchrun's (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and CUDA_VISIBLE_DEVICES of
// `w` replaced or added; OMP_NUM_THREADS=topo.threads_per_worker added
// when that is > 0 and `base` has no OMP_NUM_THREADS; HB_RESTART_COUNT (and
// torchrun's TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS) when
// topo.restart_count >= 0.
// rendezvous_port is the store's actual port.
std::vector<std::string> worker_environment(
    const std::vector<std::string> &base, const Topology &topo,
    const LocalWorker &w, int rendezvous_port);

// The environment of a worker hbrun --join adds to a running ps job: as
// worker_environment for rank `rank` of a world of `world` (local rank 0 of
// 1), with HB_PS_HOSTS=ps_hosts and without a rendezvous (HB_RENDEZVOUS,
// HB_RENDEZVOUS_SERVED, MASTER_ADDR, MASTER_PORT), ps task variables or
// TF_CONFIG: a joiner meets the job only through its ps tasks.
// topo_in gives restart_count, max_restarts and threads_per_worker.
std::vector<std::string> joined_worker_environment(
    const std::vector<std::string> &base, const Topology &topo_in, int rank,
    int world, const std::string &ps_hosts);

// The environment of hbrun --evaluator's process: `base` without any
// launcher's rank variables (HB_*, torchrun's, Open MPI's, Slurm's, PMI's)
// or HB_RENDEZVOUS, plus what a TF_CONFIG evaluator task sees: TF_CONFIG
// naming the workers as the cluster (rendezvous host, one port each, for
// the record: an evaluator connects to none of them) and task evaluator:0;
// HB_RESTART_COUNT as the workers get it; PYTHONUNBUFFERED=1 unless set.
std::vector<std::string> evaluator_environment(
    const std::vector<std::string> &base, const Topology &topo,
    int rendezvous_port);

}  // namespace launcher
}  // namespace hb
