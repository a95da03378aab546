// hb_reader: the files of one shard, parsed ahead by parser threads into
// bounded queues, handed out as batches in a deterministic order (chunk k
// comes from thread k % num_threads, whatever the timing).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "reader/batch_builder.h"
#include "reader/file_list.h"
#include "reader/position.h"
#include "reader/row_block.h"
#include "reader/settings.h"
#include "reader/shard_plan.h"

namespace hb {
namespace reader {

class Reader {
 public:
  // seq: where the shard's chunk sequence starts (a restored reader's
  // remaining ranges); lines/skipped: the counters carried over.
  Reader(std::vector<FileInfo> files, Settings s, int shard, int num_shards,
         Sequence seq = {}, uint64_t lines = 0, uint64_t skipped = 0);
  ~Reader();
  Reader(const Reader &) = delete;
  Reader &operator=(const Reader &) = delete;

  // The next batch, or nullptr when the shard is out of data. Throws the
  // first failure of the stream, at its place, and again on every later call.
  hb_reader_batch *next();

  uint64_t lines() const { return lines_; }
  // Every line of the sequence was handed out.
  bool done() const { return done_; }
  uint64_t skipped() const { return skipped_; }
  int64_t num_files() const { return static_cast<int64_t>(files_.size()); }

  // What was handed out so far (between next() calls).
  Position position() const;
  const std::vector<FileInfo> &files() const { return files_; }
  const Settings &settings() const { return s_; }
  const Sequence &sequence() const { return seq_; }
  int shard() const { return shard_; }
  int num_shards() const { return num_shards_; }

 private:
  bool short_batch_allowed() const { return !s_.drop_last; }
  hb_reader_batch *emit_or_drop();
  void stop_threads();

  const std::vector<FileInfo> files_;
  const Settings s_;
  const int shard_, num_shards_;
  const Sequence seq_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<BlockQueue>> queues_;
  std::vector<std::thread> threads_;

  // Consumer state (the caller's thread).
  BatchBuilder builder_;
  std::unique_ptr<RowBlock> block_;  // being consumed
  int64_t block_row_ = 0;
  int64_t chunk_ = 0;  // chunk number being consumed
  bool done_ = false;
  hb_status error_ = HB_OK;
  std::string error_message_;
  uint64_t lines_ = 0, skipped_ = 0;
  // The position of the last row taken from block_'s chunk.
  bool partial_ = false;
  int64_t next_byte_ = 0, next_line_ = 0;
  int epoch_ = -1;
};

}  // namespace reader
}  // namespace hb
