// The reader's settings: hb_reader_config read safely (min(struct_size,
// sizeof)), defaults applied and every field checked once, so the rest of
// the module trusts them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hb.h"

namespace hb {
namespace reader {

enum class Column : char {
  kLabel = 'L',
  kDense = 'I',
  kSparse = 'C',
  kSkip = 'S'
};

struct Settings {
  std::vector<Column> columns;  // one per field of a line
  int num_dense = 0;
  int num_sparse = 0;
  char separator = '\t';
  bool log_dense = false;
  float dense_missing = 0.0f;
  int64_t num_rows = 0;
  int32_t hash = HB_READER_HASH_MOD;
  bool skip_bad_lines = false;
  int64_t max_line_bytes = 1 << 20;
  int64_t batch_size = 1024;
  int num_threads = 2;
  int queue_depth = 4;
  int64_t chunk_bytes = 4 << 20;
  int32_t num_epochs = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;
  int32_t shard_index = -1;
  int32_t num_shards = 0;
};

// cfg NULL: defaults. Bad values are HB_ERR_INVALID_ARGUMENT naming the field.
Settings settings_from_config(const hb_reader_config *cfg);

}  // namespace reader
}  // namespace hb
