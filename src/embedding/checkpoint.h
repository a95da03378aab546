// Collective checkpoints of a sharded table (format: docs/embedding-format.md).
//
// save: rank 0 picks a fresh nonce; every rank writes its rows and slots to
// `<name>.<nonce>.shard-<r>-of-<w>` atomically; rank 0 then commits
// `<name>.manifest` (sizes and checksums of every shard file) by rename and
// only afterwards removes the files of older saves. A crash at any point
// leaves the previous manifest and the files it names untouched.
//
// load: every rank validates the manifest and every shard file (sizes,
// checksums, name, dim, slot layout), keeps the rows it owns under the
// current world size and partition in a new shard, and the ranks agree
// before any of them swaps it in: a bad checkpoint changes nothing.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "embedding/table.h"

namespace hb {
namespace emb {

void save_checkpoint(Table &t, const char *dir);
void load_checkpoint(Table &t, const char *dir);

// The pieces of a save and a load, for shards whose owners are not a
// collective world (the ps tasks, src/ps): every owner writes its shard
// file, one caller commits the manifest once all of them did.
struct ShardInfo {
  uint64_t bytes = 0, rows = 0, checksum = 0;
};
uint64_t fresh_nonce();
// mkdir -p; throws HB_ERR_IO naming `what`.
void make_dirs(const std::string &what, const std::string &dir);
// Commits shard `rank` of `world` of the save `nonce` into dir.
ShardInfo write_shard_file(const Shard &shard, const std::string &dir,
                           uint64_t nonce, int rank, int world);
// Commits the manifest naming shards[0 .. world) of save `nonce` (the
// spec's partition is recorded; a load re-shards by id whatever it is).
void commit_manifest(const Spec &spec, int64_t record_words,
                     const std::string &dir, uint64_t nonce,
                     const std::vector<ShardInfo> &shards);
// After the manifest: removes other saves' shard files of the table.
void remove_stale_shards(const Spec &spec, const std::string &dir,
                         uint64_t nonce, const std::string &what);
// Validates the checkpoint in dir and returns a new shard (rank of world)
// with the rows it owns; throws naming the table and the file.
std::unique_ptr<Shard> read_checkpoint(const Spec &spec, int64_t record_words,
                                       const char *dir, int rank, int world);

// Tests: called with "shards_written" after every shard file is committed
// and before the manifest is written (to kill a rank mid-save).
extern std::function<void(const char *phase)> g_save_test_hook;

}  // namespace emb
}  // namespace hb
