// A parser thread: takes chunks t, t + T, t + 2T, ... of its shard's
// sequence, parses their lines into RowBlocks and queues them. It ends with
// a stream_end block, or with an error block at the first failure (a
// malformed line unless skipped, a read error, a damaged gzip stream).
#pragma once

#include <atomic>
#include <vector>

#include "reader/file_list.h"
#include "reader/row_block.h"
#include "reader/settings.h"
#include "reader/shard_plan.h"

namespace hb {
namespace reader {

struct WorkerArgs {
  const std::vector<FileInfo> *files;
  const Settings *settings;
  const Sequence *sequence;
  int shard, num_shards;
  int thread, num_threads;
  BlockQueue *queue;
  const std::atomic<bool> *stop;
};

void run_parse_worker(const WorkerArgs &args) noexcept;

// Rows per RowBlock: big enough to amortise the queue, small enough that a
// thread's queue (queue_depth blocks) stays a few MiB.
constexpr int64_t kBlockRows = 2048;

}  // namespace reader
}  // namespace hb
