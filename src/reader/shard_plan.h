// Which bytes of which files a rank reads in an epoch, cut into chunks that
// the parser threads take in turn (docs in hb.h, "Sharding").
#pragma once

#include <cstdint>
#include <vector>

#include "reader/file_list.h"

namespace hb {
namespace reader {

// Lines of file `file` that start in (begin, end], or in [0, end] when
// begin == 0. A gzip file is always one chunk [0, size].
struct Chunk {
  int file = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// File order of an epoch: identity, or a Fisher-Yates shuffle driven by
// splitmix64(seed, epoch) (the same on every platform).
std::vector<int> epoch_order(int num_files, bool shuffle, uint64_t seed,
                             int epoch);

// The chunks of shard `shard` of `num_shards` for one epoch, in read order.
std::vector<Chunk> plan_epoch(const std::vector<FileInfo> &files,
                              const std::vector<int> &order, int shard,
                              int num_shards, int64_t chunk_bytes);

}  // namespace reader
}  // namespace hb
