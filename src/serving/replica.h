// One copy of a served table at one version: id -> row slot, rows in one
// slab with a free list of slots. Mutated only while no reader can see it
// (serving_table.h keeps two and swaps them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedding/id_map.h"
#include "serving/export_format.h"

namespace hb {
namespace serving {

class Replica {
 public:
  // A full export (rows copied in).
  explicit Replica(const ExportImage &full);
  Replica(const Replica &) = default;

  int64_t dim() const { return dim_; }
  int64_t version() const { return version_; }
  uint64_t lineage() const { return lineage_; }
  int64_t rows() const { return static_cast<int64_t>(map_.size()); }
  const std::string &name() const { return name_; }

  // Rows of ids into out; unknown ids read zeros. Returns the misses.
  uint64_t lookup(const int64_t *ids, size_t n, float *out) const;

  // The row count after applying delta d (evicted ids that are absent do
  // not count); read-only, so it checks a delta before anything changes.
  int64_t rows_after(const ExportImage &d) const;
  // Evictions first, then inserts and updates; version becomes d.version.
  void apply(const ExportImage &d);

  // Calls f(id, row) for every row (tests).
  template <class F>
  void for_each(F &&f) const {
    for (size_t s = 0; s < slot_ids_.size(); ++s)
      if (map_.find(slot_ids_[s]) == s) f(slot_ids_[s], row(s));
  }

 private:
  const float *row(size_t slot) const { return rows_.data() + slot * dim_; }

  std::string name_;
  int64_t dim_;
  int64_t version_;
  uint64_t lineage_;
  emb::IdMap map_;                 // id -> slot
  std::vector<float> rows_;        // slot x dim
  std::vector<int64_t> slot_ids_;  // slot -> id (for_each)
  std::vector<uint32_t> free_;     // slots of evicted rows
};

}  // namespace serving
}  // namespace hb
