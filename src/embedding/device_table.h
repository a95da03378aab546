// A sharded table whose row records live in a CUDA device's memory. The
// step is the host table's (table.h), run over DeviceOps:
//
// - the caller's ids (device) are copied to the host and planned there with
//   the host table's StepPlan (dedup in first-occurrence order, check,
//   bucket by owner); headers {status, bad id, count} go over the host
//   Exchange, so a bad id fails the step on every rank without a hang;
// - ids, rows and gradients travel between devices (ops.alltoallv: NCCL);
// - the owner maps the ids it received to record indices on the host (the
//   host Shard's index: dense for static tables, the IdMap for dynamic
//   ones, whose new rows are initialized on the host and uploaded), then
//   gathers rows / sums gradients / applies the optimizer on the device;
// - local duplicates are summed in batch order and the owner sums partial
//   sums in rank order (emb_segment_sum over the segments StepPlan's order
//   defines), so results are bit-equal to the host table's.
//
// The host Table keeps the config agreement, the id -> record index map and
// a host copy of the records that is current only after download() (used
// by checkpoints and exports); upload() pushes it back after a load.
// Rows and gradients travel in the wire dtype (float16 / bfloat16 rounded
// on the device with the host's rounding: abi/half_math.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "embedding/device_ops.h"
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

  DeviceOps &ops() { return *ops_; }

 private:
  struct Buf {
    void *p = nullptr;
    size_t bytes = 0;
  };
  template <class T>
  T *ensure(Buf &b, size_t count);
  template <class T>
  T *upload_vec(Buf &b, const std::vector<T> &v);
  const int64_t *download_ids(const int64_t *ids, size_t n, const void *data,
                              const char *what);
  // The host half of a step and the id exchange (sum_locally: also the
  // segments of the local gradient sums, in h_order_ / h_seg_).
  void start_step(const int64_t *ids, size_t n, const void *data,
                  const char *what, bool sum_locally);
  void route_ids();
  // Sends rows (float32, counts per peer) in the wire dtype; returns the
  // received rows as float32 in `into`.
  float *exchange_rows(const float *send, const std::vector<int64_t> &scount,
                       Buf &into, const std::vector<int64_t> &rcount);
  // out[u] = sum of the src rows of segment u of h_order_ / h_seg_.
  void sum_segments(const float *src, size_t nseg, float *out);
  // Record index of each id (creating dynamic rows on the device too).
  void map_rows(const int64_t *ids, size_t n);
  void ensure_records(int64_t rows);
  void release();  // waits (bounded) and frees every device buffer
  void copy_records(int64_t from, int64_t to, bool to_device);
  std::vector<int64_t> bytes_of(const std::vector<int64_t> &counts,
                                size_t unit) const;

  Table &host_;
  std::unique_ptr<DeviceOps> ops_;
  StepPlan plan_;
  hb_cuda_optimizer opt_;
  const int64_t dim_, words_;
  const hb_dtype wire_;
  float *records_ = nullptr;
  int64_t capacity_ = 0;  // records allocated on the device

  Buf send_ids_, recv_ids_, rows_, map_, order_, seg_, count_, fa_, fb_, fc_,
      wsend_, wrecv_;
  std::vector<int64_t> h_ids_, h_recv_ids_, h_rows_, h_map_, h_order_, h_seg_;
};

}  // namespace emb
}  // namespace hb
