// Per-row state of one rank's shard that the table keeps beside its row
// records, indexed like them (Shard record indices):
//
// - write stamps, for incremental (delta) export: the table has a write
//   epoch, identical on every rank; every row created or updated gets the
//   current epoch as its stamp. seal() closes an epoch (an export calls it
//   collectively, so every rank seals the same epoch): the rows written
//   after an export that sealed epoch e are exactly those with stamp > e.
//   Evicted ids are logged with the epoch of their eviction (when the log
//   is on), in eviction order, so stamps in the log never decrease.
// - lifecycle columns (tables with a lifecycle): the table's update step of
//   the row's last update and its number of updates (the LRU and LFU
//   scores, and the age for ttl_steps).
//
// A table has a RowMeta only when it has a lifecycle or when write
// tracking was turned on (Table::track_writes): tables with neither pay one
// null-pointer test per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace hb {
namespace lifecycle {

struct EvictedId {
  int64_t id;
  uint64_t stamp;  // the write epoch in which the row was evicted
};

class RowMeta {
 public:
  // slots: the shard's record slots now (static tables: all their rows).
  // lifecycle: keep the lifecycle columns too.
  RowMeta(int64_t slots, bool lifecycle);

  // ---- Write epochs (delta export) ----
  // The epoch writes get now.
  uint64_t epoch() const { return epoch_; }
  // Closes the current epoch and returns it; later writes get a larger
  // stamp. Call at the same point on every rank (inside a collective).
  uint64_t seal() { return epoch_++; }
  // The oldest sealed epoch a delta may start from: a load replaced every
  // row (and forgot which ids it dropped), so a delta needs a base sealed
  // at or after it. 0 until the first load.
  uint64_t complete_since() const { return complete_since_; }
  uint64_t stamp(int64_t idx) const { return stamp_[static_cast<size_t>(idx)]; }

  // The evicted-id log: off by default (nothing reads it then, and it would
  // grow for ever); a delta exporter turns it on and trims it.
  void set_log_evictions(bool on) { log_on_ = on; }
  bool log_evictions() const { return log_on_; }
  const std::deque<EvictedId> &evicted() const { return log_; }
  // Drops the entries with stamp <= upto.
  void trim_evicted(uint64_t upto) {
    while (!log_.empty() && log_.front().stamp <= upto) log_.pop_front();
  }

  // ---- Lifecycle columns ----
  bool has_lifecycle() const { return lifecycle_; }
  // The table's update step: apply calls since creation (or the value a
  // checkpoint restored). Identical on every rank.
  uint64_t step() const { return step_; }
  uint64_t next_step() { return ++step_; }
  void set_step(uint64_t s) { step_ = s; }
  uint64_t last_step(int64_t idx) const {
    return last_step_[static_cast<size_t>(idx)];
  }
  uint32_t updates(int64_t idx) const {
    return updates_[static_cast<size_t>(idx)];
  }
  void set_lifecycle(int64_t idx, uint64_t last_step, uint32_t updates) {
    last_step_[static_cast<size_t>(idx)] = last_step;
    updates_[static_cast<size_t>(idx)] = updates;
  }

  // ---- Hooks (embedding/shard.cc, embedding/table.cc, lifecycle) ----
  // A record was created at idx (a new id or a reused slot).
  void on_create(int64_t idx) {
    size_t i = static_cast<size_t>(idx);
    if (i >= stamp_.size()) grow(i + 1);
    stamp_[i] = epoch_;
    if (lifecycle_) {
      last_step_[i] = step_;
      updates_[i] = 0;
    }
  }
  // The row at idx got an optimizer step in the current update step.
  void on_update(int64_t idx) {
    size_t i = static_cast<size_t>(idx);
    stamp_[i] = epoch_;
    if (lifecycle_) {
      last_step_[i] = step_;
      if (updates_[i] != UINT32_MAX) ++updates_[i];
    }
  }
  void on_evict(int64_t id) {
    if (log_on_) log_.push_back(EvictedId{id, epoch_});
  }
  // After a load replaced the shard (slots records): every row counts as
  // written now; the log restarts; deltas need a base sealed from now on.
  void on_load(int64_t slots);

  size_t memory_bytes() const;

 private:
  void grow(size_t n);

  bool lifecycle_;
  bool log_on_ = false;
  uint64_t epoch_ = 0;
  uint64_t complete_since_ = 0;
  uint64_t step_ = 0;
  std::vector<uint64_t> stamp_;
  std::vector<uint64_t> last_step_;
  std::vector<uint32_t> updates_;
  std::deque<EvictedId> log_;
};

}  // namespace lifecycle
}  // namespace hb
