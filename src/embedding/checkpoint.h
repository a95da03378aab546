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
namespace lifecycle {
struct LoadedState;
}
namespace emb {

void save_checkpoint(Table &t, const char *dir);
void load_checkpoint(Table &t, const char *dir);

// The pieces of a save and a load, for shards whose owners do not save
// through one collective: job checkpoints (src/recovery) write the shard
// files of a table snapshot and commit the manifest once every rank's files
// are there; the ps tasks (src/ps) each write their shard and one worker
// commits the manifest.
struct ShardFile {
  std::string file;  // name inside the checkpoint directory
  uint64_t bytes = 0, rows = 0, checksum = 0;
};
using RecordVisitor = std::function<void(int64_t id, const float *record)>;
// Calls the visitor for every row of a shard, in the shard's order.
using RecordSource = std::function<void(const RecordVisitor &)>;

// Commits `<name>.<nonce>.shard-<rank>-of-<world>` in dir (atomic);
// life_state: the lifecycle section (lifecycle::encode_state) of a table
// with a lifecycle, else null.
ShardFile write_shard_file(const Spec &spec, int64_t record_words, int64_t rows,
                           const RecordSource &each,
                           const std::string *life_state,
                           const std::string &dir, uint64_t nonce, int rank,
                           int world);
// Commits `<name>.manifest` in dir naming shards[r] as rank r's file: from
// then on a load of dir finds this save.
void write_manifest(const Spec &spec, int64_t record_words, uint64_t nonce,
                    const std::vector<ShardFile> &shards,
                    const std::string &dir);
uint64_t fresh_nonce();
// mkdir -p; HB_ERR_IO naming `what` and the directory.
void make_dirs(const std::string &what, const std::string &dir);
// The name of shard `rank` of `world` of save `nonce` of a table.
std::string shard_file_name(const std::string &table, uint64_t nonce, int rank,
                            int world);
// After the manifest: removes other saves' shard files of the table.
void remove_stale_shards(const Spec &spec, const std::string &dir,
                         uint64_t nonce, const std::string &what);
// Validates the checkpoint in dir and returns a new shard (rank of world)
// with the rows it owns, and in *state (may be null) their lifecycle
// section; throws naming the table and the file.
std::unique_ptr<Shard> read_checkpoint(const Spec &spec, int64_t record_words,
                                       const char *dir, int rank, int world,
                                       lifecycle::LoadedState *state);

// Tests: called with "shards_written" after every shard file is committed
// and before the manifest is written (to kill a rank mid-save).
extern std::function<void(const char *phase)> g_save_test_hook;

}  // namespace emb
}  // namespace hb
