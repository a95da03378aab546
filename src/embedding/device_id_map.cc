#include "embedding/device_id_map.h"

#include <algorithm>

#include "abi/error.h"
#include "embedding/id_map_math.h"

namespace hb {
namespace emb {
namespace {

// The smallest valid capacity with load <= 1/2 for `rows` keys.
int64_t capacity_for(int64_t rows) {
  int64_t cap = idmap::kMinCapacity;
  while (cap < 2 * rows) cap *= 2;
  return cap;
}

}  // namespace

void DeviceIdMap::settle(DeviceOps &ops) {
  if (in_flight_) {
    // Right after the caller's wait this costs one small copy: the stream
    // is idle (a copy to pageable memory waits for the stream anyway).
    int64_t count = 0;
    ops.copy(&count, num_rows(), sizeof count);
    ops.sync();
    in_flight_ = false;
    broken_ = count < 0;
    if (!broken_) rows_ = count;
  }
  // Sticky: the map lost rows, every later step would map ids wrongly.
  if (broken_)
    fail(HB_ERR_INTERNAL,
         "embedding '%s': the device id map ran out of room (capacity %lld "
         "slots, %lld rows); load a checkpoint to rebuild it",
         table_.c_str(), (long long)capacity_, (long long)row_capacity_);
  bound_ = rows_;
}

void DeviceIdMap::reserve(DeviceOps &ops, int64_t rows) {
  if (rows > row_capacity_) {
    size_t keep = static_cast<size_t>(row_capacity_);
    int64_t cap = std::max<int64_t>({rows, 2 * row_capacity_, 64});
    row_ids_.ensure_keep<int64_t>(ops, static_cast<size_t>(cap), keep);
    row_capacity_ = cap;
  }
  if (2 * rows <= capacity_) return;
  // Rehash: the exact count first, then a new table built from row_ids.
  settle(ops);
  int64_t cap = capacity_for(std::max(rows, 2 * rows_));
  keys_.ensure<int64_t>(ops, static_cast<size_t>(cap + 1));
  vals_.ensure<int64_t>(ops, static_cast<size_t>(cap + 1));
  capacity_ = cap;
  ops.idmap_build(keys_.get<int64_t>(), vals_.get<int64_t>(), capacity_,
                  row_ids_.get<int64_t>(), rows_);
}

void DeviceIdMap::assign(DeviceOps &ops, const int64_t *ids, size_t n,
                         const int64_t *count, int64_t *out_rows) {
  const int64_t k = static_cast<int64_t>(n);
  reserve(ops, bound_ + k);
  int64_t *counts = counts_.ensure<int64_t>(ops, 2);
  ops.idmap_assign(keys_.get<int64_t>(), vals_.get<int64_t>(), capacity_, ids,
                   n, count, row_ids_.get<int64_t>(), row_capacity_, counts + 1,
                   counts, out_rows);
  bound_ += k;
  in_flight_ = true;  // the count is read by the next settle()
}

void DeviceIdMap::load(DeviceOps &ops, const std::vector<int64_t> &ids) {
  const int64_t rows = static_cast<int64_t>(ids.size());
  in_flight_ = broken_ = false;
  rows_ = bound_ = rows;
  if (rows > row_capacity_ || !row_ids_.get<int64_t>()) {
    row_capacity_ = std::max<int64_t>(rows, 64);
    row_ids_.ensure<int64_t>(ops, static_cast<size_t>(row_capacity_));
  }
  if (2 * rows > capacity_ || !keys_.get<int64_t>()) {
    capacity_ = std::max(capacity_, capacity_for(rows));
    keys_.ensure<int64_t>(ops, static_cast<size_t>(capacity_ + 1));
    vals_.ensure<int64_t>(ops, static_cast<size_t>(capacity_ + 1));
  }
  if (rows) ops.copy(row_ids_.get<int64_t>(), ids.data(), ids.size() * 8);
  const int64_t counts[2] = {rows, rows};
  ops.copy(counts_.ensure<int64_t>(ops, 2), counts, sizeof counts);
  ops.idmap_build(keys_.get<int64_t>(), vals_.get<int64_t>(), capacity_,
                  row_ids_.get<int64_t>(), rows);
}

std::vector<int64_t> DeviceIdMap::ids(DeviceOps &ops, int64_t from) const {
  std::vector<int64_t> out(
      static_cast<size_t>(std::max<int64_t>(rows_ - from, 0)));
  if (!out.empty())
    ops.copy(out.data(), row_ids_.get<int64_t>() + from, out.size() * 8);
  ops.sync();
  return out;
}

void DeviceIdMap::release(DeviceOps &ops) {
  for (DeviceBuf *b : {&keys_, &vals_, &row_ids_, &counts_}) b->release(ops);
  capacity_ = row_capacity_ = 0;
}

}  // namespace emb
}  // namespace hb
