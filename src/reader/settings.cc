#include "reader/settings.h"

#include <algorithm>
#include <cstring>

#include "abi/error.h"

namespace hb {
namespace reader {
namespace {

const char kCriteoColumns[] = "LIIIIIIIIIIIIICCCCCCCCCCCCCCCCCCCCCCCCCC";

}  // namespace

Settings settings_from_config(const hb_reader_config *user) {
  hb_reader_config c = HB_READER_CONFIG_INIT;
  if (user) {
    HB_CHECK_ARG(user->struct_size >= sizeof(size_t),
                 "hb_reader_config.struct_size = %zu is too small",
                 user->struct_size);
    std::memcpy(&c, user, std::min(user->struct_size, sizeof c));
  }
  Settings s;
  const char *cols = c.columns ? c.columns : kCriteoColumns;
  int labels = 0;
  for (const char *p = cols; *p; ++p) {
    switch (*p) {
      case 'L':
        ++labels;
        break;
      case 'I':
        ++s.num_dense;
        break;
      case 'C':
        ++s.num_sparse;
        break;
      case 'S':
        break;
      default:
        fail(HB_ERR_INVALID_ARGUMENT,
             "hb_reader_config.columns \"%s\": '%c' at %td is not one of "
             "L, I, C, S",
             cols, *p, p - cols);
    }
    s.columns.push_back(static_cast<Column>(*p));
  }
  HB_CHECK_ARG(!s.columns.empty(), "hb_reader_config.columns is empty");
  HB_CHECK_ARG(
      labels <= 1,
      "hb_reader_config.columns \"%s\" has %d label columns (at most 1)", cols,
      labels);
  HB_CHECK_ARG(c.separator > 0 && c.separator < 256 && c.separator != '\n' &&
                   c.separator != '\r',
               "hb_reader_config.separator = %d is not a byte other than NUL, "
               "CR or LF",
               c.separator);
  s.separator = static_cast<char>(c.separator);
  s.log_dense = c.log_dense != 0;
  s.dense_missing = c.dense_missing;
  HB_CHECK_ARG(c.num_rows >= 0, "hb_reader_config.num_rows = %lld is negative",
               static_cast<long long>(c.num_rows));
  s.num_rows = c.num_rows;
  HB_CHECK_ARG(c.hash == HB_READER_HASH_MOD || c.hash == HB_READER_HASH_MIX,
               "hb_reader_config.hash = %d is not an hb_reader_hash_code",
               c.hash);
  s.hash = c.hash;
  s.skip_bad_lines = c.skip_bad_lines != 0;
  HB_CHECK_ARG(c.max_line_bytes >= 1 && c.max_line_bytes <= (int64_t{1} << 30),
               "hb_reader_config.max_line_bytes = %lld is outside [1, 2^30]",
               static_cast<long long>(c.max_line_bytes));
  s.max_line_bytes = c.max_line_bytes;
  HB_CHECK_ARG(c.batch_size >= 1 && c.batch_size <= (int64_t{1} << 24),
               "hb_reader_config.batch_size = %lld is outside [1, 2^24]",
               static_cast<long long>(c.batch_size));
  s.batch_size = c.batch_size;
  HB_CHECK_ARG(c.num_threads >= 1 && c.num_threads <= 256,
               "hb_reader_config.num_threads = %d is outside [1, 256]",
               c.num_threads);
  s.num_threads = c.num_threads;
  HB_CHECK_ARG(c.queue_depth >= 1 && c.queue_depth <= 4096,
               "hb_reader_config.queue_depth = %d is outside [1, 4096]",
               c.queue_depth);
  s.queue_depth = c.queue_depth;
  HB_CHECK_ARG(c.chunk_bytes >= 1, "hb_reader_config.chunk_bytes = %lld < 1",
               static_cast<long long>(c.chunk_bytes));
  s.chunk_bytes = c.chunk_bytes;
  HB_CHECK_ARG(c.num_epochs >= 0,
               "hb_reader_config.num_epochs = %d is negative", c.num_epochs);
  s.num_epochs = c.num_epochs;
  s.shuffle = c.shuffle != 0;
  s.seed = c.seed;
  s.drop_last = c.drop_last != 0;
  s.shard_index = c.shard_index;
  s.num_shards = c.num_shards;
  return s;
}

}  // namespace reader
}  // namespace hb
