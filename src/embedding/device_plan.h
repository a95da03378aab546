// A GPU table's step plan, built on the device from the plugin's kernels so
// the ids never leave it: the same plan as the host's StepPlan (plan.h),
// entry for entry, because tables promise bit-identical results for every
// world size.
//
// Sender (plan): emb_dedup sorts the ids; emb_first_occurrence turns its
// segments into the distinct ids in first-occurrence order (the host
// Dedup's order); emb_partition_bounded buckets them by owner with a
// stable order (the host's counting sort); emb_send_slots gives the send
// buffer and, for every input position, the send slot of its id. Only the
// per-peer counts and the first out-of-range position (static tables)
// reach the host, in one copy and one wait, to size the exchange.
//
// Grouping (group): positions grouped by a key in [0, k) -- each key's
// positions ascending, as the host's group_by_slot -- for segment sums that
// add a slot's rows in input order (emb_dedup of the keys).
//
// Owner (owner_dedup): the received ids in first-occurrence order (packed
// by source rank, so ties go to the lowest rank, as the host's owner dedup)
// and the grouping of the received rows by id.
#pragma once

#include <cstdint>
#include <vector>

#include "embedding/device_ops.h"
#include "embedding/shard.h"

namespace hb {
namespace emb {

// Positions [0, n) grouped by key: order, seg (k + 1) and the device count
// of groups, as emb_segment_sum takes them.
struct DeviceGrouping {
  DeviceBuf order, seg, count;
  void run(DeviceOps &ops, const int64_t *keys, size_t n);
  void release(DeviceOps &ops);
};

// ids[0..n) deduplicated in first-occurrence order on the device: unique,
// inverse (n entries; the first *count of unique are valid) and count.
struct DeviceDedup {
  DeviceBuf sorted_inverse, order, seg, count, unique, inverse;
  void run(DeviceOps &ops, const int64_t *ids, size_t n);
  void release(DeviceOps &ops);
};

class DevicePlan {
 public:
  DevicePlan(const Spec &spec, int world);

  // Plans ids[0..n) (device) and waits for the counts. Returns the input
  // position of the first id outside [0, num_rows) of a static table, or
  // -1 (then send_counts() is not meaningful).
  int64_t plan(DeviceOps &ops, const int64_t *ids, size_t n);
  const int64_t *send_counts() const { return counts_.data(); }
  size_t send_total() const { return send_total_; }
  const int64_t *send_ids() const { return send_ids_.get<int64_t>(); }
  // slots()[i]: the send slot of ids[i] (device).
  const int64_t *slots() const { return slots_.get<int64_t>(); }
  // Groups the input positions by send slot (after plan): slot_groups().
  void group_by_slot(DeviceOps &ops);
  const DeviceGrouping &slot_groups() const { return slot_groups_; }

  // Owner side: the nrecv received ids (device) deduplicated, and the
  // received rows grouped by unique id.
  void owner_dedup(DeviceOps &ops, const int64_t *recv, size_t nrecv);
  const DeviceDedup &owner() const { return owner_; }
  const DeviceGrouping &owner_groups() const { return owner_groups_; }

  // Owner's dense row index of ids (static tables), first min(*count, n).
  void local_rows(DeviceOps &ops, const int64_t *ids, size_t n,
                  const int64_t *count, int64_t *rows) const;

  void release(DeviceOps &ops);

 private:
  const Partitioner part_;
  const bool dynamic_;
  size_t n_ = 0, send_total_ = 0;
  DeviceDedup local_, owner_;
  DeviceGrouping slot_groups_, owner_groups_;
  // counts_and_bad_: world counts, then the first bad position (one copy).
  DeviceBuf owners_, counts_and_bad_, send_order_, send_ids_, slots_;
  std::vector<int64_t> counts_;
};

}  // namespace emb
}  // namespace hb
