// A sharded table whose row records live in a CUDA device's memory. The
// step is the host table's (table.h), run over DeviceOps:
//
// - the caller's ids (device) are planned on the device (device_plan.h:
//   the host StepPlan's dedup order, check and owner buckets, entry for
//   entry); only the per-peer counts reach the host, and headers {status,
//   bad id, count} go over the host Exchange (StepPlan::agree_counts), so a
//   bad id fails the step on every rank without a hang;
// - ids, rows and gradients travel between devices (ops.alltoallv: NCCL);
// - the owner dedups what it received on the device too; a static table
//   maps ids to its dense rows on the device (emb_local_rows); a dynamic
//   table maps them with its device id -> row map (device_id_map.h), which
//   creates new ids' rows in the host shard's order and initializes them
//   on the device (init_math.h): only the 8-byte row count reaches the
//   host;
// - local duplicates are summed in batch order and the owner sums partial
//   sums in rank order (emb_segment_sum over the plan's groupings), so
//   results are bit-equal to the host table's.
//
// The host Table keeps the config agreement and a host copy of the records
// (and, dynamic, of the id -> record index map) that is current only after
// download() (used by checkpoints and exports: it copies the ids of the
// rows created since, creates them in the host shard in the same order and
// copies the records); upload() pushes it back after a load, rebuilding
// the device map.
// Rows and gradients travel in the wire dtype (float16 / bfloat16 rounded
// on the device with the host's rounding: abi/half_math.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "embedding/device_id_map.h"
#include "embedding/device_ops.h"
#include "embedding/device_plan.h"
#include "embedding/plan.h"
#include "embedding/table.h"

namespace hb {
namespace emb {

class DeviceTable {
 public:
  // Collective: makes the ops (make_ops may throw, e.g. no device on this
  // rank) and uploads host's shard; the ranks agree on the outcome, so a
  // failure on one rank fails the creation on all. host must outlive the
  // table.
  DeviceTable(Table &host,
              const std::function<std::unique_ptr<DeviceOps>()> &make_ops);
  ~DeviceTable();
  DeviceTable(const DeviceTable &) = delete;
  DeviceTable &operator=(const DeviceTable &) = delete;

  // ids, out, grads: device pointers. The last kernels may still run when
  // these return (ordered on the ops' stream: sync() / hb_context_synchronize).
  void lookup(const int64_t *ids, size_t n, float *out);
  void apply_gradients(const int64_t *ids, size_t n, const float *grads);

  // Device records -> the host shard (waits), and back.
  void download();
  void upload();

  // The owner halves of a step, shared with device collections
  // (device_collection.h), which route the ids and rows of several tables
  // at once. gather_received: rows (device, nrecv x dim float32) = the rows
  // of the ids received from peers (device, packed by source rank), creating
  // a dynamic table's new rows. apply_received: one optimizer step per
  // distinct received id with grads (nrecv x dim, one partial sum per
  // received id, packed like the ids) summed in rank order; sources: the
  // ranks that sent ids (at most one: the ids are already distinct).
  void gather_received(const int64_t *recv_ids, size_t nrecv, float *rows);
  void apply_received(const int64_t *recv_ids, size_t nrecv, const float *grads,
                      int sources);

  DeviceOps &ops() { return *ops_; }
  Table &host() { return host_; }

 private:
  void check_device(const int64_t *ids, size_t n, const void *data,
                    const char *what);
  // The sender's plan and the id exchange (sum_locally: also the groups of
  // the local gradient sums).
  void start_step(const int64_t *ids, size_t n, const void *data,
                  const char *what, bool sum_locally);
  void route_ids();
  // Sends rows (float32, counts per peer) in the wire dtype; returns the
  // received rows as float32 in `into`.
  float *exchange_rows(const float *send, const int64_t *scount,
                       DeviceBuf &into, const int64_t *rcount);
  // Record indices of ids[0..min(*count, n)) (count: device, NULL for n),
  // creating a dynamic table's new rows on the device too.
  const int64_t *rows_of(const int64_t *ids, size_t n, const int64_t *count);
  // Dynamic tables: creates the rows the device map has and the host shard
  // lacks (waits).
  void adopt_device_rows();
  void ensure_records(int64_t rows);
  void release();  // waits (bounded) and frees every device buffer
  void copy_records(int64_t from, int64_t to, bool to_device);
  std::vector<int64_t> bytes_of(const int64_t *counts, size_t unit) const;

  Table &host_;
  std::unique_ptr<DeviceOps> ops_;
  StepPlan plan_;  // the counts and their agreement
  DevicePlan dplan_;
  hb_cuda_optimizer opt_;
  const int64_t dim_, words_;
  const hb_dtype wire_;
  float *records_ = nullptr;
  int64_t capacity_ = 0;  // records allocated on the device

  DeviceBuf recv_ids_, rows_, count_, fa_, fb_, fc_, wsend_, wrecv_;
  DeviceIdMap map_;  // dynamic tables
  const hb_cuda_init init_;
};

}  // namespace emb
}  // namespace hb
