// Export files: full exports (format 1, unversioned; format 2, version N
// with no base) and deltas (format 2 with a base version). Layout:
// docs/embedding-format.md, "Export file" and "Versioned exports and
// deltas".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace serving {

// One export file in memory: a full table (base == 0) or the change of a
// table from version `base` to `version` (rows inserted or updated, ids
// evicted). Format 1 files read as version 0, base 0.
struct ExportImage {
  std::string name;
  int64_t dim = 0;
  int64_t version = 0;
  int64_t base = 0;
  uint64_t lineage = 0;      // the exporting table's id (0: format 1)
  int64_t total_rows = -1;   // rows of the table at `version` (-1: format 1)
  std::vector<int64_t> ids;  // ascending, no duplicates
  std::vector<float> rows;   // ids.size() x dim, in the order of ids
  std::vector<int64_t> evicted;  // ascending, disjoint from ids
  bool full() const { return base == 0; }
};

// Reads and checks a whole file (magic, format, checksum, sizes, id order):
// HB_ERR_CORRUPT naming the file and what is wrong; HB_ERR_IO when it
// cannot be read.
ExportImage read_export(const std::string &path);

// Header of a format-2 file; rows and ids come from the caller.
struct ExportHeader {
  std::string name;
  int64_t dim = 0;
  int64_t version = 0;
  int64_t base = 0;
  uint64_t lineage = 0;
  int64_t total_rows = 0;
};

// Writes a format-2 file atomically (temporary name, fsync, rename).
// Records are {int64 id, dim float32} packed at `stride` bytes, in any
// order (sorted here); evicted ids in any order. Returns the file's size.
uint64_t write_export(const std::string &path, const ExportHeader &h,
                      const unsigned char *records, size_t count, size_t stride,
                      std::vector<int64_t> evicted);

// Writes a format-1 file (the unversioned hb_embedding_export).
void write_export_v1(const std::string &path, const std::string &name,
                     int64_t dim, const unsigned char *records, size_t count,
                     size_t stride);

}  // namespace serving
}  // namespace hb
