#include "embedding/device_plan.h"

#include <algorithm>

namespace hb {
namespace emb {
namespace {

int32_t cuda_mode(const Partitioner &p) {
  return p.kind == HB_PARTITION_DIV ? HB_CUDA_PARTITION_DIV
                                    : HB_CUDA_PARTITION_MOD;
}

}  // namespace

void *DeviceBuf::grow(DeviceOps &ops, size_t bytes) {
  size_t need = std::max<size_t>(bytes, 64);
  if (need > bytes_) {
    size_t grown = std::max(need, bytes_ * 2);
    if (p_) {
      ops.sync();  // earlier work may still use it
      ops.free(p_);
      p_ = nullptr;
      bytes_ = 0;
    }
    p_ = ops.alloc(grown);
    bytes_ = grown;
  }
  return p_;
}

void *DeviceBuf::grow_keep(DeviceOps &ops, size_t bytes, size_t keep) {
  size_t need = std::max<size_t>(bytes, 64);
  if (need <= bytes_) return p_;
  size_t grown = std::max(need, bytes_ * 2);
  void *q = ops.alloc(grown);
  if (p_) {
    if (keep) ops.copy(q, p_, std::min(keep, bytes_));
    ops.sync();  // the copy, and earlier work that may use the old memory
    ops.free(p_);
  }
  p_ = q;
  bytes_ = grown;
  return p_;
}

void DeviceBuf::release(DeviceOps &ops) {
  if (p_) ops.free(p_);
  p_ = nullptr;
  bytes_ = 0;
}

void DeviceGrouping::run(DeviceOps &ops, const int64_t *keys, size_t n) {
  ops.dedup(keys, n, nullptr, nullptr, count.ensure<int64_t>(ops, 1),
            order.ensure<int64_t>(ops, n), seg.ensure<int64_t>(ops, n + 1));
}

void DeviceGrouping::release(DeviceOps &ops) {
  for (DeviceBuf *b : {&order, &seg, &count}) b->release(ops);
}

void DeviceDedup::run(DeviceOps &ops, const int64_t *ids, size_t n) {
  int64_t *inv = sorted_inverse.ensure<int64_t>(ops, n),
          *ord = order.ensure<int64_t>(ops, n),
          *sg = seg.ensure<int64_t>(ops, n + 1);
  ops.dedup(ids, n, nullptr, inv, count.ensure<int64_t>(ops, 1), ord, sg);
  ops.first_occurrence(ids, n, inv, ord, sg, unique.ensure<int64_t>(ops, n),
                       inverse.ensure<int64_t>(ops, n));
}

void DeviceDedup::release(DeviceOps &ops) {
  for (DeviceBuf *b :
       {&sorted_inverse, &order, &seg, &count, &unique, &inverse})
    b->release(ops);
}

DevicePlan::DevicePlan(const Spec &spec, int world)
    : part_(spec, world), dynamic_(spec.dynamic()) {}

int64_t DevicePlan::plan(DeviceOps &ops, const int64_t *ids, size_t n) {
  const int world = part_.world;
  n_ = n;
  int64_t *counts = counts_and_bad_.ensure<int64_t>(ops, world + 1);
  if (!dynamic_) ops.find_out_of_range(ids, n, part_.num_rows, counts + world);
  local_.run(ops, ids, n);
  // Stable by owner over the distinct ids in first-occurrence order: the
  // host's counting sort. Entries past the device count sort last.
  int64_t *order = send_order_.ensure<int64_t>(ops, n);
  ops.partition(local_.unique.get<int64_t>(), n, local_.count.get<int64_t>(),
                world, cuda_mode(part_), part_.block,
                owners_.ensure<int32_t>(ops, n), counts, order);
  ops.send_slots(local_.unique.get<int64_t>(), order,
                 local_.count.get<int64_t>(), local_.inverse.get<int64_t>(), n,
                 send_ids_.ensure<int64_t>(ops, n),
                 slots_.ensure<int64_t>(ops, n));
  // The only wait of the plan: counts (and the first bad position).
  counts_.assign(world + 1, 0);
  ops.copy(counts_.data(), counts, (world + 1) * sizeof(int64_t));
  ops.sync();
  int64_t bad = dynamic_ ? static_cast<int64_t>(n) : counts_[world];
  counts_.resize(world);
  send_total_ = 0;
  for (int64_t c : counts_) send_total_ += static_cast<size_t>(c);
  return bad < static_cast<int64_t>(n) ? bad : -1;
}

void DevicePlan::group_by_slot(DeviceOps &ops) {
  slot_groups_.run(ops, slots(), n_);
}

void DevicePlan::owner_dedup(DeviceOps &ops, const int64_t *recv,
                             size_t nrecv) {
  owner_.run(ops, recv, nrecv);
  owner_groups_.run(ops, owner_.inverse.get<int64_t>(), nrecv);
}

void DevicePlan::local_rows(DeviceOps &ops, const int64_t *ids, size_t n,
                            const int64_t *count, int64_t *rows) const {
  ops.local_rows(ids, n, count, part_.world, cuda_mode(part_), part_.block,
                 rows);
}

void DevicePlan::release(DeviceOps &ops) {
  local_.release(ops);
  owner_.release(ops);
  slot_groups_.release(ops);
  owner_groups_.release(ops);
  for (DeviceBuf *b :
       {&owners_, &counts_and_bad_, &send_order_, &send_ids_, &slots_})
    b->release(ops);
}

}  // namespace emb
}  // namespace hb
