// Writes one rank's files of a checkpoint (every file atomic: fsync +
// rename), without any collective: safe on a background thread.
#pragma once

#include <string>
#include <vector>

#include "embedding/checkpoint.h"
#include "recovery/manifest.h"
#include "recovery/snapshot.h"

namespace hb {
namespace recovery {

struct RankFiles {
  std::vector<FileEntry> files;        // buffers, readers, metrics
  std::vector<emb::ShardFile> shards;  // one per table, in order
  uint64_t bytes = 0;                  // everything written
};

RankFiles write_rank_files(const Snapshot &s);

// The text form that travels through the rendezvous store to rank 0, and
// back; an error travels as "error <status> <message>".
std::string encode_rank_files(const RankFiles &f);
RankFiles decode_rank_files(const std::string &text, int rank,
                            size_t num_tables);

}  // namespace recovery
}  // namespace hb
