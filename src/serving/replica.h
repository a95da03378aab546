// One copy of a served table at one version: its rows by id (row_table.h).
// Mutated only while no reader can see it (serving_table.h keeps two and
// swaps them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serving/export_format.h"
#include "serving/row_table.h"

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
  int64_t rows() const { return static_cast<int64_t>(table_.size()); }
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
    table_.for_each(f);
  }

 private:
  std::string name_;
  int64_t dim_;
  int64_t version_;
  uint64_t lineage_;
  RowTable table_;
};

}  // namespace serving
}  // namespace hb
