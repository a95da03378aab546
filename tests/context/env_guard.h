// Sets and unsets environment variables for one test and restores them
// afterwards, so that tests of the HB_* / TF_CONFIG discovery stay isolated.
#pragma once

#include <cstdlib>
#include <map>
#include <string>

namespace hb_test {

class EnvGuard {
 public:
  // Every variable the cluster discovery reads starts unset.
  EnvGuard() {
    for (const char *v :
         {"HB_RANK", "HB_WORLD_SIZE", "HB_LOCAL_RANK", "HB_LOCAL_WORLD_SIZE",
          "HB_RENDEZVOUS", "HB_RENDEZVOUS_SERVED", "HB_RENDEZVOUS_TOKEN",
          "TF_CONFIG", "HB_TIMEOUT_MS", "HB_LOG_LEVEL", "HB_CPU_HOST",
          "HB_SOCKET_IFNAME",
          // Other launchers' variables (a CI job may run under one).
          "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
          "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
          "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "PMI_RANK",
          "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"})
      unset(v);
  }
  ~EnvGuard() {
    for (const auto &kv : saved_) {
      if (kv.second.first)
        setenv(kv.first.c_str(), kv.second.second.c_str(), 1);
      else
        unsetenv(kv.first.c_str());
    }
  }
  void set(const std::string &name, const std::string &value) {
    save(name);
    setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string &name) {
    save(name);
    unsetenv(name.c_str());
  }

 private:
  void save(const std::string &name) {
    if (saved_.count(name)) return;
    const char *v = std::getenv(name.c_str());
    saved_[name] = {v != nullptr, v ? v : ""};
  }
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

}  // namespace hb_test
