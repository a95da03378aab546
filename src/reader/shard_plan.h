// Which bytes of which files a rank reads in an epoch, cut into chunks that
// the parser threads take in turn (docs in hb.h, "Sharding").
#pragma once

#include <cstdint>
#include <vector>

#include "reader/file_list.h"

namespace hb {
namespace reader {

// Lines of file `file` that start in (begin, end], or in [0, end] when
// begin == 0. A gzip file is always one chunk [0, size], of which the first
// skip_lines lines are not read (a restored reader's gzip file).
struct Chunk {
  int file = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int epoch = 0;  // the epoch its lines belong to
  int64_t skip_lines = 0;
};

// A shard's chunk sequence: the explicit chunks of `prefix` (a restored
// reader's remaining ranges, each tagged with its epoch, in order), then
// the planned epochs from first_epoch on (none when first_epoch reaches
// num_epochs). A fresh reader has no prefix and first_epoch 0.
struct Sequence {
  std::vector<Chunk> prefix;
  int first_epoch = 0;
};

// Appends [begin, end) of plain file `file` cut into chunks of about
// chunk_bytes. The line rule holds for any cut, so chunks need no alignment
// to lines.
void add_range(std::vector<Chunk> *out, int file, int64_t begin, int64_t end,
               int64_t chunk_bytes);

// Start of shard r's byte range when total bytes are cut into n ranges.
int64_t range_start(int64_t total, int r, int n);

// File order of an epoch: identity, or a Fisher-Yates shuffle driven by
// splitmix64(seed, epoch) (the same on every platform).
std::vector<int> epoch_order(int num_files, bool shuffle, uint64_t seed,
                             int epoch);

// The chunks of shard `shard` of `num_shards` for one epoch, in read order.
std::vector<Chunk> plan_epoch(const std::vector<FileInfo> &files,
                              const std::vector<int> &order, int shard,
                              int num_shards, int64_t chunk_bytes);

// The chunks of bytes [lo, hi) of the files laid end to end in `order`
// (lines that start in (lo, hi], a file's first line in the range holding
// its first byte): a shard of plan_epoch, or a dynamic split.
std::vector<Chunk> plan_range(const std::vector<FileInfo> &files,
                              const std::vector<int> &order, int64_t lo,
                              int64_t hi, int64_t chunk_bytes);

}  // namespace reader
}  // namespace hb
