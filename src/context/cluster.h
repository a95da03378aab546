// Cluster discovery: who am I, how many are we, where is the rendezvous.
// Order: explicit hb_context_options, hbrun's HB_* variables, then other
// launchers' variables (torchrun, Open MPI, Slurm, PMI; their rendezvous is
// HB_RENDEZVOUS or MASTER_ADDR:MASTER_PORT+1), TF_CONFIG, then a world of
// one (docs/multi-host.md).
#pragma once

#include <string>
#include <vector>

#include "hb.h"

namespace hb {

class Options;

struct ClusterInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string task_type = "worker";  // chief | worker | ps | evaluator
  int task_id = 0;
  bool in_world = true;    // false for ps and evaluator tasks
  std::string rendezvous;  // "host:port"; empty: none (world of one)
  // Parameter-server mode: host:port of every ps task (TF_CONFIG's "ps",
  // or the ps_hosts option that hbrun --ps sets); empty: collective mode.
  std::vector<std::string> ps_hosts;
  bool launcher_serves =
      false;  // HB_RENDEZVOUS_SERVED=1: hbrun serves the store
  // "options", "env" (HB_*), "torchrun", "openmpi", "slurm", "pmi",
  // "tf_config" or "default"
  std::string source;
};

// Parsed TF_CONFIG. Throws HB_ERR_CONFIG with a message naming the problem.
struct TfConfig {
  std::vector<std::string> chief, worker, ps, evaluator;  // host:port lists
  std::string task_type;
  int task_index = 0;
};
TfConfig parse_tf_config(const std::string &json);

// Throws HB_ERR_CONFIG (malformed HB_* variable, TF_CONFIG or option).
ClusterInfo discover_cluster(const hb_context_options *opts,
                             const Options &options);

// The ps_hosts option as a list ("h:p,h:p"); throws HB_ERR_CONFIG naming
// a malformed entry.
std::vector<std::string> parse_ps_hosts(const std::string &list);

// Splits "host:port"; throws HB_ERR_CONFIG naming `what`.
void split_host_port(const std::string &addr, const char *what,
                     std::string *host, int *port);

}  // namespace hb
