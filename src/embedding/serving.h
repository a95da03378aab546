// Export files and the read-only serving table (format:
// docs/embedding-format.md, "Export file").
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "embedding/id_map.h"
#include "embedding/table.h"

namespace hb {
namespace emb {

// Collective: gathers every rank's weights at rank 0, which writes `path`
// atomically (ids ascending).
void export_table(Table &t, const char *path);
// Writes an export file from records {int64 id, dim float32 weights}, in
// any order (the file holds them by ascending id).
void write_export(const Spec &spec, const std::vector<unsigned char> &records,
                  const char *path);

// A table opened from an export file. Lookups only read the map and rows,
// so any number of threads may call lookup at once.
class ServingTable {
 public:
  explicit ServingTable(const char *path);
  int64_t dim() const { return dim_; }
  int64_t rows() const { return static_cast<int64_t>(ids_.size()); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  const std::string &name() const { return name_; }
  // Unknown ids read zeros and count as misses.
  void lookup(const int64_t *ids, size_t n, float *out) const;

 private:
  std::string name_;
  int64_t dim_ = 0;
  std::vector<int64_t> ids_;
  std::vector<float> rows_;
  IdMap map_;
  mutable std::atomic<uint64_t> misses_{0};
};

}  // namespace emb
}  // namespace hb
