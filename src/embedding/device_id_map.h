// A dynamic GPU table's id -> row map, on the device (the plugin's
// emb_idmap_* kernels over DeviceOps; layout: id_map_math.h), so an
// owner maps the ids it received without copying them to the host.
//
// New ids get rows in the order of their first occurrence in the ids
// assign() is given -- the order in which the host shard creates rows --
// so a GPU table's rows, and its checkpoints, are the host table's. The
// row -> id array (row_ids) keeps the creation order for saving; load()
// rebuilds the map from a shard's ids.
//
// The host knows the row count only as an upper bound between steps:
// assign() adds its input size to the bound, and settle() copies the device
// count (8 bytes) back, best right after a wait the caller has anyway (the
// step plan's), when the stream is idle. Capacities are sized from the
// bound (hash load <= 1/2), so the kernels never run out of room; if they
// did (a bug), the device count becomes -1 and settle() throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedding/device_ops.h"

namespace hb {
namespace emb {

class DeviceIdMap {
 public:
  explicit DeviceIdMap(std::string table) : table_(std::move(table)) {}

  // Makes the row count exact: after an assign(), copies the device count
  // and waits. Throws HB_ERR_INTERNAL when the map overflowed (and at every
  // later call, until load()).
  void settle(DeviceOps &ops);
  // The row count as of the last settle(), plus every assign() since.
  int64_t rows_bound() const { return bound_; }
  // Exact once settled.
  int64_t rows() const { return rows_; }

  // out_rows[i] = the row of ids[i] for i < min(*count, n) (count: device,
  // NULL for n), creating rows for new ids (their records are the
  // caller's: first_new() .. num_rows() on the device). Grows the table
  // first when the bound requires it (a wait, then a rebuild).
  void assign(DeviceOps &ops, const int64_t *ids, size_t n,
              const int64_t *count, int64_t *out_rows);
  // Device int64s: the count before the last assign() and the count now.
  const int64_t *first_new() const { return counts_.get<int64_t>(); }
  const int64_t *num_rows() const { return counts_.get<int64_t>() + 1; }
  const int64_t *row_ids() const { return row_ids_.get<int64_t>(); }

  // Replaces the content: ids[r] (host, distinct) gets row r.
  void load(DeviceOps &ops, const std::vector<int64_t> &ids);
  // The ids of rows [from, rows()) (after settle()), copied to the host
  // (waits).
  std::vector<int64_t> ids(DeviceOps &ops, int64_t from) const;

  void release(DeviceOps &ops);

 private:
  // Room for `rows` rows: row_ids and a table at load <= 1/2.
  void reserve(DeviceOps &ops, int64_t rows);

  const std::string table_;
  DeviceBuf keys_, vals_, row_ids_, counts_;
  int64_t capacity_ = 0, row_capacity_ = 0;
  int64_t rows_ = 0, bound_ = 0;
  bool in_flight_ = false, broken_ = false;
};

}  // namespace emb
}  // namespace hb
