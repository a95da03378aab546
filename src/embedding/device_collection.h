// An embedding collection over GPU tables: the step of collection.h with
// the batch, the outputs and the gradients in device memory (the tables'
// device), on the tables' DeviceOps (the context's stream):
//
// - bags: each feature's offsets or lengths become its bag bounds on the
//   device (DeviceOps::bags); only the id count, the first id's index and
//   the first bad sample of every feature reach the host (one copy, one
//   wait), to size the step and fail bad input on every rank;
// - plan: per table, its features' ids are concatenated on the device and
//   planned there (DevicePlan: the host plan's dedup order, range check and
//   owner buckets, entry for entry); the counts of every table go in the
//   collection's one header round over the host Exchange;
// - ids, rows and partial sums travel in one device payload per round
//   [peer][header][table 0][table 1]... (ops.alltoallv: NCCL), in the
//   tables' wire dtypes, with the host collection's layout and byte counts;
// - the owner halves are the tables' own (DeviceTable::gather_received /
//   apply_received); pooling and the gradient shares run on the device with
//   the host collection's float operations (DeviceOps::pool,
//   expand_grads), so results are bit-equal to the host collection;
// - plan reuse: the update's ids are compared with the lookup's on the
//   device (DeviceOps::ids_equal; one flag to the host), and the verdict
//   header {status, verdict, call id} rides in the gradient payload, so a
//   reused plan costs one round as on the host.
//
// Rounds: lookup 3 (header, ids, rows), update after the same ids 1,
// otherwise 1 + 3 (or 3 without a lookup before it) -- the host
// collection's. stats().owner_unique counts the ids owners received (their
// dedup runs on the device and its count is not copied back).
#pragma once

#include "embedding/collection.h"  // first: it turns on HB_EXPERIMENTAL

#include <vector>

#include "embedding/device_plan.h"
#include "embedding/device_table.h"

namespace hb {
namespace emb {

class DeviceCollection : public CollectionBase {
 public:
  // Collective: every feature's Feature::device set, one device, on the
  // collection's context. The tables must outlive the collection.
  DeviceCollection(std::vector<Feature> features, std::unique_ptr<Exchange> x);
  ~DeviceCollection() override;
  DeviceCollection(const DeviceCollection &) = delete;
  DeviceCollection &operator=(const DeviceCollection &) = delete;

 private:
  struct Slot {
    DeviceTable *dt;
    DevicePlan plan;
    // ids: concatenated ids of its features; recv_ids: packed by source
    // rank; rows: rows in send order (lookup) / per-id gradients (update);
    // partial: partial sums in send order; owner: the owner's float32 rows
    // (found for the lookup, received sums for the update).
    DeviceBuf ids, recv_ids, rows, partial, owner;
    Slot(DeviceTable *t, int world) : dt(t), plan(t->host().spec(), world) {}
  };

  void read_bags(const JaggedBatch &in, const char *what, const void *pooled,
                 const void *const *rows) override;
  void plan_tables(const char *what) override;
  void route_ids() override;
  void rows_and_pool(const JaggedBatch &in, float *out,
                     float *const *unpooled) override;
  bool same_ids() override;
  void expand_grads(const float *grad_out,
                    const float *const *grad_unpooled) override;
  bool send_partials(Outcome &o, bool reuse, const char *what) override;
  void swap_state() override;

  void check_device(const void *p, const char *what, const char *name,
                    size_t f);
  void size_payloads();  // sbuf_ / rbuf_ for the current layouts
  void exchange();
  // Table t's float32 rows (counts[p] for peer p, packed by peer) into its
  // sections of the send payload in its wire dtype; and from the received
  // payload back to float32 rows.
  void pack(size_t t, const float *rows, const std::vector<int64_t> &counts);
  void unpack(size_t t, const std::vector<int64_t> &counts, float *rows);
  // Ids table t received as an owner, and a buffer for as many rows.
  size_t received(size_t t) const {
    return static_cast<size_t>(plans_[t].recv_total());
  }
  float *owner_rows(size_t t);
  void release();

  DeviceOps &ops_;  // the first table's: the tables share one device/stream
  // Per-call state, and its spare set for a started lookup (swap_state).
  std::vector<Slot> slots_, spare_slots_;
  std::vector<DeviceBuf> bags_, spare_bags_;  // feature -> bag bounds (B + 1)
  std::vector<const int64_t *> ids_, spare_ids_;  // feature -> ids this call
  std::vector<const float *> w_, spare_w_;  // feature -> its weights or NULL
  std::vector<size_t> planned_n_, spare_planned_n_;  // ids at the last plan
  int64_t batch_ = 0, spare_batch_ = 0;
  DeviceBuf info_, flag_, sbuf_, rbuf_;
  std::vector<int64_t> h_info_;
};

}  // namespace emb
}  // namespace hb
