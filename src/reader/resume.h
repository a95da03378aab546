// A reader's state in a checkpoint, and how a restored reader goes on
// (docs/fault-tolerance.md, "Readers"):
//
// - the saved state is the reader's Sequence and Position (what it handed
//   out), plus what its sequence depends on (the files, the epochs, the
//   shuffle, the chunk size and its shard);
// - at the same shard count, shard s goes on with old shard s's lines not
//   handed out yet: the rest of its current epoch as explicit chunks, then
//   the planned epochs -- the same lines in the same order, so the same
//   batches as the uninterrupted reader;
// - at another shard count, the lines no old shard handed out, up to the
//   latest epoch any old shard reached, are laid end to end per epoch (old
//   shard order) and cut into equal byte ranges (a gzip remainder goes whole
//   to the shard holding its first byte); later epochs are planned for the
//   new shard count. Every line not handed out is read exactly once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reader/file_list.h"
#include "reader/position.h"
#include "reader/settings.h"
#include "reader/shard_plan.h"

namespace hb {
namespace reader {

class Reader;

struct SavedReader {
  uint64_t files = 0;  // fingerprint of the paths, sizes and gzip flags
  int32_t num_epochs = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t chunk_bytes = 0;
  int32_t shard = 0, num_shards = 1;
  Sequence seq;
  Position pos;
};

uint64_t files_fingerprint(const std::vector<FileInfo> &files);
SavedReader save_reader(const Reader &r);
std::string encode_reader(const SavedReader &s);
// HB_ERR_CORRUPT naming `what` when the bytes are not a saved reader.
SavedReader decode_reader(const std::string &bytes, const std::string &what);

// How shard `shard` of `num_shards` goes on from the saved readers (every
// old shard's, any order). *lines / *skipped: the counters it carries (its
// own at the same shard count; else shard 0 gets the sums). Throws
// HB_ERR_INVALID_ARGUMENT when the files, epochs or shuffle differ, or old
// shards are missing.
Sequence resume_sequence(const std::vector<FileInfo> &files,
                         const Settings &current,
                         const std::vector<SavedReader> &old, int shard,
                         int num_shards, uint64_t *lines, uint64_t *skipped);

}  // namespace reader
}  // namespace hb
