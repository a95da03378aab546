// The lifecycle section of a checkpoint shard file (format version 2,
// docs/embedding-format.md): the table's update step, each row's last
// update step and update count (in the order of the file's rows), the
// exact admission counters and the Bloom filter's cells. Rows and counters
// are keyed by id, so they re-shard like rows; the Bloom cells belong to
// one rank of one world size and are restored only at the same world size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "embedding/lifecycle/admission.h"

namespace hb {
class AtomicFile;
class ByteReader;
namespace emb {
class Shard;
class Table;
}  // namespace emb
namespace lifecycle {

class Lifecycle;
class RowMeta;

// The section for the rows of s (in s.for_each order), as bytes: a table
// save appends them to its shard file at once, a job checkpoint copies
// them at its step boundary and writes them later.
std::string encode_state(const emb::Shard &s, const RowMeta &m,
                         const Admission &a);

// What a load keeps for this rank, gathered from every shard file.
struct LoadedState {
  bool present = false;  // the checkpoint had a lifecycle section
  uint64_t step = 0;
  struct Row {
    int64_t id;
    uint64_t last_step;
    uint32_t updates;
  };
  std::vector<Row> rows;
  std::vector<Admission::Counter> counters;
  std::vector<uint8_t> bloom;
  bool bloom_present = false;
};

// Reads one file's section after its rows: file_ids are the ids of its
// rows in file order; keeps the rows and counters of the ids `owned` says
// are this rank's, and the Bloom cells when keep_bloom. HB_ERR_CORRUPT
// naming the file and the byte offset when the section is malformed.
void read_state(ByteReader &rd, const std::vector<int64_t> &file_ids,
                const std::function<bool(int64_t)> &owned, bool keep_bloom,
                LoadedState *out);

// After the table swapped in the loaded shard: restores the step, the
// rows' columns and the admission state (a checkpoint without the section:
// step 0, every row last updated at step 0 with no updates).
void restore_state(emb::Table &t, const LoadedState &st);

}  // namespace lifecycle
}  // namespace hb
