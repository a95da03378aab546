// Walks the chunk sequence of one shard over the epochs (shard_plan.h,
// Sequence): every parser thread holds its own cursor (all compute the same
// sequence), so no plan is shared and only one epoch's plan is in memory
// per thread.
#pragma once

#include <vector>

#include "reader/settings.h"
#include "reader/shard_plan.h"

namespace hb {
namespace reader {

class ChunkCursor {
 public:
  // seq must outlive the cursor.
  ChunkCursor(const std::vector<FileInfo> *files, const Settings *s, int shard,
              int num_shards, const Sequence *seq)
      : files_(files),
        s_(s),
        seq_(seq),
        shard_(shard),
        num_shards_(num_shards),
        base_(static_cast<int64_t>(seq->prefix.size())) {}

  // Chunk number k (k never decreases between calls), its epoch in
  // out->epoch; false past the end. Endless mode (num_epochs 0) ends at an
  // epoch that gives this shard nothing, so a shard without data does not
  // spin.
  bool seek(int64_t k, Chunk *out) {
    if (k < base_) {
      *out = seq_->prefix[static_cast<size_t>(k)];
      return true;
    }
    if (!planned_) {
      if (s_->num_epochs != 0 && seq_->first_epoch >= s_->num_epochs)
        return false;
      load(seq_->first_epoch);
      planned_ = true;
    }
    while (k >= base_ + static_cast<int64_t>(plan_.size())) {
      if (s_->num_epochs == 0 && plan_.empty()) return false;
      if (s_->num_epochs != 0 && epoch_ + 1 >= s_->num_epochs) return false;
      base_ += static_cast<int64_t>(plan_.size());
      load(epoch_ + 1);
    }
    *out = plan_[static_cast<size_t>(k - base_)];
    out->epoch = epoch_;
    return true;
  }

 private:
  void load(int epoch) {
    epoch_ = epoch;
    plan_ = plan_epoch(*files_,
                       epoch_order(static_cast<int>(files_->size()),
                                   s_->shuffle, s_->seed, epoch),
                       shard_, num_shards_, s_->chunk_bytes);
  }

  const std::vector<FileInfo> *files_;
  const Settings *s_;
  const Sequence *seq_;
  int shard_, num_shards_;
  bool planned_ = false;
  int epoch_ = 0;
  int64_t base_;  // chunk number of plan_[0]
  std::vector<Chunk> plan_;
};

}  // namespace reader
}  // namespace hb
