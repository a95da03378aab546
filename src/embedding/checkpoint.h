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
#include <string>

#include "embedding/table.h"

namespace hb {
namespace emb {

void save_checkpoint(Table &t, const char *dir);
void load_checkpoint(Table &t, const char *dir);

// Tests: called with "shards_written" after every shard file is committed
// and before the manifest is written (to kill a rank mid-save).
extern std::function<void(const char *phase)> g_save_test_hook;

}  // namespace emb
}  // namespace hb
