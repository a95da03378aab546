// The training side of serving: collective exports of a sharded table.
// Every rank sends its rows (all of them, or those changed since a base
// version) to rank 0, which writes one file atomically (export_format.h).
#pragma once

#include <cstdint>
#include <map>

#include "embedding/table.h"

namespace hb {
namespace serving {

// Format 1, unversioned (hb_embedding_export).
void export_table(emb::Table &t, const char *path);

// The versioned exports a table made (per rank, kept with its handle):
// which versions a delta may start from, and the table's write clock at
// each, so a delta holds the rows stamped after its base's clock.
struct ExportHistory {
  uint64_t lineage = 0;      // rank 0's random id of this table's exports
  int64_t last_version = 0;  // versions only increase
  std::map<int64_t, uint64_t> bases;  // version -> write clock at export
};

// Collective: writes version `version` of the table to path, in full
// (base == 0) or as the change since the export of version `base`, which
// must be one of the last `keep` versions this table exported. Versions
// must increase; ranks must pass the same arguments (HB_ERR_MISMATCH).
// Returns the file's size on rank 0 (0 elsewhere).
uint64_t export_version(emb::Table &t, ExportHistory &h, const char *path,
                        int64_t version, int64_t base, int64_t keep);

}  // namespace serving
}  // namespace hb
