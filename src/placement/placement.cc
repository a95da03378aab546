// AdaNet's placement strategies (adanet/distributed/placement.py):
// ReplicationStrategy builds and trains everything on every worker;
// RoundRobinStrategy dedicates worker tasks (worker_index mod
// (num_subnetworks + 1)) to the ensemble (task 0) and to subnetworks.
#include "abi/error.h"
#include "hb.h"

namespace {

void check_common(int32_t num_workers, int32_t worker_index,
                  int32_t num_subnetworks, int32_t *out_build_ensemble,
                  int32_t *out_train_subnetworks,
                  int32_t *out_build_subnetwork) {
  HB_CHECK_ARG(num_workers >= 1, "num_workers = %d must be >= 1", num_workers);
  HB_CHECK_ARG(worker_index >= 0 && worker_index < num_workers,
               "worker_index = %d is outside [0, %d)", worker_index,
               num_workers);
  HB_CHECK_ARG(num_subnetworks >= 0, "num_subnetworks = %d is negative",
               num_subnetworks);
  HB_CHECK_ARG(out_build_ensemble && out_train_subnetworks,
               "out_build_ensemble or out_train_subnetworks is NULL");
  HB_CHECK_ARG(out_build_subnetwork || num_subnetworks == 0,
               "out_build_subnetwork is NULL with num_subnetworks = %d",
               num_subnetworks);
}

// RoundRobinStrategy.should_build_subnetwork.
bool rr_build_subnetwork(int32_t workers, int32_t index, int32_t k, bool drop,
                         int32_t sub) {
  if (k == 1) return true;
  int32_t task = index % (k + 1);
  if (task == 0) return true;  // the ensemble worker builds every subnetwork
  int32_t subnetwork_worker_index = task - 1;
  if (drop) return subnetwork_worker_index == sub;
  int32_t workers_per_subnetwork = workers / (k + 1);
  int32_t num_subnetwork_workers;
  if (workers % (k + 1) == 0)
    num_subnetwork_workers = k;
  else if (index >= workers_per_subnetwork * (k + 1))
    num_subnetwork_workers =
        workers % (k + 1) - 1;  // >= 1 here since task >= 1
  else
    num_subnetwork_workers = k;
  return subnetwork_worker_index == sub % num_subnetwork_workers;
}

}  // namespace

extern "C" {

hb_status hb_placement_replication(int32_t num_workers, int32_t worker_index,
                                   int32_t num_subnetworks,
                                   int32_t *out_build_ensemble,
                                   int32_t *out_train_subnetworks,
                                   int32_t *out_build_subnetwork) {
  return hb::guard([&] {
    check_common(num_workers, worker_index, num_subnetworks, out_build_ensemble,
                 out_train_subnetworks, out_build_subnetwork);
    *out_build_ensemble = 1;
    *out_train_subnetworks = 1;
    for (int32_t i = 0; i < num_subnetworks; ++i) out_build_subnetwork[i] = 1;
  });
}

hb_status hb_placement_round_robin(int32_t num_workers, int32_t worker_index,
                                   int32_t num_subnetworks,
                                   int32_t drop_remainder,
                                   int32_t *out_build_ensemble,
                                   int32_t *out_train_subnetworks,
                                   int32_t *out_build_subnetwork) {
  return hb::guard([&] {
    check_common(num_workers, worker_index, num_subnetworks, out_build_ensemble,
                 out_train_subnetworks, out_build_subnetwork);
    const int32_t k = num_subnetworks;
    bool ensemble = k == 1 || worker_index % (k + 1) == 0;
    *out_build_ensemble = ensemble;
    *out_train_subnetworks = (k == 1 || num_workers == 1) ? 1 : !ensemble;
    for (int32_t i = 0; i < k; ++i)
      out_build_subnetwork[i] = rr_build_subnetwork(num_workers, worker_index,
                                                    k, drop_remainder != 0, i);
  });
}

}  // extern "C"
